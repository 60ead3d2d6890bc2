//! The parts a [`Pool`] is built from: each instance resolved once (its address, its header
//! value, its task owner hints) and pingora's balancer over the instances and their weights.

use pingora::lb::discovery::Static;
use pingora::lb::selection::{BackendIter, BackendSelection};
use pingora::lb::{Backend, Backends, LoadBalancer};
use std::collections::BTreeSet;
use std::net::ToSocketAddrs;

use super::{Instance, Pool};
use crate::mcp::tasks::owner_hint;

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("instances", &self.instances)
            .finish()
    }
}

/// A pingora balancer over `instances` with their weights.
pub(super) fn balancer<S>(
    instances: &[Instance],
    weights: &[f64],
) -> anyhow::Result<LoadBalancer<S>>
where
    S: BackendSelection + 'static,
    S::Iter: BackendIter,
{
    let mut set = BTreeSet::new();
    for (inst, w) in instances.iter().zip(weights) {
        let mut b = Backend::new(&inst.addr.to_string())?;
        b.weight = *w as usize;
        set.insert(b);
    }
    let lb = LoadBalancer::from_backends(Backends::new(Static::new(set)));
    futures::FutureExt::now_or_never(lb.update())
        .ok_or_else(|| anyhow::anyhow!("a static pool blocked on discovery"))??;
    Ok(lb)
}

pub(super) fn instance(pool: &str, inst: &str) -> anyhow::Result<Instance> {
    let addr = inst
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| anyhow::anyhow!("pools.{pool}: cannot resolve instance {inst:?}"))?;
    let header_value = http::HeaderValue::from_str(inst).map_err(|_| {
        anyhow::anyhow!("pools.{pool}: instance {inst:?} is not a valid header value")
    })?;
    Ok(Instance {
        task_hints: [owner_hint(inst), owner_hint(&addr.to_string())],
        name: inst.to_string(),
        addr,
        header_value,
    })
}
