//! Sealed tokens: the one way this project hands a client something it must carry back
//! unchanged and unread (the gateway's session ids for 2025-era clients, the ids of the requests
//! it asks them on their behalf, the `requestState` it wraps for servers that do not protect
//! their own; the reference backend's `requestState` uses the same keys).
//!
//! A token is `<kind>.<key id>.<base64url(nonce ‖ ciphertext)>`: XChaCha20-Poly1305 with a
//! random 192-bit nonce, and `<kind>.<key id>` bound as associated data, so a token minted for
//! one purpose (a session) never opens as another (an answer id), whatever it holds. The key id
//! names the key that sealed it, so keys rotate: a [`Sealer`] seals with its current key and
//! opens with any key of its ring ([`StateKeys`]). Every replica that holds the ring opens what
//! any other sealed: state that must survive a replica lives in tokens, not tables.
//!
//! What a token *says* (who it is bound to, when it expires) is the caller's to check after
//! [`Sealer::open`]: this module proves only that the gateway wrote it, for that kind.
//! No I/O: the keys come in as text ([`StateKeys`]), read by the config.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::XNonce;
use rand::RngCore;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::{SystemTime, UNIX_EPOCH};

mod keys;
pub use keys::{StateKey, StateKeys};

const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;

/// Why a presented token was not opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealError {
    /// Not `<kind>.<key id>.<data>` of this kind, or longer than the caller allows.
    Malformed,
    /// Sealed with a key this ring does not hold (rotated out, or another deployment).
    UnknownKey(String),
    /// Authentication failed: changed, or sealed as another kind.
    Tampered,
}

impl SealError {
    /// What happened, for a message that names the token (`what`: "session id", ...).
    pub fn describe(&self, what: &str) -> String {
        match self {
            SealError::Malformed => format!("the {what} is not one this gateway issued"),
            SealError::UnknownKey(id) => format!(
                "the {what} was sealed with key {id:?}, which this gateway does not hold (rotated out, or another deployment)"
            ),
            SealError::Tampered => {
                format!("the {what} failed its integrity check (changed, or not from this gateway)")
            }
        }
    }
}

/// Seals and opens tokens with one key ring.
#[derive(Clone, Debug)]
pub struct Sealer {
    keys: StateKeys,
}

impl Sealer {
    pub fn new(keys: StateKeys) -> Self {
        Sealer { keys }
    }

    /// The id of the key new tokens are sealed with.
    pub fn current_key_id(&self) -> &str {
        self.keys.current.id()
    }

    /// Seal `payload` (as JSON) as a token of `kind` (a short ASCII tag without a dot).
    pub fn seal<T: Serialize>(&self, kind: &str, payload: &T) -> String {
        let plain = serde_json::to_vec(payload).expect("a sealed payload serializes");
        self.seal_bytes(kind, &plain)
    }

    /// Seal raw bytes as a token of `kind`.
    pub fn seal_bytes(&self, kind: &str, plain: &[u8]) -> String {
        debug_assert!(!kind.contains('.') && !kind.is_empty());
        let key = &self.keys.current;
        let mut nonce = [0u8; NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut nonce);
        let aad = format!("{kind}.{}", key.id());
        let ct = key
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: aad.as_bytes(),
                },
            )
            .expect("xchacha20poly1305 encryption does not fail");
        let mut blob = Vec::with_capacity(NONCE_LEN + ct.len());
        blob.extend_from_slice(&nonce);
        blob.extend_from_slice(&ct);
        let mut out = aad;
        out.push('.');
        URL_SAFE_NO_PAD.encode_string(blob, &mut out);
        out
    }

    /// Open a token of `kind` no longer than `max_len` and read its JSON payload.
    pub fn open<T: DeserializeOwned>(
        &self,
        kind: &str,
        text: &str,
        max_len: usize,
    ) -> Result<T, SealError> {
        let plain = self.open_bytes(kind, text, max_len)?;
        // Authentic but unreadable would be our own bug (or another version): not ours.
        serde_json::from_slice(&plain).map_err(|_| SealError::Tampered)
    }

    /// Open a token of `kind` no longer than `max_len` into its bytes.
    pub fn open_bytes(&self, kind: &str, text: &str, max_len: usize) -> Result<Vec<u8>, SealError> {
        if text.len() > max_len {
            return Err(SealError::Malformed);
        }
        let mut parts = text.splitn(3, '.');
        let (Some(k), Some(kid), Some(data)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(SealError::Malformed);
        };
        if k != kind || kid.len() != 8 || !kid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SealError::Malformed);
        }
        let key = self
            .keys
            .find(kid)
            .ok_or_else(|| SealError::UnknownKey(kid.to_owned()))?;
        let blob = URL_SAFE_NO_PAD
            .decode(data)
            .map_err(|_| SealError::Tampered)?;
        if blob.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Tampered);
        }
        let (nonce, msg) = blob.split_at(NONCE_LEN);
        let aad = &text[..k.len() + 1 + kid.len()];
        key.cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| SealError::Tampered)
    }

    /// Whether `text` looks like a token of `kind` (its prefix only; proves nothing).
    pub fn is_kind(kind: &str, text: &str) -> bool {
        text.len() > kind.len() + 10
            && text.as_bytes()[kind.len()] == b'.'
            && text.starts_with(kind)
    }
}

/// Milliseconds since the Unix epoch: the clock sealed expiries are written in.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct P {
        who: String,
        n: u32,
    }

    fn p() -> P {
        P {
            who: "alice".into(),
            n: 7,
        }
    }

    #[test]
    fn a_token_opens_as_its_own_kind_only() {
        let s = Sealer::new(StateKeys::random());
        let t = s.seal("es1", &p());
        assert!(t.starts_with(&format!("es1.{}.", s.current_key_id())));
        assert_eq!(s.open::<P>("es1", &t, 4096).unwrap(), p());
        // The same bytes relabelled as another kind fail: the kind is associated data.
        let relabelled = t.replacen("es1", "ea1", 1);
        assert_eq!(
            s.open::<P>("ea1", &relabelled, 4096),
            Err(SealError::Tampered)
        );
        assert_eq!(s.open::<P>("ea1", &t, 4096), Err(SealError::Malformed));
    }

    #[test]
    fn a_changed_byte_an_unknown_key_and_a_long_token_are_refused() {
        let s = Sealer::new(StateKeys::random());
        let t = s.seal("es1", &p());
        let mut b = t.clone().into_bytes();
        let last = b.len() - 3;
        b[last] = if b[last] == b'A' { b'B' } else { b'A' };
        let changed = String::from_utf8(b).unwrap();
        assert_eq!(s.open::<P>("es1", &changed, 4096), Err(SealError::Tampered));
        let other = Sealer::new(StateKeys::random());
        assert!(matches!(
            other.open::<P>("es1", &t, 4096),
            Err(SealError::UnknownKey(_))
        ));
        assert_eq!(s.open::<P>("es1", &t, 10), Err(SealError::Malformed));
        assert_eq!(
            s.open::<P>("es1", "es1.zz.abc", 4096),
            Err(SealError::Malformed)
        );
    }

    #[test]
    fn rotation_opens_with_an_old_key_and_seals_with_the_new() {
        let old = StateKey::random();
        let new = StateKey::random();
        let before = Sealer::new(StateKeys::new(old.clone()));
        let t = before.seal("er1", &p());
        let after = Sealer::new(StateKeys::new(new.clone()).with_previous(old));
        assert_eq!(after.open::<P>("er1", &t, 4096).unwrap(), p());
        let t2 = after.seal("er1", &p());
        assert!(t2.contains(new.id()));
        assert!(matches!(
            before.open::<P>("er1", &t2, 4096),
            Err(SealError::UnknownKey(_))
        ));
    }
}
