//! Concurrency, a component: how many requests may be in flight at once; past a limit, 503 +
//! `Retry-After` (docs/overload.md).
//!
//! - `concurrency_limits:` per route, per tool or per group of tools, taken on the claimed
//!   headers right after the rate limits, so that one slow tool cannot take a pool's capacity
//!   from the others; a limit may queue (bounded in count and time).
//! - Each pool's own limit (`pools.<name>.concurrency`), adaptive (a gradient on the pool's
//!   latency) or fixed, taken once the pool is final; legs of calls already started go before
//!   new calls.
//! - A slot is held until the request ends, whatever way it ends; counts are per replica.
//!
//! A component of its own, not part of the rate limits (`super::rate_limits`): another
//! mechanism (slots held for a request's life, not tokens spent at its start), another answer
//! (503, not 429), other config sections; it borrows only their `match` (`LimitMatch`) and the
//! `Retry-After` rounding.
//!
//! Not in this folder, and why: `pools.<name>.concurrency` is `crate::config::adaptive`
//! (`src/config/adaptive.rs`), a field of the pool's section: a component has one `config.rs`,
//! and this one is `concurrency_limits:`; the limits are built with the rest of a generation in
//! `journey::state`.
//!
//! One folder holds the rest, its layers inside it (the layer rules of [`super`] hold here as
//! everywhere: a file names only its own layer or those below):
//!
//! | file                | layer       | what it owns                                                  |
//! |---------------------|-------------|---------------------------------------------------------------|
//! | `config.rs`         | config      | `concurrency_limits:`, `crate::config::concurrency` (included by path: the config stays below the gateway) |
//! | [`telemetry`]       | telemetry   | its metric families ([`telemetry::ConcurrencyMetrics`], registered by `telemetry::metrics`) |
//! | [`stages`]          | stages      | the limits and their slots, each pool's limit and the gradient that moves it, the 503s: plain data and functions, with their unit tests |
//! | [`journey`]         | journey     | its steps in a request: the slots taken on the head, the pool's once the pool is final |

pub(crate) mod journey;
pub(crate) mod stages;
pub(crate) mod telemetry;
