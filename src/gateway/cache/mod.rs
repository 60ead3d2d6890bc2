//! The edge cache, a component: stored `complete` results of the six cacheable methods, served
//! while their `ttlMs` lasts (spec §Caching), and the `x-mcp-header` parameters learned from
//! `tools/list` for the `Mcp-Param-*` header check.
//!
//! - Each route has its own store, a `moka` cache bounded by bytes and entries. A reload keeps
//!   a route's store when the route, its pool's instances and its cache settings did not
//!   change, and drops it otherwise.
//! - What outlives every reload is the shared part: metrics, requests in flight per key (for
//!   coalescing), per-pool generations (an invalidation makes in-flight fetches unstorable),
//!   the learned tool parameters, and every live store (for invalidations and purges).
//! - A request meets the cache at three points: right after the body check (a hit answered, a
//!   `tools/call`'s `Mcp-Param-*` headers checked), on a miss's response head and on its body
//!   (collected, stored; streams watched for invalidating notifications); a failed refetch may
//!   be answered with a stale entry.
//!
//! One folder holds all of it, its layers inside it (the layer rules of [`super`] hold here as
//! everywhere: a file names only its own layer or those below):
//!
//! | file                | layer       | what it owns                                                  |
//! |---------------------|-------------|---------------------------------------------------------------|
//! | `config.rs`         | config      | `routes[].cache`, `crate::config::cache` (included by path: the config stays below the gateway) |
//! | [`telemetry`]       | telemetry   | its metric families ([`telemetry::CacheMetrics`], registered once by the stores' shared part) |
//! | [`stages`]          | stages      | the stores, keys, entries, one request's cache state and its rules, the learned tool parameters, the stream scanner: plain data and functions |
//! | [`journey`]         | journey     | its steps in a request (on the checked body, the response head and body, a failure) and the answers it writes |

pub(crate) mod journey;
pub(crate) mod stages;
pub(crate) mod telemetry;
