//! The flow vocabulary of the load tester in one place, for callers outside the module (the
//! benches, the tests): each part lives in a file with one job and is re-exported here.
//! - [`scenario`](super::scenario): scenarios, built-ins, files, the weighted pick;
//! - [`template`](super::template): a flow compiled for sending, each leg's body;
//! - [`answer`](super::answer): `inputResponses` for a set of `inputRequests`;
//! - [`reply`](super::reply): what a reply says and which instance served it.

pub use super::scenario::{
    pick_weighted, FlowSpec, Scenario, ARG_REF_PREFIX, BUILTIN_SCENARIOS, DEFAULT_MAX_ROUNDS,
};
pub use super::template::{client_capabilities, FlowTemplate, RetryParts};
