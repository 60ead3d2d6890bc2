//! `legacy:` how the gateway serves clients of the 2025 era (`initialize`, `Mcp-Session-Id`,
//! mid-call `elicitation/create`) in front of a 2026-07-28 fleet: the protocol bridge
//! (`gateway::journey::bridge`). The gateway is their session: it answers `initialize` from the
//! fleet's `server/discover`, mints a sealed, self-contained session id, turns each request
//! into a 2026 request, and runs the multi round-trip flow for the client, asking it on the
//! call's own stream.

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

use super::{ConfigError, Positions};

/// What the gateway does with a 2025-era client.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum LegacyClients {
    /// Serve it through the bridge (the default).
    #[default]
    Bridge,
    /// Refuse its `initialize` with -32022 and the supported versions (the behaviour before the
    /// bridge, and what a 2026-only server answers).
    Refuse,
}

/// The bridge for 2025-era clients.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LegacyConfig {
    /// `bridge` (default) or `refuse`, for every endpoint of this gateway.
    #[serde(default)]
    pub clients: LegacyClients,
    /// The endpoints (paths) that refuse 2025-era clients although `clients` is `bridge`.
    #[serde(default)]
    pub refuse_on: Vec<String>,
    /// A file of sealing keys, one a line (64 hex digits or base64 of 32 bytes; the first seals,
    /// the others still open: rotation). Every replica must hold the same file, so that any
    /// replica serves a session another one opened. Without it each process makes a random key
    /// at start: sessions then live as long as the process and only on it.
    #[serde(default)]
    pub keys_file: Option<PathBuf>,
    /// Where the other replicas reach this one (`http://host:port`), for a client's answer to a
    /// question this replica asked on a stream it holds. Default: the MCP listener's address
    /// (`0.0.0.0`/`::` read as loopback).
    #[serde(default)]
    pub advertise: Option<String>,
    /// Every replica's MCP listener (`http://host:port`; this one may be listed too). A
    /// 2025-era client's `notifications/cancelled` that reaches a replica not holding the call
    /// it names is sent on to each of them (a cancellation names no replica, as an answer's id
    /// does). Empty (the default): a cancellation ends only the calls of the replica it reaches.
    #[serde(default)]
    pub replicas: Vec<String>,
    /// How long a session id stays valid after `initialize`.
    #[serde(default = "d_session_ttl", with = "super::humantime_serde_compat")]
    pub session_ttl: Duration,
    /// How long a call waits for the client's answers to one round of questions before it ends
    /// with an error (nothing is held past it).
    #[serde(default = "d_answer_timeout", with = "super::humantime_serde_compat")]
    pub answer_timeout: Duration,
    /// Most calls waiting for a client's answers at once on this replica; past it a call that
    /// needs input ends with an error instead of waiting.
    #[serde(default = "d_max_waiting")]
    pub max_waiting: usize,
    /// Sessions the gateway holds with 2025-era servers (pools with a legacy `era`), one per
    /// instance and caller; past it the least recently used is closed (`DELETE`).
    #[serde(default = "d_server_sessions")]
    pub server_sessions: usize,
    /// A session with a 2025-era server unused this long is closed.
    #[serde(default = "d_server_idle", with = "super::humantime_serde_compat")]
    pub server_session_idle: Duration,
    /// Most standalone `GET` streams of 2025-era clients open at once on this replica (each
    /// holds four sockets: the client's, the hop's two ends and the upstream's); past it a
    /// `GET` gets 503 + `Retry-After` + -31007.
    #[serde(default = "d_max_streams")]
    pub max_streams: usize,
}

impl Default for LegacyConfig {
    fn default() -> Self {
        LegacyConfig {
            clients: LegacyClients::Bridge,
            refuse_on: Vec::new(),
            keys_file: None,
            advertise: None,
            replicas: Vec::new(),
            session_ttl: d_session_ttl(),
            answer_timeout: d_answer_timeout(),
            max_waiting: d_max_waiting(),
            server_sessions: d_server_sessions(),
            server_session_idle: d_server_idle(),
            max_streams: d_max_streams(),
        }
    }
}

impl LegacyConfig {
    /// Whether 2025-era clients of `path` are bridged.
    pub fn bridges(&self, path: &str) -> bool {
        self.clients == LegacyClients::Bridge && !self.refuse_on.iter().any(|p| p == path)
    }
}

fn d_session_ttl() -> Duration {
    Duration::from_secs(24 * 3600)
}
fn d_answer_timeout() -> Duration {
    Duration::from_secs(300)
}
fn d_max_waiting() -> usize {
    10_000
}
fn d_server_sessions() -> usize {
    10_000
}
fn d_max_streams() -> usize {
    10_000
}
fn d_server_idle() -> Duration {
    Duration::from_secs(600)
}

/// The checks of `legacy:`: a readable key file, an `http://` advertise address, bounds above 0.
pub(crate) fn validate(c: &LegacyConfig, pos: &Positions, file: &str) -> Result<(), ConfigError> {
    let err = |path: &str, msg: String| ConfigError::at(file, pos.near(path), msg);
    if let Some(path) = &c.keys_file {
        read_keys(path).map_err(|m| err("legacy.keys_file", m))?;
    }
    let plain = |a: &str| {
        a.strip_prefix("http://")
            .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
    };
    if let Some(a) = c.advertise.as_deref().filter(|a| !plain(a)) {
        return Err(err(
            "legacy.advertise",
            format!("legacy.advertise: {a:?} must be http://host:port (no path), the address other replicas reach this one's MCP listener at"),
        ));
    }
    if let Some(a) = c.replicas.iter().find(|a| !plain(a)) {
        return Err(err(
            "legacy.replicas",
            format!("legacy.replicas: {a:?} must be http://host:port (no path), a replica's MCP listener as the others reach it"),
        ));
    }
    if c.session_ttl.is_zero()
        || c.answer_timeout.is_zero()
        || c.max_waiting == 0
        || c.server_sessions == 0
        || c.server_session_idle.is_zero()
        || c.max_streams == 0
    {
        return Err(err(
            "legacy",
            "legacy: session_ttl, answer_timeout, max_waiting, server_sessions, server_session_idle and max_streams must be above 0".into(),
        ));
    }
    Ok(())
}

/// Read a key file into a key ring; the error names the file and says what to do.
pub(crate) fn read_keys(path: &PathBuf) -> Result<crate::mcp::seal::StateKeys, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "legacy.keys_file: cannot read {}: {e}; create it with `openssl rand -hex 32 > {}`",
            path.display(),
            path.display()
        )
    })?;
    crate::mcp::seal::StateKeys::parse_ring(&text)
        .map_err(|e| format!("legacy.keys_file: {}: {e}", path.display()))
}

/// What `mcp-edge check` says of the eras each endpoint serves; `passing`: the pool the main
/// endpoint passes 2025-era clients through to, and that endpoint.
pub(crate) fn describe(
    c: &LegacyConfig,
    endpoints: Vec<&str>,
    passing: Option<(&str, &str)>,
) -> String {
    let mut out = String::from("\neras\n");
    for e in endpoints {
        let clients = match passing {
            _ if !c.bridges(e) => {
                "2026-07-28 clients only (2025-era clients refused with -32022)".to_string()
            }
            Some((main, pool)) if main == e => format!(
                "2026-07-28 clients, and 2025-era clients passed through to pool {pool} (its instances serve both eras; sessions pinned)"
            ),
            _ => "2026-07-28 clients, and 2025-11-25/06-18/03-26 clients through the bridge"
                .to_string(),
        };
        out.push_str(&format!("  {e:<12} {clients}\n"));
    }
    let keys = match &c.keys_file {
        Some(k) => format!("sealing keys from {}", k.display()),
        None => {
            "a random sealing key per process (set legacy.keys_file for several replicas)".into()
        }
    };
    out.push_str(&format!(
        "  {:<12} {keys}; answers between replicas via {}\n",
        "",
        c.advertise.as_deref().unwrap_or("the MCP listener")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_says_which_eras_each_endpoint_serves() {
        let c = LegacyConfig {
            refuse_on: vec!["/internal".into()],
            ..Default::default()
        };
        let d = describe(&c, vec!["/mcp", "/internal"], None);
        assert!(d.contains("/mcp         2026-07-28 clients, and 2025-11-25/06-18/03-26 clients through the bridge"), "{d}");
        assert!(
            d.contains(
                "/internal    2026-07-28 clients only (2025-era clients refused with -32022)"
            ),
            "{d}"
        );
        assert!(d.contains("a random sealing key per process"), "{d}");
        let refuse = LegacyConfig {
            clients: LegacyClients::Refuse,
            ..Default::default()
        };
        assert!(!describe(&refuse, vec!["/mcp"], None).contains("through the bridge"));
        // A main endpoint whose pool serves both eras passes them through; refuse still wins.
        let d = describe(&c, vec!["/mcp", "/fed"], Some(("/mcp", "dual")));
        assert!(
            d.contains(
                "/mcp         2026-07-28 clients, and 2025-era clients passed through to pool dual"
            ),
            "{d}"
        );
        assert!(d.contains("/fed         2026-07-28 clients, and 2025-11-25/06-18/03-26 clients through the bridge"), "{d}");
        let d = describe(&refuse, vec!["/mcp"], Some(("/mcp", "dual")));
        assert!(d.contains("2025-era clients refused"), "{d}");
    }
}
