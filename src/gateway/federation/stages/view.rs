//! Merging: what a federated endpoint exposes, from its pools' lists. One function,
//! [`merge`], names every entry (the collision policy, the endpoint's include/exclude
//! patterns) and reports collisions; it serves both the routing view ([`View`], built from the
//! catalogs) and each merged list answer (built from lists fresh for that answer).

use serde_json::Value;
use std::collections::HashMap;

use super::catalog::Kind;
use crate::config::{Collisions, FederatedEndpoint};

/// Where an exposed name goes: a pool (gateway index) and the server's own name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub pool: usize,
    pub name: String,
}

/// Two or more pools serving one name (or URI).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Collision {
    pub kind: &'static str,
    pub name: String,
    /// The pools that serve it, in the endpoint's order.
    pub pools: Vec<String>,
    /// Which pool now serves it (`None`: refused, no pool does).
    pub served_by: Option<String>,
}

/// One pool's entries of one kind, as input to [`merge`].
pub(crate) struct Contribution<'a> {
    pub pool: usize,
    pub pool_name: &'a str,
    pub items: &'a [Value],
}

/// An exposed entry: the entry as clients see it (renamed if prefixed), and its target.
pub(crate) struct Merged {
    pub item: Value,
    pub exposed: String,
    pub target: Target,
}

/// The name clients see for `name` of `pool` under the endpoint's policy (resources and
/// templates keep their URI: a URI names a resource on its own).
pub(crate) fn exposed_name(ep: &FederatedEndpoint, kind: Kind, pool: &str, name: &str) -> String {
    match (ep.collisions, kind) {
        (Collisions::Prefix, Kind::Tools | Kind::Prompts) => {
            format!("{pool}{}{name}", ep.separator)
        }
        _ => name.to_string(),
    }
}

fn expose_rules(ep: &FederatedEndpoint, kind: Kind) -> &crate::config::federation::Expose {
    match kind {
        Kind::Tools => &ep.tools,
        Kind::Prompts => &ep.prompts,
        Kind::Resources | Kind::Templates => &ep.resources,
    }
}

/// Merge the contributions (in the endpoint's pool order) into the exposed entries, in order,
/// and the collisions found. An entry without a readable name is left out.
pub(crate) fn merge(
    ep: &FederatedEndpoint,
    kind: Kind,
    parts: &[Contribution],
) -> (Vec<Merged>, Vec<Collision>) {
    let field = kind.field();
    let rules = expose_rules(ep, kind);
    let mut out: Vec<Merged> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut servers: HashMap<String, Vec<String>> = HashMap::new();
    for part in parts {
        for item in part.items {
            let Some(name) = item.get(field).and_then(Value::as_str) else {
                continue;
            };
            let exposed = exposed_name(ep, kind, part.pool_name, name);
            if !rules.allows(&exposed) {
                continue;
            }
            let who = servers.entry(exposed.clone()).or_default();
            if !who.iter().any(|p| p == part.pool_name) {
                who.push(part.pool_name.to_string());
            }
            if seen.contains_key(&exposed) {
                continue; // the pool listed first keeps it (priority; refuse drops it below)
            }
            let mut item = item.clone();
            if exposed != name {
                item[field] = Value::String(exposed.clone());
            }
            seen.insert(exposed.clone(), out.len());
            let target = Target {
                pool: part.pool,
                name: name.to_string(),
            };
            out.push(Merged {
                item,
                exposed,
                target,
            });
        }
    }
    let mut collisions: Vec<Collision> = servers
        .into_iter()
        .filter(|(_, pools)| pools.len() > 1)
        .map(|(name, pools)| Collision {
            kind: kind.label(),
            served_by: (ep.collisions != Collisions::Refuse).then(|| pools[0].clone()),
            name,
            pools,
        })
        .collect();
    collisions.sort_by(|a, b| a.name.cmp(&b.name));
    if ep.collisions == Collisions::Refuse {
        out.retain(|m| {
            collisions
                .binary_search_by(|c| c.name.as_str().cmp(&m.exposed))
                .is_err()
        });
    }
    (out, collisions)
}

/// The routing view of one endpoint: every exposed name and URI and where it goes.
#[derive(Debug, Default)]
pub(crate) struct View {
    tools: HashMap<String, Target>,
    prompts: HashMap<String, Target>,
    resources: HashMap<String, usize>,
    templates: Vec<(Template, usize)>,
    pub collisions: Vec<Collision>,
    /// The store version this view was built from.
    pub version: u64,
    /// When a stale catalog it routes by expires (the view must be rebuilt then).
    pub until: Option<std::time::Instant>,
}

impl View {
    /// Build from each kind's contributions.
    pub(crate) fn build(
        ep: &FederatedEndpoint,
        by_kind: &[(Kind, Vec<Contribution>)],
        version: u64,
    ) -> View {
        let mut v = View {
            version,
            ..View::default()
        };
        for (kind, parts) in by_kind {
            let (merged, collisions) = merge(ep, *kind, parts);
            v.collisions.extend(collisions);
            for m in merged {
                match kind {
                    Kind::Tools => drop(v.tools.insert(m.exposed, m.target)),
                    Kind::Prompts => drop(v.prompts.insert(m.exposed, m.target)),
                    Kind::Resources => drop(v.resources.insert(m.exposed, m.target.pool)),
                    Kind::Templates => v
                        .templates
                        .push((Template::parse(&m.exposed), m.target.pool)),
                }
            }
        }
        v
    }

    /// A view that is never current (built on first use).
    pub(crate) fn unbuilt() -> View {
        View {
            version: u64::MAX,
            ..View::default()
        }
    }

    pub(crate) fn tool(&self, name: &str) -> Option<&Target> {
        self.tools.get(name)
    }

    pub(crate) fn prompt(&self, name: &str) -> Option<&Target> {
        self.prompts.get(name)
    }

    /// The pool serving `uri`: a listed resource (hash lookup), else the first template that
    /// matches it, in the endpoint's pool order.
    pub(crate) fn resource(&self, uri: &str) -> Option<usize> {
        if let Some(p) = self.resources.get(uri) {
            return Some(*p);
        }
        self.templates
            .iter()
            .find(|(t, _)| t.matches(uri))
            .map(|(_, p)| *p)
    }

    /// How many names of each kind route (tools, prompts, resources, templates).
    pub(crate) fn counts(&self) -> [usize; 4] {
        [
            self.tools.len(),
            self.prompts.len(),
            self.resources.len(),
            self.templates.len(),
        ]
    }
}

/// An RFC 6570 URI template read for matching: literal text and expressions (`{...}`); an
/// expression matches one or more characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template(Vec<Piece>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Expression,
}

impl Template {
    pub(crate) fn parse(t: &str) -> Template {
        let mut pieces = Vec::new();
        let mut rest = t;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                pieces.push(Piece::Literal(rest[..open].to_string()));
            }
            match rest[open..].find('}') {
                Some(close) => {
                    pieces.push(Piece::Expression);
                    rest = &rest[open + close + 1..];
                }
                None => {
                    pieces.push(Piece::Literal(rest[open..].to_string()));
                    rest = "";
                }
            }
        }
        if !rest.is_empty() {
            pieces.push(Piece::Literal(rest.to_string()));
        }
        Template(pieces)
    }

    pub(crate) fn matches(&self, uri: &str) -> bool {
        fn go(p: &[Piece], s: &str) -> bool {
            match p.split_first() {
                None => s.is_empty(),
                Some((Piece::Literal(l), rest)) => {
                    s.strip_prefix(l.as_str()).is_some_and(|s| go(rest, s))
                }
                Some((Piece::Expression, rest)) => {
                    // One or more characters, then the rest (shortest first).
                    s.char_indices()
                        .skip(1)
                        .map(|(i, _)| i)
                        .chain([s.len()])
                        .filter(|i| *i > 0)
                        .any(|i| go(rest, &s[i..]))
                }
            }
        }
        go(&self.0, uri)
    }
}
