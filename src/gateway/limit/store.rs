//! The shared tier's client: GCRA decisions of `scope: global` limits, made atomically in Redis.
//!
//! One decision is one `EVALSHA` of [`GCRA_LUA`] (the script is loaded on first use and again
//! after a Redis restart), sent over one multiplexed connection ([`ConnectionManager`]), so
//! concurrent requests are pipelined on the wire, and the connection reconnects on its own. The
//! script reads the time from Redis (`TIME`), so the replicas' clocks need not agree, and sets a
//! TTL on each bucket that ends when the bucket is full again: idle keys vanish by themselves.
//!
//! Every call is bounded by `redis.timeout`. After `circuit.failures` errors in a row the store
//! stops asking Redis for `circuit.open_for`, then lets one request probe; its success closes
//! the circuit. Metrics: `mcp_edge_limit_store_seconds`, `mcp_edge_limit_store_errors_total{kind}`,
//! `mcp_edge_limit_store_fallbacks_total{limit,policy}`, `mcp_edge_limit_store_up`.

use arc_swap::ArcSwapOption;
use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::config::{OnStoreError, RedisConfig};

/// GCRA with governor's semantics, in microseconds of Redis time.
/// KEYS[1]: the bucket; ARGV[1]: emission interval t; ARGV[2]: tolerance tau = t * (burst - 1).
/// Returns {1, 0} when admitted, {0, wait} when not (the bucket is then left unchanged).
pub const GCRA_LUA: &str = r#"
local t = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '') or now
local earliest = tat - tau
if now < earliest then
  return {0, earliest - now}
end
local new = math.max(tat, now) + t
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.floor((new - now) / 1000) + 1)
return {1, 0}
"#;

/// Why the store could not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreError {
    /// Redis did not answer within `redis.timeout`.
    Timeout,
    /// Redis answered with an error, or the connection failed.
    Failed,
    /// No connection yet (Redis unreachable since start).
    NotConnected,
    /// The circuit is open: Redis is not asked for a while.
    CircuitOpen,
}

impl StoreError {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreError::Timeout => "timeout",
            StoreError::Failed => "error",
            StoreError::NotConnected => "not_connected",
            StoreError::CircuitOpen => "circuit_open",
        }
    }
}

/// The store's metrics (registered once per registry, kept across reloads).
pub struct StoreMetrics {
    latency: Histogram,
    errors: IntCounterVec,
    fallbacks: IntCounterVec,
    up: IntGauge,
}

impl StoreMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<StoreMetrics> {
        let latency = Histogram::with_opts(
            HistogramOpts::new(
                "limit_store_seconds",
                "Time of one global rate-limit decision in Redis (answered or timed out)",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            ]),
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "limit_store_errors_total",
                "Global rate-limit decisions Redis could not make, by kind (timeout, error, not_connected, circuit_open)",
            ),
            &["kind"],
        )?;
        let fallbacks = IntCounterVec::new(
            Opts::new(
                "limit_store_fallbacks_total",
                "Requests decided by a limit's on_store_error policy instead of Redis",
            ),
            &["limit", "policy"],
        )?;
        let up = IntGauge::new(
            "limit_store_up",
            "1 while the last Redis decision succeeded and the circuit is closed",
        )?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(fallbacks.clone()))?;
        registry.register(Box::new(up.clone()))?;
        Ok(StoreMetrics {
            latency,
            errors,
            fallbacks,
            up,
        })
    }
}

/// Consecutive failures open the circuit for a while; then one probe may close it again.
pub struct Circuit {
    threshold: u32,
    open_for_ms: u64,
    failures: AtomicU32,
    /// Milliseconds since the process clock's start until which Redis is not asked.
    open_until_ms: AtomicU64,
}

fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl Circuit {
    pub fn new(threshold: u32, open_for: Duration) -> Circuit {
        Circuit {
            threshold: threshold.max(1),
            open_for_ms: open_for.as_millis() as u64,
            failures: AtomicU32::new(0),
            open_until_ms: AtomicU64::new(0),
        }
    }

    /// Whether a request may ask Redis at `now` (milliseconds).
    pub fn allow(&self, now: u64) -> bool {
        if self.failures.load(Ordering::Relaxed) < self.threshold {
            return true;
        }
        let until = self.open_until_ms.load(Ordering::Relaxed);
        // Open: nobody asks. Past the deadline: the one who moves it probes, the rest wait.
        now >= until
            && self
                .open_until_ms
                .compare_exchange(
                    until,
                    now + self.open_for_ms,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    pub fn success(&self) {
        self.failures.store(0, Ordering::Relaxed);
    }

    pub fn failure(&self, now: u64) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.threshold {
            self.open_until_ms
                .store(now + self.open_for_ms, Ordering::Relaxed);
        }
    }

    pub fn is_closed(&self) -> bool {
        self.failures.load(Ordering::Relaxed) < self.threshold
    }
}

/// The runtime that owns the Redis connections: one thread for the process, so a connection
/// (and its reconnections) never depends on which proxy thread asked first.
fn redis_runtime() -> &'static tokio::runtime::Handle {
    static RT: OnceLock<tokio::runtime::Handle> = OnceLock::new();
    RT.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime for the Redis client");
        let handle = rt.handle().clone();
        std::thread::Builder::new()
            .name("mcp-edge-redis".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .expect("a thread for the Redis client");
        handle
    })
}

/// The Redis client of the global limits.
pub struct GlobalStore {
    pub config: RedisConfig,
    conn: Arc<ArcSwapOption<ConnectionManager>>,
    script: redis::Script,
    circuit: Circuit,
    metrics: Arc<StoreMetrics>,
}

impl GlobalStore {
    /// A store for `config`; it connects in the background (requests meanwhile fall back).
    pub fn new(config: &RedisConfig, metrics: Arc<StoreMetrics>) -> anyhow::Result<GlobalStore> {
        let client = redis::Client::open(config.url.as_str())?;
        let conn = Arc::new(ArcSwapOption::empty());
        let mcfg = ConnectionManagerConfig::new()
            .set_connection_timeout(config.connect_timeout)
            .set_number_of_retries(1)
            .set_max_delay(1000)
            .set_tcp_settings(tcp_settings(config.connect_timeout));
        redis_runtime().spawn(connect(client, mcfg, Arc::downgrade(&conn)));
        Ok(GlobalStore {
            config: config.clone(),
            conn,
            script: redis::Script::new(GCRA_LUA),
            circuit: Circuit::new(config.circuit.failures, config.circuit.open_for),
            metrics,
        })
    }

    /// One GCRA decision: `Ok(Ok(()))` admitted, `Ok(Err(wait))` over the limit.
    pub async fn gcra(
        &self,
        key: &str,
        t_us: u64,
        tau_us: u64,
    ) -> Result<Result<(), Duration>, StoreError> {
        let result = self.ask(key, t_us, tau_us).await;
        match &result {
            Ok(_) => {
                self.circuit.success();
                self.metrics.up.set(1);
            }
            Err(StoreError::CircuitOpen) => {}
            Err(_) => {
                self.circuit.failure(now_ms());
                if !self.circuit.is_closed() {
                    self.metrics.up.set(0);
                }
            }
        }
        if let Err(e) = &result {
            self.metrics.errors.with_label_values(&[e.as_str()]).inc();
        }
        result
    }

    async fn ask(
        &self,
        key: &str,
        t_us: u64,
        tau_us: u64,
    ) -> Result<Result<(), Duration>, StoreError> {
        if !self.circuit.allow(now_ms()) {
            return Err(StoreError::CircuitOpen);
        }
        let Some(conn) = self.conn.load_full() else {
            return Err(StoreError::NotConnected);
        };
        let mut conn = (*conn).clone();
        let started = Instant::now();
        let mut call = self.script.key(key);
        call.arg(t_us).arg(tau_us);
        let answer = tokio::time::timeout(
            self.config.timeout,
            call.invoke_async::<(i64, i64)>(&mut conn),
        )
        .await;
        self.metrics
            .latency
            .observe(started.elapsed().as_secs_f64());
        match answer {
            Ok(Ok((1, _))) => Ok(Ok(())),
            Ok(Ok((_, wait))) => Ok(Err(Duration::from_micros(wait.max(0) as u64))),
            Ok(Err(e)) => {
                tracing::debug!("redis rate-limit call failed: {e}");
                Err(StoreError::Failed)
            }
            Err(_) => Err(StoreError::Timeout),
        }
    }

    /// Count a request decided by `policy` instead of Redis.
    pub fn fallback(&self, limit: &str, policy: OnStoreError) {
        self.metrics
            .fallbacks
            .with_label_values(&[limit, policy.as_str()])
            .inc();
    }
}

/// No Nagle delay (concurrent decisions are pipelined on one connection; the redis crate leaves
/// it on without its `tcp_nodelay` feature), and a connection whose peer vanished without a
/// reset (a partition, a host gone) fails within seconds, so the manager reconnects, instead of
/// waiting out TCP's retransmissions (minutes) with every call timing out.
fn tcp_settings(connect_timeout: Duration) -> redis::io::tcp::TcpSettings {
    let dead_after = (connect_timeout * 2).max(Duration::from_secs(2));
    let keepalive = redis::io::tcp::socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(2));
    let s = redis::io::tcp::TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive);
    #[cfg(target_os = "linux")]
    let s = s.set_user_timeout(dead_after);
    #[cfg(not(target_os = "linux"))]
    let _ = dead_after;
    s
}

/// Connect in the background until it works (or the store is dropped); the manager then
/// reconnects by itself.
async fn connect(
    client: redis::Client,
    cfg: ConnectionManagerConfig,
    slot: Weak<ArcSwapOption<ConnectionManager>>,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if slot.strong_count() == 0 {
            return;
        }
        match ConnectionManager::new_with_config(client.clone(), cfg.clone()).await {
            Ok(m) => {
                if let Some(slot) = slot.upgrade() {
                    slot.store(Some(Arc::new(m)));
                }
                return;
            }
            Err(e) => tracing::warn!("redis: cannot connect yet ({e}); retrying in {backoff:?}"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_circuit_opens_after_repeated_failures_and_one_probe_closes_it() {
        let c = Circuit::new(3, Duration::from_millis(100));
        assert!(c.allow(0));
        c.failure(0);
        c.failure(1);
        assert!(c.allow(2), "two failures: still closed");
        c.failure(2);
        assert!(!c.allow(3) && !c.allow(101), "open for 100 ms");
        assert!(c.allow(102), "the first request after the pause probes");
        assert!(!c.allow(103), "...and only that one");
        c.failure(103);
        assert!(!c.allow(150), "a failed probe keeps it open");
        assert!(c.allow(203));
        c.success();
        assert!(c.is_closed() && c.allow(204) && c.allow(205));
    }
}
