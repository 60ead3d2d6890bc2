//! What the walk keeps while it reads one document ([`State`]): the envelope so far, the
//! `jsonrpc` value, the faults found, and `params` when a server asked for them. Below the walk
//! and the `params` builder (`super::super::keep`), which both fill it.

use super::super::super::strict::Faults;
use super::super::Envelope;

#[derive(Default)]
pub(crate) struct State {
    pub(crate) env: Envelope,
    pub(crate) jsonrpc: Option<String>,
    pub(crate) has_result_or_error: bool,
    pub(crate) faults: Faults,
    /// Build `params` into [`State::params`] (see `parse_keeping_params`).
    pub(crate) keep_params: bool,
    pub(crate) params: serde_json::Map<String, serde_json::Value>,
}
