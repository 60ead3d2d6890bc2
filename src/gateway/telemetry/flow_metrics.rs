//! The MRTR flow metrics of [`crate::gateway::telemetry::flows`]: rounds, durations, waits between rounds, how
//! flows end, where retry legs go. Labels are bounded like every other metric (see
//! [`crate::gateway::telemetry::metrics`]: `method` from the protocol's list, `name` from the bounded name labels).

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

/// The flow metrics (registered once, kept across reloads).
#[derive(Clone)]
pub struct FlowMetrics {
    pub rounds: HistogramVec,
    pub duration: HistogramVec,
    pub round_wait: HistogramVec,
    pub flows: IntCounterVec,
    pub placement: IntCounterVec,
    pub untracked: IntCounterVec,
    pub evicted: IntCounter,
    pub tracked: IntGauge,
    /// Tasks by tool ([`crate::gateway::telemetry::task_count`]).
    pub tasks: crate::gateway::telemetry::task_count::TaskMetrics,
}

impl FlowMetrics {
    pub(crate) fn register(r: &Registry) -> prometheus::Result<Self> {
        let mn = ["method", "name"];
        let times = vec![
            0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
        ];
        let hist =
            |name: &str, help: &str, buckets: Vec<f64>| -> prometheus::Result<HistogramVec> {
                let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), &mn)?;
                r.register(Box::new(h.clone()))?;
                Ok(h)
            };
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> prometheus::Result<IntCounterVec> {
                let c = IntCounterVec::new(Opts::new(name, help), labels)?;
                r.register(Box::new(c.clone()))?;
                Ok(c)
            };
        let m = FlowMetrics {
            rounds: hist("mrtr_flow_rounds", "Legs of each completed MRTR flow (2 = one input_required, then complete).", vec![2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0])?,
            duration: hist("mrtr_flow_duration_seconds", "From a completed MRTR flow's first request to its complete result.", times.clone())?,
            round_wait: hist("mrtr_round_wait_seconds", "From an input_required answer to the request of the next round (the user's think time).", times)?,
            flows: counter("mrtr_flows_total", "MRTR flows that ended, by outcome: completed, failed (an error ended it) or abandoned (its state was not seen again within flows.timeout).", &["method", "name", "outcome"])?,
            placement: counter("mrtr_retry_leg_placement_total", "Retry legs of followed flows by where they went: same (the instance of the previous leg) or other.", &["method", "name", "instance"])?,
            untracked: counter("mrtr_untracked_legs_total", "Retry legs whose requestState this replica does not follow (expired, evicted, or minted through another replica).", &mn)?,
            evicted: IntCounter::new("mrtr_flows_evicted_total", "Flows dropped unfinished because flows.max_tracked were followed at once.")?,
            tracked: IntGauge::new("mrtr_flows_tracked", "Flows followed now (waiting for their next leg).")?,
            tasks: crate::gateway::telemetry::task_count::TaskMetrics::register(r)?,
        };
        r.register(Box::new(m.evicted.clone()))?;
        r.register(Box::new(m.tracked.clone()))?;
        Ok(m)
    }
}
