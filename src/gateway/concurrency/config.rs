//! `concurrency_limits:` how many requests may be in flight at once per route, per tool, or per
//! group of tools, so that one slow tool cannot take a pool's capacity from the others. The
//! schema and its validation live here; the gateway's side is `gateway::concurrency::stages`.
//! The concurrency component's section, `crate::config::concurrency` (included by path from
//! `src/config/mod.rs`); a pool's own limit, `pools.<name>.concurrency`, is
//! `crate::config::adaptive`.

use serde::Deserialize;
use std::time::Duration;

use super::{ConfigError, LimitMatch, Positions};

/// One concurrency limit.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyLimitConfig {
    /// Names the limit in metrics, logs and the 503 message.
    pub name: String,
    /// Which requests the limit covers (all, when empty): route, method and name patterns.
    #[serde(rename = "match", default)]
    pub matcher: LimitMatch,
    /// Most requests in flight at once (per key, see `per`).
    pub max_in_flight: u32,
    /// `shared` (default): one count for every request the limit covers; `name`: one count per
    /// tool, prompt or resource name.
    #[serde(default)]
    pub per: ConcurrencyKey,
    /// Wait for a slot instead of refusing at once (bounded in count and time).
    #[serde(default)]
    pub queue: Option<QueueConfig>,
    /// The `Retry-After` of a refusal (whole seconds, rounded up).
    #[serde(default = "d_retry_after", with = "super::humantime_serde_compat")]
    pub retry_after: Duration,
    /// Most names counted apart with `per: name`; further names share one overflow count.
    #[serde(default = "d_max_keys")]
    pub max_keys: usize,
}

/// What one count of a concurrency limit covers.
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConcurrencyKey {
    #[default]
    Shared,
    Name,
}

/// A bounded wait for a slot.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// Most requests waiting at once (per key); more are refused at once.
    pub max_waiting: usize,
    /// Longest wait; a request still waiting then is refused.
    #[serde(with = "super::humantime_serde_compat")]
    pub timeout: Duration,
}

fn d_retry_after() -> Duration {
    Duration::from_secs(1)
}
fn d_max_keys() -> usize {
    1000
}

/// Check the limits against each other and the route names.
pub(super) fn validate(
    limits: &[ConcurrencyLimitConfig],
    route_names: &[String],
    pos: &Positions,
    file: &str,
) -> Result<(), ConfigError> {
    let err = |path: String, message: String| ConfigError::at(file, pos.near(&path), message);
    for (i, l) in limits.iter().enumerate() {
        let at = format!("concurrency_limits[{i}]");
        if l.max_in_flight == 0 {
            return Err(err(
                format!("{at}.max_in_flight"),
                format!(
                    "{at}.max_in_flight: must be at least 1 (remove the limit to allow any number)"
                ),
            ));
        }
        if l.max_keys == 0 {
            return Err(err(
                format!("{at}.max_keys"),
                format!("{at}.max_keys: must be at least 1"),
            ));
        }
        if let Some(q) = &l.queue {
            if q.max_waiting == 0 || q.timeout.is_zero() {
                return Err(err(
                    format!("{at}.queue"),
                    format!("{at}.queue: max_waiting and timeout must be above 0 (remove queue to refuse at once)"),
                ));
            }
        }
        if let Some(r) = &l.matcher.route {
            if !route_names.contains(r) {
                return Err(err(
                    format!("{at}.match.route"),
                    format!(
                        "{at}.match.route: no route named {r:?}; routes: {}",
                        route_names.join(", ")
                    ),
                ));
            }
        }
        if limits[..i].iter().any(|o| o.name == l.name) {
            return Err(err(
                format!("{at}.name"),
                format!(
                    "{at}.name: {:?} is used twice; limit names must be unique",
                    l.name
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const MIN: &str =
        "pools:\n  default:\n    instances: [127.0.0.1:7001]\ndefault_route: {pool: default}\n";

    fn err(extra: &str) -> crate::config::ConfigError {
        Config::parse(&format!("{MIN}{extra}"), "g.yaml").unwrap_err()
    }

    #[test]
    fn limits_parse_with_defaults() {
        let c = Config::parse(
            &format!("{MIN}concurrency_limits:\n  - name: slow\n    match: {{name: deploy}}\n    max_in_flight: 2\n    per: name\n    queue: {{max_waiting: 4, timeout: 50ms}}\n"),
            "g.yaml",
        )
        .unwrap();
        let l = &c.concurrency_limits[0];
        assert_eq!(l.max_in_flight, 2);
        assert_eq!(l.per, super::ConcurrencyKey::Name);
        assert_eq!(l.retry_after, std::time::Duration::from_secs(1));
        assert_eq!(l.queue.as_ref().unwrap().max_waiting, 4);
    }

    #[test]
    fn bad_limits_name_the_file_line_and_key() {
        let e = err("concurrency_limits:\n  - name: a\n    max_in_flight: 0\n");
        assert_eq!(e.line, Some(7), "{e}");
        assert!(
            e.message.contains("concurrency_limits[0].max_in_flight"),
            "{e}"
        );
        assert_eq!(e.file, "g.yaml");
        let e = err(
            "concurrency_limits:\n  - name: a\n    max_in_flight: 1\n    match: {route: nope}\n",
        );
        assert_eq!(e.line, Some(8), "{e}");
        assert!(e.message.contains("no route named \"nope\""), "{e}");
        let e = err("concurrency_limits:\n  - name: a\n    max_in_flight: 1\n  - name: a\n    max_in_flight: 2\n");
        assert!(e.message.contains("used twice"), "{e}");
        let e = err("concurrency_limits:\n  - name: a\n    max_in_flight: 1\n    queue: {max_waiting: 0, timeout: 1s}\n");
        assert!(e.message.contains("queue"), "{e}");
        let e = err("concurrency_limits:\n  - name: a\n    max_inflight: 1\n");
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.message.contains("max_inflight"), "{e}");
        let e = err("concurrency_limits:\n  - name: a\n    max_in_flight: 1\n    per: tool\n");
        assert!(
            e.message.contains("shared") && e.message.contains("name"),
            "{e}"
        );
    }
}
