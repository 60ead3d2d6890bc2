//! The result of a run ([`Report`]): figures derived from the merged measures, the checks that
//! turn a run into a test, and three renderings: [`text`] (summary table), [`json`] (schema
//! `mcp-edge.loadtest/v1`) and [`html`] (one self-contained file with inline SVG charts);
//! [`shards`] is what a report merged from a sharded run's shards says of them.

pub(crate) mod html;
mod html_charts;
mod html_findings;
mod html_svg;
#[cfg(test)]
mod html_tests;
pub(crate) mod json;
pub(crate) mod shards;
pub(crate) mod table;
pub(crate) mod tasks;
pub(crate) mod text;

use std::time::Duration;

use hdrhistogram::Histogram;

use super::flows::Scenario;
use super::measure::{LegKind, Measures};
use super::LoadTestArgs;

/// One error group as text: `jsonrpc_error 200 -32602 "Tool create_repo not found"`.
pub(crate) fn error_label(k: &crate::loadtest::tally::ErrorKey) -> String {
    let mut s = k.kind.to_string();
    if let Some(st) = k.status {
        s.push_str(&format!(" HTTP {st}"));
    }
    if let Some(c) = k.code {
        s.push_str(&format!(" code {c}"));
    }
    if !k.message.is_empty() {
        s.push_str(&format!(" {:?}", k.message));
    }
    s
}

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
    /// What the preflight learned (absent with `--no-preflight`).
    pub discovery: Option<crate::loadtest::preflight::Discovery>,
    /// `--scenario auto`: the tools left out, with the reason.
    pub excluded: Vec<(String, &'static str)>,
    /// Each second's latency histogram, encoded ([`crate::loadtest::wire::encode`]).
    pub windows: Vec<String>,
    /// A report merged from shards' reports: which shards it holds.
    pub merge: Option<shards::MergeInfo>,
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
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
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
pub(crate) fn percentile_curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
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
    pub(crate) fn new(
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
            discovery: None,
            excluded: Vec::new(),
            windows: Vec::new(),
            merge: None,
        }
    }

    pub fn requests(&self) -> u64 {
        self.measures.requests()
    }

    pub fn errors(&self) -> u64 {
        self.measures.errors()
    }

    pub(crate) fn error_rate(&self) -> f64 {
        match self.requests() {
            0 => 0.0,
            n => self.errors() as f64 / n as f64,
        }
    }

    /// Requests per second over the whole run.
    pub(crate) fn request_rate(&self) -> f64 {
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

    pub(crate) fn flow_latency(&self) -> LatencySummary {
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

    /// The most common error groups as `N × kind [status] [code] "message"`, for reasons.
    pub(crate) fn top_errors(&self, n: usize) -> String {
        let groups = self.measures.tally.error_groups();
        let parts: Vec<String> = groups
            .iter()
            .take(n)
            .map(|(k, c)| format!("{c} × {}", error_label(k)))
            .collect();
        parts.join("; ")
    }

    /// Why no retry leg has a known instance on both legs: the cause, told truthfully.
    fn no_cross_instance_reason(&self, args: &LoadTestArgs) -> String {
        let m = &self.measures;
        let l = &m.landing;
        let retry = m.leg(LegKind::Retry);
        let first = m.leg(LegKind::First);
        if retry.requests == 0 && first.errors > 0 {
            return format!(
                "no retry leg was sent because {} first legs failed (of {}; most common: {})",
                first.errors,
                first.requests,
                self.top_errors(2)
            );
        }
        if retry.requests == 0 {
            return format!(
                "no retry leg was sent: no flow was answered input_required ({} first legs, {} plain requests)",
                first.requests,
                m.leg(LegKind::Plain).requests
            );
        }
        format!(
            "the {:?} response header is absent and no result _meta names an instance on leg 1 or \
             the retry leg of {} retry legs, so where retry legs landed is unknown",
            args.upstream_header, l.retry_unknown
        )
    }

    /// The checks asked for by `args` (`--expect-cross-instance`, `--max-error-rate`,
    /// `--max-check-failure-rate`), each as (name, passed, human-readable reason).
    pub(crate) fn check_results(&self, args: &LoadTestArgs) -> Vec<(&'static str, bool, String)> {
        let mut out = Vec::new();
        if let Some(want) = args.expect_cross_instance {
            let l = &self.measures.landing;
            match self.cross_instance_fraction() {
                None => out.push((
                    "expect_cross_instance",
                    false,
                    format!(
                        "{}, so the cross-instance share cannot reach {:.1}%",
                        self.no_cross_instance_reason(args),
                        want * 100.0
                    ),
                )),
                Some(f) => out.push((
                    "expect_cross_instance",
                    f >= want,
                    format!(
                        "{:.1}% of retry legs ({} of {}) landed on a different instance than leg 1 (required ≥ {:.1}%){}",
                        f * 100.0,
                        l.cross,
                        l.retry_known,
                        want * 100.0,
                        match (f >= want, l.steered_total()) {
                            (true, _) => String::new(),
                            (false, 0) => "; the gateway's balancer placed them: set `mrtr: {retry_landing: elsewhere}` on the pool to send each retry leg to another instance".into(),
                            (false, _) => "; the gateway steered retry legs but too few instances were eligible".into(),
                        }
                    ),
                )),
            }
        }
        if let Some(max) = args.max_error_rate {
            let rate = self.error_rate();
            let retry = self.measures.leg(LegKind::Retry);
            let top = if self.errors() > 0 {
                format!("; most common: {}", self.top_errors(3))
            } else {
                String::new()
            };
            out.push((
                "max_error_rate",
                rate <= max,
                format!(
                    "error rate {:.3}% ({} errors in {} requests; {} failed retry legs, {} abandoned flows) \
                     (allowed ≤ {:.3}%){top}",
                    rate * 100.0,
                    self.errors(),
                    self.requests(),
                    retry.errors,
                    self.measures.flows_abandoned,
                    max * 100.0
                ),
            ));
        }
        let (run, failed) = self.measures.tally.check_totals();
        if let (Some(max), true) = (args.max_check_failure_rate, run > 0) {
            let rate = failed as f64 / run as f64;
            let worst = self
                .measures
                .tally
                .checks
                .iter()
                .filter(|(_, c)| c.failed > 0)
                .max_by_key(|(_, c)| c.failed)
                .map(|(l, c)| {
                    format!(
                        "; most failed: {l} ({} ×, e.g. {})",
                        c.failed,
                        c.sample.as_deref().unwrap_or("?")
                    )
                })
                .unwrap_or_default();
            out.push((
                "max_check_failure_rate",
                rate <= max,
                format!(
                    "{:.3}% of content checks failed ({failed} of {run}) (allowed ≤ {:.3}%){worst}",
                    rate * 100.0,
                    max * 100.0
                ),
            ));
        }
        if self.requests() == 0
            && (args.expect_cross_instance.is_some() || args.max_error_rate.is_some())
        {
            out.push(("requests_sent", false, "no request was sent".into()));
        }
        if let Some(m) = &self.merge {
            out.push(("all_shards", m.complete_or_allowed(), m.describe()));
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
    pub(crate) fn target_display(&self) -> String {
        let t = &self.args.target;
        t.split_once("://")
            .map_or(t.as_str(), |(_, rest)| rest)
            .to_string()
    }

    /// How the load was driven, and which shards it covers.
    pub(crate) fn mode_display(&self) -> String {
        let part = match (&self.merge, self.args.shard) {
            (Some(m), _) => format!(" · {}", m.headline()),
            (None, Some(s)) => format!(" · shard {} of the run", s.label()),
            (None, None) => String::new(),
        };
        format!("{}{part}", self.load_display())
    }

    fn load_display(&self) -> String {
        if let Some(st) = &self.args.stages {
            let parts: Vec<String> =
                st.0.iter()
                    .map(|s| format!("{:?}:{}", s.duration, s.target))
                    .collect();
            let unit = if self.args.rate.is_some() {
                "flows/s"
            } else {
                "workers"
            };
            return format!("stages {} ({unit})", parts.join(","));
        }
        match self.args.rate {
            Some(r) => format!("open loop, {r} flows/s"),
            None => format!("closed loop, {} workers", self.args.concurrency),
        }
    }
}
