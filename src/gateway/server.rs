//! Running the gateway: the pingora server (proxy, admin and health-check services), live
//! config reload, and a handle to run a gateway inside another program (the demo, tests,
//! `embedded`); how a process stops and hands its listeners over is `shutdown`.
//!
//! **Reload.** The running [`Gateway`] sits behind an [`ArcSwap`]. Each request takes the
//! current one when it starts and keeps it to the end, so a reload applies to new requests while
//! requests in flight finish on the config they started with. A config that fails to load is
//! refused with a log line naming the error, and the old one keeps serving. Rate-limit buckets
//! and instance health carry over for limits and pools whose settings did not change. The
//! listen addresses, `threads` and `work_stealing` need a restart (a warning says so).

use arc_swap::ArcSwap;
use async_trait::async_trait;
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;
use pingora::server::{RunArgs, ShutdownWatch};
use pingora::services::background::BackgroundService;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::head_deadline::HeadDeadlineApp;
use super::health::Change;
use super::listeners::Listeners;
use super::{admin, parked, Gateway, Proxy};
use crate::config::{Config, HealthCheckKind};

mod embedded;
mod shutdown;
pub use embedded::RunningGateway;
pub use shutdown::upgrade_socket;
use shutdown::StopWhenDrained;

/// The live gateway, swapped whole on reload.
pub struct Live {
    current: ArcSwap<Gateway>,
    /// The file a reload reads, when the gateway was started from one.
    source: Option<PathBuf>,
    /// One reload at a time: SIGHUP, `POST /-/reload` and a DNS refresh never interleave, so
    /// the file read last is the one that wins.
    reloading: std::sync::Mutex<()>,
    /// The listeners, whose certificates a reload re-reads ([`listeners`]).
    pub(super) listeners: Option<Arc<Listeners>>,
    /// The last reload from the file: when, and its error if it was refused (the console).
    last_reload: std::sync::Mutex<Option<(std::time::SystemTime, Result<(), String>)>>,
}

impl Live {
    pub fn new(gateway: Gateway, source: Option<PathBuf>) -> Live {
        Live {
            current: ArcSwap::from_pointee(gateway),
            source,
            reloading: std::sync::Mutex::new(()),
            listeners: None,
            last_reload: std::sync::Mutex::new(None),
        }
    }

    /// Reload from the file on a blocking thread (file reads and DNS must not stall the
    /// runtime that serves `/healthz`, `/metrics` and requests).
    pub async fn reload_in_background(self: &Arc<Self>) -> Result<(), String> {
        let live = self.clone();
        tokio::task::spawn_blocking(move || live.reload_from_file())
            .await
            .unwrap_or_else(|e| Err(format!("reload task failed: {e}")))
    }

    /// Re-read these listeners' certificates on every reload.
    pub fn with_listeners(mut self, listeners: Arc<Listeners>) -> Live {
        self.listeners = Some(listeners);
        self
    }

    /// The gateway new requests use.
    pub fn load(&self) -> Arc<Gateway> {
        self.current.load_full()
    }

    /// Apply a new config: build the new gateway (carrying state over), then swap it in.
    pub fn replace(&self, config: Config) -> anyhow::Result<()> {
        let _one = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        self.replace_locked(config)
    }

    fn replace_locked(&self, config: Config) -> anyhow::Result<()> {
        let old = self.load();
        let (a, b) = (&old.config, &config);
        if a.listen.mcp != b.listen.mcp
            || a.listen.admin != b.listen.admin
            || a.threads != b.threads
            || a.work_stealing != b.work_stealing
        {
            tracing::warn!("reload: listen addresses, threads and work_stealing keep their old values until a restart");
        }
        // `connections.upstream_leg` is read per request: it applies with the reload.
        let (ca, cb) = (&a.connections, &b.connections);
        if (ca.read_buffer, ca.write_buffer, ca.park_idle)
            != (cb.read_buffer, cb.write_buffer, cb.park_idle)
        {
            tracing::warn!(
                "reload: connections (buffers, park_idle) keep their old values until a restart"
            );
        }
        // Certificates are read and checked first; they are swapped in only with the config.
        let staged = match &self.listeners {
            Some(l) => Some(l.stage(&config).map_err(anyhow::Error::msg)?),
            None => None,
        };
        let new = Gateway::new(config, Some(&old))?;
        self.current.store(Arc::new(new));
        if let Some(staged) = staged {
            staged.commit();
        }
        Ok(())
    }

    /// Reload from the config file; on error the old config keeps serving.
    pub fn reload_from_file(&self) -> Result<(), String> {
        let Some(path) = &self.source else {
            return Err(
                "this gateway was not started from a config file; nothing to reload".into(),
            );
        };
        let _one = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        let result = Config::load(path)
            .map_err(|e| e.to_string())
            .and_then(|c| self.replace_locked(c).map_err(|e| format!("{e:#}")));
        match &result {
            Ok(()) => tracing::info!("reloaded {}", path.display()),
            Err(e) => tracing::error!("reload refused, the previous config keeps serving: {e}"),
        }
        let mut last = self.last_reload.lock().unwrap_or_else(|p| p.into_inner());
        *last = Some((std::time::SystemTime::now(), result.clone()));
        result
    }

    /// The last reload from the file (`None`: none since start): when, and its error.
    pub fn last_reload(&self) -> Option<(std::time::SystemTime, Result<(), String>)> {
        self.last_reload
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Active health checks of every pool, on the gateway's own runtime.
struct HealthChecks {
    live: Arc<Live>,
}

#[async_trait]
impl BackgroundService for HealthChecks {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let gw = self.live.load();
            let tick = gw
                .pools
                .iter()
                .filter(|p| p.health.check.check != HealthCheckKind::Off)
                .map(|p| p.health.check.interval)
                .min();
            let Some(tick) = tick else {
                // Nothing to check now; look again later (a reload may add checks).
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            };
            let started = Instant::now();
            check_all(&gw).await;
            let rest = tick.saturating_sub(started.elapsed());
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(rest) => {}
            }
        }
    }
}

/// Probe every instance of every checked pool once, concurrently. A pool with credentials is
/// probed with its own (static or client-credentials); when that cannot be obtained, the pool
/// is not probed this round (its token endpoint failing says nothing of its instances).
async fn check_all(gw: &Gateway) {
    let endpoint = gw.config.endpoint.as_str();
    let checked = |p: &usize| gw.pools[*p].health.check.check != HealthCheckKind::Off;
    let auths = (0..gw.pools.len()).filter(checked).map(|p| async move {
        let mcp = gw.pools[p].health.check.check == HealthCheckKind::Mcp;
        match mcp {
            true => (p, gw.credentials.for_gateway(p).await),
            false => (p, Ok(None)),
        }
    });
    let auths: Vec<_> = futures::future::join_all(auths).await;
    let probes = auths
        .iter()
        .filter_map(|(p, a)| Some((*p, a.as_ref().ok()?)));
    let probes = probes.flat_map(|(p, auth)| {
        let pool = &gw.pools[p];
        let check = &pool.health.check;
        pool.instances
            .iter()
            .enumerate()
            .map(move |(i, inst)| async move {
                let peers = &gw.peers[p];
                let ok = peers
                    .probe(
                        inst.addr,
                        &inst.name,
                        check.check,
                        endpoint,
                        check.timeout,
                        auth.as_ref(),
                    )
                    .await;
                (p, i, ok)
            })
    });
    for (p, i, ok) in futures::future::join_all(probes).await {
        let change = gw.pools[p].health.on_check(i, ok);
        if change != Change::None {
            gw.note_health(p, i, change);
        }
    }
}

/// Reload on SIGHUP (only for `serve`: signals are process-wide).
struct ReloadOnSighup {
    live: Arc<Live>,
}

#[async_trait]
impl BackgroundService for ReloadOnSighup {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::error!(
                "cannot listen for SIGHUP; reload with POST /-/reload on the admin listener"
            );
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                got = hup.recv() => {
                    if got.is_none() {
                        return;
                    }
                    let _ = self.live.reload_in_background().await;
                }
            }
        }
    }
}

/// How a server is started.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The config file (enables reload from it).
    pub source: Option<PathBuf>,
    /// Reload on SIGHUP (only for a whole process: signals are process-wide).
    pub sighup: bool,
    /// Take the listening sockets over from a running gateway (which is then sent SIGQUIT)
    /// instead of binding them.
    pub upgrade: bool,
}

/// Builds the pingora server for a config: the MCP proxy, the admin listener, health checks.
pub fn build_server(config: Config, opts: StartOptions) -> anyhow::Result<(Server, Arc<Live>)> {
    let StartOptions {
        source,
        sighup,
        upgrade,
    } = opts;
    // TLS files are read and checked before anything starts (the error names the file).
    let listeners = Arc::new(Listeners::new(&config)?);
    // Fail with a clear message before pingora tries (it would exit the process). An upgrade
    // inherits the sockets instead, so they are busy by design.
    let to_bind = listeners.mcp.iter().chain(&listeners.admin);
    for l in to_bind.filter(|_| !upgrade) {
        let (what, addr) = (&l.key, l.address);
        std::net::TcpListener::bind(addr).map_err(|e| {
            anyhow::anyhow!(
                "{what}: cannot listen on {addr}: {e} (is another process using port {}?)",
                addr.port()
            )
        })?;
    }
    let round_up = |d: Duration| d.as_secs() + u64::from(d.subsec_nanos() > 0);
    let conf = ServerConf {
        threads: config.threads,
        work_stealing: config.work_stealing,
        upstream_keepalive_pool_size: config.upstream_pool_size,
        grace_period_seconds: Some(round_up(config.shutdown.grace_period)),
        graceful_shutdown_timeout_seconds: Some(round_up(config.shutdown.wind_down)),
        upgrade_sock: upgrade_socket(&config),
        ..ServerConf::default()
    };
    let opt = pingora::server::configuration::Opt {
        upgrade,
        ..Default::default()
    };
    let mut server = Server::new_with_opt_and_conf(Some(opt), conf);
    let gateway = Gateway::new(config, None)?;
    listeners.register(&gateway.metrics.registry)?;
    let live = Arc::new(Live::new(gateway, source).with_listeners(listeners.clone()));
    // One proxy service per h2c setting (pingora sets h2c per service), each with its listeners.
    // Each service's app: the proxy, idle connections parked (`parked`), every HTTP/1 request
    // head under its deadline (`head_deadline`).
    let park = live.load().config.connections.park_idle;
    let pool_size = live.load().config.upstream_pool_size;
    let proxies = listeners.attach_mcp(|| {
        // One upstream keep-alive pool, shared by the direct leg and pingora's custom connector.
        let leg = super::upstream_h1::OwnH1::new(pool_size);
        let gateway = Proxy::new(live.clone(), leg.pool().clone());
        let proxy = super::upstream_h1::proxy(gateway, &server.configuration, leg);
        let idle_live = live.clone();
        let idle: parked::IdleWait = Arc::new(move || idle_live.load().config.timeouts.client_idle);
        pingora::services::listening::Service::new(
            "mcp-edge".into(),
            HeadDeadlineApp::new(parked::Parked::new(proxy, idle, park), live.clone()),
        )
    })?;
    for proxy in proxies {
        server.add_service(proxy);
    }
    if listeners.admin.is_some() {
        let mut admin = pingora::services::listening::Service::new(
            "mcp-edge admin".into(),
            admin::AdminApp { live: live.clone() },
        );
        listeners.attach_admin(&mut admin)?;
        server.add_service(admin);
    }
    server.add_service(pingora::services::background::background_service(
        "health checks",
        HealthChecks { live: live.clone() },
    ));
    server.add_service(pingora::services::background::background_service(
        "federation catalogs",
        super::federation::refresh::CatalogRefresh { live: live.clone() },
    ));
    server.add_service(pingora::services::background::background_service(
        "dns refresh",
        super::dns::DnsRefresh { live: live.clone() },
    ));
    if sighup {
        server.add_service(pingora::services::background::background_service(
            "reload",
            ReloadOnSighup { live: live.clone() },
        ));
    }
    server.bootstrap();
    Ok((server, live))
}

/// Run the gateway until a signal: SIGTERM drains gracefully, SIGINT stops at once, SIGHUP
/// reloads the config file, SIGQUIT hands the listeners to a new process started with
/// `upgrade` (pingora's zero-downtime upgrade), then drains. Blocking; must not be called
/// inside a tokio runtime.
pub fn serve(config: Config, source: PathBuf, upgrade: bool) -> anyhow::Result<()> {
    let opts = StartOptions {
        source: Some(source),
        sighup: true,
        upgrade,
    };
    let (server, _live) = build_server(config, opts)?;
    server.run(RunArgs {
        shutdown_signal: Box::new(StopWhenDrained),
    });
    Ok(())
}
