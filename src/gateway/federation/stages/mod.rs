//! Federation's stage (the component is described in [`super`]): the endpoints of one
//! generation ([`Federation`], [`Endpoint`]) and what a request on one is to become
//! ([`Federated`]), from what each pool serves ([`catalog`]: the lists as fetched, their
//! freshness), merged into each endpoint's routing [`view::View`] and paged by [`cursor`]. The
//! steps that apply them to a request, and the fetching, are [`super::journey`].

pub(crate) mod catalog;
pub(crate) mod cursor;
pub(crate) mod view;

use arc_swap::ArcSwap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::config::federation::CatalogConfig;
use crate::config::{Config, FederatedEndpoint};
use crate::mcp::Rejection;

use crate::gateway::stages::route::RouteTable;
use catalog::{Kind, Store};
use view::{Contribution, View};

/// The federated endpoints of one gateway generation.
pub struct Federation {
    pub endpoints: Vec<Endpoint>,
    pub catalog: CatalogConfig,
}

/// One federated endpoint: its config, its pools (gateway indices, in priority order) and its
/// routing view, rebuilt when the catalogs change.
pub struct Endpoint {
    pub config: FederatedEndpoint,
    pub pools: Vec<usize>,
    view: ArcSwap<View>,
}

impl Federation {
    /// The endpoints of `config`; every pool they federate is due for a refresh at once in
    /// `catalogs` (the start, or a reload).
    pub(crate) fn build(
        config: &Config,
        table: &RouteTable,
        catalogs: &Store,
    ) -> Option<Federation> {
        let f = config.federation.as_ref()?;
        let index = |p: &String| {
            table
                .pools
                .iter()
                .position(|n| n == p)
                .expect("validated pool reference")
        };
        let endpoints = f
            .endpoints
            .iter()
            .map(|e| Endpoint {
                pools: e.pools.iter().map(index).collect(),
                config: e.clone(),
                view: ArcSwap::from_pointee(View::unbuilt()),
            })
            .collect();
        let fed = Federation {
            endpoints,
            catalog: f.catalog.clone(),
        };
        for p in fed.pools() {
            catalogs.due_at(&table.pools[p], Instant::now());
        }
        Some(fed)
    }

    /// The federated endpoint at `path`.
    pub(crate) fn endpoint_of(&self, path: &str) -> Option<usize> {
        self.endpoints.iter().position(|e| e.config.path == path)
    }

    /// Every pool some endpoint federates, once each.
    pub(crate) fn pools(&self) -> Vec<usize> {
        let mut all: Vec<usize> = self
            .endpoints
            .iter()
            .flat_map(|e| e.pools.iter().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

impl Endpoint {
    /// The routing view, rebuilt first if the catalogs changed since it was built.
    pub(crate) fn view(
        &self,
        store: &Store,
        pool_names: &[String],
        keep_stale: std::time::Duration,
    ) -> Arc<View> {
        let version = store.version.load(Ordering::Acquire);
        let current = self.view.load_full();
        let now = Instant::now();
        if current.version == version && current.until.is_none_or(|t| now < t) {
            return current;
        }
        let cats: Vec<_> = self
            .pools
            .iter()
            .map(|p| (*p, store.get(&pool_names[*p])))
            .collect();
        let by_kind: Vec<(Kind, Vec<Contribution>)> = Kind::ALL
            .into_iter()
            .map(|k| {
                let parts = cats
                    .iter()
                    .filter(|(_, c)| c.routes(now, keep_stale))
                    .filter_map(|(p, c)| {
                        let items = &c.list(k)?.items;
                        Some(Contribution {
                            pool: *p,
                            pool_name: &pool_names[*p],
                            items,
                        })
                    })
                    .collect();
                (k, parts)
            })
            .collect();
        let mut built = View::build(&self.config, &by_kind, version);
        // A stale catalog routes until it expires: the view is rebuilt then.
        built.until = cats
            .iter()
            .filter(|(_, c)| c.failing.is_some())
            .filter_map(|(_, c)| Some(c.loaded? + keep_stale))
            .filter(|t| *t > now)
            .min();
        let built = Arc::new(built);
        self.view.store(built.clone());
        built
    }
}

/// A request on a federated endpoint: which endpoint, whether the gateway answers it, and the
/// server's own name when the client called a prefixed one.
#[derive(Debug, Clone, Default)]
pub struct Federated {
    pub endpoint: usize,
    pub answer: bool,
    pub rename: Option<String>,
    /// The answer to a name the endpoint does not serve, given after the body check.
    pub refuse: Option<Rejection>,
}
