//! The stages: what happens to a request, in the order of their one list ([`pipeline`]), each
//! as its own state (built from the config, kept across reloads where it can be) and plain
//! functions of their inputs: a stage never sees the request's context or the gateway as a
//! whole. Most never see a socket either; the exceptions are the body readers of [`inspect`]
//! and the answer writer of [`answer`], which take pingora's `Session` because reading a body
//! and writing an answer are what they do (the body stages, [`body`], only see parsed data).
//! [`super::journey`] applies them to one request. Imports [`super::transport`] and
//! [`super::telemetry`] only.
//!
//! 0. [`bridge`]: a 2025-era client's session and waiting calls (the protocol bridge, before
//!    admission: its requests re-enter as 2026 requests).
//! 1. [`admission`]: what the head alone decides (MCP headers, version, framing).
//! 2. [`route`]: the claimed `Mcp-Method`/`Mcp-Name` to a pool; on a federated endpoint by the
//!    pools' catalogs ([`super::federation::stages`]).
//! 3. [`super::rate_limits::stages`], [`super::concurrency::stages`]: rate and in-flight limits
//!    on the claims
//!    (the caller's token and the pool's credential are `crate::auth` and `crate::credentials`).
//!    [`pins`]: a call of a tool whose definition changed since it was pinned is held.
//! 4. [`inspect`] then [`validate`]: read the bounded body once, parse once, headers vs body;
//!    then the body stages ([`body`]: plain functions over the parsed body, e.g. [`policy`]).
//! 5. [`seal`] (a sealing pool's `requestState` opened on the retry, sealed on the way
//!    back), then [`super::cache::stages`], or [`super::federation::stages`]'s own answers
//!    (merged lists, discovery, listen streams).
//! 6. [`super::balance::stages`] (with [`health`]): an instance of the pool.
//! 7. [`answer`]: every answer the gateway writes itself, and a stage's [`answer::Verdict`].

pub(crate) mod admission;
pub(crate) mod answer;
pub(crate) mod body;
pub(crate) mod bridge;
pub(crate) mod health;
pub(crate) mod inspect;
pub(crate) mod pins;
pub(crate) mod pipeline;
pub(crate) mod policy;
pub mod route;
pub mod seal;
pub mod validate;

/// The throwaway stage that proves a body stage is one file and one line (docs/architecture.md).
#[cfg(test)]
mod throwaway;
