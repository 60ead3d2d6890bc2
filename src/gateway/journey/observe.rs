//! Where a finished request meets its flow and its span: the glue between [`RequestCtx`] and the
//! plain [`flows`](crate::gateway::telemetry::flows) store and [`trace`](crate::gateway::telemetry::trace) exporter, called once from
//! `logging`. With flows and tracing off it returns at its first line. The audit record is
//! built after them ([`super::audit`]), with the leg's round and flow.

use std::time::{Instant, SystemTime};

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::telemetry::flows::{Leg, LegFlow};
use crate::gateway::telemetry::metrics::{method_label, Outcome};
use crate::gateway::telemetry::trace::SpanInfo;
use crate::mcp::methods::name_field;
use crate::mcp::result_scan::{ResultKind, Verdict};

/// Record the request's leg in its flow and export its span; the leg's place in its flow.
pub fn finished(ctx: &RequestCtx, status: u16, outcome: Outcome) -> Option<LegFlow> {
    let gw = ctx.gw.clone();
    if gw.flows.is_none() && gw.tracing.is_none() {
        return None;
    }
    let verdict = ctx
        .scanner
        .as_ref()
        .map(|s| s.verdict())
        .unwrap_or_default();
    if let Some(store) = gw.flows.as_ref() {
        let ok = ctx.answer.is_none() && (200..300).contains(&status);
        let tool = || {
            let admit = ctx.progress.envelope().is_some();
            gw.metrics.names.label(ctx.name.as_deref(), admit)
        };
        let answer = crate::gateway::telemetry::task_count::TaskAnswer {
            method: ctx.method.as_deref(),
            name: ctx.name.as_deref(),
            ok,
            verdict,
        };
        let (tasks, m) = (&store.tasks, &gw.metrics.flows.tasks);
        let end =
            crate::gateway::telemetry::task_count::observe(tasks, m, answer, tool, Instant::now());
        if let Some(end) = end {
            super::audit::task_ended(ctx, end);
        }
    }
    let flow = gw.flows.as_ref().and_then(|store| {
        let method = ctx.method.as_deref()?;
        name_field(method)?;
        let request_state = ctx.progress.envelope().and_then(|e| e.request_state_digest);
        if request_state.is_none() && verdict.kind != ResultKind::InputRequired {
            return None; // not a flow's leg: the common case costs two checks
        }
        let leg = leg(ctx, status, verdict, request_state);
        store.finish_leg(&leg, Instant::now(), &gw.metrics.flows)
    });
    if let (Some(tracing), Some(leg)) = (&gw.tracing, &ctx.trace) {
        if !leg.sampled {
            return flow;
        }
        let info = SpanInfo {
            outcome,
            rpc_error: verdict.kind == ResultKind::Error,
            round: flow.as_ref().map(|f: &LegFlow| f.round),
            previous_leg: flow.as_ref().and_then(|f| f.previous_span),
            start: SystemTime::now().checked_sub(ctx.started.elapsed()),
        };
        tracing.export(leg, &info);
    }
    flow
}

fn leg(ctx: &RequestCtx, status: u16, verdict: Verdict, request_state: Option<u64>) -> Leg {
    let gw = &ctx.gw;
    let answer = ctx.answer.as_ref().map(|(r, _)| r);
    Leg {
        method: method_label(ctx.method.as_deref()),
        // A name takes a label place only when its request passed the check (see `labels`).
        name: gw
            .metrics
            .names
            .label(ctx.name.as_deref(), ctx.progress.envelope().is_some()),
        request_state,
        verdict,
        failed: answer.is_some() || !(200..300).contains(&status),
        retry_invited: answer.is_some_and(|r| matches!(r.status, 429 | 503)),
        instance: ctx.instance.map(|i| (ctx.pool, i)),
        started: ctx.started,
        span: ctx.trace.as_ref().map(|t| t.span_ref()),
    }
}

/// What a finished request's state says about it.
pub(crate) fn outcome(ctx: &RequestCtx, status: u16, bytes_out: usize) -> Outcome<'_> {
    let gw = &ctx.gw;
    let answer = ctx.answer.as_ref().map(|(r, _)| r);
    let route = ctx.route.and_then(|r| gw.table.get(r));
    let envelope = ctx.progress.envelope();
    Outcome {
        method: ctx.method.as_deref(),
        name: ctx.name.as_deref(),
        route: route.map(|r| r.name.as_str()),
        pool: route.map(|_| gw.pools[ctx.pool].name.as_str()),
        instance: ctx
            .instance
            .map(|i| gw.pools[ctx.pool].instances[i].name.as_str()),
        status,
        gateway_code: answer.map(|r| r.code),
        reason: answer.map(|r| r.reason),
        checked: envelope.is_some(),
        retry_leg: envelope.is_some_and(crate::mcp::Envelope::is_retry_leg),
        input_required: ctx.scanner.as_ref().is_some_and(|s| s.found()),
        bytes_in: ctx.body_len,
        bytes_out,
        duration: ctx.started.elapsed(),
    }
}

/// A request's end: its instance released, its flow and span closed, and it counted and
/// logged (pingora's `logging` phase, or the end of a stream that left the pipeline).
pub(crate) fn finish_request(
    ctx: &mut RequestCtx,
    status: u16,
    body_bytes_sent: usize,
    headers: &http::HeaderMap,
) {
    let upstream = ctx.upstream_since.map(|t| t.elapsed());
    ctx.release_instance();
    // Flows and spans: the leg's round, its flow's end, its span (nothing when both are off).
    if ctx.trace.is_none() {
        if let Some(tracing) = &ctx.gw.tracing {
            // Answered before any upstream: the ids are chosen now.
            let ratio = tracing.config.sample_ratio;
            ctx.trace = Some(crate::gateway::telemetry::trace::begin_request(
                headers,
                ctx.progress.envelope(),
                ratio,
            ));
        }
    }
    let outcome = outcome(ctx, status, body_bytes_sent);
    ctx.gw.metrics.record(&outcome);
    ctx.gw.metrics.recent.note(
        &outcome,
        || ctx.answer.as_ref().map(|(r, _)| r.message.to_string()),
        || match ctx.progress.envelope() {
            Some(e) => (e.method.clone(), e.name.clone()),
            // Refused by the check: the body is still in hand (read again only on this path).
            None => crate::mcp::envelope::parse(&ctx.in_hand)
                .map_or((None, None), |e| (e.method, e.name)),
        },
        || ctx.identity.as_ref().map(|i| i.subject.clone()),
    );
    crate::gateway::telemetry::metrics::access_log(&outcome);
    let flow = finished(ctx, status, outcome);
    if ctx.gw.audit.is_some() {
        let verdict = ctx
            .scanner
            .as_ref()
            .map(|s| s.verdict())
            .unwrap_or_default();
        super::audit::record(ctx, status, &verdict, flow.as_ref(), upstream);
    }
    ctx.slots = None;
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::gateway::journey::state::Gateway;
    use std::sync::Arc;

    fn cfg(timeout: &str) -> Config {
        let y = format!("pools:\n  d: {{instances: [127.0.0.1:1], health: {{check: off}}}}\nflows: {{timeout: {timeout}}}\nconcurrency_limits:\n  - {{name: c, max_in_flight: 2}}\n");
        Config::parse(&y, "t").unwrap()
    }

    #[test]
    fn a_reload_keeps_flows_and_slots_whose_settings_did_not_change() {
        let g1 = Gateway::new(cfg("1m"), None).unwrap();
        let g2 = Gateway::new(cfg("1m"), Some(&g1)).unwrap();
        let same = |a: &Gateway, b: &Gateway| {
            Arc::ptr_eq(a.flows.as_ref().unwrap(), b.flows.as_ref().unwrap())
        };
        assert!(same(&g1, &g2));
        assert!(Arc::ptr_eq(&g1.concurrency[0], &g2.concurrency[0]));
        let g3 = Gateway::new(cfg("2m"), Some(&g2)).unwrap();
        assert!(!same(&g2, &g3), "a new timeout starts a new store");
        assert!(g3.tracing.is_none());
    }
}
