//! The counts that make a report truthful beyond latencies: the error distribution with the
//! upstream's own messages (grouped by kind, status, code and message, and counted), the content
//! checks (passed / failed per check, with a sample of what was found), the flows whose
//! elicitations were declined or cancelled on purpose, and per-stage figures of a ramped run.
//! Held inside [`super::measure::Measures`] (one per shard, merged at the end).

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::stats::{new_hist, LegError};

/// At most this many distinct error groups are kept; later distinct ones are counted together.
pub(crate) const MAX_GROUPS: usize = 64;
/// Messages are cut to this many characters.
pub(crate) const MAX_MESSAGE: usize = 200;
/// The message of the group that collects errors past [`MAX_GROUPS`].
pub(crate) const OTHER_MESSAGES: &str = "(other messages: too many distinct ones to list)";

/// What groups errors: the kind, the HTTP status, the JSON-RPC code and the message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ErrorKey {
    pub kind: &'static str,
    pub status: Option<u16>,
    pub code: Option<i64>,
    pub message: String,
}

/// An [`ErrorKey`] as read from a report (its kind interned on the way in).
#[derive(Deserialize)]
struct ErrorKeyWire {
    kind: String,
    status: Option<u16>,
    code: Option<i64>,
    message: String,
}

impl<'de> Deserialize<'de> for ErrorKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = ErrorKeyWire::deserialize(d)?;
        Ok(ErrorKey {
            kind: super::wire::intern(&w.kind),
            status: w.status,
            code: w.code,
            message: w.message,
        })
    }
}

/// Counts of one content check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckCount {
    pub passed: u64,
    pub failed: u64,
    /// What the first failure found.
    pub sample: Option<String>,
}

/// Figures of one ramp stage (legs and flows by the time they ended).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageStats {
    pub requests: u64,
    pub errors: u64,
    pub flows_completed: u64,
    #[serde(with = "super::wire::hist")]
    pub hist: Histogram<u64>,
}

impl Default for StageStats {
    fn default() -> Self {
        StageStats {
            requests: 0,
            errors: 0,
            flows_completed: 0,
            hist: new_hist(),
        }
    }
}

/// See the module documentation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tally {
    #[serde(with = "super::wire::pairs")]
    pub errors: BTreeMap<ErrorKey, u64>,
    /// Per check label, in the order the checks were declared (label → counts).
    pub checks: BTreeMap<String, CheckCount>,
    /// Flows that answered an elicitation with `decline` / `cancel` on purpose.
    pub declined: u64,
    pub cancelled: u64,
    pub stages: Vec<StageStats>,
}

/// `s` cut to [`MAX_MESSAGE`] characters, on one line.
pub(crate) fn clip(s: &str) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let t = one_line.trim();
    if t.chars().count() > MAX_MESSAGE {
        format!("{}…", t.chars().take(MAX_MESSAGE).collect::<String>())
    } else {
        t.to_string()
    }
}

impl Tally {
    pub(crate) fn error(&mut self, e: &LegError) {
        let mut key = ErrorKey {
            kind: e.kind,
            status: e.status,
            code: e.code,
            message: e.message.as_deref().map(clip).unwrap_or_default(),
        };
        if !self.errors.contains_key(&key) && self.errors.len() >= MAX_GROUPS {
            key.message = OTHER_MESSAGES.into();
        }
        *self.errors.entry(key).or_default() += 1;
    }

    pub(crate) fn check(&mut self, label: &str, outcome: Result<(), String>) {
        let c = match self.checks.get_mut(label) {
            Some(c) => c,
            None => self.checks.entry(label.to_string()).or_default(),
        };
        match outcome {
            Ok(()) => c.passed += 1,
            Err(why) => {
                c.failed += 1;
                if c.sample.is_none() {
                    c.sample = Some(clip(&why));
                }
            }
        }
    }

    fn stage(&mut self, i: usize) -> &mut StageStats {
        if self.stages.len() <= i {
            self.stages.resize_with(i + 1, StageStats::default);
        }
        &mut self.stages[i]
    }

    pub(crate) fn stage_leg(&mut self, i: usize, latency: Duration, error: bool) {
        let s = self.stage(i);
        s.requests += 1;
        s.errors += u64::from(error);
        let _ = s.hist.record((latency.as_micros() as u64).max(1));
    }

    pub(crate) fn stage_flow_completed(&mut self, i: usize) {
        self.stage(i).flows_completed += 1;
    }

    /// Checks run and failed, over every check.
    pub fn check_totals(&self) -> (u64, u64) {
        self.checks
            .values()
            .fold((0, 0), |(r, f), c| (r + c.passed + c.failed, f + c.failed))
    }

    /// Error groups, most frequent first.
    pub fn error_groups(&self) -> Vec<(&ErrorKey, u64)> {
        let mut v: Vec<(&ErrorKey, u64)> = self.errors.iter().map(|(k, n)| (k, *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        v
    }

    pub(crate) fn merge(&mut self, o: &Tally) {
        for (k, n) in &o.errors {
            let key = if !self.errors.contains_key(k) && self.errors.len() >= MAX_GROUPS {
                ErrorKey {
                    message: OTHER_MESSAGES.into(),
                    ..k.clone()
                }
            } else {
                k.clone()
            };
            *self.errors.entry(key).or_default() += n;
        }
        for (k, c) in &o.checks {
            let m = self.checks.entry(k.clone()).or_default();
            m.passed += c.passed;
            m.failed += c.failed;
            if m.sample.is_none() {
                m.sample.clone_from(&c.sample);
            }
        }
        self.declined += o.declined;
        self.cancelled += o.cancelled;
        for (i, s) in o.stages.iter().enumerate() {
            let m = self.stage(i);
            m.requests += s.requests;
            m.errors += s.errors;
            m.flows_completed += s.flows_completed;
            m.hist.add(&s.hist).expect("auto-resizing histogram");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: &'static str, code: Option<i64>, msg: &str) -> LegError {
        LegError {
            kind,
            status: Some(200),
            code,
            message: Some(msg.into()),
        }
    }

    #[test]
    fn errors_group_by_message_and_are_bounded() {
        let mut a = Tally::default();
        for _ in 0..3 {
            a.error(&err(
                "jsonrpc_error",
                Some(-32602),
                "Tool create_repo not found",
            ));
        }
        a.error(&err("tool_error", None, "quota\nexceeded"));
        let mut b = Tally::default();
        b.error(&err(
            "jsonrpc_error",
            Some(-32602),
            "Tool create_repo not found",
        ));
        for i in 0..100 {
            b.error(&err("tool_error", None, &format!("unique {i}")));
        }
        a.merge(&b);
        let groups = a.error_groups();
        // Most common first: the catch-all group, then the repeated message.
        assert_eq!(groups[0].0.message, OTHER_MESSAGES);
        assert_eq!(groups[1].0.message, "Tool create_repo not found");
        assert_eq!(groups[1].1, 4);
        assert!(a.errors.len() <= MAX_GROUPS + 1);
        assert_eq!(a.errors.values().sum::<u64>(), 105);
        assert!(a.errors.keys().any(|k| k.message == "quota exceeded"));
        assert!(a.errors.keys().any(|k| k.message == OTHER_MESSAGES));
        assert_eq!(clip(&"x".repeat(500)).chars().count(), MAX_MESSAGE + 1);
    }

    #[test]
    fn checks_and_stages_count_and_merge() {
        let mut a = Tally::default();
        a.check("isError=false", Ok(()));
        a.check("isError=false", Err("isError is true".into()));
        a.stage_leg(1, Duration::from_millis(3), true);
        a.stage_flow_completed(1);
        let mut t = Tally::default();
        t.merge(&a);
        t.merge(&a);
        assert_eq!(t.check_totals(), (4, 2));
        assert_eq!(
            t.checks["isError=false"].sample.as_deref(),
            Some("isError is true")
        );
        assert_eq!(t.stages.len(), 2);
        assert_eq!(
            (
                t.stages[1].requests,
                t.stages[1].errors,
                t.stages[1].flows_completed
            ),
            (2, 2, 2)
        );
        assert_eq!(t.stages[0].requests, 0);
    }
}
