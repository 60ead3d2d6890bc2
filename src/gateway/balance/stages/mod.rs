//! Balance stage: pick an instance of a pool.
//!
//! Three ways, chosen per pool by `balance:`:
//! - `round_robin` spreads requests evenly (by weight);
//! - `least_loaded` is power of two choices on in-flight requests times a latency estimate
//!   that a lone outlier does not move ([`choice`], [`load`]): a slow or busy instance gets
//!   less, and an instance it avoids is measured again by bounded probes (at most one per
//!   `probe_interval`, within `probe_share` of the pool's picks: [`select`]);
//! - `hash` is consistent hashing (ketama, from pingora-load-balancing) on the decoded
//!   `Mcp-Name`, the caller, a header, a claim or an `Mcp-Param-*` value ([`key`]), so a tool's
//!   traffic stays warm on one instance and adding or removing one of N instances moves only
//!   about 1/N of the keys. A request without a key is spread like round robin. With
//!   `load_bound: ε`, no instance takes more than `(1 + ε)` times its share of the in-flight
//!   requests: a key whose home is full goes to the next instance on the ring until it drains.
//!
//! Weights scale each instance's share in all three; slow start ramps a new or recovered
//! instance's weight up over a window (for `hash`, through its load bound).
//!
//! Tasks routing: `tasks/get|update|cancel` whose task id (the `Mcp-Name`) carries the owner
//! hint of an instance of the pool ([`crate::mcp::tasks`]) go to that instance, whatever the
//! balance and the health state say: only it holds the task. When it cannot be reached the
//! request fails instead of trying another instance, which would only answer "unknown task".
//! Ids without a known hint are balanced as usual (servers with a shared task store).
//!
//! Latency outliers (`outliers:`, [`outliers`]): an instance much slower than the pool's
//! baseline over a window is ejected for a while, in every mode, like an unhealthy one.
//!
//! Retry landing: with `mrtr.retry_landing: elsewhere`, an MRTR retry leg skips the instances
//! of its flow's earlier legs whenever another is eligible ([`steer`]), whatever the mode.

use pingora::lb::selection::{Consistent, RoundRobin};
use pingora::lb::LoadBalancer;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::auth::Identity;
use crate::config::{Balance, HashKey, PoolConfig, RetryLanding};
use crate::gateway::stages::health::{Change, PoolHealth};
use crate::mcp::tasks::{is_task_method, parse_owner_hint};

pub(crate) mod choice;
pub(crate) mod key;
pub mod load;
pub(crate) mod metrics;
pub(crate) mod outliers;
mod parts;
mod select;
pub(crate) mod steer;
mod tried;

pub(crate) use key::shard_key_for;
pub(crate) use load::InstanceLoad;
use parts::{balancer, instance};
pub(crate) use steer::{Landing, Steer};
pub use tried::Tried;

/// One upstream instance.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The name as configured (`host:port`), used in the upstream header, logs and metrics.
    pub name: String,
    pub addr: SocketAddr,
    /// `name` as a ready-made header value.
    pub header_value: http::HeaderValue,
    /// The owner hints of task ids this instance mints: of `name`, and of the resolved
    /// `addr` (a backend advertises its listen address by default).
    pub task_hints: [String; 2],
}

/// How a tasks/* request was routed (the `result` label of `mcp_edge_task_routing_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRoute {
    /// To the instance its task id names.
    Owner,
    /// The owner was already tried for this request and could not be reached.
    OwnerUnreachable,
    /// The id carries a hint that names no instance of this pool: balanced.
    UnknownOwner,
    /// The id carries no owner hint: balanced.
    NoHint,
}

impl TaskRoute {
    pub(crate) fn label(self) -> &'static str {
        match self {
            TaskRoute::Owner => "owner",
            TaskRoute::OwnerUnreachable => "owner_unreachable",
            TaskRoute::UnknownOwner => "unknown_owner",
            TaskRoute::NoHint => "no_hint",
        }
    }
}

enum Selector {
    RoundRobin(LoadBalancer<RoundRobin>),
    Hash(LoadBalancer<Consistent>, HashKey),
    LeastLoaded,
}

/// A pool of instances and how to choose among them.
pub struct Pool {
    pub name: String,
    pub instances: Vec<Instance>,
    pub health: Arc<PoolHealth>,
    /// What each instance is doing, indexed like `instances` (carried over a reload).
    pub loads: Vec<Arc<InstanceLoad>>,
    pub balance: Balance,
    selector: Selector,
    /// Each instance's configured weight, indexed like `instances`.
    weights: Vec<f64>,
    slow_start: Duration,
    /// The latency average's time constant ([`load`]).
    pub decay: Duration,
    /// Least-loaded probes ([`select`]): an instance unseen this long may get one...
    probe_interval: Duration,
    /// ...within this share of the pool's picks,
    probe_share: f64,
    /// counted here: least-loaded picks, and the pick count at the last probe.
    picks: AtomicU64,
    last_probe: AtomicU64,
    /// `load_bound` of a hash pool.
    bound: Option<f64>,
    /// Spreads keyless requests of a hash pool.
    counter: AtomicU64,
    /// `mrtr.retry_landing`: where MRTR retry legs go.
    pub retry_landing: RetryLanding,
    /// `outliers`: the latency outlier detector ([`outliers`]), when on.
    pub(crate) outliers: Option<outliers::Outliers>,
}

/// The instance a request goes to, and how it was chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Picked {
    pub index: Option<usize>,
    /// How a tasks/* request was routed.
    pub task: Option<TaskRoute>,
    /// A bounded hash pool sent the key past its home, which was over its bound.
    pub moved: bool,
    /// A steered retry leg: where it landed relative to its flow's previous leg.
    pub landing: Option<Landing>,
    /// Least-loaded sent the request to an instance it avoids, to measure it again.
    pub probe: bool,
}

impl Pool {
    /// Build a pool from validated config (host names are resolved once, here). `health` carries
    /// the state of an identical pool over a reload.
    pub fn build(
        name: &str,
        cfg: &PoolConfig,
        health: Option<Arc<PoolHealth>>,
    ) -> anyhow::Result<Pool> {
        let instances = (cfg.instances.iter())
            .map(|i| instance(name, i))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let weights: Vec<f64> = (cfg.instances.iter())
            .map(|i| f64::from(cfg.weights.get(i).copied().unwrap_or(1)))
            .collect();
        let selector = match cfg.balance {
            Balance::RoundRobin => Selector::RoundRobin(balancer(&instances, &weights)?),
            Balance::Hash => Selector::Hash(
                balancer(&instances, &weights)?,
                cfg.hash_key.clone().unwrap_or(HashKey::McpName),
            ),
            Balance::LeastLoaded => Selector::LeastLoaded,
        };
        Ok(Pool {
            name: name.to_string(),
            health: health.unwrap_or_else(|| {
                Arc::new(PoolHealth::new(
                    instances.len(),
                    cfg.health.clone(),
                    cfg.ejection.clone(),
                ))
            }),
            loads: instances.iter().map(|_| Arc::default()).collect(),
            instances,
            balance: cfg.balance,
            selector,
            weights,
            slow_start: cfg.slow_start,
            decay: cfg.latency_decay,
            probe_interval: cfg.probe_interval,
            probe_share: cfg.probe_share,
            picks: AtomicU64::new(0),
            last_probe: AtomicU64::new(0),
            bound: cfg.load_bound.filter(|_| cfg.balance == Balance::Hash),
            counter: AtomicU64::new(0),
            retry_landing: cfg.mrtr.retry_landing,
            outliers: (cfg.outliers.clone())
                .map(|o| outliers::Outliers::new(o, cfg.instances.len(), load::now_ns())),
        })
    }

    /// On a reload: take over the load state of each instance `old` also has (same name and
    /// address); an instance new to the pool ramps up when slow start is on.
    pub fn adopt_loads(&mut self, old: Option<&Pool>) {
        let now = load::now_ns();
        for (i, inst) in self.instances.iter().enumerate() {
            let kept = old.and_then(|o| {
                let j = o.instances.iter().position(|p| p.name == inst.name)?;
                (o.instances[j].addr == inst.addr).then(|| o.loads[j].clone())
            });
            match kept {
                Some(l) => self.loads[i] = l,
                None if old.is_some() && !self.slow_start.is_zero() => self.loads[i].ramp_from(now),
                None => {}
            }
        }
    }

    /// A health change of instance `i`: an instance back from down ramps up from now, an
    /// ejected one from the end of its ejection.
    pub(crate) fn on_health(&self, i: usize, change: Change) {
        if self.slow_start.is_zero() {
            return;
        }
        let now = load::now_ns();
        match change {
            Change::CameUp => self.loads[i].ramp_from(now),
            Change::Ejected(t) => self.loads[i].ramp_from(now + t.as_nanos() as u64),
            Change::WentDown | Change::None => {}
        }
    }

    /// The resolved address of each instance, in order.
    pub(crate) fn addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.instances.iter().map(|i| i.addr)
    }

    /// The instance for a request of `method`: the owner of a task for tasks/* (see the module
    /// docs; `None` when the owner was already tried), else the pool's balance.
    pub fn pick_request(
        &self,
        method: Option<&str>,
        name: Option<&str>,
        headers: &http::HeaderMap,
        identity: Option<&Identity>,
        tried: Tried,
    ) -> Picked {
        self.pick_steered(method, name, headers, identity, tried, Steer::default())
    }

    /// [`Pool::pick_request`] for a retry leg that should avoid the instances of `steer`
    /// (tasks/* requests still go to their task's owner).
    pub(crate) fn pick_steered(
        &self,
        method: Option<&str>,
        name: Option<&str>,
        headers: &http::HeaderMap,
        identity: Option<&Identity>,
        tried: Tried,
        steer: Steer,
    ) -> Picked {
        let Some(task_id) = name.filter(|_| method.is_some_and(is_task_method)) else {
            return self.choose(name, headers, identity, tried, steer);
        };
        let route = match parse_owner_hint(task_id) {
            None => TaskRoute::NoHint,
            Some(hint) => match self.owner_of(hint) {
                Some(i) => {
                    let index = (!tried.has(i)).then_some(i);
                    let task = match index {
                        Some(_) => TaskRoute::Owner,
                        None => TaskRoute::OwnerUnreachable,
                    };
                    return Picked {
                        index,
                        task: Some(task),
                        ..Picked::default()
                    };
                }
                None => TaskRoute::UnknownOwner,
            },
        };
        let picked = self.choose(name, headers, identity, tried, steer);
        Picked {
            task: Some(route),
            ..picked
        }
    }

    /// The instance whose task ids carry `hint`.
    pub(crate) fn owner_of(&self, hint: &str) -> Option<usize> {
        self.instances
            .iter()
            .position(|i| i.task_hints.iter().any(|h| h == hint))
    }

    #[cfg(test)]
    /// The index of the instance to send a request to; `name` is the decoded `Mcp-Name`.
    pub(crate) fn pick(&self, name: Option<&str>, headers: &http::HeaderMap) -> Option<usize> {
        self.pick_excluding(name, headers, Tried::default())
    }

    #[cfg(test)]
    /// Like [`Pool::pick`], skipping instances already tried for this request. With consistent
    /// hashing the next instance on the ring is chosen, so a retried key still lands on a
    /// stable second choice.
    pub(crate) fn pick_excluding(
        &self,
        name: Option<&str>,
        headers: &http::HeaderMap,
        tried: Tried,
    ) -> Option<usize> {
        self.choose(name, headers, None, tried, Steer::default())
            .index
    }

    /// The pick for a request that is not a task's: `principal` and `claim:<name>` keys use the
    /// verified `identity`, never the raw token.
    fn choose(
        &self,
        name: Option<&str>,
        headers: &http::HeaderMap,
        identity: Option<&Identity>,
        tried: Tried,
        steer: Steer,
    ) -> Picked {
        // Usable instances first; when none is left, any untried one ("panic mode": better a
        // chance on a doubtful instance than a certain refusal).
        let n = self.instances.len();
        let panic = !(0..n).any(|i| !tried.has(i) && self.health.usable(i));
        let untried = |i: usize| !tried.has(i) && (panic || self.health.usable(i));
        // A steered retry leg skips its flow's instances when another is eligible.
        let (skip, landing) = match steer.is_set() {
            true => {
                let (skip, landing) = steer.avoid(n, &untried);
                (skip, Some(landing))
            }
            false => (Tried::default(), None),
        };
        let eligible = |i: usize| untried(i) && !skip.has(i);
        // The clock is read only by the modes that use it.
        let clocked = matches!(self.selector, Selector::LeastLoaded)
            || self.bound.is_some()
            || !self.slow_start.is_zero();
        let now = if clocked { load::now_ns() } else { 0 };
        let (mut probe, mut moved) = (false, false);
        let index = match &self.selector {
            Selector::LeastLoaded => {
                let (i, p) = self.least_loaded(&eligible, now, &mut rand::thread_rng());
                probe = p;
                i
            }
            Selector::RoundRobin(lb) => self.round_robin(lb, &eligible, now),
            Selector::Hash(lb, key) => {
                let k = key::shard_key_for(key, name, headers, identity).unwrap_or_else(|| {
                    self.counter
                        .fetch_add(1, Ordering::Relaxed)
                        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                });
                let (i, m) = self.hashed(lb, k, &eligible, now);
                moved = m;
                i
            }
        };
        Picked {
            index,
            task: None,
            moved,
            landing,
            probe,
        }
    }
}

#[cfg(test)]
mod bound_tests;
#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod tests;
