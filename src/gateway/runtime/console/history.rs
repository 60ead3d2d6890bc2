//! The history's sampler and its endpoint: a background task reads the metrics and the pools'
//! balancer state once a second into [`History`] (the rings live in
//! [`crate::gateway::telemetry::history`]); `GET /-/history` answers both rings as JSON. The
//! history belongs to the process, not to one config: it carries over a reload.

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use crate::gateway::journey::live::Live;
use crate::gateway::telemetry::history::Cumulative;
use crate::gateway::telemetry::history::{History, Load, MAX_INSTANCES};

/// The history shared by the sampler and the admin listener.
pub(crate) type Shared = Arc<Mutex<History>>;

/// The history of a process starting now (its metrics are all zero).
pub(crate) fn starting_now() -> Shared {
    Arc::new(Mutex::new(History::since(now_ms())))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Take one reading now.
pub(crate) fn sample(live: &Live, history: &Shared) {
    let gw = live.load();
    let reading = Cumulative::read(&gw.metrics.registry.gather());
    let mut instances = Vec::new();
    let mut h = history.lock().unwrap_or_else(|e| e.into_inner());
    'pools: for p in gw.pools.iter() {
        let pool = h.names.get(&p.name);
        for (i, inst) in p.instances.iter().enumerate() {
            if instances.len() == MAX_INSTANCES {
                break 'pools;
            }
            instances.push(Load {
                pool: pool.clone(),
                name: h.names.get(&inst.name),
                in_flight: p.loads[i].in_flight(),
                latency_ms: (p.loads[i].latency_ns() / 1e6) as f32,
                up: p.health.usable(i),
            });
        }
    }
    h.record(now_ms(), reading, instances);
}

/// `GET /-/history`.
pub(crate) fn json(history: &Shared) -> String {
    let h = history.lock().unwrap_or_else(|e| e.into_inner());
    h.json(now_ms()).to_string()
}

/// The background task: one reading a second, on the gateway's own runtime.
pub(crate) struct Sampler {
    pub(crate) live: Arc<Live>,
    pub(crate) history: Shared,
}

#[async_trait]
impl BackgroundService for Sampler {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tick.tick() => sample(&self.live, &self.history),
            }
        }
    }
}
