//! Losses under load through faults and hand-overs, counted (zero requests lost): a backend
//! instance killed and readmitted, ten reloads, a bad reload, a graceful drain, a client that
//! stops reading an SSE stream and the zero-downtime upgrade (SIGQUIT) of `mcp-edge serve`
//! (`processes`); certificates renewed on reload and TLS and h2c listeners handed over by the
//! upgrade (`tls_reload`). These are measurements on a 2-core machine, so every test takes
//! [`one_at_a_time`] and this binary is kept apart from tests/gateway: no other test's load is
//! in a loss count. Needs the `mcp-edge` binary only (`mcp-edge serve` and `backend` children).

#[path = "../support/mod.rs"]
mod support;

mod processes;
mod tls_reload;

/// One test at a time: one test's load (a SIGKILLed instance, ten reloads under load, a
/// hand-over) is not another test's measurement.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}
