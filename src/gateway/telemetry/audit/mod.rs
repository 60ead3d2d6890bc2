//! The audit trail (`audit:` in gateway.yaml): one JSON record per `tools/call`, `prompts/get`
//! and `resources/read` the gateway answered or passed on, one per MRTR flow when it ends
//! (completed, failed or abandoned) and one per task seen ending, written by a background thread to standard output or a
//! file rotated by size.
//!
//! Never on a request's path: the observe step fills a [`Record`] from what it already knows
//! (a few small strings and the body's `Bytes`, no parse) and [`Audit::submit`] offers it to a
//! bounded queue without waiting. A full queue drops the record and counts it in
//! `mcp_edge_audit_dropped_total{why="queue_full"}`; records written are counted in
//! `mcp_edge_audit_records_total`, a sink that fails in `{why="sink_error"}`. The writer reads
//! the arguments, digests and redacts them ([`arguments`]) and writes the line ([`writer`]),
//! and exports the record as an OpenTelemetry log with `audit.otlp` ([`otlp`]).
//!
//! It reads no request context: the journey's observe step builds the records.

pub(crate) mod arguments;
mod line;
mod otlp;
mod writer;

use bytes::Bytes;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::config::audit::AuditConfig;

/// The audit's counters (registered once with the metrics, carried over reloads).
#[derive(Clone)]
pub struct AuditMetrics {
    /// Records written, by kind (`call`, `flow`) and sink (`stdout`, `file`, `otlp`).
    pub written: prometheus::IntCounterVec,
    /// Records lost, by why (`queue_full`, `sink_error`).
    pub dropped: prometheus::IntCounterVec,
}

impl AuditMetrics {
    pub(crate) fn register(r: &prometheus::Registry) -> prometheus::Result<AuditMetrics> {
        use prometheus::{IntCounterVec, Opts};
        let counter = |n: &str, h: &str, l: &[&str]| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(n, h), l)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        Ok(AuditMetrics {
            written: counter("audit_records_total", "Audit records written (audit:), by kind: call (a tools/call, prompts/get or resources/read) or flow (an MRTR flow that ended), and sink: stdout, file or otlp.", &["kind", "sink"])?,
            dropped: counter("audit_dropped_total", "Audit records lost, by why: queue_full (the writer was behind by audit.queue records; the request did not wait), sink_error (stdout or the file could not be opened or written; see the log) or otlp_error (an OTLP export failed).", &["why"])?,
        })
    }
}

/// How a call ended, as the audit records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// A result (`resultType` complete or absent).
    Result,
    /// A result with `isError: true` (the tool failed).
    ToolError,
    /// `input_required`: the flow goes on (the record's `round` says which).
    InputRequired,
    /// A task was created (Tasks extension).
    Task,
    /// A JSON-RPC error from the server, with its code when it was read.
    Error(Option<i64>),
    /// The gateway answered itself (refused, or could not reach the server).
    Refused { reason: &'static str, code: i32 },
    /// The server answered with an HTTP error and no JSON-RPC response.
    HttpError,
    /// Nothing readable came back (cut off, or a body the gateway did not scan).
    Unknown,
}

/// One `tools/call`, `prompts/get` or `resources/read`.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: &'static str,
    /// The name (or uri) as the client sent it.
    pub name: Option<String>,
    /// The name the server saw, when federation renamed it (a prefixed name).
    pub server_name: Option<String>,
    pub subject: Option<String>,
    pub client_id: Option<String>,
    /// The path the client posted to.
    pub endpoint: Arc<str>,
    pub route: Option<String>,
    pub pool: Option<String>,
    pub instance: Option<String>,
    /// The request body as it went upstream (empty when it streamed unread): the writer reads
    /// the arguments from it.
    pub body: Bytes,
    pub outcome: CallOutcome,
    pub status: u16,
    /// The leg's round in its MRTR flow (1 for the first leg), when the gateway follows it.
    pub round: Option<u32>,
    pub flow: Option<u64>,
    /// The id digest of the task the call created (`outcome: task`), as its task record has it.
    pub task: Option<u64>,
    pub trace: Option<u128>,
    pub duration: Duration,
    /// From the instance's choice to the end of the response.
    pub upstream: Option<Duration>,
}

/// How a flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowEnd {
    Completed,
    Failed,
    Abandoned,
}

impl FlowEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            FlowEnd::Completed => "completed",
            FlowEnd::Failed => "failed",
            FlowEnd::Abandoned => "abandoned",
        }
    }
}

/// One MRTR flow that ended.
#[derive(Debug, Clone)]
pub struct Flow {
    pub method: &'static str,
    pub name: Arc<str>,
    pub flow: u64,
    pub end: FlowEnd,
    /// Legs answered (for an abandoned flow, the legs before it was left).
    pub rounds: u32,
    pub duration: Duration,
    pub trace: Option<u128>,
}

/// A task (Tasks extension) seen ending.
#[derive(Debug, Clone)]
pub struct Task {
    /// The tool that created it (its metrics label; `_unknown` when this replica did not see
    /// the creation).
    pub tool: Arc<str>,
    /// `completed`, `failed` or `cancelled`.
    pub status: &'static str,
    /// The digest of the task id (the creating call's record has the same).
    pub task: u64,
    /// The caller of the request that saw the end.
    pub subject: Option<String>,
    pub trace: Option<u128>,
}

/// What a record is about.
#[derive(Debug, Clone)]
pub enum Event {
    Call(Box<Call>),
    Flow(Flow),
    Task(Task),
}

/// One audit record: when, and what.
#[derive(Debug, Clone)]
pub struct Record {
    pub time: SystemTime,
    pub event: Event,
}

/// The running audit trail of a gateway: the queue's sending end. Dropping the last one lets
/// the writer finish the queue and stop.
pub struct Audit {
    tx: SyncSender<Record>,
    metrics: AuditMetrics,
}

impl Audit {
    /// Start the writer for `cfg` (`None` when the audit is off).
    pub(crate) fn start(
        cfg: &AuditConfig,
        metrics: &AuditMetrics,
    ) -> anyhow::Result<Option<Arc<Audit>>> {
        if !cfg.enabled() {
            return Ok(None);
        }
        let (tx, rx) = sync_channel(cfg.queue);
        writer::spawn(cfg, rx, metrics.clone())?;
        Ok(Some(Arc::new(Audit {
            tx,
            metrics: metrics.clone(),
        })))
    }

    /// Offer a record to the writer; never waits. A full queue drops it (counted).
    pub fn submit(&self, record: Record) {
        match self.tx.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.count_drop("queue_full"),
            Err(TrySendError::Disconnected(_)) => self.count_drop("sink_error"),
        }
    }

    fn count_drop(&self, why: &str) {
        self.metrics.dropped.with_label_values(&[why]).inc();
    }
}
