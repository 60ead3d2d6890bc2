//! Federation, a component: one endpoint in front of several *different* MCP servers, each its
//! own pool.
//!
//! The gateway learns what each pool serves from the pool itself (the catalog: the lists as
//! fetched, their freshness), and from that one fact it does three things:
//! - **routes** `tools/call`, `prompts/get` and `resources/read` (by URI, also through a
//!   pool's URI templates) to the pool that serves the name, by hash lookup in the endpoint's
//!   [`stages::view::View`] — after the explicit routes of `gateway.yaml`, which still come
//!   first;
//! - **answers** `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`
//!   and `server/discover` itself, merging the pools' results: a pool's list is served from
//!   the catalog only while the pool's own `ttlMs`/`cacheScope` allow it, and fetched again for
//!   the answer otherwise; the merged result carries the smallest remaining freshness and
//!   `private` when any part was private or the list was filtered per caller
//!   ([`stages::cursor`] pages it);
//! - **merges** `subscriptions/listen`: one client stream carrying every pool's notifications;
//! - **names** entries under the endpoint's collision policy (`prefix`, `priority`,
//!   `refuse`); with `prefix`, a call's `Mcp-Name` and body name are set back to the server's
//!   name after the header↔body check ([`crate::mcp::rewrite`]), the one body edit the gateway
//!   makes.
//!
//! One folder holds all of it, its layers inside it (the layer rules of [`super`] hold here as
//! everywhere: a file names only its own layer or those below):
//!
//! | file                | layer       | what it owns                                                  |
//! |---------------------|-------------|---------------------------------------------------------------|
//! | `config.rs`         | config      | the `federation:` section, `crate::config::federation` (included by path: the config stays below the gateway) |
//! | [`telemetry`]       | telemetry   | its metric families, registered by `telemetry::metrics`        |
//! | [`stages`]          | stages      | the endpoints of a generation, the catalogs, the routing views, the cursors: plain data and functions |
//! | [`journey`]         | journey     | its steps in a request (route, answer, listen) and the fetching behind them (fetch, refresh, report) |

pub(crate) mod journey;
pub(crate) mod stages;
pub(crate) mod telemetry;
