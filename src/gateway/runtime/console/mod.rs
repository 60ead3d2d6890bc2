//! The console: a page on the admin listener (`/ui`) that shows what the gateway is doing, and
//! the JSON it polls (`/-/console.json`).
//!
//! The page is three files embedded in the binary ([`assets`]): no CDN, no external font, no
//! inline script (the admin listener answers it with a Content-Security-Policy that forbids
//! both). It polls the snapshot every two seconds and computes rates and percentiles from the
//! difference between snapshots, so the snapshot itself is cumulative and costs the request path
//! nothing: it reads what the metrics already count, the pools' health and load, the ring of
//! recent refusals ([`crate::gateway::telemetry::recent`]), the federation catalogs and the resolved config (as
//! `mcp-edge check` prints it: no secret is in that text). Nothing here changes state.
//!
//! What happened before the page was opened comes from the gateway's own [`history`]: a
//! background task reads the metrics once a second into fixed-size rings (`GET /-/history`),
//! which the page draws as charts.

pub(crate) mod assets;
mod eras;
pub(crate) mod history;
mod snapshot;

pub(crate) use snapshot::snapshot;
