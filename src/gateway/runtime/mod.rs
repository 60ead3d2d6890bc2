//! The process around the journey: [`server`] (start, listeners, reload on SIGHUP, graceful
//! upgrade and shutdown), [`admin`] (`/metrics`, `/healthz`, `/readyz`, reload, purge, the
//! [`console`]), [`explain`] (a request's journey told without sending it), [`dns`] (re-resolving
//! instance names). The top layer: it may import every layer below.

pub(crate) mod admin;
pub(crate) mod console;
pub mod dns;
pub(crate) mod eras;
pub mod explain;
pub(crate) mod pins;
pub mod server;
