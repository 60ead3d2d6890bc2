//! The span exporter: one OpenTelemetry span per finished request, sent over OTLP/HTTP by a
//! batch processor on its own thread, with the ids [`super::begin`] chose (the upstream was
//! already told them) and a link to the previous leg of its MRTR flow.

use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, IdGenerator, RandomIdGenerator, SdkTracer,
    SdkTracerProvider,
};
use std::cell::Cell;
use std::time::{Duration, SystemTime};

use super::TraceLeg;
use crate::config::TracingConfig;
use crate::gateway::telemetry::flows::SpanRef;
use crate::gateway::telemetry::metrics::Outcome;

/// Everything a finished request's span says: what the access log and the metrics say
/// ([`Outcome`]), and the span's own facts.
#[derive(Debug, Default)]
pub struct SpanInfo<'a> {
    pub outcome: Outcome<'a>,
    /// The response was a JSON-RPC error.
    pub rpc_error: bool,
    pub round: Option<u32>,
    pub previous_leg: Option<SpanRef>,
    pub start: Option<SystemTime>,
}

thread_local! {
    /// The ids the next span built on this thread gets (see the module docs).
    static NEXT_IDS: Cell<Option<(u128, u64)>> = const { Cell::new(None) };
}

/// Hands the SDK the ids chosen by [`begin`]; random ones otherwise.
#[derive(Debug)]
struct ChosenIds;

impl IdGenerator for ChosenIds {
    fn new_trace_id(&self) -> TraceId {
        match NEXT_IDS.with(Cell::get) {
            Some((t, _)) => TraceId::from(t),
            None => RandomIdGenerator::default().new_trace_id(),
        }
    }
    fn new_span_id(&self) -> SpanId {
        match NEXT_IDS.with(Cell::get) {
            Some((_, s)) => SpanId::from(s),
            None => RandomIdGenerator::default().new_span_id(),
        }
    }
}

/// The span exporter of one config (kept across reloads while `tracing:` is unchanged).
pub struct Tracing {
    pub config: TracingConfig,
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl Tracing {
    /// Build the OTLP/HTTP exporter and a batch span processor (its own thread).
    pub fn new(config: &TracingConfig) -> anyhow::Result<Tracing> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(config.endpoint.clone())
            .with_timeout(Duration::from_secs(5))
            .build()?;
        let batch = BatchConfigBuilder::default()
            .with_scheduled_delay(Duration::from_millis(500))
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch)
            .build();
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_id_generator(ChosenIds)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("mcp-edge");
        Ok(Tracing {
            config: config.clone(),
            provider,
            tracer,
        })
    }

    /// Export the span of a finished, sampled request.
    pub fn export(&self, leg: &TraceLeg, info: &SpanInfo) {
        if !leg.sampled {
            return;
        }
        let o = &info.outcome;
        let method = o.method.unwrap_or("_unknown");
        let span_name = match o.name {
            Some(n) => format!("{method} {n}"),
            None => method.to_string(),
        };
        let mut attrs = Vec::with_capacity(12);
        attrs.push(KeyValue::new("mcp.method.name", method.to_string()));
        if let Some(n) = o.name {
            let key = match method {
                "tools/call" => "gen_ai.tool.name",
                "prompts/get" => "gen_ai.prompt.name",
                "resources/read" => "mcp.resource.uri",
                _ => "mcp_edge.name",
            };
            attrs.push(KeyValue::new(key, n.to_string()));
        }
        let mut opt = |k: &'static str, v: Option<&str>| {
            if let Some(v) = v {
                attrs.push(KeyValue::new(k, v.to_string()));
            }
        };
        opt("mcp_edge.route", o.route);
        opt("mcp_edge.pool", o.pool);
        opt("mcp_edge.instance", o.instance);
        opt("error.type", o.reason);
        attrs.push(KeyValue::new(
            "http.response.status_code",
            i64::from(o.status),
        ));
        if let Some(c) = o.gateway_code {
            attrs.push(KeyValue::new("mcp_edge.gateway_code", i64::from(c)));
        }
        if let Some(r) = info.round {
            attrs.push(KeyValue::new("mcp_edge.mrtr.round", i64::from(r)));
        }
        let links = info
            .previous_leg
            .map(|p| {
                let sc = span_context(&p, false, TraceState::default());
                let kv = KeyValue::new("mcp_edge.link", "previous_leg");
                vec![Link::new(sc, vec![kv], 0)]
            })
            .unwrap_or_default();
        let start = info.start.unwrap_or_else(|| SystemTime::now() - o.duration);
        let parent_cx = match &leg.parent {
            Some(p) => {
                let state = leg
                    .tracestate
                    .as_deref()
                    .and_then(|s| s.parse::<TraceState>().ok())
                    .unwrap_or_default();
                Context::new().with_remote_span_context(span_context(p, true, state))
            }
            None => Context::new(),
        };
        let builder = self
            .tracer
            .span_builder(span_name)
            .with_kind(SpanKind::Server)
            .with_start_time(start)
            .with_attributes(attrs)
            .with_links(links);
        NEXT_IDS.with(|c| c.set(Some((leg.trace_id, leg.span_id))));
        let mut span = self.tracer.build_with_context(builder, &parent_cx);
        NEXT_IDS.with(|c| c.set(None));
        use opentelemetry::trace::Span as _;
        if o.status >= 500 || info.rpc_error {
            let why = o.reason.unwrap_or("error");
            span.set_status(Status::error(why.to_string()));
        }
        span.end_with_timestamp(start + o.duration);
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        let _ = self.provider.shutdown_with_timeout(Duration::from_secs(2));
    }
}

/// The OpenTelemetry context of a span reference (a remote parent, or a previous leg linked to).
fn span_context(r: &SpanRef, remote: bool, state: TraceState) -> SpanContext {
    let flags = if r.sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    SpanContext::new(
        TraceId::from(r.trace_id),
        SpanId::from(r.span_id),
        flags,
        remote,
        state,
    )
}
