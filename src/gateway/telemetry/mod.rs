//! Telemetry, the lowest layer: what the gateway records about the requests it serves. Every
//! layer above may write here; nothing here reads a request's context or a stage's state (the
//! observe stage, [`super::journey::observe`], turns a finished request into these records).
//!
//! - [`metrics`]: the Prometheus registry and its families, one [`metrics::Outcome`] per answer,
//!   the access-log line; [`labels`] keeps their label values bounded.
//! - [`flows`]: MRTR flows followed across legs and instances ([`flow_metrics`], [`task_count`],
//!   entries that expire: [`expiring`]).
//! - [`trace`]: W3C trace context and OTLP spans.
//! - [`recent`]: the ring of recent refusals the console shows, and whose fault each one was.
//! - [`audit`]: the audit trail, one record per call and per flow, written off the request path.
//! - [`history`]: per-second and per-minute points of what the gateway served, for the
//!   console's charts, read from the metrics.
//!
//! **Where a metric family goes (one rule):** every family the gateway registers is declared in
//! the telemetry layer, whichever layer records into it, never beside the code that counts it:
//! the request-level ones (requests, durations, outcomes) in `metrics/mod.rs`; a component's in
//! its own telemetry file (a struct of its families with its `register`, or a function that
//! makes one), which is `<component>/telemetry.rs` for a component folder
//! ([`super::federation`], [`super::cache`], [`super::balance`], [`super::rate_limits`],
//! [`super::concurrency`]: the rule is in [`super`]) and `metrics/<component>.rs` for the
//! others. [`metrics`] names them to build the one [`metrics::Metrics`] and register it (the
//! cache's families are registered by its stores' shared part, and the rate limits' Redis store
//! families by the limits' shared part, both outliving reloads). Telemetry is the lowest layer, so every stage, journey
//! step and transport may name them. The components outside the gateway (`crate::auth`,
//! `crate::credentials`) keep theirs in their own `metrics.rs`, registered on the gateway's
//! registry.

pub mod audit;
pub(crate) mod expiring;
pub(crate) mod flow_metrics;
pub mod flows;
pub(crate) mod history;
pub(crate) mod labels;
pub mod metrics;
pub(crate) mod outcome;
pub(crate) mod recent;
pub(crate) mod task_count;
pub mod trace;
