//! The balancer's metrics: what it sees of each instance (the requests it counts as load, the
//! latency estimate it compares, whether it is ejected as a latency outlier), published at each
//! `/metrics` scrape from the live state, and how often a bounded hash pool sent a key past its
//! home.

pub(crate) use crate::gateway::balance::telemetry::BalanceMetrics;

use super::{load, Pool};

impl BalanceMetrics {
    /// Set the gauges from the pools' live state (at a scrape).
    pub(crate) fn publish(&self, pools: &[Pool]) {
        let now = load::now_ns();
        for p in pools {
            for (i, inst) in p.instances.iter().enumerate() {
                let labels = [p.name.as_str(), inst.name.as_str()];
                let l = &p.loads[i];
                self.load
                    .with_label_values(&labels)
                    .set(i64::from(l.in_flight()));
                let secs = l.latency_ns() / 1e9;
                self.latency.with_label_values(&labels).set(secs);
                let w = p.effective_weight(i, now);
                self.weight.with_label_values(&labels).set(w);
                // Only pools with outliers on have the gauge (a reload may have turned them off).
                if p.outliers.is_some() {
                    let out = p.health.outlier_for(i).is_some();
                    self.outlier_ejected
                        .with_label_values(&labels)
                        .set(i64::from(out));
                } else {
                    let _ = self.outlier_ejected.remove_label_values(&labels);
                }
            }
        }
    }

    /// Forget an instance a reload took out of its pool.
    pub(crate) fn forget(&self, pool: &str, instance: &str) {
        let labels = [pool, instance];
        let _ = self.load.remove_label_values(&labels);
        let _ = self.latency.remove_label_values(&labels);
        let _ = self.weight.remove_label_values(&labels);
        let _ = self.probes.remove_label_values(&labels);
        let _ = self.outlier_ejected.remove_label_values(&labels);
        let _ = self.outlier_ejections.remove_label_values(&labels);
    }
}
