//! The keys that seal tokens (the backend's `requestState`, the gateway's sealed session ids,
//! answer ids and states, [`super`]): one 32-byte key with its public id (derived from the key),
//! parsed from hex or base64, and the set of the current key plus older ones still accepted
//! while clients finish their rounds (rotation).

use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use chacha20poly1305::aead::KeyInit;
use chacha20poly1305::{ChaCha20Poly1305, XChaCha20Poly1305};
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::fmt;

use crate::mcp::hex::encode as hex;

/// One 32-byte state key and its public id.
#[derive(Clone)]
pub struct StateKey {
    pub(crate) id: String,
    pub(crate) cipher: XChaCha20Poly1305,
    pub(crate) legacy: ChaCha20Poly1305,
}

impl fmt::Debug for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StateKey({})", self.id)
    }
}

impl StateKey {
    pub(crate) fn from_bytes(bytes: &[u8; 32]) -> Self {
        let mut h = Sha256::new();
        h.update(b"mcp-edge requestState key id\0");
        h.update(bytes);
        let id = hex(&h.finalize()[..4]);
        StateKey {
            id,
            cipher: XChaCha20Poly1305::new(bytes.into()),
            legacy: ChaCha20Poly1305::new(bytes.into()),
        }
    }

    /// A fresh random key (only this process can open what it seals).
    pub fn random() -> Self {
        let mut b = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut b);
        Self::from_bytes(&b)
    }

    /// Parse a key written as 64 hex digits or as base64 (standard or URL-safe, padded or not)
    /// of exactly 32 bytes. Surrounding whitespace is ignored.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let t = text.trim();
        let bytes = if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&t[2 * i..2 * i + 2], 16).expect("checked hex"))
                .collect()
        } else {
            STANDARD
                .decode(t)
                .or_else(|_| URL_SAFE.decode(t))
                .or_else(|_| URL_SAFE_NO_PAD.decode(t))
                .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(t))
                .map_err(|_| {
                    anyhow::anyhow!(
                        "the state key is neither 64 hex digits nor base64; generate one with `openssl rand -hex 32`"
                    )
                })?
        };
        let arr: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
            anyhow::anyhow!(
                "the state key decodes to {} bytes but must be exactly 32; generate one with `openssl rand -hex 32`",
                bytes.len()
            )
        })?;
        Ok(Self::from_bytes(&arr))
    }

    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The key that seals new states, and older keys still accepted while clients finish rounds.
#[derive(Clone, Debug)]
pub struct StateKeys {
    pub(crate) current: StateKey,
    previous: Vec<StateKey>,
}

impl StateKeys {
    pub fn new(current: StateKey) -> Self {
        StateKeys {
            current,
            previous: Vec::new(),
        }
    }

    pub fn random() -> Self {
        Self::new(StateKey::random())
    }

    /// Also accept (never seal with) `key`.
    pub fn with_previous(mut self, key: StateKey) -> Self {
        if key.id != self.current.id {
            self.previous.push(key);
        }
        self
    }

    #[cfg(test)]
    pub(crate) fn current_id(&self) -> &str {
        &self.current.id
    }

    /// A key file: one key a line (hex or base64, as [`StateKey::parse`]); the first seals,
    /// every other line is still accepted (rotation: put the new key first, keep the old one
    /// below it until the tokens it sealed have expired). Blank lines and `#` comments are
    /// skipped; an error names the line.
    pub fn parse_ring(text: &str) -> anyhow::Result<Self> {
        let mut ring: Option<StateKeys> = None;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let key = StateKey::parse(line).map_err(|e| anyhow::anyhow!("line {}: {e}", i + 1))?;
            ring = Some(match ring {
                None => StateKeys::new(key),
                Some(r) => r.with_previous(key),
            });
        }
        ring.ok_or_else(|| {
            anyhow::anyhow!(
                "no key in it: write one key a line, e.g. the output of `openssl rand -hex 32`"
            )
        })
    }

    pub(crate) fn find(&self, id: &str) -> Option<&StateKey> {
        std::iter::once(&self.current)
            .chain(self.previous.iter())
            .find(|k| k.id == id)
    }
}
