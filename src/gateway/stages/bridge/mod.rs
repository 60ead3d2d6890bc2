//! The protocol bridge's state and rules (its steps are `gateway::journey::bridge`): the
//! sealed session of a 2025-era client ([`session`]) and the ids opened recently ([`opened`]),
//! the calls waiting for a client's answers on this replica and the sealed ids of the questions
//! they asked ([`waiting`]), whom a hop into the pipeline speaks for ([`hops`]), the
//! `x-mcp-header` marks learned from lists ([`params`]), the standalone streams open
//! ([`streams`]) and the resources their sessions subscribed to ([`subscribed`]), and [`Bridge`], what one gateway generation holds of them all. Plain data and
//! functions: no session, no socket.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use crate::config::Config;
use crate::mcp::seal::{Sealer, StateKeys};

pub(crate) mod hops;
pub(crate) mod messages;
pub(crate) mod opened;
pub(crate) mod params;
pub(crate) mod pass;
pub(crate) mod servers;
pub(crate) mod session;
pub(crate) mod streams;
pub(crate) mod subscribed;
pub(crate) mod waiting;

use waiting::Waiting;

/// The bridge of one gateway generation: its keys and settings, and (carried over reloads) the
/// calls waiting on this replica, the sessions it holds with legacy servers and the calls they
/// paused.
pub(crate) struct Bridge {
    pub(crate) sealer: Sealer,
    /// This gateway's plain MCP listener, where translated requests of 2025-era clients enter
    /// the pipeline (`None`: no plain listener; such clients are then refused).
    pub(crate) hop: Option<SocketAddr>,
    /// Where the other replicas reach this one.
    pub(crate) advertise: String,
    pub(crate) waiting: Arc<Waiting>,
    /// Session ids opened recently here (per generation: a reload may change the keys).
    pub(crate) opened: opened::Opened,
    /// Sessions ended by `DELETE` here (carried over reloads).
    pub(crate) ended: Arc<session::Ended>,
    /// Log levels set by sessions' clients here (carried over reloads).
    pub(crate) levels: Arc<session::Levels>,
    /// Resources sessions' clients subscribed to, as this replica knows them (carried over
    /// reloads).
    pub(crate) subscribed: Arc<subscribed::Subscribed>,
    /// The `x-mcp-header` marks of the tools seen in lists (carried over reloads).
    pub(crate) params: Arc<params::ParamHeaders>,
    /// Sessions with 2025-era servers (pools with a legacy `era`).
    pub(crate) servers: Arc<servers::ServerSessions>,
    /// Calls those servers paused to ask their client something.
    pub(crate) paused: Arc<servers::PausedCalls>,
    /// The hops open now and the clients they speak for (carried over reloads).
    pub(crate) hops: Arc<hops::Hops>,
    /// The standalone streams open on this replica (carried over reloads).
    pub(crate) streams: Arc<streams::Streams>,
    /// Idle hop connections to this gateway's own listener, reused by the next translated
    /// request (a reload starts with none: the listener may have moved).
    pub(crate) kept: Arc<crate::gateway::transport::upstream_h1::Pool<tokio::net::TcpStream>>,
    /// Every replica (`legacy.replicas`), for a cancellation that names none.
    pub(crate) replicas: Vec<String>,
    /// Connect and read timeouts of a request to another replica.
    pub(crate) hop_times: (std::time::Duration, std::time::Duration),
    /// `legacy_cancels_total`: cancellations by where they ended calls.
    pub(crate) cancels: prometheus::IntCounterVec,
}

/// Idle hop connections kept (the bridge's requests in flight at once, at most, reuse one).
const KEPT_HOPS: usize = 1024;

impl Bridge {
    /// The bridge for `config`; a reload keeps the waiting and paused calls, the server
    /// sessions and, when no key file is set, the process's random key (sessions survive a
    /// reload).
    pub(crate) fn build(
        config: &Config,
        previous: Option<&Bridge>,
        cancels: prometheus::IntCounterVec,
    ) -> Bridge {
        let l = &config.legacy;
        let hop = plain_listener(config);
        if hop.is_none() && l.clients == crate::config::legacy::LegacyClients::Bridge {
            tracing::warn!("legacy: no plain (non-TLS) MCP listener for the bridge's hop; 2025-era clients are refused (-32022)");
        }
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
        let advertise = match (&l.advertise, hop) {
            (Some(a), _) => a.clone(),
            (None, Some(h)) => format!("http://{h}"),
            (None, None) => format!("http://{}", config.listen.mcp),
        };
        let servers = previous.map(|p| p.servers.clone()).unwrap_or_else(|| {
            Arc::new(servers::ServerSessions::new(
                l.server_sessions,
                l.server_session_idle,
            ))
        });
        Bridge {
            sealer,
            hop,
            advertise,
            waiting: previous.map(|p| p.waiting.clone()).unwrap_or_default(),
            opened: opened::Opened::default(),
            ended: previous.map(|p| p.ended.clone()).unwrap_or_default(),
            levels: previous.map(|p| p.levels.clone()).unwrap_or_default(),
            subscribed: previous.map(|p| p.subscribed.clone()).unwrap_or_default(),
            params: previous.map(|p| p.params.clone()).unwrap_or_default(),
            servers,
            paused: previous.map(|p| p.paused.clone()).unwrap_or_default(),
            hops: previous.map(|p| p.hops.clone()).unwrap_or_default(),
            streams: previous.map(|p| p.streams.clone()).unwrap_or_default(),
            kept: Arc::new(crate::gateway::transport::upstream_h1::Pool::new(KEPT_HOPS)),
            replicas: l.replicas.clone(),
            hop_times: (config.timeouts.connect, config.timeouts.upstream_read),
            cancels,
        }
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
