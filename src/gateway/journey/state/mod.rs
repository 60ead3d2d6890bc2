//! State stage: a [`Gateway`] is everything the proxy needs, built from one [`Config`], and
//! rebuilt on every reload.
//!
//! What outlives a config is carried over here, and only here: the metrics registry, the buckets
//! of every rate limit whose settings did not change, the health of every pool whose
//! instances and checks did not change, and the token caches of every pool whose credentials
//! did not change (their secrets are read again). A request keeps the `Arc<Gateway>` it started on, so a
//! reload never changes the rules under a request in flight.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::config::Config;

use crate::gateway::balance::stages::{outliers::Ejection, Pool};
use crate::gateway::concurrency::stages::{self as concurrency, ConcurrencyLimit};
use crate::gateway::rate_limits::stages::{self as limit, Limit, LimitInput, Verdict};
use crate::gateway::stages::health;
use crate::gateway::stages::route::RouteTable;
use crate::gateway::telemetry::flows::FlowStore;
use crate::gateway::telemetry::metrics::{Metrics, UpstreamMetrics};
use crate::gateway::telemetry::trace::Tracing;

mod parts;
use parts::{
    asserted_headers, build_credentials, build_limits, carry_audit, carry_flows, carry_metrics,
    carry_tracing, upstream_header,
};

/// Everything the proxy needs, built from a [`Config`] (and rebuilt on reload).
pub struct Gateway {
    pub config: Config,
    pub table: RouteTable,
    /// Indexed like [`RouteTable::pools`].
    pub pools: Vec<Pool>,
    pub limits: Vec<Arc<Limit>>,
    /// The rate limits' shared tier (Redis client and its metrics), kept across reloads.
    pub limit_shared: limit::Shared,
    pub metrics: Arc<Metrics>,
    /// The edge cache's stores (kept across reloads per route, see [`crate::gateway::cache::stages`]).
    pub cache: crate::gateway::cache::stages::CacheSet,
    /// Concurrency limits, in config order ([`concurrency`]).
    pub concurrency: Vec<Arc<ConcurrencyLimit>>,
    /// Each pool's own concurrency limit (`pools.<name>.concurrency`), indexed like
    /// [`RouteTable::pools`]; `None`: the pool has none.
    pub pool_limits: Vec<concurrency::pools::PoolLimits>,
    /// The MRTR flows followed (`None` with `flows.enabled: false`), per replica.
    pub flows: Option<Arc<FlowStore>>,
    /// The span exporter (`None`, the default, when tracing is off).
    pub tracing: Option<Arc<Tracing>>,
    /// The audit trail's queue (`None`, the default, when `audit.sink` is off).
    pub audit: Option<Arc<crate::gateway::telemetry::audit::Audit>>,
    pub(crate) upstream_header: Option<http::HeaderName>,
    /// The response headers the gateway asserts (`upstream_header`, `x-mcp-edge-retry-landing`):
    /// no spelling of them from an upstream reaches the client ([`crate::gateway::journey::response`]).
    pub(crate) response_asserted: Vec<http::HeaderName>,
    /// The request headers the gateway asserts to upstreams (identity from `auth.forward`, the
    /// trace context it propagates): whatever a client sent under these names, or names that
    /// fold onto them, is removed before the gateway sets its own ([`crate::gateway::journey::forward`]).
    pub(crate) asserted: Vec<http::HeaderName>,
    /// The headers the config reads as keys ([`Config::key_headers`]), for admission.
    pub key_headers: Vec<http::HeaderName>,
    /// Request body bytes held by this gateway's requests (all generations since start: a
    /// reload carries the counter over), against `limits.max_held_bytes`.
    pub held: Arc<AtomicUsize>,
    /// The OAuth resource server (`auth:`), when configured.
    pub auth: Option<crate::auth::Auth>,
    /// How the gateway authenticates to each pool (`pools.<name>.credentials`), indexed like
    /// `pools`; token caches kept across reloads for pools whose settings did not change.
    pub credentials: crate::credentials::Credentials,
    /// How each pool's instances are reached (TLS, HTTP version), indexed like `pools`.
    pub(crate) peers: Vec<crate::gateway::transport::upstream_tls::PoolPeers>,
    /// Each instance's metric handles, indexed like `pools[p].instances[i]`, resolved on first use.
    upstream_metrics: Vec<Vec<OnceLock<UpstreamMetrics>>>,
    /// The federated endpoints (`federation:`), when configured.
    pub federation: Option<crate::gateway::federation::stages::Federation>,
    /// What each federated pool serves, by pool name (kept across reloads).
    pub catalogs: Arc<crate::gateway::federation::stages::catalog::Store>,
    /// Pinned tool and prompt definitions (kept across reloads; `config::pins`).
    pub(crate) pins: Arc<crate::gateway::stages::pins::PinBook>,
    /// Each pool's `pins` policy, indexed like `pools`.
    pub(crate) pin_policies: Vec<crate::config::pins::PinPolicy>,
    /// Each pool's `requestState` sealing (`pools.<name>.mrtr.seal`), indexed like `pools`.
    pub seals: crate::gateway::stages::seal::Seals,
    /// The body stages' own states, indexed as the pipeline's list (`None`: off).
    pub(crate) stage_states: Vec<Option<crate::gateway::stages::body::State>>,
    /// SHA-256 of the admin token (`admin_token_file`), when one is configured.
    pub(crate) admin_token: Option<[u8; 32]>,
    /// The protocol bridge for 2025-era clients and servers (`legacy:`, pools' `era`).
    pub(crate) bridge: crate::gateway::stages::bridge::Bridge,
    /// What the era check found wrong with this generation's pools once it ran (pool,
    /// finding): `gateway::runtime::eras`.
    pub(crate) era_findings: OnceLock<Vec<(String, String)>>,
}

/// Each pool of the route table and how its instances are reached, with what a reload carries
/// over: the health of a pool whose instances (by address) and checks did not change, and the
/// load of every instance that stays.
fn build_pools(
    config: &Config,
    table: &RouteTable,
    previous: Option<&Gateway>,
) -> anyhow::Result<(
    Vec<Pool>,
    Vec<crate::gateway::transport::upstream_tls::PoolPeers>,
)> {
    let mut pools = Vec::with_capacity(table.pools.len());
    let mut peers = Vec::with_capacity(table.pools.len());
    for name in &table.pools {
        let cfg = &config.pools[name];
        peers.push(crate::gateway::transport::upstream_tls::PoolPeers::build(
            name, cfg,
        )?);
        let mut pool = Pool::build(name, cfg, None)?;
        let old = previous.and_then(|p| p.pools.iter().find(|o| &o.name == name));
        let same = previous
            .and_then(|p| p.config.pools.get(name))
            .is_some_and(|c| {
                c.instances == cfg.instances && c.health == cfg.health && c.ejection == cfg.ejection
                    // Outliers turned off: their ejections end with them (a fresh start).
                    && (cfg.outliers.is_some() || c.outliers.is_none())
            });
        // Health belongs to an address: a name that now resolves elsewhere starts fresh.
        if let Some(old) = old.filter(|o| same && o.addrs().eq(pool.addrs())) {
            pool.health = old.health.clone();
        }
        pool.adopt_loads(old);
        pools.push(pool);
    }
    Ok((pools, peers))
}

/// SHA-256 of the token in `path` (surrounding whitespace trimmed); an error names the file.
fn admin_token(path: &std::path::Path) -> anyhow::Result<[u8; 32]> {
    use sha2::Digest;
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("admin_token_file: cannot read {}: {e}", path.display()))?;
    let token = text.trim();
    anyhow::ensure!(
        token.len() >= 16,
        "admin_token_file: {} holds {} characters; put a random token of at least 16 in it (e.g. openssl rand -hex 32)",
        path.display(),
        token.len()
    );
    Ok(sha2::Sha256::digest(token.as_bytes()).into())
}

impl Gateway {
    /// Build a gateway. With `previous` (a reload), state that outlives a config is carried
    /// over: the metrics registry, the buckets of every rate limit whose settings did not
    /// change, and the health of every pool whose instances and checks did not change.
    pub fn new(config: Config, previous: Option<&Gateway>) -> anyhow::Result<Gateway> {
        let table = RouteTable::from_config(&config);
        let (pools, peers) = build_pools(&config, &table, previous)?;
        let metrics = carry_metrics(&config, &pools, previous)?;
        let (limit_shared, limits) = build_limits(&config, &metrics, previous)?;
        let cache = crate::gateway::cache::stages::CacheSet::build(
            &config,
            &table,
            &metrics.registry,
            previous.map(|p| (&p.cache, &p.config, &p.table)),
        )?;
        let concurrency = concurrency::build(
            &config.concurrency_limits,
            previous.map_or(&[][..], |p| &p.concurrency[..]),
            &metrics.concurrency,
        );
        let pool_limits = concurrency::pools::build(
            &config,
            &table.pools,
            previous.map_or(&[][..], |p| &p.pool_limits[..]),
            &metrics.concurrency,
        );
        let flows = carry_flows(&config, previous);
        let tracing = carry_tracing(&config, previous)?;
        let audit = carry_audit(&config, &metrics, flows.as_deref(), previous)?;
        let auth = crate::auth::Auth::new(
            &config,
            metrics.auth.clone(),
            previous.and_then(|p| p.auth.as_ref()),
        )?;
        let credentials = build_credentials(&config, &table, &metrics, previous)?;
        let catalogs = previous.map_or_else(Default::default, |p| p.catalogs.clone());
        let federation =
            crate::gateway::federation::stages::Federation::build(&config, &table, &catalogs);
        let pins = match previous {
            Some(p) => p.pins.clone(),
            None => Arc::new(crate::gateway::stages::pins::PinBook::new(
                &metrics.registry,
            )?),
        };
        pins.configure(&config.pins);
        let pin_policies = table.pools.iter().map(|n| config.pools[n].pins).collect();
        let bridge = crate::gateway::stages::bridge::Bridge::build(
            &config,
            previous.map(|p| &p.bridge),
            metrics.bridge.cancels.clone(),
        );
        let seals = crate::gateway::stages::seal::build_all(
            &config,
            &table.pools,
            previous.map(|p| (&p.table.pools[..], &p.seals)),
            limit_shared.store(),
        )?;
        Ok(Gateway {
            era_findings: OnceLock::new(),
            pins,
            pin_policies,
            seals,
            bridge,
            admin_token: config
                .admin_token_file
                .as_deref()
                .map(admin_token)
                .transpose()?,
            asserted: asserted_headers(&config, auth.as_ref()),
            key_headers: config.key_headers(),
            upstream_header: upstream_header(&config)?,
            response_asserted: upstream_header(&config)?
                .into_iter()
                .chain([http::HeaderName::from_static(
                    crate::mcp::header::RETRY_LANDING,
                )])
                .collect(),
            upstream_metrics: pools
                .iter()
                .map(|p| p.instances.iter().map(|_| OnceLock::new()).collect())
                .collect(),
            held: previous.map_or_else(Default::default, |p| p.held.clone()),
            federation,
            catalogs,
            stage_states: crate::gateway::stages::pipeline::build_states(&config),
            auth,
            credentials,
            config,
            table,
            pools,
            limits,
            limit_shared,
            metrics,
            cache,
            concurrency,
            pool_limits,
            flows,
            tracing,
            audit,
            peers,
        })
    }

    /// The catalog settings (the defaults without `federation:`).
    pub(crate) fn federation_catalog(&self) -> &crate::config::federation::CatalogConfig {
        static DEFAULT: OnceLock<crate::config::federation::CatalogConfig> = OnceLock::new();
        match &self.federation {
            Some(f) => &f.catalog,
            None => DEFAULT.get_or_init(Default::default),
        }
    }

    /// The metric handles of instance `inst` of pool `pool`.
    pub(crate) fn upstream_metrics(&self, pool: usize, inst: usize) -> &UpstreamMetrics {
        self.upstream_metrics[pool][inst].get_or_init(|| {
            let p = &self.pools[pool];
            self.metrics.upstream(&p.name, &p.instances[inst].name)
        })
    }

    /// Record a change of an instance's health: metrics and a log line.
    pub(crate) fn note_health(&self, pool: usize, i: usize, change: health::Change) {
        let p = &self.pools[pool];
        p.on_health(i, change);
        let inst = &p.instances[i].name;
        match change {
            health::Change::None => return,
            health::Change::Ejected(t) => {
                self.metrics
                    .upstream_ejections
                    .with_label_values(&[&p.name, inst])
                    .inc();
                tracing::warn!(
                    "pool {}: instance {inst} ejected for {t:?} after failed requests",
                    p.name
                );
            }
            health::Change::WentDown => tracing::warn!(
                "pool {}: instance {inst} is down (health checks failing)",
                p.name
            ),
            health::Change::CameUp => {
                tracing::info!("pool {}: instance {inst} is up again", p.name)
            }
        }
        self.metrics
            .upstream_up
            .with_label_values(&[&p.name, inst])
            .set(p.health.usable(i) as i64);
    }

    /// Before a scrape: the balancer's gauges, and `upstream_up` from the live state (an
    /// ejection ends by itself, with no event to set it back).
    pub(crate) fn publish_pools(&self) {
        self.metrics.balance.publish(&self.pools);
        for p in &self.pools {
            for (i, inst) in p.instances.iter().enumerate() {
                let up = p.health.usable(i);
                (self.metrics.upstream_up)
                    .with_label_values(&[&p.name, &inst.name])
                    .set(i64::from(up));
            }
        }
    }

    /// Record the latency outliers a window's verdict ejected: slow start's ramp, metrics and a
    /// log line each.
    pub(crate) fn note_outliers(&self, pool: usize, ejected: &[Ejection]) {
        let p = &self.pools[pool];
        for e in ejected {
            p.on_health(e.index, health::Change::Ejected(e.time));
            let inst = &p.instances[e.index].name;
            let labels = [p.name.as_str(), inst.as_str()];
            let m = &self.metrics;
            m.balance.outlier_ejections.with_label_values(&labels).inc();
            m.upstream_up.with_label_values(&labels).set(0);
            tracing::warn!(
                "pool {}: instance {inst} ejected for {:?} as a latency outlier ({:.1} ms against the pool's {:.1} ms)",
                p.name,
                e.time,
                e.latency_ns / 1e6,
                e.baseline_ns / 1e6
            );
        }
    }

    /// Count the flows whose next leg did not come in time as abandoned (before a scrape).
    pub(crate) fn sweep_flows(&self) {
        if let Some(f) = &self.flows {
            f.sweep(std::time::Instant::now(), &self.metrics.flows);
        }
    }

    /// The first limit that refuses this request, counting every decision.
    pub(crate) async fn limited(&self, input: &LimitInput<'_>) -> Option<(&Limit, Duration)> {
        for l in &self.limits {
            let decision = match l.check(input).await {
                Verdict::NotApplicable => continue,
                Verdict::Allowed => "allowed",
                Verdict::DryRunLimited => "dry_run_limited",
                Verdict::Limited(wait) => {
                    self.metrics
                        .rate_limits
                        .with_label_values(&[&l.name, "limited"])
                        .inc();
                    return Some((l, wait));
                }
            };
            self.metrics
                .rate_limits
                .with_label_values(&[&l.name, decision])
                .inc();
        }
        None
    }
}
