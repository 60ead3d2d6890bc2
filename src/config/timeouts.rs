//! `timeouts:` and `shutdown:`: how long each leg of a request may wait, and what SIGTERM does.

use serde::Deserialize;
use std::time::Duration;

use super::humantime_serde_compat;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// Connecting to an instance.
    #[serde(default = "d_connect", with = "humantime_serde_compat")]
    pub connect: Duration,
    /// Longest wait for the next bytes of an upstream response (for SSE: the gap between events).
    #[serde(default = "d_upstream_read", with = "humantime_serde_compat")]
    pub upstream_read: Duration,
    /// Longest wait to write to an instance.
    #[serde(default = "d_upstream_write", with = "humantime_serde_compat")]
    pub upstream_write: Duration,
    /// Longest wait for the next bytes of a client's request body (slow clients are cut off).
    #[serde(default = "d_downstream_read", with = "humantime_serde_compat")]
    pub downstream_read: Duration,
    /// Longest wait to write to a client that stopped reading (e.g. an SSE stream nobody
    /// drains); then the request is dropped and its upstream stream closed.
    #[serde(default = "d_downstream_write", with = "humantime_serde_compat")]
    pub downstream_write: Duration,
    /// How long an idle upstream connection is kept for reuse.
    #[serde(default = "d_idle", with = "humantime_serde_compat")]
    pub upstream_idle: Duration,
    /// How long an idle client keep-alive connection is kept open between requests.
    #[serde(default = "d_client_idle", with = "humantime_serde_compat")]
    pub client_idle: Duration,
    /// The longest a client may take to send its whole request body, however it trickles
    /// (`downstream_read` bounds each single wait); then it gets 408 / -31005.
    #[serde(default = "d_request_body", with = "humantime_serde_compat")]
    pub request_body: Duration,
    /// The longest a client may take to send a whole HTTP/1 request head, counted from the
    /// accept (first request) or the first byte (next requests); then it gets 408 / -31005.
    #[serde(default = "d_request_head", with = "humantime_serde_compat")]
    pub request_head: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: d_connect(),
            upstream_read: d_upstream_read(),
            upstream_write: d_upstream_write(),
            downstream_read: d_downstream_read(),
            downstream_write: d_downstream_write(),
            upstream_idle: d_idle(),
            request_body: d_request_body(),
            request_head: d_request_head(),
            client_idle: d_client_idle(),
        }
    }
}

fn d_connect() -> Duration {
    Duration::from_secs(2)
}
fn d_upstream_read() -> Duration {
    Duration::from_secs(60)
}
fn d_upstream_write() -> Duration {
    Duration::from_secs(10)
}
fn d_downstream_write() -> Duration {
    Duration::from_secs(30)
}
fn d_downstream_read() -> Duration {
    Duration::from_secs(10)
}
fn d_client_idle() -> Duration {
    Duration::from_secs(60)
}
fn d_request_body() -> Duration {
    Duration::from_secs(30)
}
fn d_request_head() -> Duration {
    Duration::from_secs(10)
}
fn d_idle() -> Duration {
    Duration::from_secs(60)
}

/// What SIGTERM does: stop accepting, let requests in flight finish, then stop.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShutdownConfig {
    /// How long requests in flight get to finish after SIGTERM (whole seconds, rounded up).
    #[serde(default = "d_grace", with = "humantime_serde_compat")]
    pub grace_period: Duration,
    /// After the grace period, how long the runtime gets to wind down before it is cut.
    #[serde(default = "d_wind_down", with = "humantime_serde_compat")]
    pub wind_down: Duration,
    /// The Unix socket the listeners are handed over on in a zero-downtime upgrade (default:
    /// in a directory private to this user, see `gateway::runtime::server::upgrade_socket`).
    #[serde(default)]
    pub upgrade_socket: Option<std::path::PathBuf>,
    /// After the listeners close, how long kept-alive client connections stay open: a request
    /// that arrives on one (or on a connection still in its TLS handshake) is served and
    /// answered `Connection: close`; then the idle ones are closed. Capped by `grace_period`.
    #[serde(default = "d_close_idle_after", with = "humantime_serde_compat")]
    pub close_idle_after: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            grace_period: d_grace(),
            wind_down: d_wind_down(),
            upgrade_socket: None,
            close_idle_after: d_close_idle_after(),
        }
    }
}

fn d_grace() -> Duration {
    Duration::from_secs(10)
}
fn d_wind_down() -> Duration {
    Duration::from_secs(5)
}
fn d_close_idle_after() -> Duration {
    Duration::from_secs(2)
}
