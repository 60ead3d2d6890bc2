//! Balance stage: pick an instance of a pool.
//!
//! `round_robin` spreads requests evenly; `hash` is consistent hashing (ketama, from
//! pingora-load-balancing) on the decoded `Mcp-Name`, a hash of the bearer token or a named
//! header, so a tool's traffic stays warm on one instance and adding or removing one of N
//! instances moves only about 1/N of the keys. A request without a key (no name, no token, no
//! header) is spread like round robin.
//!
//! Tasks routing: `tasks/get|update|cancel` whose task id (the `Mcp-Name`) carries the owner
//! hint of an instance of the pool ([`crate::mcp::tasks`]) go to that instance, whatever the
//! balance and the health state say: only it holds the task. When it cannot be reached the
//! request fails instead of trying another instance, which would only answer "unknown task".
//! Ids without a known hint are balanced as usual (servers with a shared task store).

use pingora::lb::selection::{Consistent, RoundRobin};
use pingora::lb::LoadBalancer;
use std::hash::{Hash, Hasher};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::auth::Identity;
use crate::config::{Balance, HashKey, PoolConfig};
use crate::gateway::health::PoolHealth;
use crate::mcp::header::bearer_token;
use crate::mcp::tasks::{is_task_method, owner_hint, parse_owner_hint};

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
    pub fn label(self) -> &'static str {
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
}

/// A pool of instances and how to choose among them.
pub struct Pool {
    pub name: String,
    pub instances: Vec<Instance>,
    pub health: Arc<PoolHealth>,
    selector: Selector,
    /// Spreads keyless requests of a hash pool.
    counter: AtomicU64,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("instances", &self.instances)
            .finish()
    }
}

impl Pool {
    /// Build a pool from validated config (host names are resolved once, here). `health` carries
    /// the state of an identical pool over a reload.
    pub fn build(
        name: &str,
        cfg: &PoolConfig,
        health: Option<Arc<PoolHealth>>,
    ) -> anyhow::Result<Pool> {
        let mut instances = Vec::with_capacity(cfg.instances.len());
        for inst in &cfg.instances {
            let addr = inst
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| anyhow::anyhow!("pools.{name}: cannot resolve instance {inst:?}"))?;
            let header_value = http::HeaderValue::from_str(inst).map_err(|_| {
                anyhow::anyhow!("pools.{name}: instance {inst:?} is not a valid header value")
            })?;
            instances.push(Instance {
                task_hints: [owner_hint(inst), owner_hint(&addr.to_string())],
                name: inst.clone(),
                addr,
                header_value,
            });
        }
        let addrs: Vec<SocketAddr> = instances.iter().map(|i| i.addr).collect();
        let selector = match cfg.balance {
            Balance::RoundRobin => Selector::RoundRobin(LoadBalancer::try_from_iter(addrs)?),
            Balance::Hash => Selector::Hash(
                LoadBalancer::try_from_iter(addrs)?,
                cfg.hash_key.clone().unwrap_or(HashKey::McpName),
            ),
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
            instances,
            selector,
            counter: AtomicU64::new(0),
        })
    }

    /// The resolved address of each instance, in order.
    pub fn addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.instances.iter().map(|i| i.addr)
    }

    /// The instance for a request of `method`: the owner of a task for tasks/* (see the module
    /// docs; `None` when the owner was already tried), else [`Pool::pick_excluding`]. The
    /// second value says how a tasks/* request was routed.
    pub fn pick_request(
        &self,
        method: Option<&str>,
        name: Option<&str>,
        headers: &http::HeaderMap,
        identity: Option<&Identity>,
        tried: Tried,
    ) -> (Option<usize>, Option<TaskRoute>) {
        let Some(task_id) = name.filter(|_| method.is_some_and(is_task_method)) else {
            return (self.pick_for(name, headers, identity, tried), None);
        };
        let route = match parse_owner_hint(task_id) {
            None => TaskRoute::NoHint,
            Some(hint) => match self.owner_of(hint) {
                Some(i) if tried.has(i) => return (None, Some(TaskRoute::OwnerUnreachable)),
                Some(i) => return (Some(i), Some(TaskRoute::Owner)),
                None => TaskRoute::UnknownOwner,
            },
        };
        (self.pick_for(name, headers, identity, tried), Some(route))
    }

    /// The instance whose task ids carry `hint`.
    pub fn owner_of(&self, hint: &str) -> Option<usize> {
        self.instances
            .iter()
            .position(|i| i.task_hints.iter().any(|h| h == hint))
    }

    /// The index of the instance to send a request to; `name` is the decoded `Mcp-Name`.
    pub fn pick(&self, name: Option<&str>, headers: &http::HeaderMap) -> Option<usize> {
        self.pick_excluding(name, headers, Tried::default())
    }

    /// Like [`Pool::pick`], skipping instances already tried for this request. With consistent
    /// hashing the next instance on the ring is chosen, so a retried key still lands on a
    /// stable second choice.
    pub fn pick_excluding(
        &self,
        name: Option<&str>,
        headers: &http::HeaderMap,
        tried: Tried,
    ) -> Option<usize> {
        self.pick_for(name, headers, None, tried)
    }

    /// Like [`Pool::pick_excluding`], for a caller verified by `auth` (`principal` and
    /// `claim:<name>` keys use the verified identity, never the raw token).
    pub fn pick_for(
        &self,
        name: Option<&str>,
        headers: &http::HeaderMap,
        identity: Option<&Identity>,
        tried: Tried,
    ) -> Option<usize> {
        let index_of = |b: &pingora::lb::Backend| {
            let addr = b.addr.as_inet()?;
            self.instances.iter().position(|i| i.addr == *addr)
        };
        // Usable instances first; when none is left, any untried one ("panic mode": better a
        // chance on a doubtful instance than a certain refusal).
        let panic = !(0..self.instances.len()).any(|i| !tried.has(i) && self.health.usable(i));
        let accept = |b: &pingora::lb::Backend, _: bool| {
            index_of(b).is_some_and(|i| !tried.has(i) && (panic || self.health.usable(i)))
        };
        let backend = match &self.selector {
            Selector::RoundRobin(lb) => lb.select_with(b"", 256, accept)?,
            Selector::Hash(lb, key) => {
                let k = shard_key_for(key, name, headers, identity).unwrap_or_else(|| {
                    self.counter
                        .fetch_add(1, Ordering::Relaxed)
                        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                });
                lb.select_with(&k.to_le_bytes(), 256, accept)?
            }
        };
        index_of(&backend)
    }
}

/// The set of instance indices a request has been sent to (pools hold at most 64 instances
/// for this purpose; later ones are never marked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tried(u64);

impl Tried {
    pub fn add(&mut self, i: usize) {
        if i < 64 {
            self.0 |= 1 << i;
        }
    }
    pub fn has(self, i: usize) -> bool {
        i < 64 && self.0 & (1 << i) != 0
    }
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }
}

/// The shard key of a request, hashed to 64 bits (so a bearer token never leaves this function).
pub fn shard_key(key: &HashKey, name: Option<&str>, headers: &http::HeaderMap) -> Option<u64> {
    shard_key_for(key, name, headers, None)
}

/// [`shard_key`] with the verified identity, when auth is on: `principal` is its subject.
pub fn shard_key_for(
    key: &HashKey,
    name: Option<&str>,
    headers: &http::HeaderMap,
    identity: Option<&Identity>,
) -> Option<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match (key, identity) {
        (HashKey::McpName, _) => name?.hash(&mut h),
        (HashKey::Principal, Some(id)) => id.subject.hash(&mut h),
        (HashKey::Principal, None) => bearer_token(headers)?.hash(&mut h),
        (HashKey::Header(n), _) => match crate::mcp::header::key_header(headers, n.as_str()) {
            // Admission refuses a repeated or shadowed key header; none shards.
            crate::mcp::header::KeyHeader::One(v) => v.hash(&mut h),
            _ => return None,
        },
        (HashKey::Claim(c), id) => id?.claim_text(c)?.hash(&mut h),
        (HashKey::Param(n), _) => match crate::mcp::header::claim(headers, n.as_str(), true) {
            crate::mcp::header::Claim::Present(v) => v.hash(&mut h),
            _ => return None,
        },
    }
    Some(h.finish())
}

#[cfg(test)]
mod tests;
