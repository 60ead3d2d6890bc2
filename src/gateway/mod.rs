//! The gateway: a pingora [`ProxyHttp`](pingora::proxy::ProxyHttp) ([`proxy::Proxy`]) whose
//! phases are a request's journey, in five layers (and the phases between two of them), each a
//! folder, each importing only the layers below it, with no import cycle inside one (`tests/`
//! checks both):
//!
//! | layer          | what it owns                                                                  |
//! |----------------|-------------------------------------------------------------------------------|
//! | [`runtime`]    | the process: server, reload, admin endpoints and console, DNS, `explain`       |
//! | [`proxy`]      | the pingora phases, calling the journey's steps in order                       |
//! | [`journey`]    | one request carried through the stages: its context, the gateway it runs on, a step per stage, the direct leg, the one place a refusal is written, observing |
//! | [`stages`]     | what each stage decides, as its own state and plain functions: admit, route, inspect, validate, the body stages, seal, pins, health, answer |
//! | [`transport`]  | how bytes move: listeners, TLS, the head deadline, parked connections, the upstream HTTP/1.1 client |
//! | [`telemetry`]  | what is recorded: metrics, flows, traces, the refusal ring                     |
//!
//! **A component** is one folder holding its layers: [`federation`], [`cache`], [`balance`],
//! [`rate_limits`] and [`concurrency`]. Inside it each file or subfolder is named by its layer
//! (`stages/`, `journey/` or `journey.rs`, `telemetry.rs`) and is in that layer, under the same
//! rules as the layer folders; its `mod.rs` says what the component owns, what of it stays
//! outside the folder and why, and names only its own parts; its `config.rs` is its
//! `gateway.yaml` section, included into `crate::config` by path (the config stays below the
//! gateway); its metric families are its `telemetry.rs` ([`telemetry`] says where). Everything
//! else keeps to the layer folders. A new component is a folder like these and one line in
//! `tests/project/layers.rs` (`COMPONENTS`). Two components are folders of the crate, below
//! the gateway: `crate::auth` and `crate::credentials` (the config's checks read the
//! credentials' secrets and signing keys, so it cannot live under the gateway); their steps in
//! a request are [`journey::auth`] and [`journey::credentials`].
//!
//! **The default path** (a plain HTTP/1.1 pool, `connections.upstream_leg: direct`, the body
//! checked) runs whole in pingora's first phase, `request_filter` ([`proxy`]), in the order of
//! the one list of stages ([`stages::pipeline`], run by [`journey::pipeline`], walked by
//! `explain`):
//!
//! 1. the whole HTTP/1 head has arrived in time ([`transport::head_deadline`], below pingora);
//! 2. **admit** the head ([`stages::admission`]);
//! 3. **route** on the claimed `Mcp-Method`/`Mcp-Name` ([`stages::route`]; on a federated
//!    endpoint by the pools' catalogs, [`federation::stages`]);
//! 4. **authenticate** ([`journey::auth`]) and **limit** ([`rate_limits::stages`] through
//!    [`rate_limits::journey`], [`concurrency::stages`] through [`concurrency::journey`]), still on
//!    the claims; only then `100 Continue`;
//! 5. **read the body** whole, once, whatever its framing ([`stages::inspect`], through
//!    [`journey::pipeline::body`]) and **validate** it against the headers
//!    ([`stages::validate`]), then the **body stages** ([`stages::body`]: the argument policy,
//!    [`stages::policy`]); a federated endpoint may answer here (merged lists, discovery:
//!    [`federation::journey::on_checked`]);
//! 6. **cache**: a hit is answered here ([`cache::journey`] over [`cache::stages`]); each
//!    returns a [`stages::answer::Verdict`]; the pool's own credential
//!    ([`journey::credentials`]);
//! 7. **forward** on the direct leg ([`journey::direct`]): it calls pingora's later phases of
//!    this proxy itself ([`journey::phases`]): **balance** (`upstream_peer`:
//!    [`journey::forward::choose`] over [`balance::stages`]), the upstream head
//!    (`upstream_request_filter`), connect retries (`fail_to_connect`), the **answer** on its
//!    way back (`response_filter`, `response_body_filter`: [`journey::response`]), a long event
//!    stream handed to its own task ([`journey::detached`]); the bytes go on the gateway's own
//!    HTTP/1.1 client ([`transport::upstream_h1`]);
//! 8. **observe** when the request ends ([`journey::observe`], in pingora's `logging` phase or
//!    at the end of a detached stream).
//!
//! A refusal at any step is a value ([`crate::mcp::Rejection`]) the phase hands to one place,
//! [`journey::steps::refuse`], which writes the JSON-RPC answer ([`stages::answer`]).
//!
//! **pingora's pipe** carries the rest: TLS and h2 pools, protocol upgrades, bodies streamed
//! unchecked (sampled out) past the read-whole size, and `upstream_leg: pingora`. There a body up
//! to 64 KiB is still read and checked in `request_filter`; a larger one is held chunk by chunk
//! in `request_body_filter`, checked at its end and released whole (pingora replays a body read
//! early only from its 64 KiB retry buffer). Then `upstream_peer` balances, `upstream_request_filter`
//! forwards, `response_filter`/`_body` run [`journey::response`], `fail_to_connect`/`_proxy` run
//! [`journey::failure`], and `logging` observes. `inspect::Plan` is the one table of these paths.
//!
//! A request's state is one [`RequestCtx`] ([`journey::request`]); where its body is, is one
//! [`journey::request::Progress`]. The rules it runs under are one [`Gateway`] ([`journey::state`]),
//! swapped whole on reload ([`Live`]) by [`runtime::server`]; [`runtime::admin`] serves
//! `/metrics`, `/healthz`, `/readyz`, `/ui`, `POST /-/reload`, `POST /-/explain` and
//! `POST /-/cache/purge`.

pub mod balance;
pub(crate) mod cache;
pub(crate) mod concurrency;
pub(crate) mod federation;
pub mod journey;
pub(crate) mod proxy;
pub mod rate_limits;
pub mod runtime;
pub mod stages;
pub mod telemetry;
pub mod transport;

pub use journey::live::Live;
pub use journey::request::RequestCtx;
pub use journey::state::Gateway;
pub use runtime::server::{build_server, serve, RunningGateway};
