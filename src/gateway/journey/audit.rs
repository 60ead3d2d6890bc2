//! A finished `tools/call`, `prompts/get` or `resources/read` as an audit record
//! ([`crate::gateway::telemetry::audit`]), built at the observe step from what the request's
//! context already holds: a few small strings, the body's `Bytes` (the writer reads the
//! arguments from it, off the request's path) and the response scanner's verdict. With the
//! audit off it returns at its first line.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::telemetry::audit::{Call, CallOutcome, Event, Record};
use crate::gateway::telemetry::flows::LegFlow;
use crate::gateway::telemetry::task_count::TaskEnd;
use crate::mcp::methods;
use crate::mcp::result_scan::{ResultKind, Verdict};

/// The audited methods, as the `'static` names records carry.
fn audited(method: &str) -> Option<&'static str> {
    [
        methods::TOOLS_CALL,
        methods::PROMPTS_GET,
        methods::RESOURCES_READ,
    ]
    .into_iter()
    .find(|m| *m == method)
}

/// Offer the request's record to the audit queue, when the audit is on and the method is one
/// it records. `upstream`: how long the instance held the request.
pub(crate) fn record(
    ctx: &RequestCtx,
    status: u16,
    verdict: &Verdict,
    flow: Option<&LegFlow>,
    upstream: Option<Duration>,
) {
    let Some(audit) = ctx.gw.audit.as_ref() else {
        return;
    };
    let envelope = ctx.progress.envelope();
    // The body's method when it was checked, else the claimed one (a refused or sampled-out
    // request).
    let method = envelope
        .and_then(|e| e.method.as_deref())
        .or(ctx.method.as_deref());
    let Some(method) = method.and_then(audited) else {
        return;
    };
    let gw = &ctx.gw;
    let route = ctx.route.and_then(|r| gw.table.get(r));
    let identity = ctx.identity.as_deref();
    let call = Call {
        method,
        name: envelope
            .and_then(|e| e.mcp_name())
            .or(ctx.name.as_deref())
            .map(str::to_string),
        server_name: ctx.federated.as_ref().and_then(|f| f.rename.clone()),
        subject: identity.map(|i| i.subject.clone()),
        client_id: identity.and_then(|i| i.claim_text("client_id").or_else(|| i.claim_text("azp"))),
        endpoint: endpoint(ctx),
        route: route.map(|r| r.name.clone()),
        pool: route.map(|_| gw.pools[ctx.pool].name.clone()),
        instance: ctx
            .instance
            .map(|i| gw.pools[ctx.pool].instances[i].name.clone()),
        body: ctx.in_hand.clone(),
        outcome: outcome(ctx, status, verdict),
        status,
        round: flow.map(|f| f.round),
        flow: flow.map(|f| f.flow),
        task: verdict
            .task_digest
            .filter(|_| verdict.kind == ResultKind::Task),
        trace: ctx.trace.as_ref().map(|t| t.span_ref().trace_id),
        duration: ctx.started.elapsed(),
        upstream,
    };
    audit.submit(Record {
        time: SystemTime::now(),
        event: Event::Call(Box::new(call)),
    });
}

/// A task seen ending (a `tasks/get` that said so, or a `tasks/cancel`): its record.
pub(crate) fn task_ended(ctx: &RequestCtx, (tool, status, task): TaskEnd) {
    let Some(audit) = ctx.gw.audit.as_ref() else {
        return;
    };
    audit.submit(Record {
        time: SystemTime::now(),
        event: Event::Task(crate::gateway::telemetry::audit::Task {
            tool,
            status: status.as_str(),
            task,
            subject: ctx.identity.as_ref().map(|i| i.subject.clone()),
            trace: ctx.trace.as_ref().map(|t| t.span_ref().trace_id),
        }),
    });
}

/// The path the client posted to: its federated endpoint's, else the gateway's endpoint.
fn endpoint(ctx: &RequestCtx) -> Arc<str> {
    let gw = &ctx.gw;
    let federated = ctx.federated.as_ref().and_then(|f| {
        let fed = gw.config.federation.as_ref()?;
        fed.endpoints.get(f.endpoint).map(|e| e.path.as_str())
    });
    Arc::from(federated.unwrap_or(gw.config.endpoint.as_str()))
}

fn outcome(ctx: &RequestCtx, status: u16, verdict: &Verdict) -> CallOutcome {
    if let Some((r, _)) = &ctx.answer {
        return CallOutcome::Refused {
            reason: r.reason,
            code: r.code,
        };
    }
    match verdict.kind {
        ResultKind::InputRequired => CallOutcome::InputRequired,
        ResultKind::Complete if verdict.tool_error => CallOutcome::ToolError,
        ResultKind::Complete => CallOutcome::Result,
        ResultKind::Task => CallOutcome::Task,
        ResultKind::Error => CallOutcome::Error(verdict.error_code),
        ResultKind::Unknown if !(200..300).contains(&status) => CallOutcome::HttpError,
        ResultKind::Unknown => CallOutcome::Unknown,
    }
}
