//! `pools.<name>.concurrency`: how many requests the gateway lets into a pool at once, a limit it
//! finds by itself (`adaptive: true`: a gradient on the pool's latency, between `min` and `max`)
//! or a fixed `max`; what a shed request is told (`retry_after`); and the priority of legs of
//! calls already started (MRTR retry legs, `tasks/*`) over new calls (`first_leg_share`,
//! `priority_wait`). The gateway's side is `gateway::concurrency::stages` (its `adaptive` and
//! `pool` modules); docs/overload.md says why a gradient and how it settles.

use serde::Deserialize;
use std::time::Duration;

use super::humantime_serde_compat;

/// `pools.<name>.concurrency`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PoolConcurrency {
    /// `true`: the limit follows the pool's latency between `min` and `max` (a gradient: it
    /// grows while latency stays near the lowest seen, and falls as it rises past
    /// `tolerance` times that). `false` (the default): the limit is `max`, fixed.
    #[serde(default)]
    pub adaptive: bool,
    /// The lowest the adaptive limit goes.
    #[serde(default = "d_min")]
    pub min: u32,
    /// The highest the adaptive limit goes; the fixed limit with `adaptive: false`.
    #[serde(default = "d_max")]
    pub max: u32,
    /// Where the adaptive limit starts (default: `min` × 4, at most `max`).
    #[serde(default)]
    pub initial: Option<u32>,
    /// How much slower than the lowest latency seen the pool may answer before the limit falls
    /// (a ratio above 1; 1.5 by default).
    #[serde(default = "d_tolerance")]
    pub tolerance: f64,
    /// How often the limit is recomputed (from the latencies of the requests answered since,
    /// at least 8 of them).
    #[serde(default = "d_window", with = "humantime_serde_compat")]
    pub window: Duration,
    /// How long the lowest latency is remembered: an older low is forgotten, so a pool whose
    /// normal latency rose is measured again.
    #[serde(default = "d_min_rtt_window", with = "humantime_serde_compat")]
    pub min_rtt_window: Duration,
    /// The share of the limit new calls (first legs) may take; the rest is kept for legs of
    /// calls already started (requests carrying `inputResponses` or `requestState`) and
    /// `tasks/*` requests. Above 0, at most 1.
    #[serde(default = "d_first_leg_share")]
    pub first_leg_share: f64,
    /// How long a leg of a call already started may wait for a slot when the whole limit is
    /// taken (a new call never waits: it is shed at once). `0s`: never waits.
    #[serde(default = "d_priority_wait", with = "humantime_serde_compat")]
    pub priority_wait: Duration,
    /// The `Retry-After` of a shed request (whole seconds, rounded up).
    #[serde(default = "d_retry_after", with = "humantime_serde_compat")]
    pub retry_after: Duration,
    /// Tools with a limit of their own, by exact name (the same keys, without `tools`): a call
    /// of one takes a slot of its limit instead of the pool's, and its latency teaches only
    /// that limit, so a slow tool does not make the pool look slow, nor a fast one hide it.
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, PoolConcurrency>,
}

impl PoolConcurrency {
    /// The limit the pool starts with.
    pub fn start(&self) -> u32 {
        if !self.adaptive {
            return self.max;
        }
        self.initial
            .unwrap_or_else(|| self.min.saturating_mul(4))
            .clamp(self.min, self.max)
    }
}

fn d_min() -> u32 {
    4
}
fn d_max() -> u32 {
    1000
}
fn d_tolerance() -> f64 {
    1.5
}
fn d_window() -> Duration {
    Duration::from_millis(250)
}
fn d_min_rtt_window() -> Duration {
    Duration::from_secs(30)
}
fn d_first_leg_share() -> f64 {
    0.9
}
fn d_priority_wait() -> Duration {
    Duration::from_secs(1)
}
fn d_retry_after() -> Duration {
    Duration::from_secs(1)
}

/// Check one pool's `concurrency` and its tools': `Err((key, message))` names the key and the fix.
pub(super) fn check(name: &str, c: &PoolConcurrency) -> Result<(), (String, String)> {
    let at = format!("pools.{name}.concurrency");
    check_at(&at, c)?;
    for (tool, t) in &c.tools {
        let at = format!("{at}.tools.{tool}");
        if !t.tools.is_empty() {
            let key = format!("{at}.tools");
            return Err((
                key.clone(),
                format!("{key}: a tool's limit has no tools of its own; remove it"),
            ));
        }
        check_at(&at, t)?;
    }
    Ok(())
}

fn check_at(at: &str, c: &PoolConcurrency) -> Result<(), (String, String)> {
    let at = |k: &str| format!("{at}.{k}");
    let fail = |k: &str, fix: &str| Err((at(k), format!("{}: {fix}", at(k))));
    if c.min == 0 || c.max == 0 {
        return fail(
            if c.max == 0 { "max" } else { "min" },
            "must be at least 1 (a pool that admits nothing serves nothing)",
        );
    }
    // A fixed limit is `max`; `min` bounds only an adaptive one.
    if c.adaptive && c.max < c.min {
        return fail(
            "max",
            &format!("{} is below min ({}); raise max or lower min", c.max, c.min),
        );
    }
    if let Some(i) = c
        .initial
        .filter(|i| c.adaptive && !(c.min..=c.max).contains(i))
    {
        return fail(
            "initial",
            &format!(
                "{i} is outside min..max ({}..{}); pick a start in between",
                c.min, c.max
            ),
        );
    }
    if !(c.tolerance > 1.0 && c.tolerance <= 10.0) {
        return fail(
            "tolerance",
            "must be above 1 and at most 10 (a ratio of latencies; e.g. 1.5: the limit falls once the pool answers 1.5 times slower than its best)",
        );
    }
    if !(c.first_leg_share > 0.0 && c.first_leg_share <= 1.0) {
        return fail(
            "first_leg_share",
            "must be above 0 and at most 1 (e.g. 0.9: new calls take at most 90% of the limit)",
        );
    }
    if c.window.is_zero() || c.min_rtt_window < c.window {
        return fail(
            "window",
            "window must be above 0s and min_rtt_window at least window (e.g. window: 250ms, min_rtt_window: 30s)",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn parse(c: &str) -> Result<Config, crate::config::ConfigError> {
        Config::parse(
            &format!("pools:\n  default:\n    instances: [127.0.0.1:7001]\n    concurrency: {c}\n"),
            "g.yaml",
        )
    }

    #[test]
    fn defaults_and_start() {
        let c = parse("{adaptive: true, min: 2, max: 50}").unwrap();
        let p = c.pools["default"].concurrency.clone().unwrap();
        assert_eq!((p.start(), p.tolerance, p.first_leg_share), (8, 1.5, 0.9));
        let c = parse("{max: 30}").unwrap();
        assert_eq!(c.pools["default"].concurrency.as_ref().unwrap().start(), 30);
    }

    #[test]
    fn bad_settings_name_the_file_line_key_and_fix() {
        let e = parse("{adaptive: true, min: 10, max: 5}").unwrap_err();
        assert!(e.to_string().contains("g.yaml"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(
            e.message
                .contains("pools.default.concurrency.max: 5 is below min (10)"),
            "{e}"
        );
        let e = parse("{adaptive: true, first_leg_share: 0}").unwrap_err();
        assert!(
            e.message
                .contains("concurrency.first_leg_share: must be above 0"),
            "{e}"
        );
        let e = parse("{adaptive: true, tolerance: 1}").unwrap_err();
        assert!(e.message.contains("concurrency.tolerance"), "{e}");
        let e = parse("{tools: {deploy: {adaptive: true, min: 0}}}").unwrap_err();
        assert!(
            e.message
                .contains("pools.default.concurrency.tools.deploy.min: must be at least 1"),
            "{e}"
        );
        let e = parse("{tools: {deploy: {tools: {x: {}}}}}").unwrap_err();
        assert!(
            e.message
                .contains("concurrency.tools.deploy.tools: a tool's limit has no tools"),
            "{e}"
        );
        let e = parse("{adaptive: yes please}").unwrap_err();
        assert!(e.to_string().contains("adaptive"), "{e}");
    }
}
