//! The balancer's metrics: what it sees of each instance (the requests it counts as load and
//! the latency estimate it compares), published at each `/metrics` scrape from the live state,
//! and how often a bounded hash pool sent a key past its home.

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry};

use super::{load, Pool};

pub struct BalanceMetrics {
    /// Requests sent past their key's home because it was over `load_bound`, by pool.
    pub moved: IntCounterVec,
    load: IntGaugeVec,
    latency: GaugeVec,
    weight: GaugeVec,
}

impl BalanceMetrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let moved = IntCounterVec::new(
            Opts::new(
                "balance_hash_moved_total",
                "Requests of a bounded hash pool (load_bound) sent past their key's home instance, which was over its bound.",
            ),
            &["pool"],
        )?;
        let load = IntGaugeVec::new(
            Opts::new(
                "upstream_balancer_load",
                "Requests the balancer counts as in flight on each instance (open subscriptions/listen streams excluded).",
            ),
            &["pool", "upstream"],
        )?;
        let latency = GaugeVec::new(
            Opts::new(
                "upstream_latency_ewma_seconds",
                "The balancer's peak-sensitive moving average of each instance's time to response head (decayed to now).",
            ),
            &["pool", "upstream"],
        )?;
        let weight = GaugeVec::new(
            Opts::new(
                "upstream_effective_weight",
                "Each instance's weight times its slow-start ramp (the share it takes now).",
            ),
            &["pool", "upstream"],
        )?;
        registry.register(Box::new(moved.clone()))?;
        registry.register(Box::new(load.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(weight.clone()))?;
        Ok(BalanceMetrics {
            moved,
            load,
            latency,
            weight,
        })
    }

    /// Set the gauges from the pools' live state (at a scrape).
    pub fn publish(&self, pools: &[Pool]) {
        let now = load::now_ns();
        for p in pools {
            for (i, inst) in p.instances.iter().enumerate() {
                let labels = [p.name.as_str(), inst.name.as_str()];
                let l = &p.loads[i];
                self.load
                    .with_label_values(&labels)
                    .set(i64::from(l.in_flight()));
                let secs = l.latency_ns(now, p.decay) / 1e9;
                self.latency.with_label_values(&labels).set(secs);
                let w = p.effective_weight(i, now);
                self.weight.with_label_values(&labels).set(w);
            }
        }
    }

    /// Forget an instance a reload took out of its pool.
    pub fn forget(&self, pool: &str, instance: &str) {
        let labels = [pool, instance];
        let _ = self.load.remove_label_values(&labels);
        let _ = self.latency.remove_label_values(&labels);
        let _ = self.weight.remove_label_values(&labels);
    }
}
