use axum::http::HeaderValue;
use proptest::prelude::*;

use super::*;

fn with(name: header::HeaderName, value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(name, HeaderValue::from_str(value).unwrap());
    h
}

fn session_cookie(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

#[test]
fn the_token_a_live_session_and_nothing_else() {
    let a = Auth::new(Some("s3cret".into()), false);
    assert!(a.allows(&with(header::AUTHORIZATION, "Bearer s3cret")));
    assert!(!a.allows(&with(header::AUTHORIZATION, "Bearer s3cre")));
    assert!(!a.allows(&with(header::AUTHORIZATION, "Basic s3cret")));
    assert!(!a.allows(&HeaderMap::new()));
    let set = a.sign_in();
    assert!(a.allows(&with(header::COOKIE, &format!("other=1; {}", session_cookie(&set)))));
    assert!(!a.allows(&with(header::COOKIE, &format!("{COOKIE}=s3cret"))), "the token is not a session");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"));
    assert!(set.contains(&format!("Max-Age={}", SESSION_MAX_AGE.as_secs())), "{set}");
    // Two sign-ins are two sessions.
    assert_ne!(session_cookie(&a.sign_in()), session_cookie(&set));
    assert!(!set.contains("Secure"), "plain HTTP: a Secure cookie would never come back");
    let tls = Auth::new(Some("s3cret".into()), false);
    tls.secure_cookie.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(tls.sign_in().ends_with("; Secure"), "{}", tls.sign_in());
}

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let a = Auth::new(Some("s3cret".into()), false);
    for scheme in ["bearer", "BEARER", "BeArEr"] {
        assert!(a.allows(&with(header::AUTHORIZATION, &format!("{scheme} s3cret"))), "{scheme}");
    }
    assert!(!a.allows(&with(header::AUTHORIZATION, "bearers3cret")));
}

#[test]
fn a_reload_takes_the_new_token_and_ends_every_session() {
    let a = Auth::new(Some("old-token".into()), false);
    let cookie = with(header::COOKIE, &session_cookie(&a.sign_in()));
    assert!(a.allows(&cookie));
    a.reload(Some("new-token".into()));
    assert!(!a.allows(&cookie), "the old session ended");
    assert!(!a.allows(&with(header::AUTHORIZATION, "Bearer old-token")));
    assert!(a.allows(&with(header::AUTHORIZATION, "Bearer new-token")));
}

#[test]
fn tokens_are_48_hex_digits_and_differ() {
    let (a, b) = (random_token(), random_token());
    assert_eq!(a.len(), 48);
    assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
    assert_eq!(check_token(&a), Ok(()));
}

#[test]
fn a_token_under_128_bits_is_refused() {
    // 32 hex digits are 128 bits; 31 are not.
    assert_eq!(check_token(&"a1".repeat(16)), Ok(()));
    assert!(check_token(&"a1".repeat(15)).is_err());
    // Letters and digits: 22 of 62 symbols are 131 bits.
    assert_eq!(check_token("Zq8xT1mW4rLp9sKd2VbN7c"), Ok(()));
    assert!(check_token("password1234567").is_err());
    assert!(check_token("correct horse").is_err(), "a space is not a token character");
    assert!(check_token(&"\0".repeat(64)).is_err());
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
