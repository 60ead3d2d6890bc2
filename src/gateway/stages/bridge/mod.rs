//! The protocol bridge's state and rules (its steps are `gateway::journey::bridge`): the
//! sealed session of a 2025-era client ([`session`]), the calls waiting for a client's answers
//! on this replica and the sealed ids of the questions they asked ([`waiting`]), the
//! `x-mcp-header` marks learned from lists ([`params`]), and [`Bridge`], what one gateway
//! generation holds of all three. Plain data and functions: no session, no socket.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use crate::config::Config;
use crate::mcp::seal::{Sealer, StateKeys};

pub(crate) mod params;
pub(crate) mod session;
pub(crate) mod waiting;

use waiting::Waiting;

/// The bridge of one gateway generation: its keys and settings, and (carried over reloads) the
/// calls waiting on this replica.
pub(crate) struct Bridge {
    pub(crate) sealer: Sealer,
    /// This gateway's plain MCP listener, where translated requests enter the pipeline.
    pub(crate) hop: SocketAddr,
    /// Where the other replicas reach this one.
    pub(crate) advertise: String,
    pub(crate) waiting: Arc<Waiting>,
    /// The `x-mcp-header` marks of the tools seen in lists (carried over reloads).
    pub(crate) params: Arc<params::ParamHeaders>,
}

impl Bridge {
    /// The bridge for `config` (`None`: legacy clients refused everywhere, or no plain MCP
    /// listener to hop to, which is said at start); a reload keeps the waiting calls and, when
    /// no key file is set, the process's random key (sessions survive a reload).
    pub(crate) fn build(config: &Config, previous: Option<&Bridge>) -> Option<Bridge> {
        let l = &config.legacy;
        if l.clients == crate::config::legacy::LegacyClients::Refuse {
            return None;
        }
        let Some(hop) = plain_listener(config) else {
            tracing::warn!("legacy: no plain (non-TLS) MCP listener for the bridge's hop; 2025-era clients are refused (-32022)");
            return None;
        };
        let keys = match &l.keys_file {
            // Validated at load: a read error here means the file changed since; keep going
            // with the previous keys rather than dropping every session.
            Some(path) => crate::config::legacy::read_keys(path).ok(),
            None => None,
        };
        let sealer = match (keys, previous) {
            (Some(k), _) => Sealer::new(k),
            (None, Some(p)) => p.sealer.clone(),
            (None, None) => Sealer::new(StateKeys::random()),
        };
        Some(Bridge {
            sealer,
            hop,
            advertise: l
                .advertise
                .clone()
                .unwrap_or_else(|| format!("http://{hop}")),
            waiting: previous.map(|p| p.waiting.clone()).unwrap_or_default(),
            params: previous.map(|p| p.params.clone()).unwrap_or_default(),
        })
    }
}

/// The MCP listener translated requests enter by: the main one unless it has TLS, else the
/// first plain extra one; an unspecified address is reached on loopback.
fn plain_listener(config: &Config) -> Option<SocketAddr> {
    let l = &config.listen;
    let plain = std::iter::once((l.mcp, &l.tls.mcp))
        .chain(l.tls.extra.iter().map(|e| (e.address, &e.options)))
        .find(|(_, o)| o.tls.is_none())
        .map(|(a, _)| a)?;
    let ip = match plain.ip() {
        IpAddr::V4(v) if v.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v) if v.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    Some(SocketAddr::new(ip, plain.port()))
}
