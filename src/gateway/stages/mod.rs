//! The stages: what happens to a request, in journey order, each as its own state (built from
//! the config, kept across reloads where it can be) and plain functions of their inputs: a
//! stage never sees the request's context or the gateway as a whole, so each is tested without
//! a socket. [`super::journey`] applies them to one request. Imports [`super::transport`] and
//! [`super::telemetry`] only.
//!
//! 1. [`admission`]: what the head alone decides (MCP headers, version, framing).
//! 2. [`route`]: the claimed `Mcp-Method`/`Mcp-Name` to a pool; on a federated endpoint by the
//!    pools' catalogs ([`federation`]).
//! 3. [`limit`], [`concurrency`]: rate and in-flight limits on the claims (the caller's token
//!    and the pool's credential are `crate::auth` and `crate::credentials`).
//! 4. [`inspect`] then [`validate`]: read the bounded body once, parse once, headers vs body.
//! 5. [`seal`]: a sealing pool's `requestState` opened on the retry (and sealed on the way
//!    back); then [`cache`], or [`federation`]'s own answers (merged lists, discovery, listen
//!    streams).
//! 6. [`balance`] (with [`health`]): an instance of the pool.
//! 7. [`answer`]: every answer the gateway writes itself, and a stage's [`answer::Verdict`].

pub(crate) mod admission;
pub(crate) mod answer;
pub mod balance;
pub(crate) mod cache;
pub(crate) mod concurrency;
pub(crate) mod federation;
pub(crate) mod health;
pub(crate) mod inspect;
pub mod limit;
pub mod route;
pub mod seal;
pub mod validate;
