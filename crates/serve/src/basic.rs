//! Basic auth as exporter-toolkit does it: every request (but `/healthz`) needs a user name and
//! password whose bcrypt hash the web configuration holds. bcrypt costs tens of milliseconds of
//! CPU by design, so a pair that verified is remembered for a few minutes, under a salted SHA-256
//! of the pair (the password itself is never kept), and a scrape costs a lookup.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use base64::Engine as _;
use subtle::ConstantTimeEq;

/// How long a verified (user, password) pair is taken without bcrypt again.
pub(crate) const VERIFIED_TTL: Duration = Duration::from_secs(300);
/// The most verified pairs remembered; the oldest goes first.
const MAX_REMEMBERED: usize = 64;
/// Verified against when the user is unknown, so that an unknown user costs what a known one does
/// (exporter-toolkit's own dummy hash).
const UNKNOWN_USER_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

pub(crate) struct BasicAuth {
    /// User name → bcrypt hash.
    users: BTreeMap<String, String>,
    /// Makes the cache's keys useless outside this process.
    salt: [u8; 32],
    verified: Mutex<HashMap<[u8; 32], Instant>>,
    /// One bcrypt at a time: a flood of wrong passwords takes one core, not all of them.
    pub(crate) verifying: tokio::sync::Semaphore,
}

impl BasicAuth {
    /// Checks that every hash is bcrypt; the message names the user whose is not.
    pub(crate) fn new(users: BTreeMap<String, String>) -> Result<Self, String> {
        for (user, hash) in &users {
            if user.contains(':') {
                return Err(format!("basic_auth_users: {user:?} has a ':', which basic auth cannot send"));
            }
            if !hash.starts_with("$2") || bcrypt::HashParts::from_str(hash).is_err() {
                return Err(format!(
                    "basic_auth_users.{user}: not a bcrypt hash (htpasswd -nBC 10 \"\" | tr -d ':\\n')"
                ));
            }
        }
        let mut salt = [0u8; 32];
        getrandom::fill(&mut salt).expect("the OS random source");
        Ok(Self { users, salt, verified: Mutex::new(HashMap::new()), verifying: tokio::sync::Semaphore::new(1) })
    }

    /// The cache's key for a pair: nothing in it gives the password back.
    pub(crate) fn key(&self, user: &str, password: &str) -> [u8; 32] {
        let mut d = ring::digest::Context::new(&ring::digest::SHA256);
        d.update(&self.salt);
        d.update(&(user.len() as u64).to_le_bytes());
        d.update(user.as_bytes());
        d.update(password.as_bytes());
        d.finish().as_ref().try_into().expect("SHA-256 is 32 bytes")
    }

    /// Whether the pair with this key verified less than `VERIFIED_TTL` ago.
    pub(crate) fn remembered(&self, key: &[u8; 32], now: Instant) -> bool {
        let Ok(v) = self.verified.lock() else { return false };
        v.get(key).is_some_and(|at| now.duration_since(*at) < VERIFIED_TTL)
    }

    pub(crate) fn remember(&self, key: [u8; 32], now: Instant) {
        let Ok(mut v) = self.verified.lock() else { return };
        v.retain(|_, at| now.duration_since(*at) < VERIFIED_TTL);
        if v.len() >= MAX_REMEMBERED
            && let Some(oldest) = v.iter().min_by_key(|(_, at)| **at).map(|(k, _)| *k)
        {
            v.remove(&oldest);
        }
        v.insert(key, now);
    }

    /// bcrypt itself: slow on purpose; call it off the runtime's thread. The user name is
    /// compared in constant time, and an unknown one costs a bcrypt too.
    pub(crate) fn verify(&self, user: &str, password: &str) -> bool {
        let mut hash = UNKNOWN_USER_HASH;
        let mut known = subtle::Choice::from(0);
        for (name, h) in &self.users {
            let same = name.as_bytes().ct_eq(user.as_bytes());
            known |= same;
            if bool::from(same) {
                hash = h;
            }
        }
        let right = bcrypt::verify(password, hash).unwrap_or(false);
        bool::from(known) && right
    }
}

/// The user name and password of an `Authorization: Basic` header, if there is one.
pub(crate) fn credentials(headers: &HeaderMap) -> Option<(String, String)> {
    headers.get_all(header::AUTHORIZATION).iter().find_map(|v| {
        let v = v.to_str().ok()?.trim();
        let (scheme, encoded) = v.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
        let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
        Some((user.to_owned(), password.to_owned()))
    })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    /// "scrape-pass" at bcrypt's lowest cost, which keeps the tests quick.
    fn users() -> BTreeMap<String, String> {
        [("prometheus".to_owned(), bcrypt::hash("scrape-pass", 4).unwrap())].into()
    }

    fn basic(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.append(header::AUTHORIZATION, HeaderValue::from_static("Bearer not-this-one"));
        h.append(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn the_right_pair_and_nothing_else() {
        let a = BasicAuth::new(users()).unwrap();
        assert!(a.verify("prometheus", "scrape-pass"));
        assert!(!a.verify("prometheus", "scrape-pas"));
        assert!(!a.verify("prometheus", "scrape-pass "));
        assert!(!a.verify("Prometheus", "scrape-pass"));
        assert!(!a.verify("prometheu", "scrape-pass"));
        assert!(!a.verify("", ""));
        // The dummy hash's own password, whatever it is, never signs an unknown user in.
        assert!(!a.verify("nobody", "password"));
    }

    #[test]
    fn the_header_is_read_beside_a_bearer_token() {
        let enc = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert_eq!(
            credentials(&basic(&format!("Basic {}", enc("prometheus:a:b")))),
            Some(("prometheus".into(), "a:b".into())),
            "the password may hold a ':'"
        );
        assert_eq!(credentials(&basic(&format!("basic {}", enc("u:p")))), Some(("u".into(), "p".into())));
        assert_eq!(credentials(&basic(&format!("Basic {}", enc("no-colon")))), None);
        assert_eq!(credentials(&basic("Basic !!!")), None);
        assert_eq!(credentials(&HeaderMap::new()), None);
    }

    #[test]
    fn a_verified_pair_is_remembered_for_a_while_and_only_that_pair() {
        let a = BasicAuth::new(users()).unwrap();
        let t0 = Instant::now();
        let key = a.key("prometheus", "scrape-pass");
        assert!(!a.remembered(&key, t0));
        a.remember(key, t0);
        assert!(a.remembered(&key, t0 + VERIFIED_TTL - Duration::from_secs(1)));
        assert!(!a.remembered(&key, t0 + VERIFIED_TTL), "forgotten after the TTL");
        assert!(!a.remembered(&a.key("prometheus", "scrape-pas"), t0));
        // The user name and password do not run together: ("ab", "c") is not ("a", "bc").
        assert_ne!(a.key("ab", "c"), a.key("a", "bc"));
        // Another process's keys differ: the salt.
        assert_ne!(BasicAuth::new(users()).unwrap().key("prometheus", "scrape-pass"), key);
        for i in 0..(MAX_REMEMBERED + 10) {
            a.remember(a.key("u", &i.to_string()), t0 + Duration::from_millis(i as u64));
        }
        assert!(a.verified.lock().unwrap().len() <= MAX_REMEMBERED);
    }

    #[test]
    fn hashes_that_are_not_bcrypt_are_refused_naming_the_user() {
        for hash in ["scrape-pass", "$6$salt$abcdef", "$2y$10$short", ""] {
            let users = [("alice".to_owned(), hash.to_owned())].into();
            let e = BasicAuth::new(users).err().unwrap();
            assert!(e.contains("basic_auth_users.alice: not a bcrypt hash"), "{hash}: {e}");
            assert!(!e.contains(hash) || hash.is_empty(), "the hash is not echoed: {e}");
        }
        let users = [("a:b".to_owned(), bcrypt::hash("x", 4).unwrap())].into();
        assert!(BasicAuth::new(users).is_err());
    }
}
