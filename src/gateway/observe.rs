//! Observe stage: one access-log line per finished request.
//!
//! The line carries what an operator needs to find a request (method, name, route, instance,
//! status, JSON-RPC error code when the gateway answered, duration, bytes); never the body and
//! never the bearer token.

use std::time::Duration;

/// What is known about a request when it is finished.
#[derive(Debug, Default)]
pub struct Outcome<'a> {
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
    pub route: Option<&'a str>,
    pub instance: Option<&'a str>,
    pub status: u16,
    /// The JSON-RPC error code, when the gateway produced the answer.
    pub gateway_code: Option<i32>,
    /// Why the gateway refused the request (a bounded label), if it did.
    pub reason: Option<&'static str>,
    /// Whether the headers were checked against the body.
    pub checked: bool,
    pub retry_leg: bool,
    pub bytes_in: usize,
    pub bytes_out: usize,
    pub duration: Duration,
}

/// Write the access-log line.
pub fn access_log(o: &Outcome) {
    tracing::info!(
        target: "mcp_edge::access",
        method = o.method.unwrap_or("-"),
        name = o.name.unwrap_or("-"),
        route = o.route.unwrap_or("-"),
        instance = o.instance.unwrap_or("-"),
        status = o.status,
        code = o.gateway_code,
        reason = o.reason,
        checked = o.checked,
        retry_leg = o.retry_leg,
        bytes_in = o.bytes_in,
        bytes_out = o.bytes_out,
        duration_ms = o.duration.as_secs_f64() * 1000.0,
    );
}
