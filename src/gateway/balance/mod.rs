//! Balance, a component: which instance of a pool a request goes to.
//!
//! - Each pool is balanced its own way (`balance:` round robin, least loaded, or consistent
//!   hashing with an optional load bound), with weights and slow start; an instance's load
//!   (requests in flight, a latency estimate) is kept across reloads.
//! - `tasks/*` requests go to the instance their task id names; an MRTR retry leg may be steered
//!   away from its flow's earlier instances (`mrtr.retry_landing`).
//! - Latency outliers (`pools.<name>.outliers`) are found here and ejected through the pool's
//!   health, so every mode skips them.
//!
//! Not in this folder, and why: whether an instance is up (active checks, passive ejection) is
//! its own stage, `stages::health`, which the balancer reads and which also serves the era
//! probe and the gateway's own checks; the journey's step is `journey::forward::choose`, in a
//! file that also writes the upstream head; the pools are built with the rest of a generation
//! in `journey::state`; and the other balancing keys are fields of `pools.<name>`
//! (`config/pools.rs`).
//!
//! One folder holds the rest, its layers inside it (the layer rules of [`super`] hold here as
//! everywhere: a file names only its own layer or those below):
//!
//! | file                | layer       | what it owns                                                  |
//! |---------------------|-------------|---------------------------------------------------------------|
//! | `config.rs`         | config      | `pools.<name>.outliers`, `crate::config::balance` (included by path: the config stays below the gateway) |
//! | [`telemetry`]       | telemetry   | its metric families ([`telemetry::BalanceMetrics`], registered by `telemetry::metrics`) |
//! | [`stages`]          | stages      | the pools and their instances, the three modes, load and latency, keys, probes, steering, the outlier detector, the gauges set at a scrape: plain data and functions, with their unit tests |

pub mod stages;
pub(crate) mod telemetry;
