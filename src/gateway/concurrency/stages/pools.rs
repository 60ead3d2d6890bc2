//! The concurrency limits of each pool (`pools.<name>.concurrency`): the pool's own and its
//! tools' (`concurrency.tools`), which one a request takes, and what a reload keeps.
//!
//! A `tools/call` of a tool with a limit of its own takes a slot of that limit only; every other
//! request to the pool takes the pool's. So each limit learns from requests of one kind of
//! latency: a 200 ms tool does not make the pool's gradient think a 2 ms pool is slow.

use std::collections::HashMap;
use std::sync::Arc;

use super::pool::PoolLimit;
use super::ConcurrencyMetrics;
use crate::config::adaptive::PoolConcurrency;

/// One pool's limits.
#[derive(Default)]
pub struct PoolLimits {
    /// The pool's own (absent without `concurrency`).
    pub(crate) pool: Option<Arc<PoolLimit>>,
    /// Its tools', by exact name.
    pub(crate) tools: HashMap<String, Arc<PoolLimit>>,
}

impl PoolLimits {
    /// The limit a request takes: its tool's own for a call of a tool that has one, else the
    /// pool's (`None`: the pool has no limit).
    pub(crate) fn for_request(
        &self,
        method: Option<&str>,
        name: Option<&str>,
    ) -> Option<&Arc<PoolLimit>> {
        let tool = (method == Some(crate::mcp::methods::TOOLS_CALL))
            .then(|| self.tools.get(name?))
            .flatten();
        tool.or(self.pool.as_ref())
    }

    fn find(&self, tool: Option<&str>) -> Option<&Arc<PoolLimit>> {
        match tool {
            Some(t) => self.tools.get(t),
            None => self.pool.as_ref(),
        }
    }
}

/// The limits of a config's pools, indexed like the route table's pools. A limit whose settings
/// did not change keeps what it learned and the slots held across a reload.
pub(crate) fn build(
    config: &crate::config::Config,
    pools: &[String],
    previous: &[PoolLimits],
    metrics: &ConcurrencyMetrics,
) -> Vec<PoolLimits> {
    let one = |name: &str, tool: Option<&str>, c: &PoolConcurrency| {
        let kept = previous
            .iter()
            .filter_map(|p| p.find(tool))
            .find(|p| p.pool == name && &p.config == c);
        kept.cloned()
            .unwrap_or_else(|| Arc::new(PoolLimit::new(name, tool, c, metrics)))
    };
    pools
        .iter()
        .map(|name| {
            let Some(c) = config.pools.get(name).and_then(|p| p.concurrency.as_ref()) else {
                return PoolLimits::default();
            };
            PoolLimits {
                pool: Some(one(name, None, c)),
                tools: c
                    .tools
                    .iter()
                    .map(|(t, tc)| (t.clone(), one(name, Some(t), tc)))
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use prometheus::Registry;

    #[test]
    fn a_tool_with_its_own_limit_takes_it_and_the_rest_the_pools() {
        let cfg = Config::parse(
            "pools:\n  p:\n    instances: [127.0.0.1:1]\n    concurrency: {max: 10, tools: {deploy: {max: 2}}}\n  q:\n    instances: [127.0.0.1:2]\n",
            "t",
        )
        .unwrap();
        let m = super::ConcurrencyMetrics::register(&Registry::new()).unwrap();
        let names = vec!["p".to_string(), "q".to_string()];
        let ls = super::build(&cfg, &names, &[], &m);
        let call = Some("tools/call");
        let deploy = ls[0].for_request(call, Some("deploy")).unwrap();
        assert_eq!(
            (deploy.tool.as_deref(), deploy.now().0),
            (Some("deploy"), 2)
        );
        assert_eq!(ls[0].for_request(call, Some("echo")).unwrap().now().0, 10);
        assert!(ls[0]
            .for_request(Some("tools/list"), Some("deploy"))
            .unwrap()
            .tool
            .is_none());
        assert!(
            ls[1].for_request(call, Some("deploy")).is_none(),
            "q has no limit"
        );
        assert_eq!(m.pool_limit.with_label_values(&["p/deploy"]).get(), 2);
        // A reload with the same settings keeps both limits.
        let again = super::build(&cfg, &names, &ls, &m);
        assert!(std::sync::Arc::ptr_eq(
            again[0].tools.get("deploy").unwrap(),
            ls[0].tools.get("deploy").unwrap()
        ));
    }
}
