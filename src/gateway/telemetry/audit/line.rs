//! One audit record as one JSON line (the format docs/audit.md describes): absent facts are
//! left out rather than written as `null`. Runs on the writer thread. A record's [`Fields`] are
//! named by `'static` keys in the order of the line and written straight into the sink's
//! buffer ([`Fields::write_line`]): no map of owned keys per record.

use serde_json::{json, Value};
use std::time::{Duration, SystemTime};

use super::arguments::{self, Redact};
use super::{Call, CallOutcome, Event, Flow, Record, Task};

/// How the writer renders arguments.
pub(super) struct Render {
    pub full: bool,
    /// With `full`: the names whose arguments are written (empty: every name).
    pub full_for: Vec<crate::config::Pattern>,
    pub redact: Redact,
}

fn ms(d: Duration) -> Value {
    json!((d.as_secs_f64() * 1e6).round() / 1e3)
}

fn time(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

/// A record's fields, in the order of its line.
#[derive(Debug, Default)]
pub(super) struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    fn insert(&mut self, k: &'static str, v: Value) {
        self.0.push((k, v));
    }

    /// The value of field `k`.
    pub(super) fn get(&self, k: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| *n == k).map(|(_, v)| v)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &(&'static str, Value)> {
        self.0.iter()
    }

    /// The record as one JSON line (its keys are plain ASCII names: written as they are).
    pub(super) fn write_line(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b"\":");
            serde_json::to_writer(&mut *out, v).expect("a JSON value serializes");
        }
        out.extend_from_slice(b"}\n");
    }
}

fn put(m: &mut Fields, k: &'static str, v: Option<impl Into<Value>>) {
    if let Some(v) = v {
        m.insert(k, v.into());
    }
}

impl Render {
    /// The record's fields, in the order of the line.
    pub(super) fn fields(&self, r: &Record) -> Fields {
        let mut m = Fields::default();
        m.insert("time", time(r.time).into());
        match &r.event {
            Event::Call(c) => self.call(c, &mut m),
            Event::Flow(f) => flow(f, &mut m),
            Event::Task(t) => task(t, &mut m),
        }
        m
    }

    fn call(&self, c: &Call, m: &mut Fields) {
        m.insert("kind", "call".into());
        m.insert("method", c.method.into());
        put(m, "name", c.name.clone());
        put(m, "server_name", c.server_name.clone());
        put(m, "subject", c.subject.clone());
        put(m, "client_id", c.client_id.clone());
        m.insert("endpoint", (*c.endpoint).into());
        put(m, "route", c.route.clone());
        put(m, "pool", c.pool.clone());
        put(m, "instance", c.instance.clone());
        self.arguments(c, m);
        outcome(&c.outcome, m);
        m.insert("status", c.status.into());
        put(m, "round", c.round);
        put(m, "flow_id", c.flow.map(|f| format!("{f:016x}")));
        put(m, "task_id_digest", c.task.map(|t| format!("{t:016x}")));
        put(m, "trace_id", c.trace.map(|t| format!("{t:032x}")));
        m.insert("duration_ms", ms(c.duration));
        put(m, "upstream_ms", c.upstream.map(ms));
    }

    fn allows(&self, name: Option<&str>) -> bool {
        let name = name.unwrap_or("");
        self.full_for.is_empty() || self.full_for.iter().any(|p| p.matches(name))
    }

    fn arguments(&self, c: &Call, m: &mut Fields) {
        if c.body.is_empty() {
            return; // streamed to the instance unread (a sampled-out, large body)
        }
        match arguments::of_body(c.method, &c.body) {
            Ok(mut args) => {
                m.insert("arguments_sha256", arguments::digest(&args).into());
                if self.full && self.allows(c.name.as_deref()) {
                    self.redact.apply(&mut args);
                    m.insert("arguments", args);
                }
            }
            Err(why) => {
                m.insert("arguments_unreadable", why.into());
            }
        }
    }
}

fn outcome(o: &CallOutcome, m: &mut Fields) {
    let name = match o {
        CallOutcome::Result => "result",
        CallOutcome::ToolError => "tool_error",
        CallOutcome::InputRequired => "input_required",
        CallOutcome::Task => "task",
        CallOutcome::Error(code) => {
            put(m, "error_code", *code);
            "error"
        }
        CallOutcome::Refused { reason, code } => {
            m.insert("reason", (*reason).into());
            m.insert("error_code", (*code).into());
            "refused"
        }
        CallOutcome::HttpError => "http_error",
        CallOutcome::Unknown => "unknown",
    };
    m.insert("outcome", name.into());
}

fn task(t: &Task, m: &mut Fields) {
    m.insert("kind", "task".into());
    m.insert("name", (*t.tool).into());
    m.insert("task_id_digest", format!("{:016x}", t.task).into());
    m.insert("outcome", t.status.into());
    put(m, "subject", t.subject.clone());
    put(m, "trace_id", t.trace.map(|t| format!("{t:032x}")));
}

fn flow(f: &Flow, m: &mut Fields) {
    m.insert("kind", "flow".into());
    m.insert("method", f.method.into());
    m.insert("name", (*f.name).into());
    m.insert("flow_id", format!("{:016x}", f.flow).into());
    m.insert("outcome", f.end.as_str().into());
    m.insert("rounds", f.rounds.into());
    m.insert("duration_ms", ms(f.duration));
    put(m, "trace_id", f.trace.map(|t| format!("{t:032x}")));
}
