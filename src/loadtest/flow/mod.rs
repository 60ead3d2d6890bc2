//! One flow, leg after leg: a `tools/call` until `complete` (answering each `inputRequests`
//! with the flow's elicitation action), or one plain or deliberately bad request; then the
//! flow's content checks, and every leg and the flow recorded in the worker's shard.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use http::HeaderValue;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::ctx::{Ctx, Draw};
use super::leg::{send_leg, LegMode};
use super::measure::{FlowEnd, LegError, LegKind};
use super::scenario::pick_weighted;
use super::task_flow::{follow, TaskStart};
use super::task_measure::TaskEnd;
use super::template::{FlowTemplate, RetryParts};

mod legs;
use legs::Flow;

/// Run one flow (or one bad request) to its end and record every leg.
pub(super) async fn run_one(ctx: &Ctx, shard: usize, d: Draw, intended: Instant) {
    let principal = &ctx.principals[(d.seq % ctx.principals.len() as u64) as usize];
    if d.bad {
        run_bad(ctx, shard, principal, intended).await;
        return;
    }
    let op = pick_weighted(&ctx.cumulative, d.pick);
    let plan = &ctx.flows[op];
    let owned;
    let tpl = if plan.dynamic {
        let Some(t) = instantiate(ctx, shard, op, &d, intended) else {
            return;
        };
        owned = t;
        &owned
    } else {
        &plan.tpl
    };
    ctx.record(shard, |m| m.flows_started += 1);
    let flow = Flow {
        ctx,
        shard,
        op,
        d: &d,
        tpl,
        principal,
    };
    let done = flow.legs(!plan.checks.is_empty(), intended).await;
    flow.finish(plan, done, intended);
}

/// Send one deliberately bad request and record it.
async fn run_bad(ctx: &Ctx, shard: usize, principal: &HeaderValue, intended: Instant) {
    let tpl = &ctx.flows[ctx.bad_template].tpl;
    let id = ctx.next_id.fetch_add(1, Relaxed);
    let mode = LegMode {
        bad: true,
        ..LegMode::default()
    };
    let body = tpl.body(id, RetryParts::default());
    let sent = send_leg(ctx, tpl, principal, id, body, mode).await;
    let leg = LegDone {
        op: ctx.bad_template,
        kind: LegKind::Bad,
        sent: intended,
        now: Instant::now(),
        error: sent.error,
        instance: sent.instance.as_deref(),
        first: None,
        steered: None,
    };
    record_leg(ctx, shard, leg);
}

/// The template of one run of a dynamic flow. `None` when its rendered arguments cannot be sent
/// (a feed value that is no valid header value, say): the flow is then recorded as failed
/// before its first leg, with the reason.
fn instantiate(
    ctx: &Ctx,
    shard: usize,
    op: usize,
    d: &Draw,
    intended: Instant,
) -> Option<FlowTemplate> {
    let mut rng = StdRng::seed_from_u64(d.seed);
    let e = match ctx.flows[op].instantiate(d.seq, &mut rng, ctx.feed.as_ref(), &ctx.extra_headers)
    {
        Ok(t) => return Some(t),
        Err(e) => e,
    };
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
    None
}

/// One answered leg, as recorded.
struct LegDone<'a> {
    op: usize,
    kind: LegKind,
    /// When the leg was (meant to be) sent.
    sent: Instant,
    /// When its answer was read.
    now: Instant,
    error: Option<LegError>,
    instance: Option<&'a [u8]>,
    /// The instance that answered the flow's first leg.
    first: Option<&'a [u8]>,
    /// The gateway's retry-landing header, on a retry leg.
    steered: Option<&'static str>,
}

/// Count a leg in the live counters and record it (and its stage) in the worker's shard.
fn record_leg(ctx: &Ctx, shard: usize, leg: LegDone<'_>) {
    let now = leg.now;
    ctx.live.requests.fetch_add(1, Relaxed);
    if leg.error.is_some() {
        ctx.live.errors.fetch_add(1, Relaxed);
    }
    let stage = ctx.stage(now);
    ctx.record(shard, |m| {
        if let Some(s) = stage {
            m.tally.stage_leg(s, now - leg.sent, leg.error.is_some());
        }
        if let (LegKind::Retry, Some(s)) = (leg.kind, leg.steered) {
            *m.landing.steered.entry(s.to_string()).or_default() += 1;
        }
        m.record_leg(
            leg.op,
            leg.kind,
            now - leg.sent,
            ctx.sec(now),
            leg.error,
            leg.instance,
            leg.first,
        )
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
