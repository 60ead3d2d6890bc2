//! A 2025-era session passed through to a pool whose instances serve both eras
//! (`pools.<name>.legacy_clients: pass`): the instance is the session, the gateway only pins
//! it. The session id the instance minted never reaches the client: it is sealed, with the pool
//! and instance that minted it, who opened it, on which endpoint and until when, into the
//! session id the client sees ([`PassSession`], kind `ep1`). Any replica holding the keys opens
//! it and sends the follow-ups (requests, answers to the instance's questions, the standalone
//! `GET` stream, `DELETE`) to that one instance, with no shared store.
//!
//! Refused like a bridged session (404, so the client opens a new one): altered, expired, from
//! another endpoint, or presented by another caller. An instance that is gone (not in the pool
//! any more, or not answering) gets the client the same 404.

use serde::{Deserialize, Serialize};

use super::session::{open_bound, Bound, Refused, MAX_LEN};
use crate::mcp::seal::{now_ms, Sealer};

/// The token kind of a pinned session id.
pub(crate) const KIND: &str = "ep1";

/// What a pinned session id says.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct PassSession {
    /// The pool, by name.
    #[serde(rename = "p")]
    pub pool: String,
    /// The instance that opened the session, by name (as `pools.<name>.instances` lists it).
    #[serde(rename = "i")]
    pub instance: String,
    /// The instance's own session id.
    #[serde(rename = "s")]
    pub upstream: String,
    /// Who opened it (the bridge's caller rule: [`super::session::caller_of`] or the verified
    /// subject).
    #[serde(rename = "w")]
    pub caller: String,
    /// The endpoint path it was opened on.
    #[serde(rename = "e")]
    pub path: String,
    /// Expiry, milliseconds since the Unix epoch.
    #[serde(rename = "x")]
    pub expires_at_ms: u64,
}

/// A passed-through message on its way (kept in its request's context).
#[derive(Debug)]
pub(crate) struct Pass {
    /// The pool (an index of this gateway generation) and, on a pinned session, its instance.
    pub pool: usize,
    pub instance: Option<usize>,
    /// The pinned session (`None`: `initialize`, or an instance that keeps no sessions).
    pub session: Option<PassSession>,
    /// Who calls, on which endpoint, for how long: what an `initialize` answer's session id is
    /// sealed with.
    pub caller: String,
    pub path: String,
    pub ttl_ms: u64,
    /// A JSON-RPC request or notification: it walks the stages, claimed by its body. Otherwise
    /// (an answer to the instance's question, the standalone `GET`, `DELETE`) it goes straight
    /// to the session's instance: there is nothing to route, limit or check.
    pub walks: bool,
    /// The session's standalone `GET` stream.
    pub stream: bool,
}

/// Whether a presented session id is a pinned one (it may still fail to open).
pub(crate) fn is_pinned(id: &str) -> bool {
    id.strip_prefix(KIND).is_some_and(|r| r.starts_with('.'))
}

impl PassSession {
    /// The session id the client sees; `None` when it would be longer than the bridge's bound
    /// (an instance that mints a huge session id).
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
    ) -> Result<PassSession, Refused> {
        open_bound(sealer, KIND, id, (caller, path))
    }
}

impl Bound for PassSession {
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

/// An instance's answer head as the client sees it: the session id the instance minted (on
/// `initialize`) sealed with that instance into the one the client will present, every other
/// spelling of the header removed; the id of the pinned session itself is left out (the client
/// keeps the one it has). An id too long to seal is dropped (the client then has no session
/// and its next request is refused by the instance).
pub(crate) fn answer_head(
    pass: &Pass,
    sealer: &Sealer,
    (pool, instance): (&str, &str),
    head: &mut pingora::http::ResponseHeader,
) -> pingora::Result<()> {
    use crate::mcp::legacy::SESSION_ID;
    let minted = head
        .headers
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let spellings: Vec<http::HeaderName> = head
        .headers
        .keys()
        .filter(|k| crate::mcp::header::folds_to(k.as_str(), SESSION_ID))
        .cloned()
        .collect();
    for name in spellings {
        head.remove_header(&name);
    }
    let Some(upstream) = minted else {
        return Ok(());
    };
    if pass
        .session
        .as_ref()
        .is_some_and(|s| s.upstream == upstream)
    {
        return Ok(());
    }
    let sealed = PassSession {
        pool: pool.to_owned(),
        instance: instance.to_owned(),
        upstream,
        caller: pass.caller.clone(),
        path: pass.path.clone(),
        expires_at_ms: now_ms().saturating_add(pass.ttl_ms),
    }
    .seal(sealer);
    match sealed {
        Some(id) => head.insert_header(SESSION_ID, id),
        None => {
            tracing::warn!(
                "pool {pool}: instance {instance} minted a session id too long to pass on"
            );
            Ok(())
        }
    }
}

/// No session here: `404`, as a 2025-era server answers a session it does not know.
pub(crate) fn not_found(why: &str) -> crate::mcp::Rejection {
    use crate::mcp::{codes, Rejection};
    let msg = format!("Session not found: {why}; send initialize again to open a new session");
    Rejection::new(
        404,
        codes::GATEWAY_SESSION_NOT_FOUND,
        "session-not-found",
        msg,
    )
}

/// The answer when a pinned session's instance is gone: `404`, as the instance would answer a
/// session it lost, so the client opens a new one (on an instance that is there).
pub(crate) fn gone(pool: &str, instance: &str, why: &str) -> crate::mcp::Rejection {
    not_found(&format!(
        "the instance {instance} of pool {pool} that held it is gone ({why})"
    ))
    .with_data(serde_json::json!({"reason": "instance_gone"}))
}

/// Whether an upstream failure means a pinned session's instance is not there: nothing was
/// sent (it could not be reached).
pub(crate) fn unreachable(e: pingora::ErrorType) -> bool {
    use pingora::ErrorType as T;
    matches!(
        e,
        T::ConnectTimedout | T::ConnectRefused | T::ConnectNoRoute | T::ConnectError
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::seal::{SealError, StateKeys};

    fn session(expires_at_ms: u64) -> PassSession {
        PassSession {
            pool: "dual".into(),
            instance: "127.0.0.1:9001".into(),
            upstream: "5f0c-upstream".into(),
            caller: "alice".into(),
            path: "/mcp".into(),
            expires_at_ms,
        }
    }

    #[test]
    fn a_pinned_session_opens_for_its_caller_and_endpoint_only_and_hides_the_instances_id() {
        let sealer = Sealer::new(StateKeys::random());
        let s = session(now_ms() + 60_000);
        let id = s.seal(&sealer).unwrap();
        assert!(is_pinned(&id), "{id}");
        assert!(!id.contains("5f0c-upstream"), "the instance's id is sealed");
        assert_eq!(PassSession::verify(&sealer, &id, "alice", "/mcp"), Ok(s));
        assert_eq!(
            PassSession::verify(&sealer, &id, "bob", "/mcp"),
            Err(Refused::OtherCaller)
        );
        assert_eq!(
            PassSession::verify(&sealer, &id, "alice", "/fed"),
            Err(Refused::OtherEndpoint)
        );
        let other = Sealer::new(StateKeys::random());
        assert!(matches!(
            PassSession::verify(&other, &id, "alice", "/mcp"),
            Err(Refused::Seal(SealError::UnknownKey(_)))
        ));
        let old = session(1).seal(&sealer).unwrap();
        assert_eq!(
            PassSession::verify(&sealer, &old, "alice", "/mcp"),
            Err(Refused::Expired)
        );
        // A bridged session's id is not a pinned one, nor the other way round.
        assert!(!is_pinned("es1.k.payload") && !is_pinned("ep10.k") && !is_pinned(""));
        let mut altered = id.clone().into_bytes();
        let n = altered.len() - 3;
        altered[n] = if altered[n] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        assert!(matches!(
            PassSession::verify(&sealer, &altered, "alice", "/mcp"),
            Err(Refused::Seal(_))
        ));
    }
}
