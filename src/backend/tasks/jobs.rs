//! What the task-supporting tools do once their task runs: plain data ([`Job`]) built by the
//! tool from its arguments, and one async function ([`run`]) that drives a [`TaskCtx`].
//!
//! The conformance suite's fixtures (`slow_compute`, `failing_job`, `protocol_error_job`,
//! `confirm_delete`, `multi_input`, `test_tool_with_task`) and one seed story,
//! `deploy_async`: confirm, then roll out in steps that report progress, for the demo and the
//! load tester.

use serde_json::{json, Map, Value};
use std::time::Duration;

use super::{Stop, TaskCtx};
use crate::mcp::codes;
use crate::mcp::methods::ELICITATION_CREATE;

/// Longest sleep a job accepts (`seconds` arguments are clamped to it).
pub(crate) const MAX_SECONDS: f64 = 120.0;

/// A task's work, with the arguments it needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// Sleep `seconds`, then answer with the label.
    SlowCompute { seconds: f64, label: String },
    /// After about a second, a tool execution error (`isError`).
    Failing,
    /// After a short while, a protocol-level failure (status `failed`).
    ProtocolError,
    /// Ask whether to delete a file (one elicitation), then answer.
    ConfirmDelete { filename: String },
    /// Ask two questions at once; complete when both are answered.
    MultiInput,
    /// Greet a name gathered by an MRTR round before the task started.
    Greeting { name: String },
    /// Ask to confirm by typing the service name, then roll out in `steps` steps over
    /// `seconds`, reporting progress in `statusMessage`.
    Deploy {
        service: String,
        environment: String,
        seconds: f64,
    },
}

/// A job's end when it was not cancelled: the tool result, or a protocol error.
pub(crate) type JobEnd = Result<Value, (i32, String)>;

fn text(s: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": s.into()}]})
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.0, MAX_SECONDS))
}

fn elicit(message: String, properties: Value, required: &[&str]) -> Value {
    json!({
        "method": ELICITATION_CREATE,
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        }
    })
}

fn one(key: &str, request: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(key.to_owned(), request);
    m
}

/// The action of an elicitation answer and its content.
fn accepted(answer: Option<&Value>) -> Option<&Map<String, Value>> {
    let a = answer?;
    (a.get("action").and_then(Value::as_str) == Some("accept"))
        .then(|| a.get("content").and_then(Value::as_object))
        .flatten()
}

/// Run `job` to its end. `Err(Stop)` when it was cancelled (the task's status already says
/// so) or needed input it cannot get.
pub(crate) async fn run(job: Job, ctx: &mut TaskCtx) -> Result<JobEnd, Stop> {
    Ok(match job {
        Job::SlowCompute { seconds, label } => {
            ctx.progress(format!("Computing {label:?} for {seconds} s"));
            ctx.sleep(secs(seconds)).await?;
            Ok(text(format!(
                "slow_compute {label:?} finished after {seconds} s"
            )))
        }
        Job::Failing => {
            ctx.sleep(Duration::from_secs(1)).await?;
            let mut r = text("failing_job failed, as it always does");
            r["isError"] = Value::Bool(true);
            Ok(r)
        }
        Job::ProtocolError => {
            ctx.sleep(Duration::from_millis(200)).await?;
            Err((
                codes::INTERNAL_ERROR,
                "protocol_error_job hit an internal error, as it always does".into(),
            ))
        }
        Job::ConfirmDelete { filename } => Ok(confirm_delete(&filename, ctx).await?),
        Job::MultiInput => Ok(multi_input(ctx).await?),
        Job::Greeting { name } => {
            ctx.sleep(Duration::from_millis(300)).await?;
            Ok(text(format!("Hello, {name}! (from a task)")))
        }
        Job::Deploy {
            service,
            environment,
            seconds,
        } => Ok(deploy(&service, &environment, seconds, ctx).await?),
    })
}

/// `confirm_delete`: ask whether to delete `filename` (one elicitation), then say what was done.
async fn confirm_delete(filename: &str, ctx: &mut TaskCtx) -> Result<Value, Stop> {
    let q = elicit(
        format!("Delete {filename}?"),
        json!({"confirm": {"type": "boolean"}}),
        &["confirm"],
    );
    let answers = ctx.ask(one("confirm_delete", q)).await?;
    let yes = accepted(answers.get("confirm_delete"))
        .and_then(|c| c.get("confirm"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(text(if yes {
        format!("Deleted {filename}")
    } else {
        format!("Kept {filename}: the deletion was not confirmed")
    }))
}

/// `multi_input`: ask two questions at once, then list the answers received.
async fn multi_input(ctx: &mut TaskCtx) -> Result<Value, Stop> {
    let mut reqs = Map::new();
    reqs.insert(
        "name".into(),
        elicit(
            "What is your name?".into(),
            json!({"name": {"type": "string"}}),
            &["name"],
        ),
    );
    reqs.insert(
        "confirm".into(),
        elicit(
            "Shall we go on?".into(),
            json!({"confirm": {"type": "boolean"}}),
            &["confirm"],
        ),
    );
    let answers = ctx.ask(reqs).await?;
    let mut keys: Vec<&String> = answers.keys().collect();
    keys.sort();
    Ok(text(format!(
        "multi_input received {} answers ({})",
        keys.len(),
        keys.iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// `deploy_async`: confirm by the typed service name (a tool error when it does not match), then
/// roll out in steps over `seconds`, reporting progress.
async fn deploy(
    service: &str,
    environment: &str,
    seconds: f64,
    ctx: &mut TaskCtx,
) -> Result<Value, Stop> {
    let q = elicit(
        format!("Type the service name to confirm deploying {service} to {environment}"),
        json!({"confirmation": {"type": "string"}}),
        &["confirmation"],
    );
    let answers = ctx.ask(one("confirm", q)).await?;
    let typed = accepted(answers.get("confirm"))
        .and_then(|c| c.get("confirmation"))
        .and_then(Value::as_str);
    if typed != Some(service) {
        let mut r = text(format!(
            "Nothing was deployed: the confirmation {typed:?} did not match {service:?}"
        ));
        r["isError"] = Value::Bool(true);
        return Ok(r);
    }
    const STEPS: u32 = 5;
    for step in 1..=STEPS {
        ctx.sleep(secs(seconds) / STEPS).await?;
        ctx.progress(format!(
            "Deploying {service} to {environment}: step {step}/{STEPS} ({}%)",
            step * 100 / STEPS
        ));
    }
    Ok(text(format!("Deployed {service} to {environment}")))
}

/// Drive `job` on its task to a terminal status (a cancelled job leaves `cancelled`).
pub(crate) async fn drive(job: Job, mut ctx: TaskCtx) {
    match run(job, &mut ctx).await {
        Ok(Ok(result)) => ctx.entry.complete(result),
        Ok(Err((code, msg))) => ctx.entry.fail(code, msg),
        Err(Stop::Cancelled) => {}
        Err(Stop::NoInput) => ctx.entry.fail(
            codes::INTERNAL_ERROR,
            "the job needs the client's input, which only a task can ask for".into(),
        ),
    }
}
