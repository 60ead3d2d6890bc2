//! A task request in the run's measures: its second of the timeline, the live window, its error
//! in the run's totals, and its own counts in [`super::task_measure::TaskMeasures`]. An `impl`
//! of [`Measures`] of its own, beside the measures and the task measures it joins (both below
//! it).

use std::time::Duration;

use super::measure::{LegError, Measures};
use super::task_measure::TaskReq;

impl Measures {
    /// Record one task request in the run's totals (timeline, live window, errors) and in
    /// [`super::task_measure::TaskMeasures`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_task_req(
        &mut self,
        kind: TaskReq,
        latency: Duration,
        at_sec: usize,
        error: Option<LegError>,
        instance: Option<&[u8]>,
        owner: Option<&[u8]>,
    ) {
        let _ = self.window.record((latency.as_micros() as u64).max(1));
        self.bucket(at_sec).requests += 1;
        if let Some(e) = &error {
            self.count_error(e, at_sec);
        }
        self.tasks
            .record_req(kind, latency, error.is_some(), instance, owner);
    }
}
