//! One audit record as one JSON line (the format docs/audit.md describes): absent facts are
//! left out rather than written as `null`. Runs on the writer thread.

use serde_json::{json, Map, Value};
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

fn put(m: &mut Map<String, Value>, k: &str, v: Option<impl Into<Value>>) {
    if let Some(v) = v {
        m.insert(k.into(), v.into());
    }
}

impl Render {
    /// The record's fields, in the order of the line.
    pub(super) fn fields(&self, r: &Record) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("time".into(), time(r.time).into());
        match &r.event {
            Event::Call(c) => self.call(c, &mut m),
            Event::Flow(f) => flow(f, &mut m),
            Event::Task(t) => task(t, &mut m),
        }
        m
    }

    fn call(&self, c: &Call, m: &mut Map<String, Value>) {
        m.insert("kind".into(), "call".into());
        m.insert("method".into(), c.method.into());
        put(m, "name", c.name.clone());
        put(m, "server_name", c.server_name.clone());
        put(m, "subject", c.subject.clone());
        put(m, "client_id", c.client_id.clone());
        m.insert("endpoint".into(), (*c.endpoint).into());
        put(m, "route", c.route.clone());
        put(m, "pool", c.pool.clone());
        put(m, "instance", c.instance.clone());
        self.arguments(c, m);
        outcome(&c.outcome, m);
        m.insert("status".into(), c.status.into());
        put(m, "round", c.round);
        put(m, "flow_id", c.flow.map(|f| format!("{f:016x}")));
        put(m, "task_id_digest", c.task.map(|t| format!("{t:016x}")));
        put(m, "trace_id", c.trace.map(|t| format!("{t:032x}")));
        m.insert("duration_ms".into(), ms(c.duration));
        put(m, "upstream_ms", c.upstream.map(ms));
    }

    fn allows(&self, name: Option<&str>) -> bool {
        let name = name.unwrap_or("");
        self.full_for.is_empty() || self.full_for.iter().any(|p| p.matches(name))
    }

    fn arguments(&self, c: &Call, m: &mut Map<String, Value>) {
        if c.body.is_empty() {
            return; // streamed to the instance unread (a sampled-out, large body)
        }
        match arguments::of_body(c.method, &c.body) {
            Ok(mut args) => {
                m.insert("arguments_sha256".into(), arguments::digest(&args).into());
                if self.full && self.allows(c.name.as_deref()) {
                    self.redact.apply(&mut args);
                    m.insert("arguments".into(), args);
                }
            }
            Err(why) => {
                m.insert("arguments_unreadable".into(), why.into());
            }
        }
    }
}

fn outcome(o: &CallOutcome, m: &mut Map<String, Value>) {
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
            m.insert("reason".into(), (*reason).into());
            m.insert("error_code".into(), (*code).into());
            "refused"
        }
        CallOutcome::HttpError => "http_error",
        CallOutcome::Unknown => "unknown",
    };
    m.insert("outcome".into(), name.into());
}

fn task(t: &Task, m: &mut Map<String, Value>) {
    m.insert("kind".into(), "task".into());
    m.insert("name".into(), (*t.tool).into());
    m.insert("task_id_digest".into(), format!("{:016x}", t.task).into());
    m.insert("outcome".into(), t.status.into());
    put(m, "subject", t.subject.clone());
    put(m, "trace_id", t.trace.map(|t| format!("{t:032x}")));
}

fn flow(f: &Flow, m: &mut Map<String, Value>) {
    m.insert("kind".into(), "flow".into());
    m.insert("method".into(), f.method.into());
    m.insert("name".into(), (*f.name).into());
    m.insert("flow_id".into(), format!("{:016x}", f.flow).into());
    m.insert("outcome".into(), f.end.as_str().into());
    m.insert("rounds".into(), f.rounds.into());
    m.insert("duration_ms".into(), ms(f.duration));
    put(m, "trace_id", f.trace.map(|t| format!("{t:032x}")));
}
