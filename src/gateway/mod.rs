//! The gateway: a pingora [`ProxyHttp`] whose phases are a request's journey, top to bottom.
//!
//! | pingora phase          | stage                                                            |
//! |------------------------|------------------------------------------------------------------|
//! | `request_filter`       | **route**, **auth** ([`crate::auth`], via `auth_stage`) and **limit** on the claimed `Mcp-Method`/`Mcp-Name`; refuse early what the headers alone doom |
//! | `upstream_peer`        | **balance**: pick an instance of the route's pool                |
//! | `request_body_filter`  | **inspect** (hold the bounded body, parse once) and **validate** |
//! | `upstream_request_filter` | **forward**: strip hop-by-hop headers, body unchanged        |
//! | `response_filter`      | name the instance that served the response; passive health       |
//! | `fail_to_proxy`        | answer a refusal or an upstream failure with a JSON-RPC error    |
//! | `logging`              | **observe**: metrics and one access-log line                     |
//!
//! **Why the body is held in `request_body_filter`.** The check needs the whole body, and the
//! body must reach the upstream byte for byte. pingora can replay a pre-read body only through
//! its retry buffer, which stops at 64 KiB (bodies above it would hang). So the route is chosen
//! from the claimed headers, the connection to the instance is made, and the body chunks are
//! held until the end of the stream, checked, then released in one piece. A request that fails
//! the check is cut off before its body is sent: the instance never sees it complete, and the
//! client gets the error. There is no size cliff: every body up to `limits.max_body_bytes`
//! takes the same path. Requests the headers alone doom (missing or malformed MCP headers, a
//! version older than 2026-07-28) are answered in `request_filter` without an upstream.
//! When a route's sample skips the check, the body streams through untouched.

pub mod admin;
mod auth_stage;
pub mod balance;
pub mod health;
pub mod inspect;
pub mod limit;
pub mod observe;
pub mod route;
pub mod server;
pub mod validate;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::ErrorType;
use serde_json::value::RawValue;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::mcp::envelope::EnvelopeError;
use crate::mcp::methods::name_field;
use crate::mcp::scan::InputRequiredScanner;
use crate::mcp::{codes, Claims, Envelope, Rejection};
use balance::{Pool, Tried};
use inspect::BodyHold;
use limit::{Limit, LimitInput, Verdict};
use observe::{Metrics, UpstreamMetrics};
use route::{RouteRef, RouteTable};
pub use server::{build_server, serve, Live, RunningGateway};

/// Everything the proxy needs, built from a [`Config`] (and rebuilt on reload).
pub struct Gateway {
    pub config: Config,
    pub table: RouteTable,
    /// Indexed like [`RouteTable::pools`].
    pub pools: Vec<Pool>,
    pub limits: Vec<Arc<Limit>>,
    pub metrics: Arc<Metrics>,
    upstream_header: Option<http::HeaderName>,
    /// The OAuth resource server (`auth:`), when configured.
    pub auth: Option<crate::auth::Auth>,
    /// Each instance's metric handles, indexed like `pools[p].instances[i]`, resolved on first use.
    upstream_metrics: Vec<Vec<OnceLock<UpstreamMetrics>>>,
}

impl Gateway {
    /// Build a gateway. With `previous` (a reload), state that outlives a config is carried
    /// over: the metrics registry, the buckets of every rate limit whose settings did not
    /// change, and the health of every pool whose instances and checks did not change.
    pub fn new(config: Config, previous: Option<&Gateway>) -> anyhow::Result<Gateway> {
        let table = RouteTable::from_config(&config);
        let mut pools = Vec::with_capacity(table.pools.len());
        for name in &table.pools {
            let cfg = &config.pools[name];
            let kept = previous.and_then(|p| {
                let old = p.pools.iter().find(|o| &o.name == name)?;
                let same = p.config.pools.get(name).is_some_and(|c| {
                    c.instances == cfg.instances
                        && c.health == cfg.health
                        && c.ejection == cfg.ejection
                });
                same.then(|| old.health.clone())
            });
            pools.push(Pool::build(name, cfg, kept)?);
        }
        let upstream_header = config
            .upstream_header
            .as_deref()
            .map(|n| http::HeaderName::from_bytes(n.as_bytes()))
            .transpose()?;
        let limits = config
            .rate_limits
            .iter()
            .map(|c| {
                let same = previous.and_then(|p| {
                    p.limits
                        .iter()
                        .zip(&p.config.rate_limits)
                        .find(|(_, oc)| *oc == c)
                });
                same.map_or_else(|| Arc::new(Limit::new(c)), |(l, _)| l.clone())
            })
            .collect();
        let metrics = match previous {
            Some(p) => p.metrics.clone(),
            None => Arc::new(Metrics::new(&config)?),
        };
        for pool in &pools {
            for (i, inst) in pool.instances.iter().enumerate() {
                metrics
                    .upstream_up
                    .with_label_values(&[&pool.name, &inst.name])
                    .set(pool.health.usable(i) as i64);
            }
        }
        let upstream_metrics = pools
            .iter()
            .map(|p| p.instances.iter().map(|_| OnceLock::new()).collect())
            .collect();
        let auth = crate::auth::Auth::new(
            &config,
            metrics.auth.clone(),
            previous.and_then(|p| p.auth.as_ref()),
        )?;
        Ok(Gateway {
            auth,
            config,
            table,
            pools,
            limits,
            metrics,
            upstream_header,
            upstream_metrics,
        })
    }

    /// The metric handles of instance `inst` of pool `pool`.
    fn upstream_metrics(&self, pool: usize, inst: usize) -> &UpstreamMetrics {
        self.upstream_metrics[pool][inst].get_or_init(|| {
            let p = &self.pools[pool];
            self.metrics.upstream(&p.name, &p.instances[inst].name)
        })
    }

    /// Record a change of an instance's health: metrics and a log line.
    pub fn note_health(&self, pool: usize, i: usize, change: health::Change) {
        let p = &self.pools[pool];
        let inst = &p.instances[i].name;
        match change {
            health::Change::None => return,
            health::Change::Ejected(t) => {
                self.metrics
                    .upstream_ejections
                    .with_label_values(&[&p.name, inst])
                    .inc();
                tracing::warn!(
                    "pool {}: instance {inst} ejected for {t:?} after failed requests",
                    p.name
                );
            }
            health::Change::WentDown => tracing::warn!(
                "pool {}: instance {inst} is down (health checks failing)",
                p.name
            ),
            health::Change::CameUp => {
                tracing::info!("pool {}: instance {inst} is up again", p.name)
            }
        }
        self.metrics
            .upstream_up
            .with_label_values(&[&p.name, inst])
            .set(p.health.usable(i) as i64);
    }

    /// The first limit that refuses this request, counting every decision.
    fn limited(&self, input: &LimitInput) -> Option<(&Limit, Duration)> {
        for l in &self.limits {
            let decision = match l.check(input) {
                Verdict::NotApplicable => continue,
                Verdict::Allowed => "allowed",
                Verdict::DryRunLimited => "dry_run_limited",
                Verdict::Limited(wait) => {
                    self.metrics
                        .rate_limits
                        .with_label_values(&[&l.name, "limited"])
                        .inc();
                    return Some((l, wait));
                }
            };
            self.metrics
                .rate_limits
                .with_label_values(&[&l.name, decision])
                .inc();
        }
        None
    }
}

/// Per-request state, carried through the phases.
pub struct RequestCtx {
    /// The gateway (config, routes, pools, limits) this request started on; a reload swaps in
    /// a new one for new requests while this one finishes on its own.
    gw: Arc<Gateway>,
    started: Instant,
    /// Claimed `Mcp-Method` (trimmed).
    method: Option<String>,
    /// Claimed, decoded `Mcp-Name`, for the methods that carry one.
    name: Option<String>,
    route: Option<RouteRef>,
    pool: usize,
    instance: Option<usize>,
    /// Instances this request was sent to (connect failures are retried elsewhere).
    tried: Tried,
    /// When the current instance was chosen, while a request is in flight to it.
    upstream_since: Option<Instant>,
    /// Whether this request's headers are checked against its body.
    check: bool,
    hold: BodyHold,
    body_len: usize,
    envelope: Option<Envelope>,
    /// The gateway's own answer, when it refuses the request.
    rejection: Option<(Rejection, Option<Box<RawValue>>)>,
    /// Extra response headers for the gateway's own answer (e.g. `Retry-After`).
    extra_headers: Vec<(&'static str, String)>,
    /// Whether the request body was fully read (the client connection may be reused).
    body_consumed: bool,
    /// Spots `input_required` in a JSON response as it streams past.
    scanner: Option<InputRequiredScanner>,
    /// The caller verified by `auth` (`None`: auth off, or no token where none is required).
    identity: Option<Arc<crate::auth::Identity>>,
    /// Whether this request's list result is filtered for the caller (auth rules).
    list_filter: bool,
    /// The list response being held for filtering.
    list_hold: Option<crate::auth::filter::ListHold>,
    /// The list response was not JSON: it is replaced by an error.
    list_unreadable: bool,
}

/// The pingora service.
pub struct Proxy {
    live: Arc<Live>,
}

impl Proxy {
    pub fn new(live: Arc<Live>) -> Self {
        Proxy { live }
    }
}

/// Write a complete JSON response from the gateway itself.
async fn respond(
    session: &mut Session,
    status: u16,
    body: Vec<u8>,
    extra: &[(&'static str, String)],
) -> Result<()> {
    let mut resp = ResponseHeader::build(status, Some(4))?;
    resp.insert_header(http::header::CONTENT_TYPE, "application/json")?;
    resp.insert_header(http::header::CONTENT_LENGTH, body.len().to_string())?;
    for (k, v) in extra {
        resp.insert_header(*k, v.as_str())?;
    }
    session.write_response_header(Box::new(resp), false).await?;
    session
        .write_response_body(Some(Bytes::from(body)), true)
        .await
}

/// Refuse a request before any upstream is involved.
async fn refuse(
    session: &mut Session,
    ctx: &mut RequestCtx,
    rej: Rejection,
    id: Option<Box<RawValue>>,
) -> Result<bool> {
    if rej.status == 405 {
        ctx.extra_headers.push(("allow", "POST".to_string()));
    }
    if !ctx.body_consumed {
        // The rest of the body is not worth draining: close the connection after answering.
        session.set_keepalive(None);
    }
    respond(
        session,
        rej.status,
        rej.body(id.as_deref()),
        &ctx.extra_headers,
    )
    .await?;
    ctx.rejection = Some((rej, id));
    Ok(true)
}

/// Refuse a request decided on its headers, echoing its id: from the envelope when the body was
/// already read, otherwise after reading the (bounded) body.
async fn refuse_with_id(
    session: &mut Session,
    ctx: &mut RequestCtx,
    rej: Rejection,
    limit: usize,
) -> Result<bool> {
    let id = if ctx.body_consumed {
        ctx.envelope.as_mut().and_then(|e| e.id.take())
    } else {
        match read_body(session, limit).await {
            Ok(body) => {
                ctx.body_consumed = true;
                ctx.body_len = body.len();
                match inspect::inspect(&body) {
                    Ok(env) => env.id,
                    Err(e) => envelope_rejection(e).1,
                }
            }
            Err(_) => None,
        }
    };
    refuse(session, ctx, rej, id).await
}

/// Read a whole (bounded) body inside `request_filter`, for requests answered by the gateway.
async fn read_body(session: &mut Session, limit: usize) -> std::result::Result<Bytes, Rejection> {
    let mut hold = BodyHold::default();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => hold.push(chunk, limit).map_err(|t| too_large(t.limit))?,
            Ok(None) => return Ok(hold.take()),
            Err(e) => {
                return Err(Rejection::new(
                    400,
                    codes::GATEWAY_REQUEST_INCOMPLETE,
                    "body-incomplete",
                    format!("The request body could not be read completely: {e}"),
                ))
            }
        }
    }
}

fn too_large(limit: usize) -> Rejection {
    Rejection::new(
        413,
        codes::GATEWAY_BODY_TOO_LARGE,
        "body-too-large",
        format!("The request body is larger than this gateway's limit of {limit} bytes (limits.max_body_bytes)"),
    )
}

fn envelope_rejection(e: EnvelopeError) -> (Rejection, Option<Box<RawValue>>) {
    let rej = e.rejection();
    let id = match e {
        EnvelopeError::Invalid { id, .. } => id,
        EnvelopeError::Parse(_) => None,
    };
    (rej, id)
}

/// Inspect and validate a complete body: the envelope, or the answer to send instead.
fn inspect_and_validate(
    metrics: &Metrics,
    headers: &http::HeaderMap,
    body: &[u8],
) -> std::result::Result<Envelope, (Rejection, Option<Box<RawValue>>)> {
    let checked = inspect::inspect(body)
        .map_err(envelope_rejection)
        .and_then(|env| match validate::validate(headers, &env) {
            Ok(()) => Ok(env),
            Err(rej) => Err((rej, env.id)),
        });
    match &checked {
        Ok(_) => metrics.check_passed(),
        Err((rej, _)) => metrics
            .header_checks
            .with_label_values(&["rejected", rej.reason])
            .inc(),
    }
    checked
}

/// The error that cuts off an upstream request the gateway refused mid-body.
fn refused_error() -> Box<Error> {
    Error::explain(
        ErrorType::Custom("mcp-edge refused the request"),
        "request refused by the gateway",
    )
}

#[async_trait]
impl ProxyHttp for Proxy {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx {
            gw: self.live.load(),
            started: Instant::now(),
            method: None,
            name: None,
            route: None,
            pool: 0,
            instance: None,
            tried: Tried::default(),
            upstream_since: None,
            check: true,
            hold: BodyHold::default(),
            body_len: 0,
            envelope: None,
            rejection: None,
            extra_headers: Vec::new(),
            body_consumed: false,
            scanner: None,
            identity: None,
            list_filter: false,
            list_hold: None,
            list_unreadable: false,
        }
    }

    /// Route and limit (and refuse early) on what the headers claim, before the body.
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        let gw = ctx.gw.clone();
        let limits = &gw.config.limits;
        session.set_read_timeout(Some(gw.config.timeouts.downstream_read));
        session.set_write_timeout(Some(gw.config.timeouts.downstream_write));

        if let Some(answered) = auth_stage::metadata(session, &gw).await? {
            return Ok(answered);
        }
        let req = session.req_header();
        if req.uri.path() != gw.config.endpoint {
            let msg = format!(
                "Not found: the MCP endpoint of this gateway is POST {}",
                gw.config.endpoint
            );
            let rej = Rejection::new(404, codes::INVALID_REQUEST, "not-found", msg);
            return refuse(session, ctx, rej, None).await;
        }
        if req.method != http::Method::POST {
            let msg = format!(
                "Method {} is not allowed: MCP 2026-07-28 uses POST only",
                req.method
            );
            let rej = Rejection::new(405, codes::INVALID_REQUEST, "method-not-allowed", msg);
            return refuse(session, ctx, rej, None).await;
        }
        if let Some(origin) = req.headers.get(http::header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !gw.config.origins.allow.iter().any(|p| p.matches(origin)) {
                let msg = format!(
                    "Origin {origin:?} is not allowed to call this gateway; add it to origins.allow"
                );
                let rej = Rejection::new(403, codes::INVALID_REQUEST, "origin-refused", msg);
                return refuse(session, ctx, rej, None).await;
            }
        }
        let header_bytes: usize = req
            .headers
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum();
        if header_bytes > limits.max_header_bytes {
            let msg = format!(
                "The request headers total {header_bytes} bytes, over this gateway's limit of {} (limits.max_header_bytes)",
                limits.max_header_bytes
            );
            let rej = Rejection::new(431, codes::INVALID_REQUEST, "headers-too-large", msg);
            return refuse(session, ctx, rej, None).await;
        }
        let declared = req
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok());
        if declared.is_some_and(|n| n > limits.max_body_bytes) {
            return refuse(session, ctx, too_large(limits.max_body_bytes), None).await;
        }
        let expects_continue = req
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));

        // Route on the claims.
        let claims = Claims::read(&req.headers);
        let doomed = claims.doomed(validate::POLICY);
        ctx.method = claims.method.value().map(str::to_owned);
        ctx.name = match ctx.method.as_deref().and_then(name_field) {
            Some(_) => claims.name.value().map(str::to_owned),
            None => None,
        };
        drop(claims);
        if expects_continue {
            session.write_continue_response().await?;
        }

        if doomed {
            // The headers alone doom the request; read the body only to echo its id. The retry
            // buffer keeps a small body forwardable in the one case that still passes: a
            // notification, which needs no MCP headers.
            session.enable_retry_buffering();
            let body = match read_body(session, limits.max_body_bytes).await {
                Ok(b) => b,
                Err(rej) => return refuse(session, ctx, rej, None).await,
            };
            ctx.body_consumed = true;
            ctx.body_len = body.len();
            match inspect_and_validate(&gw.metrics, &session.req_header().headers, &body) {
                Err((rej, id)) => return refuse(session, ctx, rej, id).await,
                Ok(env) if session.as_ref().retry_buffer_truncated() => {
                    let rej = Rejection::header_mismatch(
                        "mcp-method-missing",
                        "A notification larger than 64 KiB must carry the Mcp-Method header",
                    );
                    return refuse(session, ctx, rej, env.id).await;
                }
                Ok(env) => {
                    ctx.envelope = Some(env);
                    ctx.check = false; // already checked
                }
            }
        }

        let selected = gw
            .table
            .select_ref(ctx.method.as_deref(), ctx.name.as_deref());
        let Some((route_ref, route)) = selected.and_then(|r| Some((r, gw.table.get(r)?))) else {
            let msg = format!(
                "No route for method {:?}{}: this gateway has no default_route",
                ctx.method.as_deref().unwrap_or(""),
                ctx.name
                    .as_deref()
                    .map(|n| format!(" name {n:?}"))
                    .unwrap_or_default()
            );
            let rej = Rejection::new(404, codes::METHOD_NOT_FOUND, "no-route", msg);
            return refuse_with_id(session, ctx, rej, limits.max_body_bytes).await;
        };
        ctx.pool = route.pool;
        ctx.route = Some(route_ref);

        // Auth: who is calling, and may they call what the headers claim.
        if let Some(answered) = auth_stage::admit(session, ctx, &gw, route_ref).await? {
            return Ok(answered);
        }
        ctx.list_filter = auth_stage::wants_list_filter(&gw, ctx.method.as_deref());

        // Limit, on the same claims (a spoofed claim is caught by the check below).
        if !gw.limits.is_empty() {
            let input = LimitInput {
                route: &route.name,
                method: ctx.method.as_deref(),
                name: ctx.name.as_deref(),
                headers: &session.req_header().headers,
                client_ip: session
                    .client_addr()
                    .and_then(|a| a.as_inet())
                    .map(|a| a.ip()),
                identity: ctx.identity.as_deref(),
            };
            if let Some((limit, wait)) = gw.limited(&input) {
                let secs = limit::retry_after_secs(wait);
                let rej = Rejection::new(
                    429,
                    codes::GATEWAY_RATE_LIMITED,
                    "rate-limited",
                    format!("Rate limit {:?} exceeded; retry after {secs} s", limit.name),
                )
                .with_data(serde_json::json!({ "limit": limit.name, "retryAfterSeconds": secs }));
                ctx.extra_headers.push(("retry-after", secs.to_string()));
                return refuse_with_id(session, ctx, rej, limits.max_body_bytes).await;
            }
        }

        if !doomed {
            // Auth decides on the claimed method and name: with it, every body is checked.
            let auth_check = gw.auth.as_ref().is_some_and(|a| a.needs_body_check());
            ctx.check = auth_check || validate::sampled(route.sample);
            if !ctx.check {
                gw.metrics.check_skipped();
            }
        }
        Ok(false)
    }

    /// Balance: pick an instance of the route's pool.
    async fn upstream_peer(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        let gw = ctx.gw.clone();
        let pool = &gw.pools[ctx.pool];
        let headers = &session.req_header().headers;
        let identity = ctx.identity.as_deref();
        let idx = pool.pick_for(ctx.name.as_deref(), headers, identity, ctx.tried);
        let idx = idx.ok_or_else(|| {
            let msg = format!("pool {} has no usable instance left", pool.name);
            Error::explain(ErrorType::ConnectNoRoute, msg)
        })?;
        self.release_instance(ctx);
        ctx.instance = Some(idx);
        ctx.tried.add(idx);
        ctx.upstream_since = Some(Instant::now());
        let inst = &pool.instances[idx];
        gw.upstream_metrics(ctx.pool, idx).in_flight.inc();
        let t = &gw.config.timeouts;
        let mut peer = HttpPeer::new(inst.addr, false, String::new());
        peer.options.connection_timeout = Some(t.connect);
        peer.options.total_connection_timeout = Some(t.connect);
        peer.options.read_timeout = Some(t.upstream_read);
        peer.options.write_timeout = Some(t.upstream_write);
        peer.options.idle_timeout = Some(t.upstream_idle);
        Ok(Box::new(peer))
    }

    /// Forward: the request as the client sent it, minus hop-by-hop headers.
    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream: &mut pingora::http::RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        auth_stage::upstream_headers(ctx, upstream)?;
        const HOP_BY_HOP: [&str; 7] = [
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "trailer",
            "upgrade",
            "expect",
        ];
        // The common case has none of them: one pass over the names instead of a lookup per
        // hop-by-hop name (names listed in `Connection` need a `Connection` header).
        if !upstream
            .headers
            .keys()
            .any(|k| HOP_BY_HOP.contains(&k.as_str()))
        {
            return Ok(());
        }
        let listed: Vec<String> = upstream
            .headers
            .get_all(http::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
            .filter(|s| !s.is_empty() && s != "close" && s != "keep-alive")
            .collect();
        for name in listed {
            upstream.remove_header(name.as_str());
        }
        for name in HOP_BY_HOP {
            upstream.remove_header(name);
        }
        Ok(())
    }

    /// Inspect and validate: hold the body until it is complete, check it, release it whole.
    async fn request_body_filter(
        &self,
        session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let limit = ctx.gw.config.limits.max_body_bytes;
        if !ctx.check {
            // Header-only fast path: stream through, bounded.
            ctx.body_len += body.as_ref().map_or(0, Bytes::len);
            if ctx.body_len > limit {
                ctx.rejection = Some((too_large(limit), None));
                return Err(refused_error());
            }
            if end_of_stream {
                // The whole request went to the instance (counted once, whatever the connect
                // retries before it).
                self.count_delivery(ctx);
            }
            return Ok(());
        }
        if let Some(chunk) = body.take() {
            if let Err(t) = ctx.hold.push(chunk, limit) {
                ctx.rejection = Some((too_large(t.limit), None));
                return Err(refused_error());
            }
        }
        if !end_of_stream {
            // An empty chunk is skipped by pingora; `None` would end the upstream body.
            *body = Some(Bytes::new());
            return Ok(());
        }
        ctx.body_consumed = true;
        ctx.body_len = ctx.hold.len();
        let full = ctx.hold.take();
        match inspect_and_validate(&ctx.gw.metrics, &session.req_header().headers, &full) {
            Ok(env) => {
                ctx.envelope = Some(env);
                *body = Some(full);
                self.count_delivery(ctx);
                Ok(())
            }
            Err(refusal) => {
                ctx.rejection = Some(refusal);
                Err(refused_error())
            }
        }
    }

    /// Name the instance that served the response; watch JSON responses for `input_required`.
    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let gw = ctx.gw.clone();
        if let Some(idx) = ctx.instance {
            let pool = &gw.pools[ctx.pool];
            let inst = &pool.instances[idx];
            if let Some(since) = ctx.upstream_since {
                gw.upstream_metrics(ctx.pool, idx)
                    .duration
                    .observe(since.elapsed().as_secs_f64());
            }
            if let Some(name) = &gw.upstream_header {
                upstream_response.insert_header(name.clone(), inst.header_value.clone())?;
            }
            let change = pool
                .health
                .on_response(idx, upstream_response.status.as_u16());
            gw.note_health(ctx.pool, idx, change);
        }
        let json = upstream_response
            .headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
        if json && name_field(ctx.method.as_deref().unwrap_or("")).is_some() {
            ctx.scanner = Some(InputRequiredScanner::default());
        }
        auth_stage::on_response_header(ctx, upstream_response);
        Ok(())
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Duration>> {
        auth_stage::on_response_body(ctx, body, end_of_stream);
        if let (Some(scanner), Some(chunk)) = (ctx.scanner.as_mut(), body.as_ref()) {
            if !scanner.found() {
                scanner.feed(chunk);
            }
        }
        Ok(None)
    }

    /// A request that never reached its instance may go to another one.
    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        let tried = ctx.tried.count() as usize;
        let pool = &ctx.gw.pools[ctx.pool];
        if let Some(idx) = ctx.instance {
            ctx.gw
                .metrics
                .upstream_errors
                .with_label_values(&[&pool.name, &pool.instances[idx].name, "connect"])
                .inc();
            ctx.gw
                .note_health(ctx.pool, idx, pool.health.on_connect_failure(idx));
        }
        if tried <= ctx.gw.config.retries.connect_failure && tried < pool.instances.len() {
            e.set_retry(true);
        }
        e
    }

    /// Answer a refusal found mid-body, or an upstream failure, with a JSON-RPC error body.
    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        let upstream_side = e.esource() != &pingora::ErrorSource::Downstream;
        if ctx.rejection.is_none() && ctx.envelope.is_none() && !ctx.body_consumed && upstream_side
        {
            // The upstream failed before the body was read (e.g. it could not be reached): read
            // it now, bounded, to echo the request id and keep the client connection usable.
            let limit = ctx.gw.config.limits.max_body_bytes;
            if let Ok(body) = read_body(session, limit).await {
                ctx.body_consumed = true;
                ctx.body_len = body.len();
                ctx.envelope = inspect::inspect(&body).ok();
            }
        }
        let id = ctx.envelope.as_ref().and_then(|env| env.id.clone());
        let (rej, id) = match ctx.rejection.take() {
            Some(r) => r,
            None => {
                let rej = upstream_failure(e, ctx, &ctx.gw);
                if let (Some(idx), true) = (ctx.instance, upstream_side) {
                    let pool = &ctx.gw.pools[ctx.pool];
                    let inst = &pool.instances[idx].name;
                    ctx.gw
                        .metrics
                        .upstream_errors
                        .with_label_values(&[&pool.name, inst, rej.reason])
                        .inc();
                }
                (rej, id)
            }
        };
        if matches!(
            e.etype(),
            ErrorType::ReadError | ErrorType::WriteError | ErrorType::ConnectionClosed
        ) && e.esource() == &pingora::ErrorSource::Downstream
        {
            // The client is gone; nothing can be written.
            ctx.rejection = Some((rej, id));
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        // pingora does not reuse a client connection after an error once an upstream was
        // chosen; say so in the answer (`Connection: close`) so the client does not send its next
        // request into a closing connection.
        session.set_keepalive(None);
        let status = rej.status;
        if let Err(err) =
            respond(session, status, rej.body(id.as_deref()), &ctx.extra_headers).await
        {
            tracing::debug!("could not send the error response: {err}");
        }
        ctx.rejection = Some((rej, id));
        FailToProxy {
            error_code: status,
            can_reuse_downstream: false,
        }
    }

    fn suppress_error_log(&self, _session: &Session, ctx: &RequestCtx, _error: &Error) -> bool {
        // Refusals are logged once, in the access log.
        ctx.rejection.is_some()
    }

    /// Observe: metrics and one access-log line.
    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut RequestCtx) {
        let gw = ctx.gw.clone();
        self.release_instance(ctx);
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        let rejection = ctx.rejection.as_ref().map(|(r, _)| r);
        let route = ctx.route.and_then(|r| gw.table.get(r));
        let pool = route.map(|_| gw.pools[ctx.pool].name.as_str());
        let instance = ctx
            .instance
            .map(|i| gw.pools[ctx.pool].instances[i].name.as_str());
        let outcome = observe::Outcome {
            method: ctx.method.as_deref(),
            name: ctx.name.as_deref(),
            route: route.map(|r| r.name.as_str()),
            pool,
            instance,
            status,
            gateway_code: rejection.map(|r| r.code),
            reason: rejection.map(|r| r.reason),
            checked: ctx.envelope.is_some(),
            retry_leg: ctx.envelope.as_ref().is_some_and(Envelope::is_retry_leg),
            input_required: ctx
                .scanner
                .as_ref()
                .is_some_and(InputRequiredScanner::found),
            bytes_in: ctx.body_len,
            bytes_out: session.body_bytes_sent(),
            duration: ctx.started.elapsed(),
        };
        gw.metrics.record(&outcome);
        observe::access_log(&outcome);
    }
}

impl Proxy {
    /// Count a request as sent to its instance (a request cut off by the check is not).
    fn count_delivery(&self, ctx: &RequestCtx) {
        if let Some(idx) = ctx.instance {
            ctx.gw.upstream_metrics(ctx.pool, idx).requests.inc();
        }
    }

    /// The request no longer occupies its instance (finished, or moving to another one).
    fn release_instance(&self, ctx: &mut RequestCtx) {
        if let (Some(idx), Some(_)) = (ctx.instance, ctx.upstream_since.take()) {
            ctx.gw.upstream_metrics(ctx.pool, idx).in_flight.dec();
        }
    }
}

/// The answer for a request that could not be proxied.
fn upstream_failure(e: &Error, ctx: &RequestCtx, gw: &Gateway) -> Rejection {
    let instance = ctx
        .instance
        .map(|i| gw.pools[ctx.pool].instances[i].name.clone())
        .unwrap_or_else(|| format!("pool {}", gw.pools[ctx.pool].name));
    use ErrorType::*;
    match e.etype() {
        ConnectTimedout | ConnectRefused | ConnectNoRoute | ConnectError | SocketError | BindError => Rejection::new(
            502,
            codes::GATEWAY_UPSTREAM_UNAVAILABLE,
            "upstream-unavailable",
            format!("The upstream instance {instance} could not be reached ({}); the request was not delivered", e.etype().as_str()),
        ),
        ReadTimedout | WriteTimedout => Rejection::new(
            504,
            codes::GATEWAY_UPSTREAM_TIMEOUT,
            "upstream-timeout",
            format!("The upstream instance {instance} did not answer in time ({})", e.etype().as_str()),
        ),
        _ if e.esource() == &pingora::ErrorSource::Downstream => Rejection::new(
            400,
            codes::GATEWAY_REQUEST_INCOMPLETE,
            "request-incomplete",
            format!("The request could not be read from the client: {}", e.etype().as_str()),
        ),
        _ => Rejection::new(
            502,
            codes::GATEWAY_UPSTREAM_FAILED,
            "upstream-failed",
            format!(
                "The upstream instance {instance} failed after the request was sent ({}); it was not re-sent because tools/call may have side effects",
                e.etype().as_str()
            ),
        ),
    }
}
