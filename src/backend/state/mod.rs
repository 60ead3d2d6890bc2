//! Sealed `requestState`: the MRTR continuation a client carries between rounds.
//!
//! The spec calls `requestState` attacker-controlled, so it is sealed with an AEAD
//! (XChaCha20-Poly1305): the client can neither read nor change it. Every instance that holds
//! the key can open it, so a retry completes on any instance of the fleet.
//!
//! Wire format (URL-safe text, no padding): `v2.<key id>.<base64url(nonce ‖ ciphertext)>`, with
//! a random 192-bit nonce. Safe volume: with random nonces the chance that two states of one key
//! share a nonce is about n²/2^193 after n states, so 2^72 states per key keep it below 2^-49
//! (the 96-bit nonce of ChaCha20-Poly1305, format `v1`, allowed about 2^32 states per key for
//! 2^-33). `v1` states are still opened, so states issued before an upgrade finish their
//! rounds; new states are always `v2`.
//! The key id (8 hex digits, derived from the key) says which key sealed it, so keys rotate:
//! a codec accepts the current key and any previous ones and always seals with the current.
//! The `v1.<key id>` prefix is bound as associated data.
//!
//! Inside ([`StatePayload`]): the principal (SHA-256 of the bearer token, never the token), an
//! expiry, the method and a digest of the salient params (name + canonical arguments), the
//! round, a random nonce, tool data (e.g. the deploy environment) and the issuing instance.
//!
//! Sealing proves integrity, not single use: the same state can be presented twice until it
//! expires. Tools whose side effect must happen once (`charge`) keep a server-side record.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{Nonce, XNonce};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Format version, the first dot-separated field of a sealed state.
pub(crate) const STATE_VERSION: &str = "v2";
/// The previous format (ChaCha20-Poly1305, 96-bit nonce): opened, never sealed.
pub(crate) const LEGACY_VERSION: &str = "v1";
const NONCE_LEN: usize = 24;
const LEGACY_NONCE_LEN: usize = 12;
/// The largest sealed state we try to open (anything longer is not ours).
const MAX_STATE_LEN: usize = 16 * 1024;

pub use crate::mcp::seal::{StateKey, StateKeys};

/// What a sealed state says.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StatePayload {
    /// SHA-256 (hex) of the bearer token, or `anonymous`.
    #[serde(rename = "p")]
    pub principal: String,
    /// Expiry, milliseconds since the Unix epoch.
    #[serde(rename = "e")]
    pub expires_at_ms: u64,
    /// The JSON-RPC method the state belongs to.
    #[serde(rename = "m")]
    pub method: String,
    /// [`request_digest`] of the request that was answered with this state.
    #[serde(rename = "d")]
    pub digest: String,
    /// The round that issued the state (1 for the first `input_required`).
    #[serde(rename = "r")]
    pub round: u32,
    /// 16 random bytes (hex): tells two issued states apart (idempotency keys).
    #[serde(rename = "n")]
    pub nonce: String,
    /// Tool-specific data carried to the next round.
    #[serde(rename = "t", default, skip_serializing_if = "Value::is_null")]
    pub data: Value,
    /// The instance that issued the state (observability only; never trusted).
    #[serde(rename = "i")]
    pub issuer: String,
}

/// Why a presented state was refused. Every variant is answered with -32602.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StateError {
    /// Not in the `v1.<kid>.<base64url>` shape, or not base64.
    Malformed,
    /// Sealed with a key this server does not hold (rotated out, or another deployment).
    UnknownKey(String),
    /// Authentication failed: the text was changed or was sealed for something else.
    Tampered,
    /// Presented by a different principal than the one it was issued to.
    OtherPrincipal,
    /// Presented on a different method, tool/prompt or arguments.
    OtherRequest,
    /// Past its expiry.
    Expired { ago_ms: u64 },
}

impl StateError {
    /// A message for the client: what happened and what to do.
    pub(crate) fn message(&self) -> String {
        const RESTART: &str =
            "start over: send the request again without requestState and inputResponses";
        match self {
            StateError::Malformed => format!(
                "Invalid requestState: it is not a state this server issued (expected \"{STATE_VERSION}.<key id>.<data>\"); echo requestState byte for byte, or {RESTART}"
            ),
            StateError::UnknownKey(id) => format!(
                "Invalid requestState: it was sealed with key {id:?}, which this server does not hold (rotated out or another deployment); {RESTART}"
            ),
            StateError::Tampered => format!(
                "Invalid requestState: integrity check failed (the state was modified or is not from this server); {RESTART}"
            ),
            StateError::OtherPrincipal => format!(
                "Invalid requestState: it was issued to a different user (Authorization bearer token) than the one presenting it; {RESTART}"
            ),
            StateError::OtherRequest => format!(
                "Invalid requestState: it was issued for a different request (method, name or arguments differ); retry with the original arguments, or {RESTART}"
            ),
            StateError::Expired { ago_ms } => format!(
                "Invalid requestState: it expired {}s ago; {RESTART}",
                ago_ms.div_ceil(1000)
            ),
        }
    }
}

/// Seals and opens states with one key set and one lifetime.
#[derive(Clone, Debug)]
pub struct StateCodec {
    keys: StateKeys,
    ttl: Duration,
}

impl StateCodec {
    pub(crate) fn new(keys: StateKeys, ttl: Duration) -> Self {
        StateCodec { keys, ttl }
    }

    #[cfg(test)]
    pub(crate) fn key_id(&self) -> &str {
        self.keys.current_id()
    }

    /// Build and seal a payload for the next round, expiring `ttl` from now.
    pub(crate) fn mint(
        &self,
        principal: &str,
        method: &str,
        digest: &str,
        round: u32,
        data: Value,
        issuer: &str,
    ) -> String {
        let mut n = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut n);
        let payload = StatePayload {
            principal: principal.to_owned(),
            expires_at_ms: now_ms().saturating_add(self.ttl.as_millis() as u64),
            method: method.to_owned(),
            digest: digest.to_owned(),
            round,
            nonce: hex(&n),
            data,
            issuer: issuer.to_owned(),
        };
        self.seal(&payload)
    }

    /// Seal a payload with the current key.
    pub(crate) fn seal(&self, payload: &StatePayload) -> String {
        let key = &self.keys.current;
        let plain = serde_json::to_vec(payload).expect("payload serializes");
        let mut nonce = [0u8; NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut nonce);
        let aad = format!("{STATE_VERSION}.{}", key.id);
        let ct = key
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &plain,
                    aad: aad.as_bytes(),
                },
            )
            .expect("xchacha20poly1305 encryption does not fail");
        let mut blob = Vec::with_capacity(NONCE_LEN + ct.len());
        blob.extend_from_slice(&nonce);
        blob.extend_from_slice(&ct);
        format!("{aad}.{}", URL_SAFE_NO_PAD.encode(blob))
    }

    /// Open a state: check the format, find the key, authenticate and decrypt. Does not check
    /// who presents it, for what, or when: see [`StateCodec::verify`].
    pub(crate) fn open(&self, text: &str) -> Result<StatePayload, StateError> {
        if text.len() > MAX_STATE_LEN {
            return Err(StateError::Malformed);
        }
        let mut parts = text.splitn(3, '.');
        let (Some(ver), Some(kid), Some(data)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(StateError::Malformed);
        };
        let legacy = ver == LEGACY_VERSION;
        if !(legacy || ver == STATE_VERSION)
            || kid.len() != 8
            || !kid.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(StateError::Malformed);
        }
        let key = self
            .keys
            .find(kid)
            .ok_or_else(|| StateError::UnknownKey(kid.to_owned()))?;
        let blob = URL_SAFE_NO_PAD
            .decode(data)
            .map_err(|_| StateError::Tampered)?;
        let nonce_len = if legacy { LEGACY_NONCE_LEN } else { NONCE_LEN };
        if blob.len() < nonce_len + 16 {
            return Err(StateError::Tampered);
        }
        let aad = &text[..ver.len() + 1 + kid.len()];
        let (nonce, msg) = blob.split_at(nonce_len);
        let payload = Payload {
            msg,
            aad: aad.as_bytes(),
        };
        let plain = if legacy {
            key.legacy.decrypt(Nonce::from_slice(nonce), payload)
        } else {
            key.cipher.decrypt(XNonce::from_slice(nonce), payload)
        }
        .map_err(|_| StateError::Tampered)?;
        // Authentic but unreadable would be our own bug; treat it as not ours.
        serde_json::from_slice(&plain).map_err(|_| StateError::Tampered)
    }

    /// Open a state and check that it belongs to this principal and this request and has not
    /// expired (in that order).
    pub(crate) fn verify(
        &self,
        text: &str,
        principal: &str,
        method: &str,
        digest: &str,
    ) -> Result<StatePayload, StateError> {
        self.verify_at(text, principal, method, digest, now_ms())
    }

    pub(crate) fn verify_at(
        &self,
        text: &str,
        principal: &str,
        method: &str,
        digest: &str,
        now_ms: u64,
    ) -> Result<StatePayload, StateError> {
        let p = self.open(text)?;
        if p.principal != principal {
            return Err(StateError::OtherPrincipal);
        }
        if p.method != method || p.digest != digest {
            return Err(StateError::OtherRequest);
        }
        if now_ms >= p.expires_at_ms {
            return Err(StateError::Expired {
                ago_ms: now_ms - p.expires_at_ms,
            });
        }
        Ok(p)
    }
}

/// The principal a state is bound to: SHA-256 (hex) of the bearer token, or `anonymous`.
pub(crate) fn principal_of(bearer: Option<&str>) -> String {
    match bearer {
        Some(t) => hex(&Sha256::digest(t.as_bytes())),
        None => "anonymous".to_owned(),
    }
}

/// Digest (hex SHA-256) of the salient params of a request: method, NUL, name (or uri), NUL and
/// the RFC 8785 canonical JSON of the arguments ([`crate::mcp::jcs`]), so key order and number
/// spelling do not matter and an implementation in another language gets the same digest.
pub(crate) fn request_digest(method: &str, name: &str, arguments: &Value) -> String {
    hex(&crate::mcp::digest::salient_params(method, name, arguments))
}

pub(crate) use crate::mcp::hex::encode as hex;

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
