//! Who may see the dashboard and the API: whoever has the token, given once as `?token=` (then
//! kept by a session cookie), or on every request as `Authorization: Bearer`. Compared in
//! constant time; never logged. Sessions expire, and end all at once when the token is reloaded.

use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

/// The cookie that keeps a browser signed in after a correct `?token=`.
pub const COOKIE: &str = "gpulse_session";
/// How long a session lasts: a working day at the dashboard.
pub const SESSION_MAX_AGE: Duration = Duration::from_secs(12 * 3600);
/// The most sessions kept at once; signing in beyond it ends the oldest.
const MAX_SESSIONS: usize = 1024;
/// The least a token may hold: a 128-bit secret, as the random ones are (they hold 192).
pub const MIN_TOKEN_BITS: f64 = 128.0;

/// The server's secrets: the token users hold and the sessions signed in with it.
pub struct Auth {
    secrets: RwLock<Secrets>,
    /// `/metrics` asks for the token too.
    pub metrics_need_token: bool,
    /// The cookie is `Secure`: set by the server when it speaks TLS.
    pub(crate) secure_cookie: AtomicBool,
}

struct Secrets {
    token: Option<String>,
    /// Each session's cookie value and when it began.
    sessions: Vec<(String, Instant)>,
}

/// 24 random bytes as hex, as random as Jupyter's tokens.
pub fn random_token() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).expect("the OS random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How many bits of secret a token holds at most: its length times the bits of the alphabet it
/// draws from (hex digits, letters and digits, or printable ASCII). A dictionary word scores
/// above its worth, so this refuses only what is surely weak.
pub fn token_bits(token: &str) -> f64 {
    let t = token.as_bytes();
    let alphabet: f64 = if t.iter().all(u8::is_ascii_hexdigit) {
        16.0
    } else {
        let classes = [
            (t.iter().any(u8::is_ascii_digit), 10.0),
            (t.iter().any(u8::is_ascii_lowercase), 26.0),
            (t.iter().any(u8::is_ascii_uppercase), 26.0),
            (t.iter().any(|b| b.is_ascii_punctuation()), 32.0),
        ];
        classes.iter().filter(|c| c.0).map(|c| c.1).sum()
    };
    t.len() as f64 * alphabet.max(2.0).log2()
}

/// Why `token` cannot be used, if it cannot: printable ASCII only, and 128 bits at least.
pub fn check_token(token: &str) -> Result<(), String> {
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("holds characters other than printable ASCII (or nothing)".into());
    }
    let bits = token_bits(token);
    if bits < MIN_TOKEN_BITS {
        return Err(format!(
            "is too weak: about {bits:.0} bits, and {MIN_TOKEN_BITS:.0} are needed (32 hex digits, or 22 letters and digits)"
        ));
    }
    Ok(())
}

fn same(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Auth {
    /// `token`: `None` turns auth off (loopback only; the caller checks).
    pub fn new(token: Option<String>, metrics_need_token: bool) -> Self {
        Self {
            secrets: RwLock::new(Secrets { token, sessions: Vec::new() }),
            metrics_need_token,
            secure_cookie: AtomicBool::new(false),
        }
    }

    pub fn is_on(&self) -> bool {
        self.secrets.read().is_ok_and(|s| s.token.is_some())
    }

    /// Whether `given` is the token.
    pub fn is_token(&self, given: &str) -> bool {
        self.secrets.read().is_ok_and(|s| s.token.as_deref().is_some_and(|t| same(t, given)))
    }

    /// A new session, and the `Set-Cookie` value that signs a browser into it.
    pub fn sign_in(&self) -> String {
        let value = random_token();
        if let Ok(mut s) = self.secrets.write() {
            let now = Instant::now();
            s.sessions.retain(|(_, at)| now.duration_since(*at) < SESSION_MAX_AGE);
            if s.sessions.len() >= MAX_SESSIONS {
                s.sessions.remove(0);
            }
            s.sessions.push((value.clone(), now));
        }
        let secure = if self.secure_cookie.load(Ordering::Relaxed) { "; Secure" } else { "" };
        format!("{COOKIE}={value}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{secure}", SESSION_MAX_AGE.as_secs())
    }

    /// Takes `token` in place of the old one and ends every session (the token file was
    /// rewritten, or a session must end during a long run).
    pub fn reload(&self, token: Option<String>) {
        if let Ok(mut s) = self.secrets.write() {
            s.token = token;
            s.sessions.clear();
        }
    }

    /// Ends every session, keeping the token.
    pub fn end_sessions(&self) {
        if let Ok(mut s) = self.secrets.write() {
            s.sessions.clear();
        }
    }

    /// Whether a request carries the token (a bearer header, its scheme in any case, as RFC
    /// 9110 has it) or the cookie of a live session.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        let Ok(s) = self.secrets.read() else { return false };
        let Some(token) = s.token.as_deref() else { return true };
        let bearer = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.trim_start().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .any(|(_, t)| same(token, t.trim()));
        let now = Instant::now();
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
            .any(|given| {
                // Every live session is compared, so the time taken says nothing of which matched.
                s.sessions.iter().fold(false, |found, (value, at)| {
                    found | (same(value, given) & (now.duration_since(*at) < SESSION_MAX_AGE))
                })
            });
        bearer || cookie
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
