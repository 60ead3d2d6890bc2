//! One task followed to its end (Tasks extension), after the `tools/call` that created it:
//! poll `tasks/get` with backoff (from [`FIRST_POLL`], doubling up to the server's
//! `pollIntervalMs`), answer the task's `inputRequests` with `tasks/update` (the flow's answer
//! table), cancel it with `tasks/cancel` after the first poll when the flow drew a cancel, and
//! stop at a terminal status. Bounded: a task not terminal within `--task-limit` (or after
//! [`MAX_POLLS`] polls) is cancelled and counted abandoned; [`MAX_ERRORS_IN_A_ROW`] failed
//! requests in a row lose it. Every request is recorded with the instance that answered it and
//! the task's owner (the instance that answered the creating call).

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use super::answer::{answer_input_requests_as, ElicitAction};
use super::ctx::Ctx;
use super::measure::LegError;
use super::reply::{error_message, instance_from_meta, json_payload};
use super::tally::clip;
use super::task_measure::{TaskEnd, TaskReq};
use super::template::{client_capabilities_with_tasks, FlowTemplate};
use crate::mcp::tasks::{status, TASK_ID};
use crate::mcp::{self, header, meta};

/// The wait before the first poll, and after each answer or cancel.
pub(crate) const FIRST_POLL: Duration = Duration::from_millis(50);
/// The longest wait between polls, whatever the server asks.
pub(crate) const MAX_POLL_WAIT: Duration = Duration::from_secs(5);
/// The wait cap until the server says its `pollIntervalMs`.
const DEFAULT_POLL_CAP: Duration = Duration::from_millis(500);
/// Polls after which an unfinished task is given up.
pub(crate) const MAX_POLLS: u32 = 1_000;
/// Failed requests in a row after which the task is lost.
pub(crate) const MAX_ERRORS_IN_A_ROW: u32 = 3;

/// The task to follow.
pub(super) struct TaskStart<'a> {
    pub tpl: &'a FlowTemplate,
    pub principal: &'a HeaderValue,
    pub task_id: String,
    /// The instance that answered the creating call.
    pub owner: Option<Bytes>,
    pub cancel: bool,
    /// When the creating call was sent.
    pub created_sent: Instant,
}

/// How the task ended, and the completed task's result.
pub(super) struct Followed {
    pub end: TaskEnd,
    pub result: Option<Value>,
    pub polls: u32,
    /// When the terminal status (or the giving up) was seen.
    pub at: Instant,
}

/// The next wait between polls: doubled, at most the server's interval (clamped).
pub(crate) fn next_wait(current: Duration, server_ms: Option<u64>) -> Duration {
    let cap = server_ms.map_or(DEFAULT_POLL_CAP, Duration::from_millis);
    let cap = cap.clamp(Duration::from_millis(10), MAX_POLL_WAIT);
    (current * 2).min(cap).max(Duration::from_millis(1))
}

/// The body of a tasks/* request.
pub(crate) fn task_body(
    id: u64,
    method: &str,
    task_id: &str,
    extra: Option<(&str, Value)>,
) -> Vec<u8> {
    let mut params = Map::new();
    params.insert(TASK_ID.into(), Value::String(task_id.into()));
    if let Some((k, v)) = extra {
        params.insert(k.into(), v);
    }
    params.insert(
        "_meta".into(),
        json!({
            meta::PROTOCOL_VERSION: mcp::PROTOCOL_VERSION,
            meta::CLIENT_CAPABILITIES: client_capabilities_with_tasks(),
        }),
    );
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .expect("JSON values serialize")
}

fn leg_err(kind: &'static str, status: Option<u16>, code: Option<i64>, msg: String) -> LegError {
    LegError {
        kind,
        status,
        code,
        message: Some(msg),
    }
}

/// Send one tasks/* request; the result object, or why not; and the instance that answered.
async fn send(
    ctx: &Ctx,
    s: &TaskStart<'_>,
    kind: TaskReq,
    extra: Option<(&str, Value)>,
) -> (Result<Value, LegError>, Option<Bytes>) {
    let id = ctx.next_id.fetch_add(1, Relaxed);
    let mut headers = s.tpl.headers.clone();
    let params: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(header::PARAM_PREFIX))
        .cloned()
        .collect();
    for k in params {
        headers.remove(k);
    }
    headers.insert(
        HeaderName::from_static(header::METHOD),
        HeaderValue::from_static(kind.method()),
    );
    match HeaderValue::from_str(&header::encode_value(&s.task_id)) {
        Ok(v) => headers.insert(HeaderName::from_static(header::NAME), v),
        Err(_) => {
            let msg = format!("task id {:?} is no header value", clip(&s.task_id));
            return (Err(leg_err("task_id_invalid", None, None, msg)), None);
        }
    };
    if !ctx.user_authorization {
        headers.insert(http::header::AUTHORIZATION, s.principal.clone());
    }
    let body = task_body(id, kind.method(), &s.task_id, extra);
    let req = ctx.http.request(headers, body);
    let (ans, mut instance) = match super::leg::exchange(ctx, req).await {
        Ok(got) => got,
        Err(e) => return (Err(e), None),
    };
    let status = ans.status.as_u16();
    let ct = ans.headers.get(http::header::CONTENT_TYPE);
    let payload = json_payload(&ans.body, ct.map(|v| v.as_bytes()));
    let v: Option<Value> = serde_json::from_slice(&payload).ok();
    let code = v
        .as_ref()
        .and_then(|v| v.get("error")?.get("code")?.as_i64());
    let message =
        || error_message(&payload).unwrap_or_else(|| clip(&String::from_utf8_lossy(&payload)));
    if !ans.status.is_success() {
        return (
            Err(leg_err("http_status", Some(status), code, message())),
            instance,
        );
    }
    if code.is_some() {
        return (
            Err(leg_err("jsonrpc_error", Some(status), code, message())),
            instance,
        );
    }
    let Some(mut result) = v.and_then(|mut v| v.get_mut("result").map(Value::take)) else {
        let e = leg_err("reply_invalid", Some(status), None, message());
        return (Err(e), instance);
    };
    if instance.is_none() {
        instance = result
            .get("_meta")
            .and_then(|m| instance_from_meta(&m.to_string()))
            .map(Bytes::from);
    }
    if let Some(m) = result.as_object_mut() {
        m.remove("_meta");
    }
    (Ok(result), instance)
}

/// Send and record one tasks/* request.
async fn request(
    ctx: &Ctx,
    shard: usize,
    s: &TaskStart<'_>,
    kind: TaskReq,
    extra: Option<(&str, Value)>,
) -> Result<Value, ()> {
    let sent = Instant::now();
    let (r, inst) = send(ctx, s, kind, extra).await;
    let now = Instant::now();
    ctx.live.requests.fetch_add(1, Relaxed);
    let (result, err) = match r {
        Ok(v) => (Ok(v), None),
        Err(e) => {
            ctx.live.errors.fetch_add(1, Relaxed);
            (Err(()), Some(e))
        }
    };
    let owner = s.owner.as_deref();
    ctx.record(shard, |m| {
        m.record_task_req(kind, now - sent, ctx.sec(now), err, inst.as_deref(), owner)
    });
    result
}

/// Follow the task to its end, recording every request in the worker's shard.
pub(super) async fn follow(ctx: &Ctx, shard: usize, s: TaskStart<'_>) -> Followed {
    ctx.record(shard, |m| m.tasks.created += 1);
    let deadline = s.created_sent + ctx.task_limit;
    let mut wait = FIRST_POLL;
    let mut server_ms: Option<u64> = None;
    let (mut polls, mut errors_in_a_row) = (0u32, 0u32);
    let mut cancel_sent = false;
    let mut responses: Vec<u8> = Vec::new();
    let end = |end, result, polls| Followed {
        end,
        result,
        polls,
        at: Instant::now(),
    };
    loop {
        if Instant::now() + wait >= deadline || polls >= MAX_POLLS {
            // Give up, and say so to the server (the task would run on for nothing).
            let _ = request(ctx, shard, &s, TaskReq::Cancel, None).await;
            return end(TaskEnd::Abandoned, None, polls);
        }
        tokio::time::sleep(wait).await;
        if s.cancel && !cancel_sent && polls >= 1 {
            cancel_sent = true;
            if request(ctx, shard, &s, TaskReq::Cancel, None)
                .await
                .is_err()
            {
                errors_in_a_row += 1;
            }
            wait = FIRST_POLL;
            continue;
        }
        polls += 1;
        let Ok(task) = request(ctx, shard, &s, TaskReq::Get, None).await else {
            errors_in_a_row += 1;
            if errors_in_a_row >= MAX_ERRORS_IN_A_ROW {
                return end(TaskEnd::Error, None, polls);
            }
            wait = next_wait(wait, server_ms);
            continue;
        };
        errors_in_a_row = 0;
        server_ms = task
            .get("pollIntervalMs")
            .and_then(Value::as_u64)
            .or(server_ms);
        match task.get("status").and_then(Value::as_str) {
            Some(status::WORKING) => wait = next_wait(wait, server_ms),
            Some(status::INPUT_REQUIRED) => {
                let raw = task.get(mcp::mrtr::INPUT_REQUESTS).map(Value::to_string);
                responses.clear();
                let answered = raw.as_deref().map(|ir| {
                    answer_input_requests_as(
                        ir,
                        &s.tpl.answers,
                        ElicitAction::Accept,
                        &mut responses,
                    )
                });
                match answered {
                    Some(Ok(())) => {
                        let v: Value = serde_json::from_slice(&responses).unwrap_or_default();
                        let extra = Some((mcp::mrtr::INPUT_RESPONSES, v));
                        if request(ctx, shard, &s, TaskReq::Update, extra)
                            .await
                            .is_err()
                        {
                            errors_in_a_row += 1;
                        }
                        wait = FIRST_POLL;
                    }
                    // Nothing to answer yet (or unanswerable): poll again.
                    _ => wait = next_wait(wait, server_ms),
                }
            }
            Some(status::COMPLETED) => {
                return end(TaskEnd::Completed, task.get("result").cloned(), polls)
            }
            Some(status::FAILED) => return end(TaskEnd::Failed, None, polls),
            Some(status::CANCELLED) => return end(TaskEnd::Cancelled, None, polls),
            _ => {
                let e = leg_err(
                    "task_status_invalid",
                    None,
                    None,
                    format!(
                        "tasks/get answered no known status: {}",
                        clip(&task.to_string())
                    ),
                );
                ctx.record(shard, |m| m.tally.error(&e));
                return end(TaskEnd::Error, None, polls);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_servers_interval() {
        let ms = Duration::from_millis;
        assert_eq!(next_wait(FIRST_POLL, None), ms(100));
        assert_eq!(next_wait(ms(400), None), ms(500));
        assert_eq!(next_wait(ms(400), Some(300)), ms(300));
        assert_eq!(next_wait(ms(4_000), Some(60_000)), MAX_POLL_WAIT);
        assert_eq!(next_wait(ms(50), Some(0)), ms(10));
    }

    #[test]
    fn task_bodies_carry_the_id_and_the_extension() {
        let b = task_body(
            7,
            "tasks/update",
            "abc.d",
            Some(("inputResponses", json!({"k": 1}))),
        );
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["method"], "tasks/update");
        assert_eq!(v["params"]["taskId"], "abc.d");
        assert_eq!(v["params"]["inputResponses"]["k"], 1);
        let caps = &v["params"]["_meta"][meta::CLIENT_CAPABILITIES];
        assert!(caps["extensions"]
            .get(crate::mcp::tasks::EXTENSION)
            .is_some());
    }
}
