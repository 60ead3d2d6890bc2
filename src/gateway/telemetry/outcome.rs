//! One finished request, as every record of it sees it: the metrics, the access log, the
//! refusal ring and the span all read this one value (filled in by `journey::observe`).

use std::time::Duration;

/// What is known about a request when it is finished.
#[derive(Debug, Default)]
pub struct Outcome<'a> {
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
    pub route: Option<&'a str>,
    pub pool: Option<&'a str>,
    pub instance: Option<&'a str>,
    pub status: u16,
    /// The JSON-RPC error code, when the gateway produced the answer.
    pub gateway_code: Option<i32>,
    /// Why the gateway refused the request (a bounded label), if it did.
    pub reason: Option<&'static str>,
    /// Whether the headers were checked against the body.
    pub checked: bool,
    pub retry_leg: bool,
    pub input_required: bool,
    pub bytes_in: usize,
    pub bytes_out: usize,
    pub duration: Duration,
}
