//! The shared tier's client: GCRA decisions of `scope: global` limits, made atomically in
//! Redis, and the one-time record of sealed states (`mrtr.seal.one_time: global`,
//! [`GlobalStore::claim_once`]).
//!
//! One decision is one `EVALSHA` of [`GCRA_LUA`] (the script is loaded on first use and again
//! after a Redis restart), sent over one multiplexed connection ([`ConnectionManager`]) per
//! proxy thread, made on that thread's runtime: concurrent requests are pipelined on the wire,
//! no other thread is woken for a decision, and the connection reconnects on its own. The
//! script reads the time from Redis (`TIME`), so the replicas' clocks need not agree, and sets a
//! TTL on each bucket that ends when the bucket is full again: idle keys vanish by themselves.
//!
//! Every call is bounded by `redis.timeout`. After `circuit.failures` errors in a row the store
//! stops asking Redis for `circuit.open_for`, then lets one request probe; its success closes
//! the circuit ([`super::circuit`]). Metrics: `mcp_edge_limit_store_seconds`, `mcp_edge_limit_store_errors_total{kind}`,
//! `mcp_edge_limit_store_fallbacks_total{limit,policy}`, `mcp_edge_limit_store_up`.

use arc_swap::ArcSwapOption;

pub use crate::gateway::rate_limits::telemetry::StoreMetrics;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::circuit::{now_ms, Circuit};
use crate::config::{OnStoreError, RedisConfig};

/// GCRA with governor's semantics, in microseconds of Redis time.
/// KEYS[1]: the bucket; ARGV[1]: emission interval t; ARGV[2]: tolerance tau = t * (burst - 1).
/// Returns {1, 0} when admitted, {0, wait} when not (the bucket is then left unchanged).
pub(crate) const GCRA_LUA: &str = r#"
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

/// One-time use: KEYS[1] is recorded for ARGV[1] ms unless it already is. Returns 1 when this
/// call recorded it, 0 when it was recorded before.
pub(crate) const ONCE_LUA: &str = r#"
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 1 end
return 0
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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StoreError::Timeout => "timeout",
            StoreError::Failed => "error",
            StoreError::NotConnected => "not_connected",
            StoreError::CircuitOpen => "circuit_open",
        }
    }
}

/// One proxy thread's connection: made on that thread's runtime, so a decision never wakes
/// another thread (the connection's driver runs where the request runs).
#[derive(Default)]
struct Slot {
    conn: ArcSwapOption<ConnectionManager>,
    connecting: std::sync::atomic::AtomicBool,
    ready: tokio::sync::Notify,
}

/// The Redis client of the global limits.
pub struct GlobalStore {
    pub config: RedisConfig,
    client: redis::Client,
    manager_config: ConnectionManagerConfig,
    /// A connection per proxy thread (`threads:`), made on first use.
    slots: RwLock<HashMap<ThreadId, Arc<Slot>>>,
    script: redis::Script,
    /// [`ONCE_LUA`].
    once: redis::Script,
    circuit: Circuit,
    metrics: Arc<StoreMetrics>,
}

impl GlobalStore {
    /// A store for `config`. Each proxy thread connects on its first decision (which waits at
    /// most `timeout` for it) and keeps the connection, reconnecting on its own.
    pub fn new(config: &RedisConfig, metrics: Arc<StoreMetrics>) -> anyhow::Result<GlobalStore> {
        let client = redis::Client::open(config.url.as_str())?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(config.connect_timeout)
            .set_number_of_retries(0)
            .set_max_delay(1000)
            .set_tcp_settings(tcp_settings(config.connect_timeout));
        Ok(GlobalStore {
            config: config.clone(),
            client,
            manager_config,
            slots: RwLock::new(HashMap::new()),
            script: redis::Script::new(GCRA_LUA),
            once: redis::Script::new(ONCE_LUA),
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
        let (admitted, wait): (i64, i64) = self.eval(&self.script, key, &[t_us, tau_us]).await?;
        Ok(match admitted {
            1 => Ok(()),
            _ => Err(Duration::from_micros(wait.max(0) as u64)),
        })
    }

    /// Record `key` as used for `ttl_ms`: `true` when this call recorded it, `false` when it
    /// already was (one-time use of sealed `requestState`, `gateway::stages::seal`).
    pub async fn claim_once(&self, key: &str, ttl_ms: u64) -> Result<bool, StoreError> {
        let fresh: i64 = self.eval(&self.once, key, &[ttl_ms.max(1)]).await?;
        Ok(fresh == 1)
    }

    /// One script call, with the circuit, the error counts and `up` kept.
    async fn eval<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        key: &str,
        args: &[u64],
    ) -> Result<T, StoreError> {
        let result = self.ask(script, key, args).await;
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

    async fn ask<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        key: &str,
        args: &[u64],
    ) -> Result<T, StoreError> {
        if !self.circuit.allow(now_ms()) {
            return Err(StoreError::CircuitOpen);
        }
        let started = Instant::now();
        let mut conn = self.connection(started).await?;
        let mut call = script.key(key);
        for a in args {
            call.arg(*a);
        }
        // A connection that broke since its last use (Redis restarted) fails at once and starts
        // reconnecting: one more try within the same deadline waits for the new connection.
        // (Should the broken attempt have run in Redis after all, a bucket is charged twice,
        // stricter, never looser; a one-time record then reads as used: the client starts the
        // call again.)
        let mut attempts = 0;
        let answer = loop {
            attempts += 1;
            let left = self.config.timeout.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, call.invoke_async::<T>(&mut conn)).await {
                Ok(Err(e))
                    if attempts < 2
                        && !waited_out(&e, started, self.config.timeout)
                        && (e.is_io_error() || e.is_unrecoverable_error()) =>
                {
                    tracing::debug!("redis call failed ({e}); trying again");
                }
                other => break other,
            }
        };
        self.metrics
            .latency
            .observe(started.elapsed().as_secs_f64());
        match answer {
            Ok(Ok(v)) => Ok(v),
            // A reconnect that timed out (Redis accepts but does not answer) waited like a call.
            Ok(Err(e)) if waited_out(&e, started, self.config.timeout) => Err(StoreError::Timeout),
            Ok(Err(e)) => {
                tracing::debug!("redis call failed: {e}");
                Err(StoreError::Failed)
            }
            Err(_) => Err(StoreError::Timeout),
        }
    }

    /// This thread's connection; the first caller on a thread starts connecting, and callers
    /// wait for the attempt (until `timeout` after `started`): a refused attempt fails them at
    /// once, the background task keeps trying.
    async fn connection(&self, started: Instant) -> Result<ConnectionManager, StoreError> {
        let slot = self.slot();
        let ready = slot.ready.notified();
        if let Some(conn) = slot.conn.load_full() {
            return Ok((*conn).clone());
        }
        if !slot.connecting.swap(true, Ordering::AcqRel) {
            tokio::spawn(connect(
                self.client.clone(),
                self.manager_config.clone(),
                Arc::downgrade(&slot),
            ));
        }
        let left = self.config.timeout.saturating_sub(started.elapsed());
        if left.is_zero() || tokio::time::timeout(left, ready).await.is_err() {
            return Err(StoreError::NotConnected);
        }
        let conn = slot.conn.load_full().ok_or(StoreError::NotConnected)?;
        Ok((*conn).clone())
    }

    fn slot(&self) -> Arc<Slot> {
        let me = std::thread::current().id();
        if let Some(s) = self
            .slots
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&me)
        {
            return s.clone();
        }
        let mut slots = self.slots.write().unwrap_or_else(|p| p.into_inner());
        slots.entry(me).or_default().clone()
    }

    /// Count a request decided by `policy` instead of Redis.
    pub(crate) fn fallback(&self, limit: &str, policy: OnStoreError) {
        self.metrics
            .fallbacks
            .with_label_values(&[limit, policy.as_str()])
            .inc();
    }
}

/// Whether a failed call failed by waiting: the redis crate's own timeout (a reconnect whose
/// handshake Redis never answered), or an error that came only once the budget was spent.
fn waited_out(e: &redis::RedisError, started: Instant, budget: Duration) -> bool {
    e.is_timeout() || started.elapsed() >= budget
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

/// Connect in the background until it works (or the store is dropped), then wake the waiting
/// callers; the manager reconnects by itself after that.
async fn connect(client: redis::Client, cfg: ConnectionManagerConfig, slot: Weak<Slot>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if slot.strong_count() == 0 {
            return;
        }
        match ConnectionManager::new_with_config(client.clone(), cfg.clone()).await {
            Ok(m) => {
                if let Some(slot) = slot.upgrade() {
                    slot.conn.store(Some(Arc::new(m)));
                    slot.ready.notify_waiters();
                }
                return;
            }
            Err(e) => {
                tracing::warn!("redis: cannot connect yet ({e}); retrying in {backoff:?}");
                if let Some(slot) = slot.upgrade() {
                    slot.ready.notify_waiters();
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}
