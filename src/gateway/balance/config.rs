//! `pools.<name>.outliers`: latency outlier detection, as Envoy's outlier detection ejects on
//! errors. Each `interval`, every instance that answered at least `min_samples` times is
//! compared with the pool's baseline (the `baseline` quantile of those instances' latencies, the
//! median by default): one more than `latency_ratio` times slower, and at least `min_gap`
//! slower, is ejected for `base_ejection`, doubled for each ejection in a row up to
//! `max_ejection`; at most `max_ejected_percent` of the pool is out at once. The detector is
//! `gateway::balance::stages::outliers`. Absent: off.
//!
//! The balance component's section, `crate::config::balance` (included by path from
//! `src/config/mod.rs`). The other balancing keys (`balance`, `hash_key`, `load_bound`,
//! `weights`, `slow_start`, `latency_decay`, `probe_*`) are fields of `pools.<name>` itself, so
//! they stay with the pool's section in `config/pools.rs`.

use serde::Deserialize;
use std::time::Duration;

use super::humantime_serde_compat;

/// `pools.<name>.outliers`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OutlierConfig {
    /// An instance whose latency is more than this many times the pool's baseline is an
    /// outlier (above 1; default 3).
    #[serde(default = "d_ratio")]
    pub latency_ratio: f64,
    /// ...and only if it is at least this much slower than the baseline, so that 1 ms against
    /// 4 ms is no outlier (default 10ms).
    #[serde(default = "d_min_gap", with = "humantime_serde_compat")]
    pub min_gap: Duration,
    /// Answers an instance must give in a window to be judged and to count in the baseline
    /// (default 10).
    #[serde(default = "d_min_samples")]
    pub min_samples: u32,
    /// The window: how often the pool is judged (default 10s).
    #[serde(default = "d_interval", with = "humantime_serde_compat")]
    pub interval: Duration,
    /// First ejection time; each further ejection in a row doubles it (default 30s).
    #[serde(default = "d_base", with = "humantime_serde_compat")]
    pub base_ejection: Duration,
    /// The longest ejection (default 5m).
    #[serde(default = "d_max", with = "humantime_serde_compat")]
    pub max_ejection: Duration,
    /// The most of the pool that may be out at once, in percent of its instances, counting
    /// every instance the pool cannot use (down, ejected for errors or for latency); at least
    /// one instance may always be ejected (default 10).
    #[serde(default = "d_percent")]
    pub max_ejected_percent: u32,
    /// The quantile of the judged instances' latencies an instance is compared with: 0.5 the
    /// median (the default: robust to a fast-failing minority), 0 the fastest instance (a slow
    /// majority is ejected as far as `max_ejected_percent` allows).
    #[serde(default = "d_baseline")]
    pub baseline: f64,
}

impl Default for OutlierConfig {
    fn default() -> Self {
        OutlierConfig {
            latency_ratio: d_ratio(),
            min_gap: d_min_gap(),
            min_samples: d_min_samples(),
            interval: d_interval(),
            base_ejection: d_base(),
            max_ejection: d_max(),
            max_ejected_percent: d_percent(),
            baseline: d_baseline(),
        }
    }
}

fn d_ratio() -> f64 {
    3.0
}
fn d_min_gap() -> Duration {
    Duration::from_millis(10)
}
fn d_min_samples() -> u32 {
    10
}
fn d_interval() -> Duration {
    Duration::from_secs(10)
}
fn d_base() -> Duration {
    Duration::from_secs(30)
}
fn d_max() -> Duration {
    Duration::from_secs(300)
}
fn d_percent() -> u32 {
    10
}
fn d_baseline() -> f64 {
    0.5
}

/// Checks of `pools.<name>.outliers`: `(key, message)` of the first failure.
pub(super) fn check(name: &str, pool: &super::PoolConfig) -> Result<(), (String, String)> {
    let Some(o) = &pool.outliers else {
        return Ok(());
    };
    let at = |k: &str| format!("pools.{name}.outliers.{k}");
    let fail = |k: &str, fix: String| Err((at(k), format!("{}: {fix}", at(k))));
    if pool.instances.len() < 2 {
        return Err((format!("pools.{name}.outliers"), format!(
            "pools.{name}.outliers: the pool has one instance, and an outlier is judged against the others; add instances or remove outliers"
        )));
    }
    if !(o.latency_ratio > 1.0 && o.latency_ratio <= 1000.0) {
        let v = o.latency_ratio;
        return fail("latency_ratio", format!(
            "{v} is out of range; write a factor above 1 and up to 1000, e.g. 3 (three times slower than the pool's median)"
        ));
    }
    if o.min_samples == 0 {
        return fail(
            "min_samples",
            "0 would judge an instance on no answer at all; write at least 1, e.g. 10".into(),
        );
    }
    if o.interval < Duration::from_millis(100) {
        let v = o.interval;
        return fail(
            "interval",
            format!("{v:?} is too short a window to judge anything; write at least 100ms (the default is 10s)"),
        );
    }
    if o.base_ejection.is_zero() {
        return fail(
            "base_ejection",
            "0s would eject nothing; write e.g. 30s".into(),
        );
    }
    if o.max_ejection < o.base_ejection {
        let (m, b) = (o.max_ejection, o.base_ejection);
        return fail("max_ejection", format!(
            "{m:?} is shorter than base_ejection ({b:?}); write at least {b:?}, e.g. 10 times base_ejection"
        ));
    }
    if !(1..=100).contains(&o.max_ejected_percent) {
        let v = o.max_ejected_percent;
        return fail("max_ejected_percent", format!(
            "{v} is out of range; write a percent from 1 to 100, e.g. 10 (at least one instance may always be ejected)"
        ));
    }
    if !(0.0..=1.0).contains(&o.baseline) {
        let v = o.baseline;
        return fail("baseline", format!(
            "{v} is not a quantile; write 0.5 for the median (the default) or 0 for the fastest instance"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn parse(outliers: &str, instances: &str) -> Result<Config, super::super::ConfigError> {
        let y = format!(
            "pools:\n  default:\n    instances: [{instances}]\n    outliers: {outliers}\ndefault_route: {{pool: default}}\n"
        );
        Config::parse(&y, "t.yaml")
    }

    #[test]
    fn defaults_and_a_full_block_load() {
        let two = "127.0.0.1:7001, 127.0.0.1:7002";
        let c = parse("{}", two).unwrap();
        assert_eq!(c.pools["default"].outliers, Some(OutlierConfig::default()));
        let c = parse("{latency_ratio: 5, min_gap: 2ms, min_samples: 3, interval: 1s, base_ejection: 2s, max_ejection: 20s, max_ejected_percent: 34, baseline: 0}", two).unwrap();
        let o = c.pools["default"].outliers.clone().unwrap();
        assert_eq!(
            (o.latency_ratio, o.min_samples, o.max_ejected_percent),
            (5.0, 3, 34)
        );
        assert_eq!(
            (o.interval, o.base_ejection),
            (Duration::from_secs(1), Duration::from_secs(2))
        );
        let none = Config::parse(
            "pools:\n  default:\n    instances: [127.0.0.1:7001]\ndefault_route: {pool: default}\n",
            "t.yaml",
        )
        .unwrap();
        assert_eq!(none.pools["default"].outliers, None);
    }

    #[test]
    fn bad_values_name_file_line_key_and_fix() {
        let two = "127.0.0.1:7001, 127.0.0.1:7002";
        let cases = [
            (
                "{latency_ratio: 1}",
                "pools.default.outliers.latency_ratio",
                "e.g. 3",
            ),
            (
                "{min_samples: 0}",
                "pools.default.outliers.min_samples",
                "at least 1",
            ),
            (
                "{interval: 10ms}",
                "pools.default.outliers.interval",
                "at least 100ms",
            ),
            (
                "{base_ejection: 0s}",
                "pools.default.outliers.base_ejection",
                "e.g. 30s",
            ),
            (
                "{base_ejection: 1m, max_ejection: 10s}",
                "pools.default.outliers.max_ejection",
                "at least 60s",
            ),
            (
                "{max_ejected_percent: 0}",
                "pools.default.outliers.max_ejected_percent",
                "from 1 to 100",
            ),
            (
                "{baseline: 2}",
                "pools.default.outliers.baseline",
                "0.5 for the median",
            ),
        ];
        for (block, key, fix) in cases {
            let e = parse(block, two).unwrap_err();
            let shown = e.to_string();
            assert!(shown.starts_with("t.yaml:4:"), "{block}: {shown}");
            assert!(
                shown.contains(&format!("{key}: ")) && shown.contains(fix),
                "{block}: {shown}"
            );
        }
        let e = parse("{}", "127.0.0.1:7001").unwrap_err().to_string();
        assert!(
            e.starts_with("t.yaml:4:") && e.contains("remove outliers"),
            "{e}"
        );
        let e = parse("{ratio: 3}", two).unwrap_err().to_string();
        assert!(
            e.contains("unknown field `ratio`") && e.contains("latency_ratio"),
            "{e}"
        );
    }
}
