//! Recent refusals and failures: the last [`CAPACITY`] requests the gateway refused or that
//! failed, for the console's "why was this call refused?" table.
//!
//! Bounded (a ring: the oldest goes when a new one comes) and lock-light: the lock is taken
//! only for a refused or failed request, never on the path of one that succeeds. What an
//! entry holds is what the access log holds — time, status, JSON-RPC code and reason, route,
//! pool, the instance blamed, the claimed `Mcp-Method`/`Mcp-Name` and what the body said — plus
//! the caller's verified subject. Never a token, a header value or the body.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::gateway::telemetry::outcome::Outcome;
use crate::mcp::codes;

/// Entries kept.
pub(crate) const CAPACITY: usize = 300;
/// The longest message kept (the gateway's own refusal text).
const MESSAGE_MAX: usize = 300;

/// Whose fault a refusal or failure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Side {
    /// The gateway refused what the client sent (4xx).
    Client,
    /// The gateway could not serve it (its limits, its dependencies; 5xx it made).
    Gateway,
    /// The instance failed or could not be reached.
    Upstream,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Entry {
    pub at_unix_ms: u64,
    pub side: Side,
    pub status: u16,
    pub code: Option<i32>,
    pub reason: Option<&'static str>,
    pub message: Option<String>,
    pub route: Option<String>,
    pub pool: Option<String>,
    pub instance: Option<String>,
    pub claimed_method: Option<String>,
    pub claimed_name: Option<String>,
    pub body_method: Option<String>,
    pub body_name: Option<String>,
    pub caller: Option<String>,
}

/// The ring.
#[derive(Default)]
pub struct Recent {
    ring: Mutex<VecDeque<Entry>>,
}

/// The JSON-RPC codes of the gateway's answers that blame the instance (it could not be
/// reached, timed out or failed).
const UPSTREAM_CODES: [i32; 3] = [
    codes::GATEWAY_UPSTREAM_UNAVAILABLE,
    codes::GATEWAY_UPSTREAM_TIMEOUT,
    codes::GATEWAY_UPSTREAM_FAILED,
];

/// Whose fault an answer is, from its HTTP status and the JSON-RPC code of an answer the
/// gateway made (`None`: neither a refusal nor a failure). The one rule behind the refusal ring
/// and the console's error counts.
pub(crate) fn side(status: u16, gateway_code: Option<i32>) -> Option<Side> {
    match gateway_code {
        Some(c) if UPSTREAM_CODES.contains(&c) => Some(Side::Upstream),
        Some(_) if status < 500 => Some(Side::Client),
        Some(_) => Some(Side::Gateway),
        None if status >= 500 => Some(Side::Upstream),
        None => None,
    }
}

/// Whose fault an outcome is, if it is a refusal or a failure at all.
pub(crate) fn side_of(o: &Outcome) -> Option<Side> {
    side(o.status, o.gateway_code)
}

impl Side {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Gateway => "gateway",
            Side::Upstream => "upstream",
        }
    }
}

impl Recent {
    /// Keep `o` if it was refused or failed. `message`, `body` (method, name) and `caller` are
    /// read only then.
    pub(crate) fn note(
        &self,
        o: &Outcome,
        message: impl FnOnce() -> Option<String>,
        body: impl FnOnce() -> (Option<String>, Option<String>),
        caller: impl FnOnce() -> Option<String>,
    ) {
        let Some(side) = side_of(o) else {
            return;
        };
        let (body_method, body_name) = body();
        let entry = Entry {
            at_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            side,
            status: o.status,
            code: o.gateway_code,
            reason: o.reason,
            message: message().map(|m| m.chars().take(MESSAGE_MAX).collect()),
            route: o.route.map(str::to_string),
            pool: o.pool.map(str::to_string),
            instance: o.instance.map(str::to_string),
            claimed_method: o.method.map(str::to_string),
            claimed_name: o.name.map(str::to_string),
            body_method,
            body_name,
            caller: caller(),
        };
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if ring.len() >= CAPACITY {
            ring.pop_front();
        }
        ring.push_back(entry);
    }

    /// The entries, newest first.
    pub(crate) fn snapshot(&self) -> Vec<Entry> {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(status: u16, code: Option<i32>, reason: Option<&'static str>) -> Outcome<'static> {
        Outcome {
            method: Some("tools/call"),
            name: Some("echo"),
            route: Some("r"),
            pool: Some("p"),
            instance: None,
            status,
            gateway_code: code,
            reason,
            checked: true,
            retry_leg: false,
            input_required: false,
            bytes_in: 0,
            bytes_out: 0,
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn only_refusals_and_failures_are_kept_newest_first_and_bounded() {
        let r = Recent::default();
        let none = || None;
        let body = || (Some("tools/call".to_string()), Some("deploy".to_string()));
        r.note(&outcome(200, None, None), none, body, none);
        assert!(r.snapshot().is_empty());
        for i in 0..CAPACITY + 5 {
            let o = outcome(400, Some(-32020 - i as i32), Some("mcp-name-mismatch"));
            r.note(&o, || Some("x".repeat(1000)), body, || Some("alice".into()));
        }
        let s = r.snapshot();
        assert_eq!(s.len(), CAPACITY);
        assert_eq!(s[0].code, Some(-32020 - (CAPACITY + 4) as i32));
        assert_eq!(s[0].side, Side::Client);
        assert_eq!(s[0].body_name.as_deref(), Some("deploy"));
        assert_eq!(s[0].message.as_ref().unwrap().len(), MESSAGE_MAX);
    }

    #[test]
    fn each_fault_is_blamed_on_its_side() {
        let side = |s, c, r| side_of(&outcome(s, c, r));
        assert_eq!(
            side(429, Some(-31000), Some("rate-limited")),
            Some(Side::Client)
        );
        assert_eq!(
            side(503, Some(-31007), Some("concurrency")),
            Some(Side::Gateway)
        );
        assert_eq!(
            side(
                502,
                Some(codes::GATEWAY_UPSTREAM_UNAVAILABLE),
                Some("upstream-unavailable")
            ),
            Some(Side::Upstream)
        );
        assert_eq!(side(500, None, None), Some(Side::Upstream));
        assert_eq!(side(404, None, None), None);
    }
}
