//! Digests of `requestState` values: how the gateway recognises the next leg of an MRTR flow
//! without keeping the state itself.
//!
//! A digest is a keyed 64-bit SipHash of the state's *decoded* string value (the client echoes the
//! value, whatever JSON escapes either side used). The key is random per process, so a client
//! cannot aim collisions at another flow's digest, and digests mean nothing outside the process
//! that made them (flow state is per replica).

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

fn keys() -> &'static std::collections::hash_map::RandomState {
    static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    KEYS.get_or_init(std::collections::hash_map::RandomState::new)
}

/// A digest fed piece by piece: the same bytes in any chunking give the same digest.
pub(crate) struct StateHasher(std::collections::hash_map::DefaultHasher);

impl Default for StateHasher {
    fn default() -> Self {
        StateHasher(keys().build_hasher())
    }
}

impl StateHasher {
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0.finish()
    }
}

impl std::fmt::Debug for StateHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateHasher")
    }
}

/// The digest of a whole (decoded) `requestState` value.
pub fn state_digest(state: &str) -> u64 {
    let mut h = StateHasher::default();
    h.write(state.as_bytes());
    h.finish()
}

/// The digest of a request's salient params, the one form the backend's states, the edge's
/// sealed states and the bridge's paused calls bind: SHA-256 of the method, NUL, the name (or
/// URI), NUL and the RFC 8785 canonical JSON of the arguments ([`super::jcs`]), so key order
/// and number spelling do not matter and another language's implementation gets the same bytes.
pub(crate) fn salient_params(method: &str, name: &str, arguments: &serde_json::Value) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(method.as_bytes());
    buf.push(0);
    buf.extend_from_slice(name.as_bytes());
    buf.push(0);
    super::jcs::write(arguments, &mut buf);
    Sha256::digest(&buf).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_does_not_depend_on_chunking() {
        let s = "v1.6Qm0abcdefghijklmnopqrstuvwxyz0123456789-_.hmac";
        let whole = state_digest(s);
        for piece in 1..s.len() {
            let mut h = StateHasher::default();
            s.as_bytes().chunks(piece).for_each(|c| h.write(c));
            assert_eq!(h.finish(), whole, "piece {piece}");
        }
        assert_ne!(state_digest("a"), state_digest("b"));
        assert_ne!(state_digest(""), state_digest("a"));
    }
}
