//! The journey: one request carried through the stages. Its context ([`request::RequestCtx`])
//! and the rules it runs under ([`state::Gateway`], swapped whole on reload: [`live::Live`]);
//! for each stage the step that reads the context, asks the stage ([`super::stages`]) and keeps
//! its verdict; and the one place a refusal becomes the client's answer ([`steps::refuse`]).
//! The phases in [`super::proxy::Proxy`] call these in order. Imports the stages, transport and
//! telemetry, never [`super::proxy`] or [`super::runtime`].
//!
//! 0. [`pipeline`]: the runner of the one list of stages (`stages::pipeline::STAGES`): the
//!    head stages, the body stages where the body is in hand, the pool's.
//! 1. [`steps`]: refusing, reading the body, `100 Continue` (the route step consults
//!    [`super::federation::journey`] on a federated endpoint; [`super::rate_limits::journey`]
//!    asks the rate limits and [`super::concurrency::journey`] takes the slots).
//! 2. [`auth`]: the caller's token; the pool's credential towards the instance ([`credentials`]).
//! 3. [`seal`] (a sealing pool's retry state opened), then [`super::cache::journey`], or
//!    [`super::federation::journey`]'s own answers, right after the body check.
//! 4. [`forward`]: balance, the head's hop-by-hop policy and the peer; on the default path the
//!    [`direct`] leg sends head and body and streams the answer back ([`detached`]: a long
//!    stream handed to its own task).
//! 5. [`response`]: the instance's answer on its way back (passive health, list filter, cache
//!    store, flow scanning); [`failure`] when there is none.
//! 6. [`observe`]: the finished request's metrics, flow and span; its [`audit`] record.
//!
//! The drivers that forward a request themselves (the direct leg, the leg to 2025-era servers)
//! call the proxy's own phases for balance, the upstream head, a connect failure and the answer
//! ([`phases`]): each of those steps has one caller, its phase.

pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod bridge;
pub(crate) mod credentials;
pub mod detached;
pub(crate) mod direct;
pub(crate) mod failure;
pub(crate) mod forward;
pub(crate) mod legacy_up;
pub(crate) mod live;
pub mod observe;
pub(crate) mod phases;
pub(crate) mod pins;
pub(crate) mod pipeline;
pub mod request;
pub(crate) mod response;
pub(crate) mod seal;
pub mod state;
pub(crate) mod steps;
