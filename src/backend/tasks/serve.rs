//! The task side of the wire: starting a task from tools/call (`CreateTaskResult`), running a
//! task-supporting tool inline for a client without the extension, and the methods
//! `tasks/get`, `tasks/update` and `tasks/cancel`.
//!
//! Order of checks for `tasks/*`: the client must declare the extension in
//! `_meta.clientCapabilities.extensions` (else 400 / -32021, before anything else), then
//! `params.taskId` must name a task of this caller (else -32602 in band: unknown, expired and
//! another principal's tasks get the same answer), then `tasks/update` needs an
//! `inputResponses` object. `tasks/update` and `tasks/cancel` answer an empty
//! `{resultType:"complete"}` ack, also for a task that is already terminal.

use http::Response;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::sync::Arc;

use super::jobs::{drive, run, Job};
use super::{Entry, Stop, TaskCtx};
use crate::backend::instance::Instance;
use crate::backend::respond::{in_band, json_response, missing_caps, reject, Body};
use crate::mcp::mrtr::INPUT_RESPONSES;
use crate::mcp::tasks::{self, EXTENSION};
use crate::mcp::{codes, result_body, result_type};

/// Did the client declare the Tasks extension for this request?
pub(crate) fn client_has_tasks(caps: &Map<String, Value>) -> bool {
    caps.get("extensions")
        .and_then(Value::as_object)
        .is_some_and(|e| e.contains_key(EXTENSION))
}

/// The `requiredCapabilities` of a request that needs the extension.
pub(crate) fn required() -> Value {
    json!({ "extensions": { EXTENSION: {} } })
}

/// Create a task of `principal` for `tool`, start `job` on it, answer `CreateTaskResult`.
pub(crate) fn start(
    inst: &Arc<Instance>,
    principal: &str,
    tool: &str,
    job: Job,
    id: &RawValue,
) -> Response<Body> {
    let entry = match inst.shared.tasks.create(principal, &inst.task_hint) {
        Ok(e) => e,
        Err(msg) => return in_band(id, codes::INTERNAL_ERROR, &msg, None),
    };
    tracing::debug!(task = %entry.id, tool, "task created");
    tokio::spawn(drive(job, TaskCtx::new(entry.clone())));
    json_response(
        http::StatusCode::OK,
        result_body(id, &inst.finish(result_type::TASK, entry.created())),
    )
}

/// Run a task-supporting tool's job inline (the client did not negotiate the extension) and
/// answer its result like a plain tools/call.
pub(crate) async fn inline(inst: &Arc<Instance>, job: Job, id: &RawValue) -> Response<Body> {
    let entry = Entry::detached();
    let mut ctx = TaskCtx::new(entry);
    match run(job, &mut ctx).await {
        Ok(Ok(result)) => inst.ok(id, result),
        Ok(Err((code, msg))) => in_band(id, code, &msg, None),
        Err(Stop::NoInput | Stop::Cancelled) => reject(&missing_caps(required()), Some(id)),
    }
}

/// tasks/get, tasks/update, tasks/cancel.
pub(crate) fn handle(
    inst: &Arc<Instance>,
    method: &str,
    task_id: Option<&str>,
    principal: &str,
    params: &Map<String, Value>,
    caps: &Map<String, Value>,
    id: &RawValue,
) -> Response<Body> {
    if !client_has_tasks(caps) {
        return reject(&missing_caps(required()), Some(id));
    }
    let Some(task_id) = task_id else {
        return in_band(
            id,
            codes::INVALID_PARAMS,
            &format!("params.taskId is required by {method} (the taskId of the CreateTaskResult, a string)"),
            None,
        );
    };
    let Some(entry) = inst.shared.tasks.find(task_id, principal) else {
        return in_band(
            id,
            codes::INVALID_PARAMS,
            &format!("Unknown task {task_id:?}: no task of this caller has that id here (it never existed, expired, or belongs to another caller)"),
            Some(&json!({ "taskId": task_id })),
        );
    };
    match method {
        tasks::GET => inst.ok(id, entry.detailed()),
        tasks::UPDATE => match params.get(INPUT_RESPONSES) {
            Some(Value::Object(responses)) => {
                entry.answer(responses);
                inst.ok(id, json!({}))
            }
            _ => in_band(
                id,
                codes::INVALID_PARAMS,
                "params.inputResponses must be an object mapping keys of the task's inputRequests to the client's answers",
                None,
            ),
        },
        _ => {
            if entry.cancel() {
                tracing::debug!(task = %entry.id, "task cancelled");
            }
            inst.ok(id, json!({}))
        }
    }
}
