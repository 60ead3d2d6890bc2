//! `limits:` and `metrics:`: the size bounds of a request (body, headers, bodies held at once)
//! and the cardinality bound of the metrics' `name` label.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest request body accepted (bytes); larger ones get 413.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Largest total size of the request headers (bytes); larger ones get 431.
    #[serde(default = "default_max_header")]
    pub max_header_bytes: usize,
    /// Request bodies held in memory across all connections at once (bytes): past it, new bodies
    /// get 503 / -31007 with `Retry-After` instead of exhausting memory with slow uploads.
    #[serde(default = "default_max_held")]
    pub max_held_bytes: usize,
}

fn default_max_held() -> usize {
    256 * 1024 * 1024
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: default_max_body(),
            max_held_bytes: default_max_held(),
            max_header_bytes: default_max_header(),
        }
    }
}
fn default_max_body() -> usize {
    1024 * 1024
}
fn default_max_header() -> usize {
    16 * 1024
}

/// Prometheus metrics.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// How many distinct `name` label values (tool names, prompt names, resource URIs) are kept
    /// besides the names in the config; the rest are counted as `_other`.
    #[serde(default = "default_name_labels")]
    pub name_label_limit: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            name_label_limit: default_name_labels(),
        }
    }
}

fn default_name_labels() -> usize {
    100
}
