//! A 2025-era session as the gateway keeps it: nowhere. Everything a session needs (the
//! negotiated revision, the client's capabilities and info, who opened it, for which endpoint,
//! until when) is sealed into the `Mcp-Session-Id` the gateway mints ([`crate::mcp::seal`]), so
//! any replica that holds the keys serves any session, with no shared store.
//!
//! A session id is refused (404, as a legacy server refuses an unknown session, so the client
//! opens a new one) when it does not open, has expired, was opened on another endpoint, or is
//! presented with another credential than the one that opened it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::mcp::hex;
use crate::mcp::seal::{now_ms, SealError, Sealer};

/// The token kind of a sealed session id.
const KIND: &str = "es1";
/// The longest session id opened (a client that declares huge capabilities gets an error at
/// `initialize`, not a header that proxies drop).
pub(super) const MAX_LEN: usize = 4096;

/// What a sealed session id says.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct LegacySession {
    /// The negotiated 2025-era revision.
    #[serde(rename = "v")]
    pub version: String,
    /// The client's capabilities from its `initialize`.
    #[serde(rename = "c")]
    pub capabilities: Value,
    /// The client's `clientInfo`.
    #[serde(rename = "i", default)]
    pub client_info: Value,
    /// Who opened it: [`caller_of`].
    #[serde(rename = "w")]
    pub caller: String,
    /// The endpoint path it was opened on.
    #[serde(rename = "p")]
    pub path: String,
    /// 16 random bytes (hex): the session's own name, to which answer ids are bound.
    #[serde(rename = "n")]
    pub nonce: String,
    /// Expiry, milliseconds since the Unix epoch.
    #[serde(rename = "e")]
    pub expires_at_ms: u64,
    /// The `_meta` members each of its requests carries to the fleet, written when first
    /// needed ([`LegacySession::meta`]); not sealed.
    #[serde(skip)]
    pub(crate) meta: MetaText,
}

/// A session's `_meta` members as JSON text, written once. Part of no comparison: it says
/// nothing the sealed members do not.
#[derive(Clone, Debug, Default)]
pub(crate) struct MetaText(std::sync::OnceLock<String>);

impl PartialEq for MetaText {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Why a presented session id was refused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refused {
    Seal(SealError),
    Expired,
    OtherEndpoint,
    OtherCaller,
    /// Ended by `DELETE` (on this replica).
    Ended,
}

impl Refused {
    pub(crate) fn message(&self) -> String {
        let why = match self {
            Refused::Seal(e) => e.describe("session id"),
            Refused::Expired => "the session expired".into(),
            Refused::OtherEndpoint => "the session was opened on another endpoint".into(),
            Refused::OtherCaller => {
                "the session was opened with another credential (Authorization)".into()
            }
            Refused::Ended => "the session was ended (DELETE)".into(),
        };
        format!("Session not found: {why}; send initialize again to open a new session")
    }

    /// The answer a client gets: `404 / -31014`, as a legacy server answers a session it does
    /// not know (so the client opens a new one), with the reason in `data`.
    pub(crate) fn rejection(&self) -> crate::mcp::Rejection {
        use crate::mcp::{codes, Rejection};
        let code = codes::GATEWAY_SESSION_NOT_FOUND;
        Rejection::new(404, code, "session-not-found", self.message())
            .with_data(serde_json::json!({"reason": self.label()}))
    }

    /// The metric label of the refusal.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Refused::Seal(SealError::UnknownKey(_)) => "unknown_key",
            Refused::Seal(_) => "invalid",
            Refused::Expired => "expired",
            Refused::OtherEndpoint => "other_endpoint",
            Refused::OtherCaller => "other_caller",
            Refused::Ended => "ended",
        }
    }
}

/// Who calls: a digest of the `Authorization` header (never the credential itself), or empty
/// without one. A session and the answers given on it are bound to it.
pub(crate) fn caller_of(authorization: Option<&[u8]>) -> String {
    match authorization {
        Some(a) => hex::encode(&Sha256::digest(a)[..16]),
        None => String::new(),
    }
}

/// Who calls a 2025-era server through the gateway, for its sessions with the server and the
/// states of its paused calls: the subject `auth` verified, else a digest of the credential the
/// request carried ([`caller_of`]). The one rule for a 2026 client's calls to a legacy pool,
/// the listen streams they open there (direct or merged by a federated endpoint), so a caller's
/// listen stream rides the session its calls change.
pub(crate) fn server_side_caller(subject: Option<&str>, authorization: Option<&[u8]>) -> String {
    match subject {
        Some(s) => format!("sub:{s}"),
        None => caller_of(authorization),
    }
}

/// Who calls when `auth` verified the token: a digest of its issuer and subject, so a
/// refreshed token of the same caller keeps the session (and another caller's never opens
/// it). Distinct from every [`caller_of`] value (another prefix under the digest).
pub(crate) fn caller_of_subject(issuer: &str, subject: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"sub\0");
    h.update(issuer.as_bytes());
    h.update(b"\0");
    h.update(subject.as_bytes());
    hex::encode(&h.finalize()[..16])
}

impl LegacySession {
    /// A new session for `caller` on `path`, valid for `ttl_ms`.
    pub(crate) fn open(
        version: &str,
        capabilities: Value,
        client_info: Value,
        caller: String,
        path: &str,
        ttl_ms: u64,
    ) -> Self {
        LegacySession {
            version: version.to_owned(),
            capabilities,
            client_info,
            caller,
            path: path.to_owned(),
            nonce: hex::encode(&rand::random::<[u8; 16]>()),
            expires_at_ms: now_ms().saturating_add(ttl_ms),
            meta: MetaText::default(),
        }
    }

    /// The `_meta` members its requests carry to the fleet ([`crate::mcp::legacy::session_meta`]),
    /// as JSON text.
    pub(crate) fn meta(&self) -> &str {
        let (caps, info) = (&self.capabilities, &self.client_info);
        self.meta
            .0
            .get_or_init(|| crate::mcp::legacy::session_meta(caps, info))
    }

    /// The session id: `None` when it would be longer than [`MAX_LEN`].
    pub(crate) fn seal(&self, sealer: &Sealer) -> Option<String> {
        let id = sealer.seal(KIND, self);
        (id.len() <= MAX_LEN).then_some(id)
    }

    /// Open a presented session id and check it belongs to `caller` on `path`, now.
    pub(crate) fn verify(
        sealer: &Sealer,
        id: &str,
        caller: &str,
        path: &str,
    ) -> Result<LegacySession, Refused> {
        open_bound(sealer, KIND, id, (caller, path))
    }
}

/// A sealed session id's binding: who opened it, on which endpoint, until when.
pub(crate) trait Bound: serde::de::DeserializeOwned {
    fn caller(&self) -> &str;
    fn path(&self) -> &str;
    fn expires_at_ms(&self) -> u64;
}

impl Bound for LegacySession {
    fn caller(&self) -> &str {
        &self.caller
    }
    fn path(&self) -> &str {
        &self.path
    }
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

/// Open a session id of `kind` and check it is `caller`'s, on `path`, unexpired: the one rule
/// for a bridged session and a passed-through one.
pub(crate) fn open_bound<T: Bound>(
    sealer: &Sealer,
    kind: &str,
    id: &str,
    (caller, path): (&str, &str),
) -> Result<T, Refused> {
    let s: T = sealer.open(kind, id, MAX_LEN).map_err(Refused::Seal)?;
    check_bound(&s, (caller, path))?;
    Ok(s)
}

/// Whether an opened session is `caller`'s, on `path`, and unexpired now.
pub(super) fn check_bound<T: Bound>(s: &T, (caller, path): (&str, &str)) -> Result<(), Refused> {
    if now_ms() >= s.expires_at_ms() {
        return Err(Refused::Expired);
    }
    if s.path() != path {
        return Err(Refused::OtherEndpoint);
    }
    if s.caller() != caller {
        return Err(Refused::OtherCaller);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::seal::StateKeys;
    use serde_json::json;

    #[test]
    fn a_session_opens_for_its_caller_and_endpoint_only() {
        let sealer = Sealer::new(StateKeys::random());
        let alice = caller_of(Some(b"Bearer a"));
        let s = LegacySession::open(
            "2025-11-25",
            json!({"elicitation": {}}),
            json!({"name": "c"}),
            alice.clone(),
            "/mcp",
            60_000,
        );
        let id = s.seal(&sealer).unwrap();
        assert_eq!(
            LegacySession::verify(&sealer, &id, &alice, "/mcp").unwrap(),
            s
        );
        let bob = caller_of(Some(b"Bearer b"));
        assert_eq!(
            LegacySession::verify(&sealer, &id, &bob, "/mcp"),
            Err(Refused::OtherCaller)
        );
        assert_eq!(
            LegacySession::verify(&sealer, &id, &alice, "/fed"),
            Err(Refused::OtherEndpoint)
        );
        let other = Sealer::new(StateKeys::random());
        assert!(matches!(
            LegacySession::verify(&other, &id, &alice, "/mcp"),
            Err(Refused::Seal(SealError::UnknownKey(_)))
        ));
        let old = LegacySession {
            expires_at_ms: 1,
            ..s
        };
        let id = old.seal(&sealer).unwrap();
        assert_eq!(
            LegacySession::verify(&sealer, &id, &alice, "/mcp"),
            Err(Refused::Expired)
        );
        assert_eq!(caller_of(None), "");
    }
}

/// Sessions ended by `DELETE` on this replica, refused from then on until they would have
/// expired anyway (a sealed session cannot be unsealed; this set is what ends one here).
/// Bounded: past [`MAX_ENDED`] the expired ones go, then the soonest to expire.
#[derive(Default)]
pub(crate) struct Ended {
    set: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

const MAX_ENDED: usize = 100_000;

impl Ended {
    pub(crate) fn end(&self, s: &LegacySession) {
        let mut set = self.set.lock().expect("ended lock");
        if set.len() >= MAX_ENDED {
            let now = now_ms();
            set.retain(|_, exp| *exp > now);
            if set.len() >= MAX_ENDED {
                let soonest = set.iter().min_by_key(|(_, e)| **e).map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    set.remove(&k);
                }
            }
        }
        set.insert(s.nonce.clone(), s.expires_at_ms);
    }

    pub(crate) fn has(&self, s: &LegacySession) -> bool {
        self.set.lock().expect("ended lock").contains_key(&s.nonce)
    }
}

/// The log level a session's client set (`logging/setLevel`), on this replica: a 2026 request
/// carries its level in `_meta`, a 2025 session set it once. Bounded like [`Ended`].
#[derive(Default)]
pub(crate) struct Levels {
    map: std::sync::Mutex<std::collections::HashMap<String, (String, u64)>>,
}

impl Levels {
    pub(crate) fn set(&self, s: &LegacySession, level: &str) {
        let mut m = self.map.lock().expect("levels lock");
        if m.len() >= MAX_ENDED {
            let now = now_ms();
            m.retain(|_, (_, exp)| *exp > now);
            if m.len() >= MAX_ENDED {
                m.clear();
            }
        }
        m.insert(s.nonce.clone(), (level.to_owned(), s.expires_at_ms));
    }

    pub(crate) fn get(&self, s: &LegacySession) -> Option<String> {
        let m = self.map.lock().expect("levels lock");
        m.get(&s.nonce).map(|(l, _)| l.clone())
    }
}
