//! Running the gateway: the pingora server (proxy, admin and health-check services), live
//! config reload, and a handle to run a gateway inside another program (the demo, tests,
//! `embedded`); how a process stops and hands its listeners over is `shutdown`.
//!
//! **Reload.** The running [`Gateway`] sits behind [`Live`], which says how a reload swaps it
//! (requests in flight finish on their own; a config that fails to load leaves the old one
//! serving). SIGHUP triggers one here; `dns` and `admin` (`POST /-/reload`) do too. Rate-limit buckets
//! and instance health carry over for limits and pools whose settings did not change. The
//! listen addresses, `threads` and `work_stealing` need a restart (a warning says so).

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;
use pingora::server::{RunArgs, ShutdownWatch};
use pingora::services::background::BackgroundService;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Config, HealthCheckKind};
use crate::gateway::journey::live::Live;
use crate::gateway::journey::state::Gateway;
use crate::gateway::proxy::Proxy;
use crate::gateway::runtime::admin;
use crate::gateway::stages::health::{self, Change};
use crate::gateway::transport::head_deadline::HeadDeadlineApp;
use crate::gateway::transport::listeners::Listeners;
use crate::gateway::transport::{parked, upstream_h1};

mod embedded;
mod shutdown;
pub use embedded::RunningGateway;
pub use shutdown::upgrade_socket;
use shutdown::StopWhenDrained;

/// Active health checks of every pool, on the gateway's own runtime.
struct HealthChecks {
    live: Arc<Live>,
}

#[async_trait]
impl BackgroundService for HealthChecks {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut checked: Option<Arc<crate::gateway::journey::state::Gateway>> = None;
        loop {
            let gw = self.live.load();
            if !checked.as_ref().is_some_and(|c| Arc::ptr_eq(c, &gw)) {
                // A new generation (start, reload): do its pools speak their declared eras?
                let g = gw.clone();
                tokio::spawn(async move { crate::gateway::runtime::eras::check(&g).await });
                checked = Some(gw.clone());
            }
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
                let ok = health::probe(
                    peers,
                    (inst.addr, &inst.name),
                    check,
                    endpoint,
                    auth.as_ref(),
                )
                .await;
                (p, i, ok)
            })
    });
    for (p, i, ok) in futures::future::join_all(probes).await {
        let (pool, inst) = (&gw.pools[p].name, &gw.pools[p].instances[i].name);
        let result = if ok { "pass" } else { "fail" };
        let checks = &gw.metrics.health_checks;
        checks.with_label_values(&[pool, inst, result]).inc();
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
        // The direct leg's keep-alive pool of upstream connections.
        let upstreams = Arc::new(upstream_h1::Pool::new(pool_size));
        let gateway = Proxy::new(live.clone(), upstreams);
        let proxy = pingora::proxy::http_proxy(&server.configuration, gateway);
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
        // The console's history: sampled once a second for as long as the process runs.
        let history = crate::gateway::runtime::console::history::starting_now();
        let mut admin = pingora::services::listening::Service::new(
            "mcp-edge admin".into(),
            admin::AdminApp {
                live: live.clone(),
                history: history.clone(),
            },
        );
        listeners.attach_admin(&mut admin)?;
        server.add_service(admin);
        server.add_service(pingora::services::background::background_service(
            "console history",
            crate::gateway::runtime::console::history::Sampler {
                live: live.clone(),
                history,
            },
        ));
    }
    server.add_service(pingora::services::background::background_service(
        "health checks",
        HealthChecks { live: live.clone() },
    ));
    server.add_service(pingora::services::background::background_service(
        "federation catalogs",
        crate::gateway::federation::journey::refresh::CatalogRefresh { live: live.clone() },
    ));
    server.add_service(pingora::services::background::background_service(
        "legacy server sessions",
        crate::gateway::journey::legacy_up::upkeep::Upkeep { live: live.clone() },
    ));
    server.add_service(pingora::services::background::background_service(
        "dns refresh",
        crate::gateway::runtime::dns::DnsRefresh { live: live.clone() },
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
