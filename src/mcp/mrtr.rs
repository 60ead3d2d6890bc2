//! Member names of multi round-trip requests (MRTR, SEP-2322) on the wire: what an
//! `input_required` result carries and what the retry leg sends back. The gateway, the
//! reference backend and the load tester name these fields through the constants here.

/// `result.resultType` (the values are in [`super::result_type`]).
pub(crate) const RESULT_TYPE: &str = "resultType";
/// `result.inputRequests`: the server's requests to the client, keyed by the server.
pub(crate) const INPUT_REQUESTS: &str = "inputRequests";
/// `params.inputResponses` of a retry leg (and of `tasks/update`): the client's answers, by key.
pub(crate) const INPUT_RESPONSES: &str = "inputResponses";
/// `result.requestState` / `params.requestState`: the server's opaque state, echoed verbatim.
pub(crate) const REQUEST_STATE: &str = "requestState";
