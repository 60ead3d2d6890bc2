//! The route index: the first matching route in file order, found in constant time for routes
//! whose method and name are exact values (or absent), by hash lookups, and by ordered matching
//! for the routes with patterns.
//!
//! First match in file order still wins: the exact candidates give the earliest exact route that
//! matches; the pattern routes are then tried in order, but only those that come *before* that
//! candidate, so an exact route never jumps ahead of an earlier pattern route that also matches,
//! and a table of only exact routes costs the same at 10 routes as at 10,000.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::gateway::stages::route::{Pattern, Route};

/// FNV-1a. Not keyed, and need not be: the keys stored are the config's, so a client can only
/// look up (one probe sequence per lookup), never add keys to collide with.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Map<V> = HashMap<String, V, BuildHasherDefault<Fnv>>;

/// Built once per route table (see [`crate::gateway::stages::route::RouteTable::from_config`]).
#[derive(Debug, Clone, Default)]
pub struct RouteIndex {
    /// Method exact and name exact: method -> name -> first route.
    method_name: Map<Map<usize>>,
    /// Method exact, no name condition: the first such route per method.
    method_only: Map<usize>,
    /// No method condition, name exact: the first such route per name.
    name_only: Map<usize>,
    /// A route with neither condition (matches everything): the first one.
    catch_all: Option<usize>,
    /// Every other route (some pattern: prefix, glob, `*`), in file order.
    ordered: Vec<usize>,
}

fn exact(p: &Option<Pattern>) -> Option<Option<&str>> {
    match p {
        None => Some(None),
        Some(Pattern::Exact(v)) => Some(Some(v.as_str())),
        Some(_) => None,
    }
}

impl RouteIndex {
    pub(crate) fn new(routes: &[Route]) -> RouteIndex {
        let mut ix = RouteIndex::default();
        for (i, r) in routes.iter().enumerate() {
            // `or_insert`: a later route with the same values can never be the first match.
            match (exact(&r.method), exact(&r.mcp_name)) {
                (Some(Some(m)), Some(Some(n))) => {
                    let names = ix.method_name.entry(m.to_owned()).or_default();
                    names.entry(n.to_owned()).or_insert(i);
                }
                (Some(Some(m)), Some(None)) => {
                    ix.method_only.entry(m.to_owned()).or_insert(i);
                }
                (Some(None), Some(Some(n))) => {
                    ix.name_only.entry(n.to_owned()).or_insert(i);
                }
                (Some(None), Some(None)) => {
                    ix.catch_all.get_or_insert(i);
                }
                _ => ix.ordered.push(i),
            }
        }
        ix
    }

    /// The index of the first route (in file order) that matches the claims.
    pub(crate) fn first_match(
        &self,
        routes: &[Route],
        method: Option<&str>,
        name: Option<&str>,
    ) -> Option<usize> {
        let mut best = self.catch_all;
        let mut consider = |i: Option<usize>| {
            if let Some(i) = i {
                best = Some(best.map_or(i, |b| b.min(i)));
            }
        };
        // Empty maps are skipped: no hashing for kinds of route the table does not have.
        if let Some(m) = method {
            if let (false, Some(n)) = (self.method_name.is_empty(), name) {
                let names = self.method_name.get(m);
                consider(names.and_then(|names| names.get(n).copied()));
            }
            if !self.method_only.is_empty() {
                consider(self.method_only.get(m).copied());
            }
        }
        if let (false, Some(n)) = (self.name_only.is_empty(), name) {
            consider(self.name_only.get(n).copied());
        }
        let before = best.unwrap_or(usize::MAX);
        self.ordered
            .iter()
            .copied()
            .take_while(|&i| i < before)
            .find(|&i| routes[i].matches(method, name))
            .or(best)
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
