//! Pinned tool and prompt definitions (`pools.<name>.pins`, docs/pins.md): the [`PinBook`]
//! holds, per pool, the definition an operator approved (the pins file, `config::pins`) and the
//! one the pool serves now (learned from every `tools/list` and `prompts/list` the gateway
//! reads: a single pool's answers as they pass, a federated pool's catalog), and judges each
//! name: the same, changed, or never pinned.
//!
//! A changed definition on a `hold` pool is left out of lists and its calls are refused before
//! any upstream ([`PinBook::held`], -31017); on a `flag` pool it is listed and callable, and
//! flagged (the `mcp_edge_tool_definition_changed` gauge, a warning once per new digest, the
//! admin API). A definition with no pin is pinned as first seen (trust on first use) unless
//! `pins.first_sight: hold`. Approval ([`PinBook::approve`]) pins the definition served now.
//!
//! The book outlives a config (carried over reloads); the file is re-read whenever its
//! modification time or length changed, checked on every list the book reads, every refusal
//! and every admin request, so replicas sharing one file converge without a restart.

mod file;
mod report;

use prometheus::{IntGaugeVec, Registry};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::RwLock;

use crate::config::pins::{FirstSight, Pin, PinPolicy, PinsConfig, PinsFile, PINS_FILE_VERSION};
use crate::mcp::lists::Kind;
use crate::mcp::{codes, definition, Rejection};

/// A list response a request reads for pins (`journey::pins`): held until complete.
#[derive(Debug, Default)]
pub struct PinList {
    pub(crate) hold: crate::auth::filter::ListHold,
    /// Not JSON: a `hold` pool's list is withheld.
    pub(crate) unreadable: bool,
}

/// A definition as a pool serves it now.
#[derive(Debug, Clone)]
struct Seen {
    digest: String,
    definition: Value,
    since: String,
}

/// How a name stands against its pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Never seen in a list: the gateway cannot judge it (its calls pass).
    Unseen,
    Same,
    /// Served with another definition than the pinned one (`None`: never pinned).
    Changed {
        pinned: Option<String>,
        now: String,
    },
}

#[derive(Default)]
struct Inner {
    file: Option<PathBuf>,
    first_sight: FirstSight,
    pins: PinsFile,
    stamp: file::Stamp,
    /// By pool, then tools and prompts by name (looked up by `&str`: a call allocates nothing).
    seen: BTreeMap<String, [BTreeMap<String, Seen>; 2]>,
}

/// Every pool's pins and current definitions (one per process, carried over reloads).
pub struct PinBook {
    /// Read on every call to a `hold` pool; written when a list changes what is known.
    inner: RwLock<Inner>,
    changed: IntGaugeVec,
}

fn kind_key(kind: Kind) -> &'static str {
    match kind {
        Kind::Prompts => "prompts",
        _ => "tools",
    }
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

fn slot(kind: Kind) -> usize {
    usize::from(kind == Kind::Prompts)
}

impl Inner {
    fn seen_of(&self, pool: &str, kind: Kind, name: &str) -> Option<&Seen> {
        self.seen.get(pool)?[slot(kind)].get(name)
    }

    fn see(&mut self, pool: &str, kind: Kind, name: &str, seen: Seen) {
        let p = self.seen.entry(pool.to_string()).or_default();
        p[slot(kind)].insert(name.to_string(), seen);
    }

    /// Every name seen: (pool, kind, name).
    fn seen_names(&self) -> impl Iterator<Item = (&str, Kind, &str)> {
        self.seen.iter().flat_map(|(pool, kinds)| {
            [Kind::Tools, Kind::Prompts].into_iter().flat_map(move |k| {
                kinds[slot(k)]
                    .keys()
                    .map(move |n| (pool.as_str(), k, n.as_str()))
            })
        })
    }

    fn pin(&self, pool: &str, kind: Kind, name: &str) -> Option<&Pin> {
        let p = self.pins.pools.get(pool)?;
        match kind {
            Kind::Prompts => p.prompts.get(name),
            _ => p.tools.get(name),
        }
    }

    fn set_pin(&mut self, pool: &str, kind: Kind, name: &str, pin: Pin) {
        let p = self.pins.pools.entry(pool.to_string()).or_default();
        let map = match kind {
            Kind::Prompts => &mut p.prompts,
            _ => &mut p.tools,
        };
        map.insert(name.to_string(), pin);
    }

    fn standing(&self, pool: &str, kind: Kind, name: &str) -> Standing {
        let Some(seen) = self.seen_of(pool, kind, name) else {
            return Standing::Unseen;
        };
        match self.pin(pool, kind, name) {
            Some(p) if p.digest == seen.digest => Standing::Same,
            p => Standing::Changed {
                pinned: p.map(|p| p.digest.clone()),
                now: seen.digest.clone(),
            },
        }
    }

    /// Re-read the file when it changed on disk (another replica approved, an operator edited
    /// it); a file that cannot be read keeps the pins in memory, with a warning.
    fn sync(&mut self) {
        let Some(path) = self.file.clone() else {
            return;
        };
        match file::read_if_changed(&path, self.stamp) {
            Ok(Some((pins, stamp))) => {
                self.pins = pins;
                self.stamp = stamp;
            }
            Ok(None) => {}
            Err(why) => tracing::warn!("pins: {why}; the pins in memory stay in force"),
        }
    }

    fn save(&mut self) -> Result<(), String> {
        let Some(path) = self.file.clone() else {
            return Ok(());
        };
        self.pins.version = PINS_FILE_VERSION;
        self.stamp = file::write(&path, &self.pins)?;
        Ok(())
    }
}

impl PinBook {
    pub(crate) fn new(registry: &Registry) -> prometheus::Result<PinBook> {
        let changed = crate::gateway::telemetry::metrics::pins::definition_changed(registry)?;
        Ok(PinBook {
            inner: RwLock::new(Inner::default()),
            changed,
        })
    }

    fn lock(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Take a config's `pins:` (start and reload): the file is read again.
    pub(crate) fn configure(&self, c: &PinsConfig) {
        let mut inner = self.lock();
        if inner.file != c.file {
            inner.stamp = None;
            inner.pins = PinsFile::default();
        }
        inner.file = c.file.clone();
        inner.first_sight = c.first_sight;
        inner.stamp = None;
        inner.sync();
        self.count(&inner);
    }

    /// Read one list (a page, or a federated pool's whole list) of pool `pool`: learn what it
    /// serves, pin what is new (unless `first_sight: hold`), and return the names to leave out
    /// of the list (changed ones, on a `hold` pool).
    pub(crate) fn observe(
        &self,
        pool: &str,
        policy: PinPolicy,
        kind: Kind,
        items: &[Value],
    ) -> Vec<String> {
        if policy == PinPolicy::Off || definition::members(kind).is_none() {
            return Vec::new();
        }
        let mut inner = self.lock();
        inner.sync();
        let mut dirty = false;
        let mut out = Vec::new();
        for (name, def) in items.iter().filter_map(|e| definition::of_entry(kind, e)) {
            let digest = definition::digest(&def);
            let fresh = inner
                .seen_of(pool, kind, &name)
                .is_none_or(|s| s.digest != digest);
            if fresh {
                let since = now_rfc3339();
                let seen = Seen {
                    digest: digest.clone(),
                    definition: def.clone(),
                    since: since.clone(),
                };
                inner.see(pool, kind, &name, seen);
                if inner.pin(pool, kind, &name).is_none() && inner.first_sight == FirstSight::Pin {
                    let by = "first-sight".to_string();
                    let pin = Pin {
                        digest: digest.clone(),
                        definition: def,
                        approved: since,
                        by,
                    };
                    inner.set_pin(pool, kind, &name, pin);
                    tracing::info!(
                        "pins: pool {pool}: {} {name:?} pinned on first sight ({digest})",
                        kind.member()
                    );
                    dirty = true;
                }
            }
            if let Standing::Changed { pinned, now } = inner.standing(pool, kind, &name) {
                if fresh {
                    tracing::warn!(
                        "pins: pool {pool}: {} {name:?} changed its definition (pinned {}, now {now}); {} until approved: mcp-edge pins diff --pool {pool}",
                        kind.member(),
                        pinned.as_deref().unwrap_or("nothing"),
                        if policy == PinPolicy::Hold { "held" } else { "flagged" }
                    );
                }
                if policy == PinPolicy::Hold {
                    out.push(name);
                }
            }
        }
        if dirty {
            if let Err(why) = inner.save() {
                tracing::warn!("pins: {why}; the pins are kept in memory");
            }
        }
        self.count(&inner);
        out
    }

    /// Whether a call of `name` on a `hold` pool is refused: its definition changed since it
    /// was pinned (the file is read again first: another replica may have approved it).
    pub(crate) fn held(&self, pool: &str, kind: Kind, name: &str) -> Option<Rejection> {
        if !matches!(
            self.read().standing(pool, kind, name),
            Standing::Changed { .. }
        ) {
            return None;
        }
        let mut inner = self.lock();
        inner.sync();
        self.count(&inner);
        match inner.standing(pool, kind, name) {
            Standing::Changed { pinned, now } => Some(refusal(pool, kind, name, pinned, now)),
            _ => None,
        }
    }

    /// Approve what pool `pool` serves now under `name`: it becomes the pin (and the file is
    /// written). The error says why not (never seen, or the file could not be written).
    pub(crate) fn approve(&self, pool: &str, kind: Kind, name: &str) -> Result<Value, String> {
        let mut inner = self.lock();
        inner.sync();
        let Some(seen) = inner.seen_of(pool, kind, name).cloned() else {
            return Err(format!(
                "pool {pool:?} has served no {} named {name:?} since this gateway started (GET /-/pins lists what it saw)",
                kind_key(kind).trim_end_matches('s')
            ));
        };
        let pin = Pin {
            digest: seen.digest.clone(),
            definition: seen.definition,
            approved: now_rfc3339(),
            by: "admin".into(),
        };
        inner.set_pin(pool, kind, name, pin);
        inner.save()?;
        self.count(&inner);
        tracing::info!(
            "pins: pool {pool}: {} {name:?} approved ({})",
            kind.member(),
            seen.digest
        );
        Ok(json!({"pool": pool, "kind": kind_key(kind), "name": name, "digest": seen.digest}))
    }

    /// Set the gauge from the book: changed definitions per pool and kind.
    fn count(&self, inner: &Inner) {
        let mut counts: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        for (pool, kind, name) in inner.seen_names() {
            let n = counts.entry((pool, kind_key(kind))).or_default();
            if matches!(inner.standing(pool, kind, name), Standing::Changed { .. }) {
                *n += 1;
            }
        }
        for ((pool, kind), n) in counts {
            self.changed.with_label_values(&[pool, kind]).set(n);
        }
    }
}

/// The refusal of a held call: what changed, and how to release it.
fn refusal(pool: &str, kind: Kind, name: &str, pinned: Option<String>, now: String) -> Rejection {
    let what = if kind == Kind::Prompts {
        "prompt"
    } else {
        "tool"
    };
    let flag = if kind == Kind::Prompts {
        "--prompt"
    } else {
        "--tool"
    };
    let since = match &pinned {
        Some(p) => format!("changed its definition since it was pinned ({p}, now {now})"),
        None => format!("has no approved definition yet (now {now}; pins.first_sight: hold)"),
    };
    let msg = format!(
        "The {what} {name:?} of pool {pool} {since}: the gateway holds it until an operator approves the change (mcp-edge pins diff --pool {pool}; mcp-edge pins approve --pool {pool} {flag} {name}, or POST /-/pins/approve on the admin listener)"
    );
    Rejection::new(
        403,
        codes::GATEWAY_DEFINITION_CHANGED,
        "definition-changed",
        msg,
    )
    .with_data(
        json!({"pool": pool, "kind": kind_key(kind), "name": name, "pinned": pinned, "now": now}),
    )
}

#[cfg(test)]
mod tests;
