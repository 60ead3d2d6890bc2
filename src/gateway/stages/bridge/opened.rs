//! Session ids opened recently on this replica ([`Opened`]), so that a session's every request
//! does not decrypt and parse its id again; what the keys said is remembered, the binding is
//! checked on each request ([`super::session::check_bound`]).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};

use super::session::{check_bound, LegacySession, Refused};
use crate::mcp::seal::Sealer;

/// The most session ids one gateway generation keeps opened.
const MAX_OPENED: usize = 4096;

/// Session ids opened recently on this replica, by their exact text: a session's every request
/// presents the same id, and opening it (decrypting, parsing its JSON) is most of what checking
/// it costs. The binding (caller, endpoint, expiry) is still checked on each request; only
/// what the keys said is remembered. Per gateway generation (a reload may change the keys);
/// bounded: when full, it starts again empty.
#[derive(Default)]
pub(crate) struct Opened {
    by_id: Mutex<HashMap<String, Arc<LegacySession>, ByTail>>,
}

/// How many of a session id's last bytes its hash reads.
const TAIL: usize = 32;

/// Hashes a session id by its last [`TAIL`] bytes (with a random key), not its every byte: a
/// sealed id ends in ciphertext no one can choose, so its tail tells ids apart as well as the
/// whole does, and an id of some 300 bytes costs a tenth as much to hash. Keys are still
/// compared whole; an id forged to share a held id's tail only lands by it, and fails there.
#[derive(Default)]
struct ByTail(RandomState);

struct TailHasher(std::hash::DefaultHasher);

impl Hasher for TailHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(&bytes[bytes.len().saturating_sub(TAIL)..]);
    }
    fn finish(&self) -> u64 {
        self.0.finish()
    }
}

impl BuildHasher for ByTail {
    type Hasher = TailHasher;
    fn build_hasher(&self) -> TailHasher {
        TailHasher(self.0.build_hasher())
    }
}

impl Opened {
    /// [`LegacySession::verify`], remembering what opened.
    pub(crate) fn verify(
        &self,
        sealer: &Sealer,
        id: &str,
        (caller, path): (&str, &str),
    ) -> Result<Arc<LegacySession>, Refused> {
        let known = self.lock().get(id).cloned();
        if let Some(s) = known {
            check_bound(&*s, (caller, path))?;
            return Ok(s);
        }
        let s = Arc::new(LegacySession::verify(sealer, id, caller, path)?);
        let mut by_id = self.lock();
        if by_id.len() >= MAX_OPENED {
            by_id.clear();
        }
        by_id.insert(id.to_owned(), s.clone());
        Ok(s)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<LegacySession>, ByTail>> {
        self.by_id.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::stages::bridge::session::caller_of;
    use crate::mcp::seal::{now_ms, StateKeys};
    use serde_json::json;

    /// A session of `caller` on `/mcp`, for a minute.
    fn session_of(caller: &str) -> LegacySession {
        let (caps, info) = (json!({}), json!({}));
        LegacySession::open("2025-11-25", caps, info, caller.to_owned(), "/mcp", 60_000)
    }

    #[test]
    fn an_opened_session_is_remembered_but_its_binding_checked_on_every_request() {
        let sealer = Sealer::new(StateKeys::random());
        let alice = caller_of(Some(b"Bearer a"));
        let s = session_of(&alice);
        let id = s.seal(&sealer).unwrap();
        let opened = Opened::default();
        assert_eq!(*opened.verify(&sealer, &id, (&alice, "/mcp")).unwrap(), s);
        assert_eq!(opened.lock().len(), 1);
        // Remembered: the same id now opens without the keys, yet for its caller and endpoint
        // only.
        let no_keys = Sealer::new(StateKeys::random());
        assert_eq!(*opened.verify(&no_keys, &id, (&alice, "/mcp")).unwrap(), s);
        let bob = caller_of(Some(b"Bearer b"));
        let refused = opened.verify(&sealer, &id, (&bob, "/mcp"));
        assert_eq!(refused.unwrap_err(), Refused::OtherCaller);
        let refused = opened.verify(&sealer, &id, (&alice, "/fed"));
        assert_eq!(refused.unwrap_err(), Refused::OtherEndpoint);
        // Another text is another id: an altered one is opened, and refused.
        let mut altered = id.clone();
        altered.push('A');
        assert!(opened.verify(&sealer, &altered, (&alice, "/mcp")).is_err());
        // An id that shares a held id's tail (all its hash reads) is still another id.
        let first = if id.starts_with('A') { "B" } else { "A" };
        let same_tail = format!("{first}{}", &id[1..]);
        assert!(same_tail.len() > TAIL);
        assert!(opened
            .verify(&no_keys, &same_tail, (&alice, "/mcp"))
            .is_err());
        // Expiry is checked on the remembered session too.
        let brief = LegacySession {
            expires_at_ms: now_ms() + 30,
            ..s
        };
        let brief_id = brief.seal(&sealer).unwrap();
        assert!(opened.verify(&sealer, &brief_id, (&alice, "/mcp")).is_ok());
        if let Some(b) = opened.lock().get_mut(&brief_id) {
            let lapsed = LegacySession {
                expires_at_ms: 1,
                ..(**b).clone()
            };
            *b = Arc::new(lapsed);
        }
        let refused = opened.verify(&sealer, &brief_id, (&alice, "/mcp"));
        assert_eq!(refused.unwrap_err(), Refused::Expired);
        // Bounded.
        for _ in 0..MAX_OPENED + 3 {
            let s = session_of(&alice);
            opened
                .verify(&sealer, &s.seal(&sealer).unwrap(), (&alice, "/mcp"))
                .unwrap();
        }
        assert!(opened.lock().len() <= MAX_OPENED);
    }
}
