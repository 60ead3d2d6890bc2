//! The body segment of the pipeline: read the body as its plan says ([`inspect::Plan`]), then
//! run the stages that need it, in list order, at the one point it is in hand:
//!
//! - read whole before any upstream (every plan but a held one): [`on_body`] runs the check,
//!   the body stages, then the stages that may answer themselves (federation, the cache);
//! - held chunk by chunk on pingora's pipe (past 64 KiB): [`hold_chunk`] runs the check and the
//!   body stages at the body's end, and a refusal cuts the upstream request off.
//!
//! Sampling decides whether the check runs (`ctx.check`), never whether a body stage sees the
//! body: a body stage that covers the request ([`needed`]) makes the body be read and parsed on
//! a sampled-out route too, on either leg.

use bytes::Bytes;
use pingora::proxy::Session;
use pingora::Result;

use crate::config::pins::PinPolicy;
use crate::gateway::cache::journey as cache;
use crate::gateway::federation::journey as federation;
use crate::gateway::journey::direct;
use crate::gateway::journey::request::{Progress, RequestCtx};
use crate::gateway::journey::state::Gateway;
use crate::gateway::journey::steps::{cut_off, invite_body, read_in_hand, refuse, refuse_with_id};
use crate::gateway::stages::answer::{self, envelope_rejection, too_large, Refusal, Verdict};
use crate::gateway::stages::body::{Input, Scope};
use crate::gateway::stages::inspect::{self, BodyHold, Plan, Read};
use crate::gateway::stages::pipeline::{Needs, Run, Step, STAGES};
use crate::gateway::stages::validate;
use crate::mcp::{envelope, Envelope};

/// Whether a body stage covers this request (decided before its body, without its claims).
pub(crate) fn needed(gw: &Gateway, path: &str) -> bool {
    let scope = Scope { path };
    STAGES
        .iter()
        .zip(&gw.stage_states)
        .any(|(s, state)| match (&s.run, state) {
            (Run::Body(b), Some(state)) => (b.covers)(state, &scope),
            _ => false,
        })
}

/// Whether the header↔body check runs: always with auth (it decided on the claimed method and
/// name), on a federated endpoint, on a sealing pool (a retry's state is opened before any
/// upstream) and on a pool that holds changed definitions, else as the route's sample says.
pub(crate) fn check_runs(gw: &Gateway, ctx: &RequestCtx, sample: f64) -> bool {
    let auth_check = gw.auth.as_ref().is_some_and(|a| a.needs_body_check());
    let sealing = gw.seals.get(ctx.pool).is_some_and(Option::is_some);
    // A hold pool's calls were judged on their claimed name: the check holds the body to it.
    let holds = crate::gateway::journey::pins::policy(gw, ctx.pool) == PinPolicy::Hold;
    auth_check || ctx.federated.is_some() || sealing || holds || validate::sampled(sample)
}

/// Read the body as its framing and leg allow, and run the body stages on it where it is in
/// hand. `Some(answered)`: the request is over (refused, or answered by the gateway itself).
pub(crate) async fn on_body(
    session: &mut Session,
    ctx: &mut RequestCtx,
    gw: &Gateway,
) -> Result<Option<bool>> {
    if let Progress::Checked(_) = ctx.progress {
        // A notification the head doomed, read and checked by admit: its body stages (the
        // stages that answer themselves have nothing to answer a notification with).
        let body = ctx.in_hand.clone();
        if let Err((rej, id)) = judge(session.req_header(), ctx, &body, false) {
            return refuse(session, ctx, rej, id).await.map(Some);
        }
        return Ok(None);
    }
    if !matches!(ctx.progress, Progress::Claimed) {
        return Ok(None);
    }
    // Only now is the body invited (`100 Continue`): the head stages ran on the headers alone.
    invite_body(session, ctx).await?;
    let sample = ctx
        .route
        .and_then(|r| gw.table.get(r))
        .map_or(1.0, |r| r.sample);
    ctx.check = check_runs(gw, ctx, sample);
    if !ctx.check {
        gw.metrics.check_skipped();
    }
    let read = ctx.check || needed(gw, session.req_header().uri.path());
    // In hand: for the direct leg, and for a pool of 2025-era servers whatever its transport
    // (the bridge translates the body, `journey::bridge::back`).
    let direct = direct::leg_for(session, ctx)
        || crate::gateway::journey::legacy_up::era_of(gw, ctx.pool).is_some();
    let declared = inspect::declared_length(session, ctx.content_length);
    let plan = inspect::plan(read, direct, declared, session.is_body_empty());
    if federation::needs_body_first(ctx, plan) {
        // Answered or renamed by the gateway: the body must be in hand first.
        let rej = too_large(inspect::PREREAD_MAX);
        return refuse_with_id(session, ctx, rej).await.map(Some);
    }
    let body = match carry_out(session, ctx, plan, direct).await? {
        Ok(Some(body)) => body,
        Ok(None) => return Ok(None),
        Err(answered) => return Ok(Some(answered)),
    };
    ctx.progress = Progress::Unchecked;
    if !read {
        return Ok(None);
    }
    let check = ctx.check;
    run_stages(session, ctx, &body, check).await
}

/// Carry out a body's plan before any upstream is chosen: `Ok(Some(body))`, read whole (kept
/// in hand for the direct leg); `Ok(None)`, held or streamed in `request_body_filter`;
/// `Err(answered)`, refused.
async fn carry_out(
    session: &mut Session,
    ctx: &mut RequestCtx,
    plan: Plan,
    direct: bool,
) -> Result<std::result::Result<Option<Bytes>, bool>> {
    let stop_after = match plan {
        Plan::Stream => {
            ctx.progress = Progress::Streaming;
            return Ok(Ok(None));
        }
        Plan::Hold => {
            ctx.progress = Progress::Holding(BodyHold::default());
            return Ok(Ok(None));
        }
        Plan::Whole => None,
        Plan::Prefix => Some(inspect::PREREAD_MAX),
    };
    let body = match read_in_hand(session, ctx, stop_after, !direct).await? {
        Ok(Read::Whole(body)) => body,
        Ok(Read::Prefix(hold)) => {
            ctx.progress = Progress::Holding(hold);
            return Ok(Ok(None));
        }
        Ok(Read::Over) => {
            ctx.progress = Progress::Drained;
            let pool = &ctx.gw.pools[ctx.pool].name;
            let rej = answer::length_required(pool, inspect::PREREAD_MAX);
            return refuse(session, ctx, rej, None).await.map(Err);
        }
        Err(answered) => return Ok(Err(answered)),
    };
    if direct {
        ctx.in_hand = body.clone();
    }
    Ok(Ok(Some(body)))
}

/// The body stages over a body read whole, before any upstream is chosen, in list order
/// (`check`: the header↔body check is to run; else the body was already checked, or is
/// sampled out).
async fn run_stages(
    session: &mut Session,
    ctx: &mut RequestCtx,
    body: &Bytes,
    check: bool,
) -> Result<Option<bool>> {
    if let Err((rej, id)) = judge(session.req_header(), ctx, body, check) {
        if !matches!(ctx.progress, Progress::Checked(_)) {
            ctx.progress = Progress::Drained;
        }
        // Kept for the refusal ring: what the body said (a refcount, not a copy).
        ctx.in_hand = body.clone();
        return refuse(session, ctx, rej, id).await.map(Some);
    }
    if !matches!(ctx.progress, Progress::Checked(_)) {
        return Ok(None);
    }
    for (i, stage) in STAGES.iter().enumerate() {
        let said = match stage.run {
            Run::Step(Step::Federation) if ctx.federated.is_some() => {
                federation::on_checked(session, ctx, body).await?
            }
            Run::Step(Step::Seal) if ctx.gw.seals.get(ctx.pool).is_some_and(Option::is_some) => {
                let renamed = ctx.federated.as_ref().is_some_and(|f| f.rename.is_some());
                let body = if renamed { &ctx.in_hand.clone() } else { body };
                crate::gateway::journey::seal::on_checked(session, ctx, body).await
            }
            // A retry whose state was opened carries `requestState`: the cache never keys nor
            // answers it, whichever body it reads.
            Run::Step(Step::Cache) => {
                let renamed = ctx.federated.as_ref().is_some_and(|f| f.rename.is_some());
                let body = if renamed {
                    ctx.in_hand.clone()
                } else {
                    body.clone()
                };
                cache::on_checked(session, ctx, &body).await?
            }
            _ => continue,
        };
        ctx.ran.mark(i);
        match said {
            Verdict::Next => {}
            Verdict::Answered => return Ok(Some(true)),
            Verdict::Refuse(rej) => {
                let id = ctx.progress.take_id();
                return refuse(session, ctx, rej, id).await.map(Some);
            }
        }
    }
    Ok(None)
}

/// The check (when `check`) and the body stages, in list order, over a whole body: the
/// decisions that need no session, shared by the read-whole and the held path. A body that
/// passes the check is `Progress::Checked` afterwards.
fn judge(
    head: &pingora::http::RequestHeader,
    ctx: &mut RequestCtx,
    body: &[u8],
    check: bool,
) -> Result<(), Refusal> {
    let gw = ctx.gw.clone();
    let mut parsed: Option<Envelope> = None;
    for (i, stage) in STAGES.iter().enumerate() {
        if stage.needs != Needs::Body {
            continue;
        }
        match stage.run {
            Run::Step(Step::Check) if check => {
                ctx.ran.mark(i);
                let env = inspect::inspect_and_validate(&gw.metrics, &head.headers, body)?;
                ctx.progress = Progress::Checked(env);
            }
            Run::Body(b) => {
                let Some(state) = &gw.stage_states[i] else {
                    continue;
                };
                let scope = Scope {
                    path: head.uri.path(),
                };
                if !(b.covers)(state, &scope) {
                    continue;
                }
                ctx.ran.mark(i);
                if ctx.progress.envelope().is_none() && parsed.is_none() {
                    // Sampled out: parsed for the body stages, not checked against the head.
                    parsed = Some(envelope::parse(body).map_err(envelope_rejection)?);
                }
                let env: &Envelope = match (ctx.progress.envelope(), &parsed) {
                    (Some(env), _) | (None, Some(env)) => env,
                    (None, None) => unreachable!("parsed just above"),
                };
                let input = Input::new(scope, env, body, ctx.identity.as_deref());
                if let Err(rej) = (b.run)(state, &input) {
                    return Err((rej, env.id.clone()));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The checked path for bodies pingora's pipe carries past 64 KiB: hold each chunk (bounded in
/// size, time and the gateway's body budget) and, at the end of the stream, run the check and
/// the body stages on the whole body and release it (or cut the upstream request off).
pub(crate) fn hold_chunk(
    session: &Session,
    body: &mut Option<Bytes>,
    end_of_stream: bool,
    ctx: &mut RequestCtx,
) -> Result<()> {
    let limits = &ctx.gw.config.limits;
    let (limit, budget) = (limits.max_body_bytes, limits.max_held_bytes);
    let deadline = ctx.gw.config.timeouts.request_body;
    if ctx.started.elapsed() > deadline {
        return Err(cut_off(ctx, answer::body_timeout(deadline), None));
    }
    let n = body.as_ref().map_or(0, Bytes::len);
    if let Err(rej) = ctx.held.reserve(&ctx.gw.held, n, budget) {
        return Err(cut_off(ctx, rej, None));
    }
    let Progress::Holding(hold) = &mut ctx.progress else {
        return Ok(());
    };
    match hold.feed(body.take(), end_of_stream, limit) {
        Err(t) => Err(cut_off(ctx, too_large(t.limit), None)),
        // An empty chunk is skipped by pingora; `None` would end the upstream body.
        Ok(None) => {
            *body = Some(Bytes::new());
            Ok(())
        }
        Ok(Some(full)) => {
            ctx.body_len = full.len();
            ctx.progress = Progress::Unchecked;
            let check = ctx.check;
            match judge(session.req_header(), ctx, &full, check) {
                Ok(()) => {
                    *body = Some(full);
                    ctx.count_delivery();
                    Ok(())
                }
                Err((rej, id)) => Err(cut_off(ctx, rej, id)),
            }
        }
    }
}
