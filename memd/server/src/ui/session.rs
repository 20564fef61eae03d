//! Who is logged into the dashboard: one-time login codes, browser sessions, CSRF tokens.
//!
//! Owns the codes `memd ui` mints (random, single use, valid [`CODE_TTL`]), the sessions they
//! turn into (an HttpOnly, SameSite=Strict cookie holding a random id; idle and absolute
//! expiry) and each session's CSRF token. Everything lives in memory: a daemon restart logs
//! every browser out, which is the safe direction. Must never keep a code after it was used or
//! expired, compare a secret in variable time, or log a code, session id or token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a login link works by default (`ui.link_ttl_secs`). Long enough to reach the
/// browser `memd ui` opens, short enough that a link left in a terminal's scrollback is dead.
pub const CODE_TTL: Duration = Duration::from_secs(60);
/// A session ends after this long without a request...
pub const IDLE_TTL: Duration = Duration::from_secs(8 * 3600);
/// ...and at the latest this long after login.
pub const ABSOLUTE_TTL: Duration = Duration::from_secs(24 * 3600);
/// Codes and sessions held at most; the oldest goes first (bounds a caller that mints in a loop).
const MAX_LIVE: usize = 64;
/// The session cookie's name on `port`. Browsers keep cookies per host, not per port: with
/// the port in the name, two daemons (a dev and a normal one, or a forwarded one) do not log
/// each other out.
pub fn cookie_name(port: u16) -> String {
    format!("memd_ui_{port}")
}

/// The `Set-Cookie` value that holds `session` (empty with `max_age` 0: the logout).
pub fn cookie(port: u16, session: &str, max_age: Duration) -> String {
    format!(
        "{}={session}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
        cookie_name(port),
        max_age.as_secs()
    )
}

/// A logged-in browser.
#[derive(Debug, Clone)]
struct Session {
    csrf: String,
    created: Instant,
    last_seen: Instant,
}

/// The dashboard's logins. One per daemon.
pub struct Sessions {
    code_ttl: Duration,
    codes: Mutex<HashMap<String, Instant>>,
    live: Mutex<HashMap<String, Session>>,
}

impl Default for Sessions {
    fn default() -> Sessions {
        Sessions::new(CODE_TTL)
    }
}

impl Sessions {
    /// Login links work for `code_ttl`.
    pub fn new(code_ttl: Duration) -> Sessions {
        Sessions {
            code_ttl,
            codes: Mutex::default(),
            live: Mutex::default(),
        }
    }

    pub fn code_ttl(&self) -> Duration {
        self.code_ttl
    }

    /// A fresh one-time login code.
    pub fn mint_code(&self) -> String {
        let code = random_hex();
        let now = Instant::now();
        let ttl = self.code_ttl;
        let mut codes = lock(&self.codes);
        codes.retain(|_, born| now.duration_since(*born) < ttl);
        evict_oldest(&mut codes, |born| *born);
        codes.insert(code.clone(), now);
        code
    }

    /// Spends `code`: the new session's id when the code was live, `None` when it was unknown,
    /// already used or expired.
    pub fn redeem(&self, code: &str) -> Option<String> {
        let now = Instant::now();
        let born = {
            let mut codes = lock(&self.codes);
            let key = codes.keys().find(|k| same(k, code))?.clone();
            codes.remove(&key)?
        };
        if now.duration_since(born) >= self.code_ttl {
            return None;
        }
        let id = random_hex();
        let mut live = lock(&self.live);
        live.retain(|_, s| alive(s, now));
        evict_oldest(&mut live, |s| s.last_seen);
        live.insert(
            id.clone(),
            Session {
                csrf: random_hex(),
                created: now,
                last_seen: now,
            },
        );
        Some(id)
    }

    /// The CSRF token of the session `id`, refreshing its idle timer; `None` when there is no
    /// such live session.
    pub fn touch(&self, id: &str) -> Option<String> {
        let now = Instant::now();
        let mut live = lock(&self.live);
        let key = live.keys().find(|k| same(k, id))?.clone();
        let session = live.get_mut(&key)?;
        if !alive(session, now) {
            live.remove(&key);
            return None;
        }
        session.last_seen = now;
        Some(session.csrf.clone())
    }

    /// Ends the session `id` (logout).
    pub fn end(&self, id: &str) {
        lock(&self.live).retain(|k, _| !same(k, id));
    }

    /// Ages every code as if `by` had passed (tests of expiry without waiting).
    #[cfg(test)]
    fn age_codes(&self, by: Duration) {
        for born in lock(&self.codes).values_mut() {
            *born = born.checked_sub(by).unwrap_or(*born);
        }
    }
}

fn alive(s: &Session, now: Instant) -> bool {
    now.duration_since(s.last_seen) < IDLE_TTL && now.duration_since(s.created) < ABSOLUTE_TTL
}

/// Drops the oldest entry when the map is full.
fn evict_oldest<V>(map: &mut HashMap<String, V>, age: impl Fn(&V) -> Instant) {
    if map.len() < MAX_LIVE {
        return;
    }
    if let Some(oldest) = map
        .iter()
        .min_by_key(|(_, v)| age(v))
        .map(|(k, _)| k.clone())
    {
        map.remove(&oldest);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

pub use crate::guard::same_secret as same;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_logs_in_once() {
        let s = Sessions::default();
        let code = s.mint_code();
        let id = s.redeem(&code).expect("fresh code");
        assert!(s.touch(&id).is_some());
        assert_eq!(s.redeem(&code), None, "a used code is dead");
        assert_eq!(s.redeem("not-a-code"), None);
    }

    #[test]
    fn an_expired_code_is_refused() {
        let s = Sessions::default();
        let code = s.mint_code();
        s.age_codes(CODE_TTL + Duration::from_secs(1));
        assert_eq!(s.redeem(&code), None);
    }

    #[test]
    fn sessions_have_their_own_csrf_token_and_end_on_logout() {
        let s = Sessions::default();
        let a = s.redeem(&s.mint_code()).unwrap();
        let b = s.redeem(&s.mint_code()).unwrap();
        let (ta, tb) = (s.touch(&a).unwrap(), s.touch(&b).unwrap());
        assert_ne!(ta, tb);
        assert_eq!(s.touch(&a), Some(ta), "stable for the session");
        s.end(&a);
        assert_eq!(s.touch(&a), None);
        assert!(s.touch(&b).is_some());
    }

    #[test]
    fn minting_in_a_loop_keeps_a_bounded_number_of_codes() {
        let s = Sessions::default();
        let first = s.mint_code();
        for _ in 0..MAX_LIVE * 3 {
            s.mint_code();
        }
        assert!(lock(&s.codes).len() <= MAX_LIVE);
        assert_eq!(s.redeem(&first), None, "the oldest went first");
    }
}
