//! The stages: what happens to a request, in journey order. Each stage is plain functions over
//! the request's context ([`request::RequestCtx`]) and the rules it runs under
//! ([`state::Gateway`], swapped whole on reload: [`state::Live`]); the phases in
//! [`super::Proxy`] call them in order. Imports [`super::transport`] and [`super::telemetry`],
//! never [`super::runtime`].
//!
//! 1. [`admission`]: what the head alone decides (MCP headers, version, framing).
//! 2. [`route`]: the claimed `Mcp-Method`/`Mcp-Name` to a pool; on a federated endpoint by the
//!    pools' catalogs ([`federation`]).
//! 3. [`auth`]: the caller's token; the pool's credential towards the instance ([`credentials`]).
//! 4. [`limit`], [`concurrency`]: rate and in-flight limits on the claims.
//! 5. [`inspect`] then [`validate`]: read the bounded body once, parse once, headers vs body.
//! 6. [`cache`], or [`federation`]'s own answers (merged lists, discovery, listen streams).
//! 7. [`balance`] (with [`health`]): an instance of the pool.
//! 8. [`forward`]: the head's hop-by-hop policy and the peer; on the default path the
//!    [`direct`] leg sends head and body and streams the answer back ([`detached`]: a long
//!    stream handed to its own task).
//! 9. [`response`]: the instance's answer on its way back (passive health, list filter, cache
//!    store, flow scanning); [`failure`] when there is none.
//! 10. [`answer`]: every answer the gateway writes itself; [`steps`]: the session-facing steps
//!     the phases share (refusing, reading a small body first, holding a large one).
//! 11. [`observe`]: the finished request's metrics, flow and span.

pub mod admission;
pub mod answer;
pub mod auth;
pub mod balance;
pub mod cache;
pub mod concurrency;
pub mod credentials;
pub mod detached;
pub mod direct;
pub mod failure;
pub mod federation;
pub mod forward;
pub mod health;
pub mod inspect;
pub mod limit;
pub mod live;
pub mod observe;
pub mod request;
pub mod response;
pub mod route;
pub mod state;
pub mod steps;
pub mod validate;
