//! One flow, leg after leg: a `tools/call` until `complete` (answering each `inputRequests`
//! with the flow's elicitation action), or one plain or deliberately bad request; then the
//! flow's content checks, and every leg and the flow recorded in the worker's shard.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::answer::{answer_input_requests_as, ElicitAction};
use super::leg::{send_leg, LegMode, Outcome};
use super::measure::{FlowEnd, LegError, LegKind};
use super::run::{Ctx, Draw};
use super::scenario::pick_weighted;
use super::task_flow::{follow, TaskStart};
use super::task_measure::TaskEnd;
use super::template::RetryParts;

/// Run one flow (or one bad request) to its end and record every leg.
pub(super) async fn run_one(ctx: &Ctx, shard: usize, d: Draw, intended: Instant) {
    let principal = &ctx.principals[(d.seq % ctx.principals.len() as u64) as usize];
    if d.bad {
        let tpl = &ctx.flows[ctx.bad_template].tpl;
        let id = ctx.next_id.fetch_add(1, Relaxed);
        let mode = LegMode {
            bad: true,
            ..LegMode::default()
        };
        let body = tpl.body(id, RetryParts::default());
        let (_, e, inst) = send_leg(ctx, tpl, principal, id, body, mode).await;
        let now = Instant::now();
        ctx.live.requests.fetch_add(1, Relaxed);
        if e.is_some() {
            ctx.live.errors.fetch_add(1, Relaxed);
        }
        let op = ctx.bad_template;
        let stage = ctx.stage(now);
        ctx.record(shard, |m| {
            if let Some(s) = stage {
                m.tally.stage_leg(s, now - intended, e.is_some());
            }
            m.record_leg(
                op,
                LegKind::Bad,
                now - intended,
                ctx.sec(now),
                e,
                inst.as_deref(),
                None,
            )
        });
        return;
    }
    let op = pick_weighted(&ctx.cumulative, d.pick);
    let plan = &ctx.flows[op];
    let owned;
    let tpl = if plan.dynamic {
        let mut rng = StdRng::seed_from_u64(d.seed);
        match plan.instantiate(d.seq, &mut rng, ctx.feed.as_ref(), &ctx.extra_headers) {
            Ok(t) => {
                owned = t;
                &owned
            }
            Err(e) => {
                // The rendered arguments cannot be sent (a feed value that is no valid header
                // value, say): the flow fails before its first leg, and says why.
                let now = Instant::now();
                ctx.live.errors.fetch_add(1, Relaxed);
                let err = LegError {
                    kind: "template_error",
                    status: None,
                    code: None,
                    message: Some(format!("{e:#}")),
                };
                ctx.record(shard, |m| {
                    m.flows_started += 1;
                    m.flows_unsent += 1;
                    m.tally.error(&err);
                    *m.errors_by_kind.entry(err.kind).or_default() += 1;
                    m.record_flow(op, FlowEnd::Failed, 0, now - intended, ctx.sec(now), true)
                });
                return;
            }
        }
    } else {
        &plan.tpl
    };
    ctx.record(shard, |m| m.flows_started += 1);
    let mode = LegMode {
        bad: false,
        want_result: !plan.checks.is_empty(),
        tool_error_ok: false,
    };
    let mut asked = false;
    let mut first_instance: Option<Bytes> = None;
    let mut state: Option<String> = None;
    let mut responses: Vec<u8> = Vec::new();
    let mut has_responses = false;
    let mut send_at = intended;
    let mut round = 1u32;
    let mut final_result: Option<serde_json::Value> = None;
    let end = loop {
        let id = ctx.next_id.fetch_add(1, Relaxed);
        let retry = RetryParts {
            input_responses: has_responses.then_some(responses.as_slice()),
            request_state: state.as_deref(),
        };
        let body = tpl.body(id, retry);
        let mode = LegMode {
            // After a decline or cancel, the tool's error result is the expected end.
            tool_error_ok: asked && d.action != ElicitAction::Accept,
            ..mode
        };
        let (outcome, mut e, inst) = send_leg(ctx, tpl, principal, id, body, mode).await;
        let now = Instant::now();
        let kind = match (tpl.is_call(), round) {
            (false, _) => LegKind::Plain,
            (true, 1) => LegKind::First,
            (true, _) => LegKind::Retry,
        };
        let mut next = None;
        let mut task = None;
        let end = match outcome {
            Outcome::Task { task_id } if tpl.tasks => {
                task = Some(task_id);
                None
            }
            Outcome::Task { .. } => {
                e = Some(LegError {
                    kind: "unexpected_task",
                    status: None,
                    code: None,
                    message: Some(
                        "the call was answered with a task, but this flow does not follow tasks (set `tasks: true`)"
                            .into(),
                    ),
                });
                Some(FlowEnd::Failed)
            }
            Outcome::Complete { result } => {
                final_result = result;
                Some(FlowEnd::Completed)
            }
            Outcome::Failed { result } => {
                final_result = result;
                Some(FlowEnd::Failed)
            }
            Outcome::InputRequired { .. } if round >= ctx.max_rounds => Some(FlowEnd::Abandoned),
            Outcome::InputRequired {
                input_requests,
                request_state,
            } => {
                responses.clear();
                has_responses = false;
                asked = true;
                match input_requests
                    .map(|ir| answer_input_requests_as(&ir, &tpl.answers, d.action, &mut responses))
                {
                    Some(Err(why)) => {
                        e = Some(LegError {
                            kind: "unanswerable_input_request",
                            status: None,
                            code: None,
                            message: Some(why.to_string()),
                        });
                        Some(FlowEnd::Failed)
                    }
                    answered => {
                        has_responses = answered.is_some();
                        next = Some(request_state);
                        None
                    }
                }
            }
        };
        ctx.live.requests.fetch_add(1, Relaxed);
        if e.is_some() {
            ctx.live.errors.fetch_add(1, Relaxed);
        }
        let first = first_instance.as_deref();
        let stage = ctx.stage(now);
        ctx.record(shard, |m| {
            if let Some(s) = stage {
                m.tally.stage_leg(s, now - send_at, e.is_some());
            }
            m.record_leg(
                op,
                kind,
                now - send_at,
                ctx.sec(now),
                e,
                inst.as_deref(),
                first,
            )
        });
        let owner = if task.is_some() { inst.clone() } else { None };
        if round == 1 {
            first_instance = inst;
        }
        if let Some(task_id) = task {
            let start = TaskStart {
                tpl,
                principal,
                task_id,
                owner,
                cancel: d.cancel_task,
                created_sent: send_at,
            };
            let (end, result) = follow_task(ctx, shard, start).await;
            final_result = result;
            break (end, Instant::now());
        }
        if let Some(end) = end {
            break (end, now);
        }
        state = next.flatten();
        send_at = now;
        round += 1;
    };
    let (end, at) = end;
    if end == FlowEnd::Completed {
        ctx.live.flows.fetch_add(1, Relaxed);
    } else if end == FlowEnd::Abandoned {
        ctx.live.errors.fetch_add(1, Relaxed);
    }
    let is_call = tpl.is_call();
    let deliberate = asked && d.action != ElicitAction::Accept;
    // Content checks run on every final result of a flow that accepted its elicitations.
    let checked: Vec<(&str, Result<(), String>)> = match (&final_result, deliberate) {
        (Some(r), false) => plan
            .checks
            .iter()
            .map(|c| (c.label.as_str(), c.evaluate(r)))
            .collect(),
        _ => Vec::new(),
    };
    let stage = ctx.stage(at);
    ctx.record(shard, |m| {
        for (label, outcome) in checked {
            m.tally.check(label, outcome);
        }
        if deliberate {
            match d.action {
                ElicitAction::Decline => m.tally.declined += 1,
                ElicitAction::Cancel => m.tally.cancelled += 1,
                ElicitAction::Accept => {}
            }
        }
        if let (Some(s), FlowEnd::Completed) = (stage, end) {
            m.tally.stage_flow_completed(s);
        }
        m.record_flow(op, end, round, at - intended, ctx.sec(at), is_call)
    });
}

/// Follow a task the flow's call created, record its end, and say how the flow ends: a
/// completed task whose result is not a tool error, or a cancel the flow drew, is the flow's
/// planned end; anything else fails it.
async fn follow_task(
    ctx: &Ctx,
    shard: usize,
    start: TaskStart<'_>,
) -> (FlowEnd, Option<serde_json::Value>) {
    let created_sent = start.created_sent;
    let f = follow(ctx, shard, start).await;
    let tool_error = f.end == TaskEnd::Completed
        && f.result
            .as_ref()
            .and_then(|r| r.get("isError"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
    ctx.record(shard, |m| {
        m.tasks.record_end(f.end, f.polls, f.at - created_sent);
        if tool_error {
            m.tasks.tool_errors += 1;
            let text = f.result.as_ref().and_then(super::reply::result_text);
            m.tally.error(&LegError {
                kind: "tool_error",
                status: None,
                code: None,
                message: text,
            });
        }
    });
    let end = match f.end {
        TaskEnd::Completed if !tool_error => FlowEnd::Completed,
        TaskEnd::Cancelled => FlowEnd::Completed,
        _ => FlowEnd::Failed,
    };
    (end, f.result)
}
