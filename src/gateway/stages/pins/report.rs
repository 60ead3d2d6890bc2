//! What the admin API (`GET /-/pins`), the CLI and the console show of the book: every pinned
//! or served name of every pool, its standing, and both definitions where they differ.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;

use super::{kind_key, Inner, PinBook, Standing};
use crate::config::pins::PinPolicy;
use crate::mcp::lists::Kind;

/// One name of one pool.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub pool: String,
    pub kind: &'static str,
    pub name: String,
    /// The pool's policy (`hold`, `flag`; `off` for a pool that no longer pins).
    pub policy: &'static str,
    /// `same`, `changed` (held or flagged), `unpinned` (first_sight: hold), or `not-seen`
    /// (pinned, not served since this gateway started).
    pub status: &'static str,
    pub pinned: Option<Value>,
    pub current: Option<Value>,
}

fn side(digest: &str, definition: &Value, when: &str, by: Option<&str>) -> Value {
    let mut v = serde_json::json!({"digest": digest, "definition": definition, "since": when});
    if let Some(by) = by {
        v["by"] = by.into();
    }
    v
}

impl PinBook {
    /// Every row, sorted by pool, kind and name; `policy_of` gives each pool's policy.
    pub(crate) fn report(&self, policy_of: impl Fn(&str) -> PinPolicy) -> Vec<Row> {
        let mut inner = self.lock();
        inner.sync();
        self.count(&inner);
        let inner: &Inner = &inner;
        let mut names: BTreeSet<(String, &'static str, String)> = BTreeSet::new();
        for (pool, pins) in &inner.pins.pools {
            for n in pins.tools.keys() {
                names.insert((pool.clone(), "tools", n.clone()));
            }
            for n in pins.prompts.keys() {
                names.insert((pool.clone(), "prompts", n.clone()));
            }
        }
        for (pool, kind, name) in inner.seen_names() {
            names.insert((pool.to_string(), kind_key(kind), name.to_string()));
        }
        names
            .into_iter()
            .map(|(pool, k, name)| {
                let kind = if k == "prompts" {
                    Kind::Prompts
                } else {
                    Kind::Tools
                };
                let pin = inner.pin(&pool, kind, &name);
                let seen = inner.seen_of(&pool, kind, &name);
                let status = match inner.standing(&pool, kind, &name) {
                    Standing::Unseen => "not-seen",
                    Standing::Same => "same",
                    Standing::Changed { pinned: None, .. } => "unpinned",
                    Standing::Changed { .. } => "changed",
                };
                Row {
                    policy: policy_of(&pool).label(),
                    pinned: pin.map(|p| side(&p.digest, &p.definition, &p.approved, Some(&p.by))),
                    current: seen.map(|s| side(&s.digest, &s.definition, &s.since, None)),
                    pool,
                    kind: k,
                    name,
                    status,
                }
            })
            .collect()
    }
}
