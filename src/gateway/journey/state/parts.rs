//! The parts of a [`super::Gateway`] that are built from the config, each with what it carries
//! over from the previous gateway (`Gateway::new` lists them): the limits, flows, tracing,
//! credentials and metrics, the asserted headers and the upstream header.

use std::sync::Arc;

use crate::config::Config;

use crate::gateway::balance::stages::Pool;
use crate::gateway::rate_limits::stages as limit;
use crate::gateway::stages::route::RouteTable;
use crate::gateway::telemetry::flows::FlowStore;
use crate::gateway::telemetry::metrics::Metrics;
use crate::gateway::telemetry::trace::Tracing;

use super::Gateway;

/// The request headers a gateway built from `config` asserts to its upstreams.
pub(super) fn asserted_headers(
    config: &Config,
    auth: Option<&crate::auth::Auth>,
) -> Vec<http::HeaderName> {
    let mut names: Vec<http::HeaderName> = auth
        .map(|a| a.asserted_headers().cloned().collect())
        .unwrap_or_default();
    if config.tracing.enabled && config.tracing.propagate {
        names.push(http::HeaderName::from_static(
            crate::mcp::header::TRACEPARENT,
        ));
        names.push(http::HeaderName::from_static(
            crate::mcp::header::TRACESTATE,
        ));
    }
    names
}

/// The metrics registry: the previous gateway's (its fixed name labels updated, the series of
/// instances a reload removed forgotten), or a new one; each instance's `upstream_up` set.
pub(super) fn carry_metrics(
    config: &Config,
    pools: &[Pool],
    previous: Option<&Gateway>,
) -> anyhow::Result<Arc<Metrics>> {
    let metrics = match previous {
        Some(p) => {
            p.metrics
                .names
                .set_fixed(crate::gateway::telemetry::metrics::exact_names(config));
            for old in &p.pools {
                let kept = pools.iter().find(|n| n.name == old.name);
                for inst in &old.instances {
                    if !kept.is_some_and(|k| k.instances.iter().any(|i| i.name == inst.name)) {
                        p.metrics.forget_upstream(&old.name, &inst.name);
                    }
                }
            }
            p.metrics.clone()
        }
        None => Arc::new(Metrics::new(config)?),
    };
    for pool in pools {
        for (i, inst) in pool.instances.iter().enumerate() {
            metrics
                .upstream_up
                .with_label_values(&[&pool.name, &inst.name])
                .set(pool.health.usable(i) as i64);
        }
    }
    Ok(metrics)
}

/// The rate limits: a limit whose settings (and Redis) did not change keeps its buckets.
pub(super) fn build_limits(
    config: &Config,
    metrics: &Metrics,
    previous: Option<&Gateway>,
) -> anyhow::Result<(limit::Shared, Vec<Arc<limit::Limit>>)> {
    let shared = limit::Shared::new(config, previous.map(|p| &p.limit_shared), &metrics.registry)?;
    let limits = config
        .rate_limits
        .iter()
        .map(|c| {
            let same = previous.and_then(|p| {
                p.limits
                    .iter()
                    .zip(&p.config.rate_limits)
                    .find(|(_, oc)| *oc == c && p.config.redis == config.redis)
            });
            same.map_or_else(|| Arc::new(shared.limit(c)), |(l, _)| l.clone())
        })
        .collect();
    Ok((shared, limits))
}

/// The flow store: kept over a reload whose `flows` settings did not change.
pub(super) fn carry_flows(config: &Config, previous: Option<&Gateway>) -> Option<Arc<FlowStore>> {
    match previous {
        Some(p) if p.config.flows == config.flows => p.flows.clone(),
        _ => config
            .flows
            .enabled
            .then(|| Arc::new(FlowStore::new(&config.flows))),
    }
}

/// The span exporter: kept over a reload whose `tracing` settings did not change.
pub(super) fn carry_tracing(
    config: &Config,
    previous: Option<&Gateway>,
) -> anyhow::Result<Option<Arc<Tracing>>> {
    Ok(match previous {
        Some(p) if p.config.tracing == config.tracing => p.tracing.clone(),
        _ if config.tracing.enabled => Some(Arc::new(Tracing::new(&config.tracing)?)),
        _ => None,
    })
}

/// The audit trail: kept over a reload whose `audit` settings did not change (its writer
/// goes on), else a new writer; the flow store reports flow ends to it.
pub(super) fn carry_audit(
    config: &Config,
    metrics: &Metrics,
    flows: Option<&FlowStore>,
    previous: Option<&Gateway>,
) -> anyhow::Result<Option<Arc<crate::gateway::telemetry::audit::Audit>>> {
    let audit = match previous {
        Some(p) if p.config.audit == config.audit => p.audit.clone(),
        _ => crate::gateway::telemetry::audit::Audit::start(&config.audit, &metrics.audit)?,
    };
    if let Some(f) = flows {
        f.audit.store(audit.clone());
    }
    Ok(audit)
}

/// The pools' credentials (their metrics registered once, carried over reloads).
pub(super) fn build_credentials(
    config: &Config,
    table: &RouteTable,
    metrics: &Metrics,
    previous: Option<&Gateway>,
) -> anyhow::Result<crate::credentials::Credentials> {
    let credential_metrics = match previous {
        Some(p) => p.credentials.metrics.clone(),
        None => Arc::new(crate::credentials::CredentialMetrics::register(
            &metrics.registry,
        )?),
    };
    let pools = table.pools.iter().map(|name| {
        let cfg = config.pools.get(name).and_then(|p| p.credentials.as_ref());
        (name.as_str(), cfg)
    });
    crate::credentials::Credentials::build(
        pools,
        credential_metrics,
        previous.map(|p| &p.credentials),
    )
}

/// `upstream_header`: the response header naming the instance that served it.
pub(super) fn upstream_header(config: &Config) -> anyhow::Result<Option<http::HeaderName>> {
    let name = config.upstream_header.as_deref();
    Ok(name
        .map(|n| http::HeaderName::from_bytes(n.as_bytes()))
        .transpose()?)
}
