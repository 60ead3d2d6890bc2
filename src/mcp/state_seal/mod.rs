//! `requestState` sealed at the edge, for servers that do not protect their own: the envelope
//! the gateway hands the client in place of the server's state, and the checks on the retry.
//!
//! An envelope is a [`Sealer`] token of kind [`KIND`] (XChaCha20-Poly1305 with the key ring
//! shared by the replicas) whose payload binds:
//!
//! - the caller (a 128-bit digest the gateway computes: the verified subject, else the
//!   `Authorization` header, else the client address; [`caller`]);
//! - the method and the name (tool, prompt, or resource URI);
//! - the digest of the arguments: SHA-256 of method, NUL, name, NUL and the RFC 8785 canonical
//!   JSON of `params.arguments` ([`arguments_digest`]; key order and number spelling do not
//!   matter; the backend's own digest uses the same form);
//! - when it was issued and when it expires;
//! - the server's state, byte for byte.
//!
//! [`open`] checks each in that order and says which failed ([`Refused`]). The byte-level
//! editing of responses and requests is [`rewrite`]. No I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::mcp::hex;
use crate::mcp::seal::{SealError, Sealer};

pub mod rewrite;

/// The token kind of a sealed `requestState` (never opens as any other kind of token).
pub const KIND: &str = "ers1";

/// What a sealed state is bound to (all but the times).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding<'a> {
    /// [`caller`]'s digest, hex.
    pub caller: &'a str,
    pub method: &'a str,
    pub name: &'a str,
    /// [`arguments_digest`], hex.
    pub arguments: &'a str,
}

/// The sealed payload (short member names: it travels in every round).
#[derive(Serialize, Deserialize)]
struct Payload<'a> {
    c: std::borrow::Cow<'a, str>,
    m: std::borrow::Cow<'a, str>,
    n: std::borrow::Cow<'a, str>,
    a: std::borrow::Cow<'a, str>,
    /// Issued and expires, milliseconds since the epoch.
    i: u64,
    e: u64,
    s: std::borrow::Cow<'a, str>,
}

/// Who is calling, as a state is bound to it: `kind` says what identifies them (`sub`, `auth`,
/// `ip`), `value` is it. A digest: the envelope carries no credential.
pub fn caller(kind: &str, value: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    h.update([0]);
    h.update(value);
    hex::encode(&h.finalize()[..16])
}

/// The digest of a request's salient params (method, name, canonical arguments), hex.
pub fn arguments_digest(method: &str, name: &str, arguments: &Value) -> String {
    hex::encode(&super::digest::salient_params(method, name, arguments)[..16])
}

/// The envelope for the server's `state`, bound to `to`, issued at `now_ms` for `ttl_ms`.
pub fn seal(sealer: &Sealer, to: &Binding, state: &str, now_ms: u64, ttl_ms: u64) -> String {
    use std::borrow::Cow::Borrowed;
    let p = Payload {
        c: Borrowed(to.caller),
        m: Borrowed(to.method),
        n: Borrowed(to.name),
        a: Borrowed(to.arguments),
        i: now_ms,
        e: now_ms.saturating_add(ttl_ms),
        s: Borrowed(state),
    };
    sealer.seal(KIND, &p)
}

/// Why a presented state was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Not an envelope of this gateway at all (an unsealed or made-up state).
    NotSealed,
    /// Longer than `max_bytes`.
    TooLarge(usize),
    /// Changed since the gateway sealed it.
    Tampered,
    /// Sealed with a key the ring no longer holds.
    UnknownKey(String),
    /// Issued to another caller.
    OtherCaller,
    /// Issued for another method or name.
    OtherTool,
    /// Issued for other arguments.
    OtherArguments,
    /// Past its expiry.
    Expired,
    /// Already redeemed (one-time use).
    Used,
}

impl Refused {
    /// The label of metrics and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Refused::NotSealed => "state-not-sealed",
            Refused::TooLarge(_) => "state-too-large",
            Refused::Tampered => "state-tampered",
            Refused::UnknownKey(_) => "state-unknown-key",
            Refused::OtherCaller => "state-other-caller",
            Refused::OtherTool => "state-other-tool",
            Refused::OtherArguments => "state-other-arguments",
            Refused::Expired => "state-expired",
            Refused::Used => "state-used",
        }
    }

    /// The client's message: what was wrong with the state, and what to do.
    pub fn message(&self) -> String {
        let what = match self {
            Refused::NotSealed => "is not one this gateway issued".to_string(),
            Refused::TooLarge(max) => format!("is longer than the {max} bytes allowed"),
            Refused::Tampered => "failed its integrity check (it was changed)".into(),
            Refused::UnknownKey(id) => {
                format!("was sealed with key {id:?}, which this gateway no longer holds")
            }
            Refused::OtherCaller => "was issued to another caller".into(),
            Refused::OtherTool => "was issued for another method or name".into(),
            Refused::OtherArguments => "was issued for other arguments".into(),
            Refused::Expired => "has expired".into(),
            Refused::Used => "was already used (a state completes once)".into(),
        };
        format!("Invalid requestState: it {what}; start the call again without requestState")
    }
}

/// An envelope opened: the server's state, and when the envelope expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub state: String,
    pub expires_ms: u64,
}

/// The server's original state, if `token` is an envelope of this gateway bound to `to` and
/// not expired at `now_ms`.
pub fn open(
    sealer: &Sealer,
    token: &str,
    to: &Binding,
    now_ms: u64,
    max_bytes: usize,
) -> Result<Opened, Refused> {
    if token.len() > max_bytes {
        return Err(Refused::TooLarge(max_bytes));
    }
    let p: Payload = match sealer.open(KIND, token, max_bytes) {
        Ok(p) => p,
        Err(SealError::Malformed) => return Err(Refused::NotSealed),
        Err(SealError::Tampered) => return Err(Refused::Tampered),
        Err(SealError::UnknownKey(id)) => return Err(Refused::UnknownKey(id)),
    };
    if p.c != to.caller {
        return Err(Refused::OtherCaller);
    }
    if p.m != to.method || p.n != to.name {
        return Err(Refused::OtherTool);
    }
    if p.a != to.arguments {
        return Err(Refused::OtherArguments);
    }
    if now_ms >= p.e {
        return Err(Refused::Expired);
    }
    Ok(Opened {
        state: p.s.into_owned(),
        expires_ms: p.e,
    })
}

#[cfg(test)]
mod tests;
