//! Who may see the dashboard and the API: whoever has the token, given once as `?token=` (then
//! kept by a cookie), or on every request as `Authorization: Bearer`. Compared in constant time;
//! never logged.

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

/// The cookie that keeps a browser signed in after a correct `?token=`.
pub const COOKIE: &str = "gpulse_session";

/// The server's secrets: the token users hold and the session value the cookie carries.
pub struct Auth {
    token: Option<String>,
    session: String,
    /// `/metrics` asks for the token too.
    pub metrics_need_token: bool,
}

/// 24 random bytes as hex, as random as Jupyter's tokens.
pub fn random_token() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).expect("the OS random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn same(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Auth {
    /// `token`: `None` turns auth off (loopback only; the caller checks).
    pub fn new(token: Option<String>, metrics_need_token: bool) -> Self {
        Self { token, session: random_token(), metrics_need_token }
    }

    pub fn is_on(&self) -> bool {
        self.token.is_some()
    }

    /// Whether `given` is the token.
    pub fn is_token(&self, given: &str) -> bool {
        self.token.as_deref().is_some_and(|t| same(t, given))
    }

    /// The `Set-Cookie` value that signs a browser in.
    pub fn cookie(&self) -> String {
        format!("{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict", self.session)
    }

    /// Whether a request carries the token (a bearer header) or the session cookie.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        if !self.is_on() {
            return true;
        }
        let bearer = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.strip_prefix("Bearer "))
            .any(|t| self.is_token(t.trim()));
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
            .any(|s| same(s, &self.session));
        bearer || cookie
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use proptest::prelude::*;

    use super::*;

    fn with(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn the_token_the_cookie_and_nothing_else() {
        let a = Auth::new(Some("s3cret".into()), false);
        assert!(a.allows(&with(header::AUTHORIZATION, "Bearer s3cret")));
        assert!(!a.allows(&with(header::AUTHORIZATION, "Bearer s3cre")));
        assert!(!a.allows(&with(header::AUTHORIZATION, "Basic s3cret")));
        assert!(!a.allows(&HeaderMap::new()));
        let cookie = a.cookie();
        let value = cookie.split(';').next().unwrap();
        assert!(a.allows(&with(header::COOKIE, &format!("other=1; {value}"))));
        assert!(!a.allows(&with(header::COOKIE, &format!("{COOKIE}=s3cret"))), "the token is not the session");
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    }

    #[test]
    fn tokens_are_48_hex_digits_and_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 48);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    proptest! {
        /// A wrong token of any length, or any prefix of the right one, is refused.
        #[test]
        fn a_wrong_token_of_every_length_is_refused(wrong in "[ -~]{0,80}") {
            let token = random_token();
            let a = Auth::new(Some(token.clone()), false);
            prop_assume!(wrong.trim() != token);
            prop_assert!(!a.is_token(&wrong));
            let header = format!("Bearer {wrong}");
            if let Ok(v) = HeaderValue::from_str(&header) {
                let mut h = HeaderMap::new();
                h.insert(header::AUTHORIZATION, v);
                prop_assert!(!a.allows(&h));
            }
            prop_assert!(!a.is_token(&token[..wrong.len().min(47)]));
        }
    }
}
