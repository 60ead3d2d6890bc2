//! The gateway's metrics: the Prometheus registry, its families (each component's in its own
//! telemetry file, a submodule here or a component folder's `telemetry.rs`: the rule is stated
//! in [`super`]), one [`Outcome`] per finished request, and the access-log line (the observe
//! stage, `journey::observe`, fills them in).
//!
//! Label values are bounded: `method` takes the methods of the protocol (others are `_other`),
//! `name` takes the names written in the config plus the first `metrics.name_label_limit` other
//! names seen (the rest are `_other`), `route`, `pool` and `upstream` (an instance's `host:port`; not `instance`, which Prometheus
//! keeps for the scrape target) come from the config, and
//! `code` and `reason` from fixed lists. The access log never carries a body or a bearer token.

pub use super::outcome::Outcome;

pub(crate) mod bridge;
pub(crate) mod listeners;
pub(crate) mod pins;
pub(crate) mod seal;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::sync::{Arc, OnceLock};

use crate::config::Config;
use crate::config::Pattern;
use crate::gateway::balance::telemetry::BalanceMetrics;
use crate::gateway::concurrency::telemetry::ConcurrencyMetrics;
use crate::gateway::federation::telemetry::FederationMetrics;

pub(crate) use crate::gateway::telemetry::labels::{code_label, method_label, NameLabels};
use crate::gateway::telemetry::labels::{method_index, METHOD_LABELS};

fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "none",
    }
}

/// The metrics of one upstream instance, resolved once: the per-request path then touches atomics
/// only, without hashing label values under the metric family's lock.
#[derive(Clone)]
pub(crate) struct UpstreamMetrics {
    pub requests: IntCounter,
    pub in_flight: IntGauge,
    pub duration: Histogram,
}

/// A label handle resolved on first use (so a series appears in `/metrics` exactly when it
/// would with a lookup per request) and reused after that.
struct Lazy<T>(OnceLock<T>);

impl<T> Default for Lazy<T> {
    fn default() -> Self {
        Lazy(OnceLock::new())
    }
}

impl<T> Lazy<T> {
    fn get(&self, init: impl FnOnce() -> T) -> &T {
        self.0.get_or_init(init)
    }
}

/// The `kind` values of `upstream_errors_total`.
pub(crate) const UPSTREAM_ERROR_KINDS: [&str; 6] = [
    "connect",
    "upstream-tls",
    "upstream-unavailable",
    "upstream-timeout",
    "upstream-failed",
    "request-incomplete",
];

/// Every metric the gateway exports.
pub struct Metrics {
    pub registry: Registry,
    pub names: NameLabels,
    requests: IntCounterVec,
    duration: HistogramVec,
    request_bytes: HistogramVec,
    response_bytes: HistogramVec,
    pub upstream_requests: IntCounterVec,
    pub upstream_in_flight: IntGaugeVec,
    pub upstream_errors: IntCounterVec,
    pub upstream_duration: HistogramVec,
    pub upstream_up: IntGaugeVec,
    pub upstream_ejections: IntCounterVec,
    /// Active health probes by instance and result (`pass`, `fail`).
    pub health_checks: IntCounterVec,
    pub header_checks: IntCounterVec,
    pub rate_limits: IntCounterVec,
    pub retry_legs: IntCounterVec,
    pub input_required: IntCounterVec,
    /// tasks/get|update|cancel by how their instance was chosen (see `balance::TaskRoute`).
    pub task_routing: IntCounterVec,
    /// The auth stage's metrics (`auth_*`).
    pub auth: Arc<crate::auth::metrics::AuthMetrics>,
    /// MRTR flow metrics ([`crate::gateway::telemetry::flows`]).
    pub flows: crate::gateway::telemetry::flows::FlowMetrics,
    /// Concurrency-limit metrics ([`crate::gateway::concurrency::stages`]).
    pub concurrency: ConcurrencyMetrics,
    pub federation: FederationMetrics,
    pub bridge: bridge::BridgeMetrics,
    /// The requestState seal's metrics ([`crate::gateway::stages::seal`]).
    pub seal: seal::SealMetrics,
    pub audit: crate::gateway::telemetry::audit::AuditMetrics,
    /// The balancer's view of each instance ([`crate::gateway::balance::stages::metrics`]).
    pub balance: BalanceMetrics,
    /// The last refused or failed requests, for the console ([`crate::gateway::telemetry::recent`]).
    pub recent: crate::gateway::telemetry::recent::Recent,
    checked: Lazy<IntCounter>,
    skipped: Lazy<IntCounter>,
    /// Request and response body size histograms, by [`method_index`].
    body_bytes: [Lazy<(Histogram, Histogram)>; METHOD_LABELS.len()],
}

pub(crate) fn exact_names(cfg: &Config) -> Vec<String> {
    let route_names = cfg.routes.iter().filter_map(|r| r.matcher.name.clone());
    let limit_names = cfg
        .rate_limits
        .iter()
        .filter_map(|l| l.matcher.name.clone());
    route_names
        .chain(limit_names)
        .filter_map(|p| match p {
            Pattern::Exact(s) => Some(s),
            _ => None,
        })
        .collect()
}

impl Metrics {
    pub(crate) fn new(cfg: &Config) -> prometheus::Result<Metrics> {
        let registry = Registry::new_custom(Some("mcp_edge".into()), None)?;
        let latency = vec![
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0,
        ];
        let sizes = prometheus::exponential_buckets(64.0, 4.0, 10)?; // 64 B .. 16 MiB
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> prometheus::Result<IntCounterVec> {
                let c = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(c.clone()))?;
                Ok(c)
            };
        let histogram = |name: &str,
                         help: &str,
                         labels: &[&str],
                         buckets: &[f64]|
         -> prometheus::Result<HistogramVec> {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                labels,
            )?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let rlabels = ["method", "name", "route", "pool", "status", "code"];
        let m = Metrics {
            requests: counter("requests_total", "MCP requests answered, by method, name, route, pool, HTTP status class and the JSON-RPC code of gateway-made errors.", &rlabels)?,
            duration: histogram("request_duration_seconds", "Time from the request's arrival to the end of its response.", &["method", "name", "route", "pool"], &latency)?,
            request_bytes: histogram("request_body_bytes", "Request body sizes.", &["method"], &sizes)?,
            response_bytes: histogram("response_body_bytes", "Response body sizes.", &["method"], &sizes)?,
            upstream_requests: counter("upstream_requests_total", "Requests sent to each upstream instance.", &["pool", "upstream"])?,
            upstream_in_flight: {
                let g = IntGaugeVec::new(Opts::new("upstream_in_flight_requests", "Requests in flight to each upstream instance."), &["pool", "upstream"])?;
                registry.register(Box::new(g.clone()))?;
                g
            },
            upstream_errors: counter("upstream_errors_total", "Upstream failures by instance and kind.", &["pool", "upstream", "kind"])?,
            upstream_duration: histogram("upstream_response_seconds", "Time from choosing an instance to its response header.", &["pool", "upstream"], &latency)?,
            upstream_up: {
                let g = IntGaugeVec::new(
                    Opts::new("upstream_up", "1 when an instance gets new requests (health checks pass and it is not ejected), else 0."),
                    &["pool", "upstream"],
                )?;
                registry.register(Box::new(g.clone()))?;
                g
            },
            upstream_ejections: counter(
                "upstream_ejections_total",
                "Passive ejections of instances after failed requests.",
                &["pool", "upstream"],
            )?,
            health_checks: counter(
                "health_checks_total",
                "Active health probes of each instance: result is pass or fail.",
                &["pool", "upstream", "result"],
            )?,
            header_checks: counter("header_checks_total", "Header-vs-body checks: result is checked, skipped (sampled out) or rejected; reason names what failed.", &["result", "reason"])?,
            rate_limits: counter("rate_limit_decisions_total", "Rate-limit decisions by limit: allowed, limited, or dry_run_limited.", &["limit", "decision"])?,
            retry_legs: counter("mrtr_retry_legs_total", "MRTR retry legs (requests carrying requestState or inputResponses).", &["method", "name"])?,
            input_required: counter("mrtr_input_required_total", "input_required results seen in JSON responses.", &["method", "name"])?,
            task_routing: counter("task_routing_total", "Tasks-extension requests (tasks/get, tasks/update, tasks/cancel) by routing result: owner (sent to the instance its task id names), owner_unreachable (that instance could not be reached; answered 502 without trying another), unknown_owner (the id names no instance of the pool) or no_hint (balanced as usual).", &["pool", "result"])?,
            flows: crate::gateway::telemetry::flows::FlowMetrics::register(&registry)?,
            concurrency: ConcurrencyMetrics::register(&registry)?,
            federation: FederationMetrics::register(&registry)?,
            bridge: bridge::BridgeMetrics::register(&registry)?,
            seal: seal::SealMetrics::register(&registry)?,
            audit: crate::gateway::telemetry::audit::AuditMetrics::register(&registry)?,
            balance: BalanceMetrics::register(&registry)?,
            recent: Default::default(),
            names: NameLabels::new(exact_names(cfg), cfg.metrics.name_label_limit),
            auth: Arc::new(crate::auth::metrics::AuthMetrics::register(&registry)?),
            checked: Lazy::default(),
            skipped: Lazy::default(),
            body_bytes: Default::default(),
            registry,
        };
        let info = IntGaugeVec::new(
            Opts::new("build_info", "The running mcp-edge version."),
            &["version"],
        )?;
        info.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        m.registry.register(Box::new(info))?;
        Ok(m)
    }

    /// The Prometheus text exposition.
    pub(crate) fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding gathered families into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }

    /// The handles of one upstream instance's metrics (resolve once, then keep them).
    pub(crate) fn upstream(&self, pool: &str, instance: &str) -> UpstreamMetrics {
        UpstreamMetrics {
            requests: self.upstream_requests.with_label_values(&[pool, instance]),
            in_flight: self.upstream_in_flight.with_label_values(&[pool, instance]),
            duration: self.upstream_duration.with_label_values(&[pool, instance]),
        }
    }

    /// Remove every series of an instance that a reload took out of its pool (so `/metrics` does
    /// not report instances that are gone, forever).
    pub(crate) fn forget_upstream(&self, pool: &str, instance: &str) {
        let labels = [pool, instance];
        let _ = self.upstream_requests.remove_label_values(&labels);
        let _ = self.upstream_in_flight.remove_label_values(&labels);
        let _ = self.upstream_duration.remove_label_values(&labels);
        let _ = self.upstream_up.remove_label_values(&labels);
        let _ = self.upstream_ejections.remove_label_values(&labels);
        self.balance.forget(pool, instance);
        for kind in UPSTREAM_ERROR_KINDS {
            let _ = self
                .upstream_errors
                .remove_label_values(&[pool, instance, kind]);
        }
    }

    /// Count a header check that passed (`result="checked"`).
    pub(crate) fn check_passed(&self) {
        self.checked
            .get(|| self.header_checks.with_label_values(&["checked", ""]))
            .inc();
    }

    /// Count a request whose check was sampled out (`result="skipped"`).
    pub(crate) fn check_skipped(&self) {
        self.skipped
            .get(|| self.header_checks.with_label_values(&["skipped", ""]))
            .inc();
    }

    /// Record a finished request.
    pub(crate) fn record(&self, o: &Outcome) {
        let mi = method_index(o.method);
        let method = METHOD_LABELS[mi];
        // A task id (the `Mcp-Name` of tasks/*) is not a name label: each is new.
        let task = o.method.is_some_and(crate::mcp::tasks::is_task_method);
        let name = self
            .names
            .label(if task { None } else { o.name }, o.checked);
        let route = o.route.unwrap_or("");
        let pool = o.pool.unwrap_or("");
        self.requests
            .with_label_values(&[
                method,
                &name,
                route,
                pool,
                status_class(o.status),
                code_label(o.gateway_code),
            ])
            .inc();
        self.duration
            .with_label_values(&[method, &name, route, pool])
            .observe(o.duration.as_secs_f64());
        let (request_bytes, response_bytes) = self.body_bytes[mi].get(|| {
            (
                self.request_bytes.with_label_values(&[method]),
                self.response_bytes.with_label_values(&[method]),
            )
        });
        request_bytes.observe(o.bytes_in as f64);
        response_bytes.observe(o.bytes_out as f64);
        if o.retry_leg {
            self.retry_legs.with_label_values(&[method, &name]).inc();
        }
        if o.input_required {
            self.input_required
                .with_label_values(&[method, &name])
                .inc();
        }
    }
}

/// Write the access-log line.
pub(crate) fn access_log(o: &Outcome) {
    tracing::info!(
        target: "mcp_edge::access",
        method = o.method.unwrap_or("-"),
        name = o.name.unwrap_or("-"),
        route = o.route.unwrap_or("-"),
        instance = o.instance.unwrap_or("-"),
        status = o.status,
        code = o.gateway_code,
        reason = o.reason,
        checked = o.checked,
        retry_leg = o.retry_leg,
        input_required = o.input_required,
        bytes_in = o.bytes_in,
        bytes_out = o.bytes_out,
        duration_ms = o.duration.as_secs_f64() * 1000.0,
    );
}
