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

use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce, XChaCha20Poly1305, XNonce};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Format version, the first dot-separated field of a sealed state.
pub const STATE_VERSION: &str = "v2";
/// The previous format (ChaCha20-Poly1305, 96-bit nonce): opened, never sealed.
pub const LEGACY_VERSION: &str = "v1";
const NONCE_LEN: usize = 24;
const LEGACY_NONCE_LEN: usize = 12;
/// The largest sealed state we try to open (anything longer is not ours).
const MAX_STATE_LEN: usize = 16 * 1024;

/// One 32-byte state key and its public id.
#[derive(Clone)]
pub struct StateKey {
    id: String,
    cipher: XChaCha20Poly1305,
    legacy: ChaCha20Poly1305,
}

impl fmt::Debug for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StateKey({})", self.id)
    }
}

impl StateKey {
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
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
    current: StateKey,
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

    pub fn current_id(&self) -> &str {
        &self.current.id
    }

    fn find(&self, id: &str) -> Option<&StateKey> {
        std::iter::once(&self.current)
            .chain(self.previous.iter())
            .find(|k| k.id == id)
    }
}

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
pub enum StateError {
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
    pub fn message(&self) -> String {
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
    pub fn new(keys: StateKeys, ttl: Duration) -> Self {
        StateCodec { keys, ttl }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn key_id(&self) -> &str {
        self.keys.current_id()
    }

    /// Build and seal a payload for the next round, expiring `ttl` from now.
    pub fn mint(
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
    pub fn seal(&self, payload: &StatePayload) -> String {
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
    pub fn open(&self, text: &str) -> Result<StatePayload, StateError> {
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
    pub fn verify(
        &self,
        text: &str,
        principal: &str,
        method: &str,
        digest: &str,
    ) -> Result<StatePayload, StateError> {
        self.verify_at(text, principal, method, digest, now_ms())
    }

    pub fn verify_at(
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
pub fn principal_of(bearer: Option<&str>) -> String {
    match bearer {
        Some(t) => hex(&Sha256::digest(t.as_bytes())),
        None => "anonymous".to_owned(),
    }
}

/// Digest (hex SHA-256) of the salient params of a request: method, NUL, name (or uri), NUL and
/// the RFC 8785 canonical JSON of the arguments ([`crate::mcp::jcs`]), so key order and number
/// spelling do not matter and an implementation in another language gets the same digest.
pub fn request_digest(method: &str, name: &str, arguments: &Value) -> String {
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(method.as_bytes());
    buf.push(0);
    buf.extend_from_slice(name.as_bytes());
    buf.push(0);
    crate::mcp::jcs::write(arguments, &mut buf);
    hex(&Sha256::digest(&buf))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec() -> StateCodec {
        StateCodec::new(StateKeys::random(), Duration::from_secs(600))
    }

    fn digest() -> String {
        request_digest("tools/call", "create_repo", &json!({"repo":"demo"}))
    }

    #[test]
    fn round_trip() {
        let c = codec();
        let alice = principal_of(Some("alice"));
        let s = c.mint(
            &alice,
            "tools/call",
            &digest(),
            1,
            json!({"env":"staging"}),
            "i-1",
        );
        assert!(s.starts_with(&format!("v2.{}.", c.key_id())), "{s}");
        assert!(s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_'));
        let p = c.verify(&s, &alice, "tools/call", &digest()).unwrap();
        assert_eq!(
            (p.round, p.data, p.issuer.as_str()),
            (1, json!({"env":"staging"}), "i-1")
        );
        assert_eq!(p.nonce.len(), 32);
        assert!(
            !s.contains("alice") && !s.contains("staging"),
            "the payload is encrypted"
        );
    }

    #[test]
    fn tampering_is_detected() {
        let c = codec();
        let s = c.mint("anonymous", "tools/call", &digest(), 1, Value::Null, "i");
        let check = |t: &str| {
            c.verify(t, "anonymous", "tools/call", &digest())
                .unwrap_err()
        };
        assert_eq!(check(&format!("{s}-TAMPERED")), StateError::Tampered);
        assert_eq!(check(&format!("x{s}")), StateError::Malformed);
        assert_eq!(check("garbage"), StateError::Malformed);
        assert_eq!(check(""), StateError::Malformed);
        // Flip one character of the ciphertext.
        let mut b = s.clone().into_bytes();
        let last = b.len() - 3;
        b[last] = if b[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(check(&String::from_utf8(b).unwrap()), StateError::Tampered);
        // Re-label the key id: the AAD no longer matches.
        let other = format!("v2.00000000.{}", s.splitn(3, '.').nth(2).unwrap());
        assert_eq!(check(&other), StateError::UnknownKey("00000000".into()));
    }

    #[test]
    fn legacy_v1_states_still_open_and_labels_cannot_be_swapped() {
        let keys = StateKeys::random();
        let c = StateCodec::new(keys.clone(), Duration::from_secs(600));
        let payload = c
            .open(&c.mint("anonymous", "tools/call", &digest(), 1, Value::Null, "i"))
            .unwrap();
        let key = &keys.current;
        let plain = serde_json::to_vec(&payload).unwrap();
        let nonce = [7u8; LEGACY_NONCE_LEN];
        let aad = format!("{LEGACY_VERSION}.{}", key.id);
        let ct = key
            .legacy
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &plain,
                    aad: aad.as_bytes(),
                },
            )
            .unwrap();
        let v1 = format!(
            "{aad}.{}",
            URL_SAFE_NO_PAD.encode([&nonce[..], &ct].concat())
        );
        assert_eq!(c.open(&v1).unwrap(), payload);
        let v2 = c.seal(&payload);
        assert_eq!(
            c.open(&v2.replacen("v2.", "v1.", 1)),
            Err(StateError::Tampered)
        );
        assert_eq!(
            c.open(&v1.replacen("v1.", "v2.", 1)),
            Err(StateError::Tampered)
        );
    }

    #[test]
    fn principal_request_and_expiry_are_bound() {
        let c = codec();
        let alice = principal_of(Some("alice"));
        let s = c.mint(&alice, "tools/call", &digest(), 1, Value::Null, "i");
        assert_eq!(
            c.verify(&s, &principal_of(Some("bob")), "tools/call", &digest()),
            Err(StateError::OtherPrincipal)
        );
        assert_eq!(
            c.verify(&s, "anonymous", "tools/call", &digest()),
            Err(StateError::OtherPrincipal)
        );
        let other = request_digest("tools/call", "create_repo", &json!({"repo":"prod"}));
        assert_eq!(
            c.verify(&s, &alice, "tools/call", &other),
            Err(StateError::OtherRequest)
        );
        assert_eq!(
            c.verify(&s, &alice, "prompts/get", &digest()),
            Err(StateError::OtherRequest)
        );
        let exp = c.open(&s).unwrap().expires_at_ms;
        assert!(c
            .verify_at(&s, &alice, "tools/call", &digest(), exp - 1)
            .is_ok());
        assert_eq!(
            c.verify_at(&s, &alice, "tools/call", &digest(), exp + 1500),
            Err(StateError::Expired { ago_ms: 1500 })
        );
        assert!(StateError::Expired { ago_ms: 1500 }
            .message()
            .contains("2s ago"));
    }

    #[test]
    fn rotation_accepts_previous_and_seals_with_current() {
        let old = StateKey::random();
        let new = StateKey::random();
        let before = StateCodec::new(StateKeys::new(old.clone()), Duration::from_secs(60));
        let after = StateCodec::new(
            StateKeys::new(new.clone()).with_previous(old.clone()),
            Duration::from_secs(60),
        );
        let s_old = before.mint("anonymous", "tools/call", &digest(), 1, Value::Null, "i");
        assert!(after
            .verify(&s_old, "anonymous", "tools/call", &digest())
            .is_ok());
        let s_new = after.mint("anonymous", "tools/call", &digest(), 1, Value::Null, "i");
        assert!(s_new.contains(new.id()));
        assert_eq!(
            before.verify(&s_new, "anonymous", "tools/call", &digest()),
            Err(StateError::UnknownKey(new.id().to_owned()))
        );
        let unrelated = codec();
        assert!(matches!(
            unrelated.open(&s_old),
            Err(StateError::UnknownKey(_))
        ));
    }

    #[test]
    fn key_parsing() {
        let hexkey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
        let a = StateKey::parse(hexkey).unwrap();
        let bytes: Vec<u8> = (0u8..32).collect();
        let b = StateKey::parse(&format!("  {}\n", STANDARD.encode(&bytes))).unwrap();
        let c = StateKey::parse(&URL_SAFE_NO_PAD.encode(&bytes)).unwrap();
        assert_eq!(a.id(), b.id());
        assert_eq!(a.id(), c.id());
        assert!(StateKey::parse("abcd")
            .unwrap_err()
            .to_string()
            .contains("32"));
        assert!(StateKey::parse("not a key!").is_err());
    }

    #[test]
    fn digest_ignores_key_order() {
        let a = request_digest(
            "tools/call",
            "t",
            &json!({"a":1,"b":{"y":2,"x":[1,{"q":1,"p":2}]}}),
        );
        let b = request_digest(
            "tools/call",
            "t",
            &json!({"b":{"x":[1,{"p":2,"q":1}],"y":2},"a":1}),
        );
        assert_eq!(a, b);
        assert_ne!(a, request_digest("tools/call", "t", &json!({"a":2})));
        assert_ne!(
            a,
            request_digest(
                "tools/call",
                "u",
                &json!({"a":1,"b":{"y":2,"x":[1,{"q":1,"p":2}]}})
            )
        );
    }
}
