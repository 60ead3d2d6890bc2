//! Health: active checks and passive ejection of upstream instances.
//!
//! An instance is *usable* when its active checks say it is up (it starts up) and it is not
//! ejected. Active checks POST `server/discover` with the required MCP headers (or just connect,
//! or nothing), taking an instance down after `unhealthy_threshold` failures in a row and back up
//! after `healthy_threshold` passes. Passive ejection reacts to live traffic: a refused
//! connection ejects at once, `consecutive_failures` 5xx answers in a row eject too; each
//! ejection in a row doubles the time out, up to a cap. When no instance of a pool is usable,
//! the balancer ignores health rather than refuse everything ("panic mode", as Envoy does).
//! Latency outliers are ejected here too, on their own clock ([`PoolHealth::eject_outlier`]; the
//! detector is the balance component's, `balance::stages::outliers`), so every mode skips them
//! as it skips an unhealthy instance.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::{EjectionConfig, HealthCheckKind, HealthConfig};
use crate::gateway::transport::upstream_h1::oneshot;
use crate::gateway::transport::upstream_tls::PoolPeers;
use crate::mcp::{meta, methods, PROTOCOL_VERSION};

/// The health of one instance.
#[derive(Debug)]
pub struct InstanceHealth {
    active_up: AtomicBool,
    passes: AtomicU32,
    fails: AtomicU32,
    request_failures: AtomicU32,
    ejections_in_row: AtomicU32,
    /// Milliseconds since the pool's epoch until which the instance is ejected.
    ejected_until_ms: AtomicU64,
    /// The same for an ejection as a latency outlier, and how many in a row.
    outlier_until_ms: AtomicU64,
    outliers_in_row: AtomicU32,
}

impl Default for InstanceHealth {
    fn default() -> Self {
        InstanceHealth {
            active_up: AtomicBool::new(true),
            passes: AtomicU32::new(0),
            fails: AtomicU32::new(0),
            request_failures: AtomicU32::new(0),
            ejections_in_row: AtomicU32::new(0),
            ejected_until_ms: AtomicU64::new(0),
            outlier_until_ms: AtomicU64::new(0),
            outliers_in_row: AtomicU32::new(0),
        }
    }
}

/// Why an instance gets no new requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Unusable {
    /// Its active checks fail.
    Down,
    /// Ejected after failed requests, for this long still.
    Ejected(Duration),
    /// Ejected as a latency outlier, for this long still.
    Outlier(Duration),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Unusable::Down => f.write_str("down (health checks failing)"),
            Unusable::Ejected(d) => write!(
                f,
                "ejected after failed requests, {:.1}s left",
                d.as_secs_f64()
            ),
            Unusable::Outlier(d) => write!(
                f,
                "ejected as a latency outlier, {:.1}s left",
                d.as_secs_f64()
            ),
        }
    }
}

/// Health of every instance of a pool.
#[derive(Debug)]
pub struct PoolHealth {
    pub instances: Vec<InstanceHealth>,
    pub check: HealthConfig,
    ejection: EjectionConfig,
    epoch: Instant,
}

/// A change worth reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    Ejected(Duration),
    WentDown,
    CameUp,
}

impl PoolHealth {
    pub(crate) fn new(n: usize, check: HealthConfig, ejection: EjectionConfig) -> Self {
        PoolHealth {
            instances: (0..n).map(|_| InstanceHealth::default()).collect(),
            check,
            ejection,
            epoch: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Whether instance `i` should get new requests.
    pub(crate) fn usable(&self, i: usize) -> bool {
        let h = &self.instances[i];
        let until = (h.ejected_until_ms.load(Ordering::Relaxed))
            .max(h.outlier_until_ms.load(Ordering::Relaxed));
        h.active_up.load(Ordering::Relaxed) && self.now_ms() >= until
    }

    /// Why instance `i` gets no new requests (`None`: it is usable).
    pub(crate) fn unusable(&self, i: usize) -> Option<Unusable> {
        let h = &self.instances[i];
        if !h.active_up.load(Ordering::Relaxed) {
            return Some(Unusable::Down);
        }
        let now = self.now_ms();
        let left = |until: &AtomicU64| {
            let until = until.load(Ordering::Relaxed);
            (until > now).then(|| Duration::from_millis(until - now))
        };
        (left(&h.outlier_until_ms).map(Unusable::Outlier))
            .or_else(|| left(&h.ejected_until_ms).map(Unusable::Ejected))
    }

    /// How long instance `i` stays ejected as a latency outlier, if it is.
    pub(crate) fn outlier_for(&self, i: usize) -> Option<Duration> {
        match self.unusable(i) {
            Some(Unusable::Outlier(d)) => Some(d),
            _ => None,
        }
    }

    /// Eject instance `i` as a latency outlier: for `base`, doubled for each ejection in a row
    /// before, up to `max`. The time it is out.
    pub(crate) fn eject_outlier(&self, i: usize, base: Duration, max: Duration) -> Duration {
        let h = &self.instances[i];
        let n = h.outliers_in_row.fetch_add(1, Ordering::Relaxed).min(16);
        let time = base.saturating_mul(1 << n).min(max);
        h.outlier_until_ms
            .store(self.now_ms() + time.as_millis() as u64, Ordering::Relaxed);
        time
    }

    /// Instance `i` was judged and found no outlier: one step off its ejections in a row (so
    /// an instance that keeps relapsing stays out longer each time, and one that stays well
    /// comes back to the base time).
    pub(crate) fn outlier_cleared(&self, i: usize) {
        let h = &self.instances[i].outliers_in_row;
        let _ = h.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Whether instance `i`'s active checks pass (ejection aside).
    pub(crate) fn checks_pass(&self, i: usize) -> bool {
        self.instances[i].active_up.load(Ordering::Relaxed)
    }

    /// How long instance `i` stays ejected, if it is.
    pub(crate) fn ejected_for(&self, i: usize) -> Option<Duration> {
        let h = &self.instances[i];
        let until = (h.ejected_until_ms.load(Ordering::Relaxed))
            .max(h.outlier_until_ms.load(Ordering::Relaxed));
        let now = self.now_ms();
        (until > now).then(|| Duration::from_millis(until - now))
    }

    pub(crate) fn any_usable(&self) -> bool {
        (0..self.instances.len()).any(|i| self.usable(i))
    }

    fn eject(&self, i: usize) -> Change {
        let h = &self.instances[i];
        let n = h.ejections_in_row.fetch_add(1, Ordering::Relaxed).min(16);
        let time = self
            .ejection
            .base_time
            .saturating_mul(1 << n)
            .min(self.ejection.max_time);
        h.ejected_until_ms
            .store(self.now_ms() + time.as_millis() as u64, Ordering::Relaxed);
        h.request_failures.store(0, Ordering::Relaxed);
        Change::Ejected(time)
    }

    fn ejection_on(&self) -> bool {
        self.ejection.consecutive_failures > 0
    }

    /// A connection to instance `i` failed: the request never reached it.
    pub(crate) fn on_connect_failure(&self, i: usize) -> Change {
        if !self.ejection_on() || !self.usable(i) {
            return Change::None;
        }
        self.eject(i)
    }

    /// Instance `i` answered with `status`.
    pub(crate) fn on_response(&self, i: usize, status: u16) -> Change {
        let h = &self.instances[i];
        if status >= 500 {
            let n = h.request_failures.fetch_add(1, Ordering::Relaxed) + 1;
            if self.ejection_on() && n >= self.ejection.consecutive_failures && self.usable(i) {
                return self.eject(i);
            }
        } else {
            h.request_failures.store(0, Ordering::Relaxed);
            h.ejections_in_row.store(0, Ordering::Relaxed);
        }
        Change::None
    }

    /// An active check of instance `i` passed or failed.
    pub(crate) fn on_check(&self, i: usize, ok: bool) -> Change {
        let h = &self.instances[i];
        let up = h.active_up.load(Ordering::Relaxed);
        if ok {
            h.fails.store(0, Ordering::Relaxed);
            let n = h.passes.fetch_add(1, Ordering::Relaxed) + 1;
            if !up && n >= self.check.healthy_threshold {
                h.active_up.store(true, Ordering::Relaxed);
                // A recovered instance starts with a clean slate.
                h.ejected_until_ms.store(0, Ordering::Relaxed);
                h.ejections_in_row.store(0, Ordering::Relaxed);
                h.outlier_until_ms.store(0, Ordering::Relaxed);
                h.outliers_in_row.store(0, Ordering::Relaxed);
                return Change::CameUp;
            }
        } else {
            h.passes.store(0, Ordering::Relaxed);
            let n = h.fails.fetch_add(1, Ordering::Relaxed) + 1;
            if up && n >= self.check.unhealthy_threshold {
                h.active_up.store(false, Ordering::Relaxed);
                return Change::WentDown;
            }
        }
        Change::None
    }
}

/// The pool's credential on a health check (`pools.<name>.credentials`: the static secret or the
/// gateway's own client-credentials token, never a caller's).
pub(crate) type CheckAuth<'a> = Option<&'a crate::credentials::Credential>;

/// The `server/discover` request an MCP health check sends to `addr` at `endpoint`.
fn discover_request(addr: SocketAddr, endpoint: &str, auth: CheckAuth) -> Vec<u8> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"mcp-edge-health","method":"{}","params":{{"_meta":{{"{}":"{}","{}":{{}}}}}}}}"#,
        methods::DISCOVER,
        meta::PROTOCOL_VERSION,
        PROTOCOL_VERSION,
        meta::CLIENT_CAPABILITIES
    );
    let host = addr.to_string();
    let mut extra = vec![("User-Agent", "mcp-edge-health")];
    if let Some((h, v)) = auth {
        if let Ok(v) = v.to_str() {
            extra.push((h.as_str(), v));
        }
    }
    oneshot::mcp_post(
        (endpoint, &host),
        methods::DISCOVER,
        &extra,
        body.as_bytes(),
        false,
    )
}

/// Probe one instance, over TLS for TLS pools: true when it passes. `tcp`: the connection (and
/// TLS handshake) is made; `discover`: `server/discover` answers 200. The request goes on the
/// gateway's one client for its own calls (`upstream_h1::oneshot`), which reads only the head.
pub(crate) async fn probe(
    peers: &PoolPeers,
    (addr, instance): (SocketAddr, &str),
    check: &HealthConfig,
    endpoint: &str,
    auth: CheckAuth<'_>,
) -> bool {
    let attempt = async {
        let stream = peers.connect(addr, instance).await.ok()?;
        if check.check == HealthCheckKind::Tcp {
            return Some(true);
        }
        let req = discover_request(addr, endpoint, auth);
        let answer = oneshot::Streaming::start(stream, &req).await.ok()?;
        Some(answer.head.status == http::StatusCode::OK)
    };
    matches!(
        tokio::time::timeout(check.timeout, attempt).await,
        Ok(Some(true))
    )
}

/// The HTTP status one instance answers `server/discover` with, within `timeout` (`None`: it
/// could not be reached or did not answer): what the era check at start reads.
pub(crate) async fn discover_status(
    peers: &PoolPeers,
    (addr, instance): (SocketAddr, &str),
    endpoint: &str,
    auth: CheckAuth<'_>,
    timeout: std::time::Duration,
) -> Option<u16> {
    let attempt = async {
        let stream = peers.connect(addr, instance).await.ok()?;
        let req = discover_request(addr, endpoint, auth);
        let answer = oneshot::Streaming::start(stream, &req).await.ok()?;
        Some(answer.head.status.as_u16())
    };
    tokio::time::timeout(timeout, attempt).await.ok().flatten()
}

#[cfg(test)]
mod tests;
