//! Audit records as OpenTelemetry logs over OTLP/HTTP (`audit.otlp`), on the audit's writer
//! thread: each record becomes a log record (event `mcp.audit`, severity INFO, the record's time)
//! whose attributes are the record's fields and whose body says it in one line. The writer
//! exports what it took off the queue in one batch, synchronously, so a slow collector slows
//! the writer and the bounded queue in front of it counts what it cannot take
//! (`mcp_edge_audit_dropped_total{why="queue_full"}`); a failed export counts its records in
//! `{why="otlp_error"}`. Nothing is dropped inside the SDK: no SDK processor or queue is used,
//! only its exporter.
//!
//! `LogBatch::new` is the SDK's way to hand records to an exporter; its docs say it may become
//! private (the crates are pinned by Cargo.lock; an upgrade that hides it shows here).

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::logs::{
    LogBatch, LogExporter as _, SdkLogRecord, SdkLogger, SdkLoggerProvider,
};
use serde_json::Value;
use std::time::{Duration, SystemTime};

use super::line::Fields;
use super::AuditMetrics;
use crate::config::audit::AuditOtlp;

/// Records per export at most.
const BATCH: usize = 512;

pub(super) struct Otlp {
    exporter: opentelemetry_otlp::LogExporter,
    logger: SdkLogger,
    _provider: SdkLoggerProvider,
    scope: InstrumentationScope,
    pending: Vec<(SdkLogRecord, &'static str)>,
    failing: bool,
}

impl Otlp {
    /// The exporter for `cfg` (built on the writer thread: its blocking HTTP client must not be
    /// made inside an async runtime).
    pub(super) fn new(cfg: &AuditOtlp) -> anyhow::Result<Otlp> {
        let mut exporter = opentelemetry_otlp::LogExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(cfg.endpoint.clone())
            .with_timeout(Duration::from_secs(5))
            .build()?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(cfg.service_name.clone())
            .build();
        exporter.set_resource(&resource);
        let provider = SdkLoggerProvider::builder().build();
        Ok(Otlp {
            exporter,
            logger: provider.logger("mcp-edge.audit"),
            _provider: provider,
            scope: InstrumentationScope::builder("mcp-edge.audit").build(),
            pending: Vec::new(),
            failing: false,
        })
    }

    /// Queue one record's fields for the next export (made now when the batch is full).
    pub(super) fn push(
        &mut self,
        time: SystemTime,
        fields: &Fields,
        kind: &'static str,
        m: &AuditMetrics,
    ) {
        let mut r = self.logger.create_log_record();
        r.set_event_name("mcp.audit");
        r.set_timestamp(time);
        r.set_observed_timestamp(SystemTime::now());
        r.set_severity_number(Severity::Info);
        r.set_severity_text("INFO");
        r.set_body(AnyValue::from(summary(fields)));
        for (k, v) in fields.iter() {
            r.add_attribute(format!("mcp.audit.{k}"), any(v));
        }
        self.pending.push((r, kind));
        if self.pending.len() >= BATCH {
            self.export(m);
        }
    }

    /// Export what is pending, in one request; count it written or dropped.
    pub(super) fn export(&mut self, m: &AuditMetrics) {
        if self.pending.is_empty() {
            return;
        }
        let pairs: Vec<(&SdkLogRecord, &InstrumentationScope)> =
            self.pending.iter().map(|(r, _)| (r, &self.scope)).collect();
        let sent = futures::executor::block_on(self.exporter.export(LogBatch::new(&pairs)));
        match sent {
            Ok(()) => {
                self.failing = false;
                for (_, kind) in &self.pending {
                    m.written.with_label_values(&[kind, "otlp"]).inc();
                }
            }
            Err(e) => {
                if !self.failing {
                    tracing::error!("audit: OTLP logs export failed: {e}; records are lost (mcp_edge_audit_dropped_total{{why=\"otlp_error\"}}) until it works again");
                }
                self.failing = true;
                let n = self.pending.len() as u64;
                m.dropped.with_label_values(&["otlp_error"]).inc_by(n);
            }
        }
        self.pending.clear();
    }
}

/// One line for a log viewer: `tools/call deploy: input_required`.
fn summary(fields: &Fields) -> String {
    let s = |k: &str| fields.get(k).and_then(Value::as_str).unwrap_or("-");
    format!("{} {}: {}", s("method"), s("name"), s("outcome"))
}

fn any(v: &Value) -> AnyValue {
    match v {
        Value::String(s) => AnyValue::from(s.clone()),
        Value::Bool(b) => AnyValue::from(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => AnyValue::from(i),
            None => AnyValue::from(n.as_f64().unwrap_or(0.0)),
        },
        // Arguments (`arguments: full`) and anything nested: their JSON text.
        other => AnyValue::from(other.to_string()),
    }
}
