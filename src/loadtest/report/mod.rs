//! The result of a run ([`Report`]): figures derived from the merged measures, the checks that
//! turn a run into a test, and three renderings: [`text`] (summary table), [`json`] (schema
//! `mcp-edge.loadtest/v1`) and [`html`] (one self-contained file with inline SVG charts).

pub mod html;
pub mod json;
pub mod text;

use std::time::Duration;

use hdrhistogram::Histogram;

use super::flows::Scenario;
use super::measure::{LegKind, Measures};
use super::LoadTestArgs;

/// Percentiles reported for every latency distribution.
pub const PERCENTILES: &[f64] = &[50.0, 90.0, 99.0, 99.9];

/// The full result of one load test.
#[derive(Debug, Clone)]
pub struct Report {
    /// The options it ran with.
    pub args: LoadTestArgs,
    pub scenario: Scenario,
    pub started_unix_ms: u64,
    pub elapsed: Duration,
    pub measures: Measures,
    /// p99 latency (µs) of the legs answered in each second, from the live ticker.
    pub p99_timeline_us: Vec<Option<u64>>,
}

/// A latency distribution summarized, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let q = |p: f64| ms(h.value_at_quantile(p / 100.0));
        LatencySummary {
            count: h.len(),
            min_ms: ms(h.min()),
            mean_ms: h.mean() / 1000.0,
            p50_ms: q(50.0),
            p90_ms: q(90.0),
            p99_ms: q(99.0),
            p999_ms: q(99.9),
            max_ms: ms(h.max()),
        }
    }
}

/// Points of a percentile curve: (percentile, ms), spaced evenly in log(1/(1-p)).
pub fn percentile_curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut pts = Vec::new();
    // 0 .. 5 "nines" in steps of 0.1 decade.
    let mut nines = 0.0f64;
    while nines <= 5.0 + 1e-9 {
        let p = 1.0 - 10f64.powf(-nines);
        pts.push((p * 100.0, ms(h.value_at_quantile(p))));
        // Stop once the curve reaches the max: further points repeat it.
        if (1.0 - p) * (h.len() as f64) < 1.0 {
            break;
        }
        nines += 0.1;
    }
    pts.push((100.0, ms(h.max())));
    pts
}

impl Report {
    pub fn new(
        args: LoadTestArgs,
        scenario: Scenario,
        started_unix_ms: u64,
        elapsed: Duration,
        measures: Measures,
        p99_timeline_us: Vec<Option<u64>>,
    ) -> Self {
        Report {
            args,
            scenario,
            started_unix_ms,
            elapsed,
            measures,
            p99_timeline_us,
        }
    }

    pub fn requests(&self) -> u64 {
        self.measures.requests()
    }

    pub fn errors(&self) -> u64 {
        self.measures.errors()
    }

    pub fn error_rate(&self) -> f64 {
        match self.requests() {
            0 => 0.0,
            n => self.errors() as f64 / n as f64,
        }
    }

    /// Requests per second over the whole run.
    pub fn request_rate(&self) -> f64 {
        self.requests() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Flows started but neither completed, failed nor abandoned (cut off at the end).
    pub fn flows_interrupted(&self) -> u64 {
        let m = &self.measures;
        m.flows_started
            .saturating_sub(m.flows_completed + m.flows_failed + m.flows_abandoned)
    }

    /// Fraction of retry legs served by a different instance than leg 1 of their flow.
    pub fn cross_instance_fraction(&self) -> Option<f64> {
        self.measures.landing.cross_fraction()
    }

    pub fn latency(&self, kind: LegKind) -> LatencySummary {
        LatencySummary::of(&self.measures.leg(kind).hist)
    }

    pub fn flow_latency(&self) -> LatencySummary {
        LatencySummary::of(&self.measures.flows_hist)
    }

    /// Operations merged by label (two flows may call the same tool).
    pub fn operations(&self) -> Vec<super::measure::OpStats> {
        let mut out: Vec<super::measure::OpStats> = Vec::new();
        for o in &self.measures.ops {
            match out.iter_mut().find(|x| x.label == o.label) {
                Some(x) => {
                    x.legs
                        .hist
                        .add(&o.legs.hist)
                        .expect("auto-resizing histogram");
                    x.legs.requests += o.legs.requests;
                    x.legs.errors += o.legs.errors;
                    x.flows.add(&o.flows).expect("auto-resizing histogram");
                    x.completed += o.completed;
                    x.failed += o.failed;
                    x.abandoned += o.abandoned;
                }
                None => out.push(o.clone()),
            }
        }
        out
    }

    /// The checks asked for by `args` (`--expect-cross-instance`, `--max-error-rate`), each as
    /// (name, passed, human-readable reason).
    pub fn check_results(&self, args: &LoadTestArgs) -> Vec<(&'static str, bool, String)> {
        let mut out = Vec::new();
        if let Some(want) = args.expect_cross_instance {
            let l = &self.measures.landing;
            match self.cross_instance_fraction() {
                None => out.push((
                    "expect_cross_instance",
                    false,
                    format!(
                        "no retry leg with a known instance on both legs ({} retry legs answered; is the {:?} \
                         response header set?), so the cross-instance share cannot reach {:.1}%",
                        l.retry_known + l.retry_unknown,
                        args.upstream_header,
                        want * 100.0
                    ),
                )),
                Some(f) => out.push((
                    "expect_cross_instance",
                    f >= want,
                    format!(
                        "{:.1}% of retry legs ({} of {}) landed on a different instance than leg 1 (required ≥ {:.1}%)",
                        f * 100.0,
                        l.cross,
                        l.retry_known,
                        want * 100.0
                    ),
                )),
            }
        }
        if let Some(max) = args.max_error_rate {
            let rate = self.error_rate();
            let retry = self.measures.leg(LegKind::Retry);
            out.push((
                "max_error_rate",
                rate <= max,
                format!(
                    "error rate {:.3}% ({} errors in {} requests; {} failed retry legs, {} abandoned flows) \
                     (allowed ≤ {:.3}%)",
                    rate * 100.0,
                    self.errors(),
                    self.requests(),
                    retry.errors,
                    self.measures.flows_abandoned,
                    max * 100.0
                ),
            ));
        }
        if self.requests() == 0
            && (args.expect_cross_instance.is_some() || args.max_error_rate.is_some())
        {
            out.push(("requests_sent", false, "no request was sent".into()));
        }
        out
    }

    /// The failed checks, human-readable (empty when every check passed).
    pub fn check(&self, args: &LoadTestArgs) -> Vec<String> {
        self.check_results(args)
            .into_iter()
            .filter(|(_, ok, _)| !ok)
            .map(|(_, _, why)| why)
            .collect()
    }

    /// The summary table printed at the end of a run.
    pub fn summary_text(&self) -> String {
        text::render(self)
    }

    /// Every figure, schema `mcp-edge.loadtest/v1`.
    pub fn to_json(&self) -> serde_json::Value {
        json::render(self)
    }

    /// One self-contained HTML page with inline SVG charts and no external URL.
    pub fn to_html(&self) -> String {
        html::render(self)
    }

    /// The target without its scheme (reports carry no URL).
    pub fn target_display(&self) -> String {
        let t = &self.args.target;
        t.split_once("://")
            .map_or(t.as_str(), |(_, rest)| rest)
            .to_string()
    }

    pub fn mode_display(&self) -> String {
        match self.args.rate {
            Some(r) => format!("open loop, {r} flows/s"),
            None => format!("closed loop, {} workers", self.args.concurrency),
        }
    }
}
