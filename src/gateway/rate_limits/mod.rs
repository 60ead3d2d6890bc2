//! Rate limits, a component: keyed GCRA limits (`rate_limits:`), checked on what a request's
//! headers claim, before its body is read; over a limit the answer is 429 + `Retry-After`.
//!
//! - A limit's key is built from the route, method, name, principal, client IP or a header; a
//!   `scope: replica` limit keeps its buckets in this process (bounded), a `scope: global` one
//!   asks Redis, behind a circuit, with its `on_store_error` policy when Redis cannot answer.
//! - A reload keeps the buckets of every limit whose settings (and Redis) did not change.
//!
//! Named `rate_limits` after its `gateway.yaml` section: `crate::config::limits` is already the
//! `limits:` section (sizes, the metrics label bound). The in-flight limits are a component of
//! their own, `concurrency` (another mechanism, another answer: 503).
//!
//! Not in this folder, and why: the top-level `redis:` section and the `scope`/`on_store_error`
//! values (`config/redis.rs`) are also read by the seal stage's one-time record, which uses this
//! component's Redis client ([`stages::store`]); the decisions counter
//! (`rate_limit_decisions_total`) is one of the request-level families in `telemetry::metrics`,
//! counted by `Gateway::limited` in `journey::state`, where the limits are built with the rest
//! of a generation.
//!
//! One folder holds the rest, its layers inside it (the layer rules of [`super`] hold here as
//! everywhere: a file names only its own layer or those below):
//!
//! | file                | layer       | what it owns                                                  |
//! |---------------------|-------------|---------------------------------------------------------------|
//! | `config.rs`         | config      | `rate_limits:`, `crate::config::rate_limits` (included by path: the config stays below the gateway) |
//! | [`telemetry`]       | telemetry   | the Redis store's metric families ([`telemetry::StoreMetrics`], registered once, when `redis:` is set, by the limits' shared part) |
//! | [`stages`]          | stages      | the limits and their keys, the local buckets, the Redis store and its circuit, the 429: plain data and functions, with their unit tests |
//! | [`journey`]         | journey     | its step in a request: the limits asked on the claimed headers |

pub(crate) mod journey;
pub mod stages;
pub(crate) mod telemetry;
