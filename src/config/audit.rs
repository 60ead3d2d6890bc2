//! `audit:` the audit trail (one JSON record per `tools/call`, `prompts/get` and
//! `resources/read`, and per MRTR flow that ends): where records go (stdout or a file, and
//! OpenTelemetry logs over OTLP), how many may wait, and how much of the arguments they carry. The gateway's side is `gateway::telemetry::audit`.

use serde::Deserialize;

use super::{ConfigError, Positions};

/// Where audit records are written.
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AuditSink {
    /// No audit trail (the default).
    #[default]
    Off,
    /// JSON lines on the process's standard output.
    Stdout,
    /// JSON lines appended to `audit.file.path`, rotated by size.
    File,
}

/// How much of a call's arguments a record carries.
#[derive(Debug, Clone, Copy, Default, Deserialize, schemars::JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AuditArguments {
    /// Only the SHA-256 of the arguments' canonical JSON (RFC 8785): equal arguments, equal
    /// digests, whatever their key order or spacing.
    #[default]
    Digest,
    /// The digest and the arguments themselves, after `redact`.
    Full,
}

/// The file sink: JSON lines, rotated when the file would pass `max_bytes`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuditFile {
    /// The file records are appended to (its directory must exist).
    pub path: std::path::PathBuf,
    /// Rotate before a record would take the file past this many bytes (at least 1024).
    #[serde(default = "d_max_bytes")]
    pub max_bytes: u64,
    /// Rotated files kept (`path.1` the newest ... `path.<keep>`); 0 keeps none.
    #[serde(default = "d_keep")]
    pub keep: u32,
}

/// OpenTelemetry logs over OTLP/HTTP (protobuf), beside `sink`: each record a log record whose
/// attributes are the record's fields.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuditOtlp {
    /// The OTLP/HTTP logs endpoint (plain HTTP).
    #[serde(default = "d_otlp_endpoint")]
    pub endpoint: String,
    /// `service.name` of the exported logs.
    #[serde(default = "d_service")]
    pub service_name: String,
}

/// What `arguments: full` hides: values under the named keys (at any depth, compared without
/// case) and the parts of string values that match a pattern become `"[redacted]"`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuditRedact {
    #[serde(default)]
    pub keys: Vec<String>,
    /// Regular expressions (Rust `regex` syntax) over string values.
    #[serde(default)]
    pub patterns: Vec<String>,
}

/// The audit trail. Off by default.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// `off` (default), `stdout` or `file` (then `file.path` is required).
    #[serde(default)]
    pub sink: AuditSink,
    #[serde(default)]
    pub file: Option<AuditFile>,
    /// Also export every record as an OpenTelemetry log over OTLP/HTTP (alone, with `sink: off`).
    #[serde(default)]
    pub otlp: Option<AuditOtlp>,
    /// Records waiting for the writer at most; past it a record is dropped and counted in
    /// `mcp_edge_audit_dropped_total` (a request never waits for the audit).
    #[serde(default = "d_queue")]
    pub queue: usize,
    /// `digest` (default) or `full` (the arguments too, after `redact`).
    #[serde(default)]
    pub arguments: AuditArguments,
    /// With `arguments: full`: only the calls whose name (tool, prompt or resource URI) matches
    /// one of these patterns carry their arguments; the others only their digest. Empty: all.
    #[serde(default)]
    pub full_for: Vec<super::Pattern>,
    #[serde(default)]
    pub redact: AuditRedact,
}

impl AuditConfig {
    /// Whether records are written at all.
    pub fn enabled(&self) -> bool {
        self.sink != AuditSink::Off || self.otlp.is_some()
    }
}

fn d_max_bytes() -> u64 {
    100 << 20
}
fn d_keep() -> u32 {
    5
}
fn d_queue() -> usize {
    8192
}
fn d_otlp_endpoint() -> String {
    "http://127.0.0.1:4318/v1/logs".into()
}
fn d_service() -> String {
    "mcp-edge".into()
}

/// What `mcp-edge check` prints of the audit trail (nothing when it is off).
pub(super) fn describe(a: &AuditConfig) -> String {
    if !a.enabled() {
        return String::new();
    }
    let mut sinks = Vec::new();
    match (&a.sink, &a.file) {
        (AuditSink::Stdout, _) => sinks.push("stdout".to_string()),
        (AuditSink::File, Some(f)) => sinks.push(format!(
            "file {} (rotated at {} bytes, {} kept)",
            f.path.display(),
            f.max_bytes,
            f.keep
        )),
        _ => {}
    }
    if let Some(o) = &a.otlp {
        sinks.push(format!("OTLP logs to {}", o.endpoint));
    }
    let args = match a.arguments {
        AuditArguments::Digest => "arguments as their SHA-256 only".to_string(),
        AuditArguments::Full => format!(
            "arguments in full{}, {} key(s) and {} pattern(s) redacted",
            match a.full_for.is_empty() {
                true => String::new(),
                false => format!(
                    " for {}",
                    a.full_for
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            a.redact.keys.len(),
            a.redact.patterns.len()
        ),
    };
    format!(
        "\naudit trail\n  to {}; {args}; queue {} (past it records are dropped and counted)\n",
        sinks.join(" and "),
        a.queue
    )
}

pub(super) fn validate(a: &AuditConfig, pos: &Positions, file: &str) -> Result<(), ConfigError> {
    let err = |path: &str, msg: String| ConfigError::at(file, pos.near(path), msg);
    if a.sink == AuditSink::File {
        let Some(f) = &a.file else {
            return Err(err(
                "audit.sink",
                "audit.sink: `file` needs audit.file.path (e.g. file: {path: /var/log/mcp-edge/audit.jsonl})".into(),
            ));
        };
        let dir = f.path.parent().filter(|d| !d.as_os_str().is_empty());
        if dir.is_some_and(|d| !d.is_dir()) {
            return Err(err(
                "audit.file.path",
                format!(
                    "audit.file.path: the directory of {:?} does not exist; create it or name another file",
                    f.path
                ),
            ));
        }
        if f.max_bytes < 1024 {
            return Err(err(
                "audit.file.max_bytes",
                format!(
                    "audit.file.max_bytes: {} is too small; give at least 1024 (bytes)",
                    f.max_bytes
                ),
            ));
        }
    }
    if let Some(o) = a
        .otlp
        .as_ref()
        .filter(|o| !o.endpoint.starts_with("http://"))
    {
        return Err(err(
            "audit.otlp.endpoint",
            format!("audit.otlp.endpoint: {:?} must be an http:// URL of an OTLP/HTTP logs endpoint (e.g. http://127.0.0.1:4318/v1/logs; https is not built in)", o.endpoint),
        ));
    }
    if a.enabled() && a.queue == 0 {
        return Err(err(
            "audit.queue",
            "audit.queue: must be at least 1 (records waiting for the writer)".into(),
        ));
    }
    for (i, p) in a.redact.patterns.iter().enumerate() {
        if let Err(e) = regex::Regex::new(p) {
            let key = format!("audit.redact.patterns[{i}]");
            return Err(err(
                &key,
                format!("{key}: {p:?} is not a regular expression: {e}"),
            ));
        }
    }
    if let Some(i) = a.redact.keys.iter().position(String::is_empty) {
        let key = format!("audit.redact.keys[{i}]");
        return Err(err(&key, format!("{key}: a key to redact cannot be empty")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const MIN: &str = "pools:\n  default:\n    instances: [127.0.0.1:7001]\n";

    fn err(extra: &str) -> crate::config::ConfigError {
        Config::parse(&format!("{MIN}{extra}"), "g.yaml").unwrap_err()
    }

    #[test]
    fn defaults_and_errors_name_the_line_and_the_fix() {
        let c = Config::parse(MIN, "g.yaml").unwrap();
        assert!(!c.audit.enabled());
        let dir = std::env::temp_dir();
        let ok = format!(
            "{MIN}audit:\n  sink: file\n  file: {{path: {}/a.jsonl}}\n  arguments: full\n  full_for: [search, 'deploy*']\n  redact: {{keys: [password], patterns: ['sk-[a-z0-9]+']}}\n",
            dir.display()
        );
        let c = Config::parse(&ok, "g.yaml").unwrap();
        let f = c.audit.file.as_ref().unwrap();
        assert_eq!((f.max_bytes, f.keep, c.audit.queue), (100 << 20, 5, 8192));
        let printed = c.describe();
        assert!(printed.contains("audit trail\n  to file "), "{printed}");
        assert!(
            printed.contains("in full for search, deploy*, 1 key(s) and 1 pattern(s) redacted"),
            "{printed}"
        );
        let e = err("audit:\n  sink: file\n");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.contains("audit.file.path"), "{e}");
        let e = err("audit:\n  sink: file\n  file: {path: /no/such/dir/a.jsonl}\n");
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("does not exist"), "{e}");
        let e = err("audit:\n  sink: stdout\n  queue: 0\n");
        assert_eq!(e.line, Some(6), "{e}");
        let e = err("audit:\n  sink: stdout\n  redact:\n    patterns: ['ok', '(']\n");
        assert!(e.message.contains("audit.redact.patterns[1]"), "{e}");
        assert_eq!(e.line, Some(7), "{e}");
        let e = err("audit:\n  otlp: {endpoint: https://c:4318/v1/logs}\n");
        assert_eq!(e.line, Some(5), "{e}");
        assert!(e.message.contains("http://"), "{e}");
        let c = Config::parse(&format!("{MIN}audit:\n  otlp: {{}}\n"), "g.yaml").unwrap();
        assert!(c.audit.enabled(), "otlp alone turns the audit on");
        assert!(c
            .describe()
            .contains("OTLP logs to http://127.0.0.1:4318/v1/logs"));
        let e = err("audit:\n  sink: syslog\n");
        assert_eq!(e.line, Some(5), "{e}");
        let e = err(&format!(
            "audit:\n  sink: file\n  file: {{path: {}/a.jsonl, max_bytes: 10}}\n",
            dir.display()
        ));
        assert!(e.message.contains("at least 1024"), "{e}");
    }
}
