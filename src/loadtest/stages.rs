//! Ramp stages (`--stages 10s:16,30s:64,10s:0`): the load level moves linearly from the level
//! before a stage to the stage's target over its duration, as k6's `stages` do. Closed loop: the
//! level is the number of active workers, starting from 0. Open loop (`--rate R`): the level is
//! flows per second, starting from R. Pure.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One stage: reach `target` at the end of `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    #[serde(
        rename = "duration_s",
        serialize_with = "super::wire::ser_secs",
        deserialize_with = "super::wire::de_secs"
    )]
    pub duration: Duration,
    pub target: f64,
}

/// The stages of a run, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Stages(pub Vec<Stage>);

/// Parse `DURATION:TARGET[,DURATION:TARGET...]` (durations as `--duration` takes them).
pub(crate) fn parse_stages(s: &str) -> Result<Stages, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (d, t) = part
            .split_once(':')
            .ok_or_else(|| format!("stage {part:?}: write DURATION:TARGET, e.g. 30s:64"))?;
        let duration =
            crate::config::parse_duration(d.trim()).map_err(|e| format!("stage {part:?}: {e}"))?;
        let target: f64 = t
            .trim()
            .parse()
            .map_err(|_| format!("stage {part:?}: the target {t:?} is not a number"))?;
        if duration.is_zero() || !(target.is_finite() && target >= 0.0) {
            return Err(format!(
                "stage {part:?}: the duration must be positive and the target at least 0"
            ));
        }
        out.push(Stage { duration, target });
    }
    if out.is_empty() {
        return Err("--stages needs at least one DURATION:TARGET".into());
    }
    Ok(Stages(out))
}

impl Stages {
    /// The run length: every stage's duration.
    pub(crate) fn total(&self) -> Duration {
        self.0.iter().map(|s| s.duration).sum()
    }

    /// The stage running at `t` since the start (the last one after the end).
    pub(crate) fn index_at(&self, t: Duration) -> usize {
        let mut end = Duration::ZERO;
        for (i, s) in self.0.iter().enumerate() {
            end += s.duration;
            if t < end {
                return i;
            }
        }
        self.0.len().saturating_sub(1)
    }

    /// The level at `t`, ramping from `start` before the first stage.
    pub(crate) fn level_at(&self, start: f64, t: Duration) -> f64 {
        let mut from = start;
        let mut begin = Duration::ZERO;
        for s in &self.0 {
            let end = begin + s.duration;
            if t < end {
                let f = (t - begin).as_secs_f64() / s.duration.as_secs_f64();
                return from + (s.target - from) * f;
            }
            from = s.target;
            begin = end;
        }
        from
    }

    /// The highest level reached.
    pub(crate) fn peak(&self, start: f64) -> f64 {
        self.0.iter().map(|s| s.target).fold(start, f64::max)
    }

    /// When the next flow of an open loop ramped from `rate` is due, after `due` for the one
    /// before: once one more flow's worth of `share` of the ramped rate (a shard's part) has
    /// accumulated in `credit`, looked at every `step` (exact spacing when the rate is high).
    pub(crate) fn next_due(
        &self,
        rate: f64,
        share: f64,
        step: Duration,
        due: &mut Duration,
        credit: &mut f64,
    ) {
        let dt = step.as_secs_f64();
        loop {
            let r = self.level_at(rate, *due) * share;
            if r * dt >= 1.0 {
                *due += Duration::from_secs_f64(1.0 / r);
                return;
            }
            *credit += r * dt;
            *due += step;
            if *credit >= 1.0 {
                *credit -= 1.0;
                return;
            }
            if *due >= self.total() {
                return;
            }
        }
    }

    /// (start, end) of stage `i` since the start of the run.
    pub(crate) fn span(&self, i: usize) -> (Duration, Duration) {
        let begin: Duration = self.0[..i].iter().map(|s| s.duration).sum();
        (begin, begin + self.0[i].duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_ramp() {
        let s = parse_stages("10s:16, 30s:64,10s:0").unwrap();
        assert_eq!(s.0.len(), 3);
        assert_eq!(s.total(), Duration::from_secs(50));
        let at = |secs: f64| s.level_at(0.0, Duration::from_secs_f64(secs));
        assert_eq!(at(0.0), 0.0);
        assert_eq!(at(5.0), 8.0);
        assert_eq!(at(10.0), 16.0);
        assert_eq!(at(25.0), 40.0);
        assert_eq!(at(45.0), 32.0);
        assert_eq!(at(60.0), 0.0);
        assert_eq!(s.peak(0.0), 64.0);
        assert_eq!(s.index_at(Duration::from_secs(9)), 0);
        assert_eq!(s.index_at(Duration::from_secs(10)), 1);
        assert_eq!(s.index_at(Duration::from_secs(99)), 2);
        assert_eq!(
            s.span(1),
            (Duration::from_secs(10), Duration::from_secs(40))
        );
        assert_eq!(s.level_at(20.0, Duration::from_secs(5)), 18.0);
        for bad in ["", "10s", "10s:x", "0s:5", "10s:-1", "ten:5"] {
            assert!(parse_stages(bad).is_err(), "{bad}");
        }
    }
}
