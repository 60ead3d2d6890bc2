//! `flows:` MRTR flow tracking (how a multi-round call is followed across its legs), and
//! `tracing:` OpenTelemetry span export. The gateway's side is `gateway::telemetry::flows` and
//! `gateway::telemetry::trace`.

use serde::{Deserialize, Deserializer};
use std::time::Duration;

use super::{ConfigError, Positions};

/// Flow tracking: per replica, in memory, bounded.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowsConfig {
    /// Follow MRTR flows (on by default; it costs only on MRTR legs).
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// How long a flow waits for its next leg before it counts as abandoned.
    #[serde(default = "d_flow_timeout", with = "super::humantime_serde_compat")]
    pub timeout: Duration,
    /// Most flows followed at once; past it the oldest is dropped (counted as evicted).
    #[serde(default = "d_max_tracked")]
    pub max_tracked: usize,
}

impl Default for FlowsConfig {
    fn default() -> Self {
        FlowsConfig {
            enabled: true,
            timeout: d_flow_timeout(),
            max_tracked: d_max_tracked(),
        }
    }
}

fn d_true() -> bool {
    true
}
fn d_flow_timeout() -> Duration {
    Duration::from_secs(600)
}
fn d_max_tracked() -> usize {
    50_000
}

/// Span export with OpenTelemetry OTLP over HTTP/protobuf. Off by default.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TracingConfig {
    #[serde(default)]
    pub enabled: bool,
    /// The OTLP/HTTP traces endpoint (plain HTTP).
    #[serde(default = "d_endpoint")]
    pub endpoint: String,
    /// The share of new traces recorded (0.0 to 1.0); a sampled or unsampled incoming
    /// `traceparent` is followed as it says.
    #[serde(default = "d_ratio", deserialize_with = "de_ratio")]
    pub sample_ratio: f64,
    /// `service.name` of the exported spans.
    #[serde(default = "d_service")]
    pub service_name: String,
    /// Send `traceparent` (and `tracestate`) to the upstream naming the gateway's span.
    #[serde(default = "d_true")]
    pub propagate: bool,
}

impl Default for TracingConfig {
    fn default() -> Self {
        TracingConfig {
            enabled: false,
            endpoint: d_endpoint(),
            sample_ratio: d_ratio(),
            service_name: d_service(),
            propagate: true,
        }
    }
}

fn d_endpoint() -> String {
    "http://127.0.0.1:4318/v1/traces".into()
}
fn d_ratio() -> f64 {
    1.0
}
fn d_service() -> String {
    "mcp-edge".into()
}

fn de_ratio<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "sample_ratio: {v} is not between 0.0 and 1.0"
        )))
    }
}

pub(super) fn validate(
    flows: &FlowsConfig,
    tracing: &TracingConfig,
    pos: &Positions,
    file: &str,
) -> Result<(), ConfigError> {
    let err = |path: &str, message: String| ConfigError::at(file, pos.near(path), message);
    if flows.enabled && (flows.max_tracked == 0 || flows.timeout.is_zero()) {
        return Err(err(
            if flows.max_tracked == 0 {
                "flows.max_tracked"
            } else {
                "flows.timeout"
            },
            "flows: max_tracked and timeout must be above 0 (or set enabled: false)".into(),
        ));
    }
    if tracing.enabled && !tracing.endpoint.starts_with("http://") {
        return Err(err(
            "tracing.endpoint",
            format!(
                "tracing.endpoint: {:?} must be an http:// URL of an OTLP/HTTP traces endpoint (e.g. http://127.0.0.1:4318/v1/traces; https is not built in)",
                tracing.endpoint
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const MIN: &str = "pools:\n  default:\n    instances: [127.0.0.1:7001]\n";

    #[test]
    fn defaults_and_errors() {
        let c = Config::parse(MIN, "g.yaml").unwrap();
        assert!(c.flows.enabled && !c.tracing.enabled);
        assert_eq!(c.flows.timeout, std::time::Duration::from_secs(600));
        let e = Config::parse(&format!("{MIN}flows:\n  max_tracked: 0\n"), "g.yaml").unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        let e = Config::parse(
            &format!("{MIN}tracing:\n  enabled: true\n  endpoint: https://x:4318\n"),
            "g.yaml",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        let e =
            Config::parse(&format!("{MIN}tracing:\n  sample_ratio: 2\n"), "g.yaml").unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.contains("sample_ratio"), "{e}");
    }
}
