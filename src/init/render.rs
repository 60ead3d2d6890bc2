//! From what the servers said to a gateway config: [`plan`] groups the probes into pools (URLs
//! that serve the same server, catalog and path are instances of one pool), picks the endpoint
//! path and the collision policy; [`yaml`] writes it out as a commented `gateway.yaml`.
//!
//! Everything a server said that reaches the file (its name, tool names) goes into comments
//! only, stripped of control characters, so no answer can write a key.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;

use super::probe::{Eras, Probe};

/// One pool of the written config.
#[derive(Debug)]
pub(crate) struct Pool<'a> {
    pub name: String,
    /// Its instances, one probe each (the first one speaks for all).
    pub probes: Vec<&'a Probe>,
}

impl Pool<'_> {
    fn first(&self) -> &Probe {
        self.probes[0]
    }

    /// Whether the federated endpoint can merge it today: a server that wants no token (one
    /// that does needs credentials first). A 2025-era one joins through its `era:`.
    pub(crate) fn federable(&self) -> bool {
        self.first().auth.is_none()
    }
}

/// The whole plan.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    pub pools: Vec<Pool<'a>>,
    /// The path every server is asked at (the gateway's `endpoint`).
    pub path: String,
    /// URLs whose path differs from [`Plan::path`].
    pub other_paths: Vec<String>,
    /// Tool or prompt names two federable pools share: (kind, name, pools).
    pub collisions: Vec<(&'static str, String, Vec<String>)>,
    pub policy: &'static str,
    /// Why the policy was chosen (written as a comment).
    pub why: String,
}

/// A pool name from a server name: `A-Z a-z 0-9 _ -`, the rest `_`.
fn pool_name(p: &Probe) -> String {
    let raw = p.server_name.clone().unwrap_or_else(|| p.authority.clone());
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    s = s.trim_matches(['_', '-']).to_string();
    if s.is_empty() {
        s = "server".into();
    }
    s.truncate(40);
    s
}

/// What makes two URLs instances of one pool.
fn identity(p: &Probe) -> Option<String> {
    p.server_name.as_ref()?;
    Some(format!(
        "{:?}|{:?}|{}|{}|{:?}|{:?}|{:?}|{:?}|{}",
        p.server_name,
        p.server_version,
        p.path,
        p.https,
        p.eras,
        p.tools.names,
        p.prompts.names,
        p.resources.names,
        p.auth.is_some()
    ))
}

/// Group the probes into pools and choose the endpoint and policy.
pub(crate) fn plan(probes: &[Probe]) -> Plan<'_> {
    let mut pools: Vec<Pool> = Vec::new();
    let mut by_identity: BTreeMap<String, usize> = BTreeMap::new();
    for p in probes {
        if let Some(i) = identity(p).and_then(|id| by_identity.get(&id).copied()) {
            if !pools[i].probes.iter().any(|q| q.authority == p.authority) {
                pools[i].probes.push(p);
            }
            continue;
        }
        let base = pool_name(p);
        let mut name = base.clone();
        let mut n = 2;
        while pools.iter().any(|q| q.name == name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        if let Some(id) = identity(p) {
            by_identity.insert(id, pools.len());
        }
        pools.push(Pool {
            name,
            probes: vec![p],
        });
    }
    // The path most servers are at.
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for p in probes {
        *counts.entry(&p.path).or_default() += 1;
    }
    let path = counts
        .iter()
        .max_by_key(|(_, n)| **n)
        .map_or("/mcp", |(p, _)| p)
        .to_string();
    let path = if path.is_empty() { "/".into() } else { path };
    let other_paths = probes
        .iter()
        .filter(|p| p.path != path)
        .map(|p| p.url.clone())
        .collect();
    let collisions = collisions(&pools);
    let tls = pools.iter().any(|p| p.federable() && p.first().https);
    let (policy, why) = match (collisions.first(), tls) {
        (None, _) => ("priority", "no two servers share a tool or prompt name, so every name stays as its server wrote it. \
            If a server added later shares a name, the pool listed first serves it: switch to `prefix` then".to_string()),
        (Some((kind, name, owners)), false) => ("prefix", format!(
            "{} {kind} name(s) are served by more than one server ({kind} {name:?}: {}), so every tool and prompt \
             is named <pool>__<name> and each call reaches the server that wrote it; prefix also keeps names \
             stable when a server is added later", collisions.len(), owners.join(", "))),
        (Some((kind, name, owners)), true) => ("priority", format!(
            "{kind} {name:?} is served by {}; prefix renames in the body, which the gateway does on plain \
             HTTP/1.1 pools only and a pool here is https, so the pool listed first serves a shared name",
            owners.join(", "))),
    };
    Plan {
        pools,
        path,
        other_paths,
        collisions,
        policy,
        why,
    }
}

fn collisions(pools: &[Pool]) -> Vec<(&'static str, String, Vec<String>)> {
    let mut out = Vec::new();
    for kind in ["tool", "prompt"] {
        let mut owners: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for pool in pools.iter().filter(|p| p.federable()) {
            let l = if kind == "tool" {
                &pool.first().tools
            } else {
                &pool.first().prompts
            };
            for n in &l.names {
                owners.entry(n).or_default().push(pool.name.clone());
            }
        }
        for (n, o) in owners.into_iter().filter(|(_, o)| o.len() > 1) {
            out.push((kind, n.to_string(), o));
        }
    }
    out
}

/// Text from a server, made safe for a comment: one line, printable.
pub(crate) fn comment_text(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if t.chars().count() > 200 {
        t.chars().take(200).collect::<String>() + "…"
    } else {
        t
    }
}

/// A few names, then how many more.
pub(crate) fn some_names(names: &[String], n: usize) -> String {
    let mut s = names.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > n {
        let _ = write!(s, ", … {} more", names.len() - n);
    }
    comment_text(&s)
}

/// One line on what a pool's server is.
pub(crate) fn summary(p: &Probe) -> String {
    let name = p.server_name.as_deref().unwrap_or("(no serverInfo)");
    let era = match (p.eras, &p.auth) {
        (_, Some(_)) => "wants a token".to_string(),
        (Eras::Both, _) => "serves both eras (2026-07-28 and 2025-11-25)".into(),
        (Eras::Modern, _) => "2026-07-28 only".into(),
        (Eras::Legacy, _) => "a 2025-era server (2025-11-25 initialize only)".into(),
    };
    comment_text(&format!(
        "{name} {} · {era} · {} tools, {} prompts, {} resources",
        p.server_version.as_deref().unwrap_or(""),
        p.tools.names.len(),
        p.prompts.names.len(),
        p.resources.names.len()
    ))
}

/// The config text.
pub(crate) fn yaml(plan: &Plan, listen: SocketAddr, admin: SocketAddr) -> String {
    let mut y = String::new();
    let w = &mut y;
    let _ = writeln!(
        w,
        "# gateway.yaml written by `mcp-edge init` from {} server URL(s).",
        plan.pools.iter().map(|p| p.probes.len()).sum::<usize>()
    );
    let _ = writeln!(w, "# Check it: mcp-edge check --config <this file>; serve it: mcp-edge serve --config <this file>.");
    let _ = writeln!(
        w,
        "# Every key is described in docs/configuration.md; federation in docs/federation.md.\n"
    );
    let _ = writeln!(w, "listen:\n  mcp: {listen}      # MCP clients POST here");
    let _ = writeln!(
        w,
        "  admin: {admin}    # /metrics (Prometheus), the console at /ui, /catalog, /healthz\n"
    );
    let _ = writeln!(
        w,
        "# The path clients POST to, and the path the gateway asks every server at."
    );
    let _ = writeln!(w, "endpoint: {}", quote(&plan.path));
    for url in &plan.other_paths {
        let _ = writeln!(
            w,
            "# WARNING: {} is at another path; the gateway will ask it at {} instead.",
            comment_text(url),
            comment_text(&plan.path)
        );
    }
    let _ = writeln!(w, "\npools:");
    for pool in &plan.pools {
        pool_yaml(w, pool);
    }
    let fed: Vec<&str> = plan
        .pools
        .iter()
        .filter(|p| p.federable())
        .map(|p| p.name.as_str())
        .collect();
    if fed.is_empty() {
        // Nothing to merge: requests go to the first pool as they are.
        let _ = writeln!(w, "\n# No server here can be federated yet (see the pools' comments): every request goes to");
        let _ = writeln!(
            w,
            "# the first pool as it is.\ndefault_route:\n  pool: {}",
            plan.pools[0].name
        );
        metrics(w);
        return y;
    }
    let _ = writeln!(w, "\n# One endpoint that merges the servers: one tools/list with every tool, and each call routed");
    let _ = writeln!(w, "# to the pool that serves its name.");
    let _ = writeln!(
        w,
        "federation:\n  endpoints:\n    - path: {}",
        quote(&plan.path)
    );
    let _ = writeln!(w, "      pools: [{}]", fed.join(", "));
    for line in wrap(&format!("{}: {}", plan.policy, plan.why), 90) {
        let _ = writeln!(w, "      # {}", comment_text(&line));
    }
    let _ = writeln!(w, "      collisions: {}", plan.policy);
    for pool in plan.pools.iter().filter(|p| !p.federable()) {
        let _ = writeln!(
            w,
            "      # {} is left out of this endpoint: {}",
            pool.name,
            left_out(pool)
        );
    }
    metrics(w);
    y
}

fn metrics(w: &mut String) {
    let _ = writeln!(w, "\nmetrics:\n  name_label_limit: 100   # distinct tool names kept as metric labels (the rest: _other)");
}

fn left_out(_pool: &Pool) -> &'static str {
    "it wants a token; give the pool credentials (docs/credentials.md), then add it"
}

/// The `era:` a 2025-era server's negotiated version names: one the gateway speaks to such
/// servers, else the latest (a config that `check` accepts either way).
fn era_value(version: &str) -> &'static str {
    match version {
        "2025-06-18" => "2025-06-18",
        "2025-03-26" => "2025-03-26",
        _ => "2025-11-25",
    }
}

fn pool_yaml(w: &mut String, pool: &Pool) {
    let p = pool.first();
    let _ = writeln!(w, "  # {}", summary(p));
    let urls: Vec<&str> = pool.probes.iter().map(|q| q.url.as_str()).collect();
    let _ = writeln!(w, "  # from {}", comment_text(&urls.join(", ")));
    if !p.tools.names.is_empty() {
        let _ = writeln!(w, "  # tools: {}", some_names(&p.tools.names, 12));
    }
    if p.eras == Eras::Legacy {
        let _ = writeln!(
            w,
            "  # It is a 2025-era server (initialize, sessions, no server/discover): `era:` below"
        );
        let _ = writeln!(w, "  # makes the gateway hold its sessions and serve 2026 clients from it, mid-call questions");
        let _ = writeln!(
            w,
            "  # turned into input_required (docs/bridge.md); health is a TCP connect."
        );
    }
    if p.eras == Eras::Both && p.legacy_sessions {
        let _ = writeln!(w, "  # It also keeps 2025-era clients in sessions of its own: on a pool the main endpoint routes");
        let _ = writeln!(w, "  # initialize to (not a federated one), `legacy_clients: pass` passes them through, each");
        let _ = writeln!(w, "  # session pinned to its instance (docs/bridge.md); otherwise the gateway is their session.");
    }
    if let Some(a) = &p.auth {
        let _ = writeln!(
            w,
            "  # It answered 401: it wants a bearer token{}.",
            a.resource_metadata
                .as_deref()
                .map(|m| format!(" (resource metadata: {})", comment_text(m)))
                .unwrap_or_default()
        );
        let _ = writeln!(
            w,
            "  # Add `credentials:` (docs/credentials.md); until then health is a TCP connect."
        );
    }
    let _ = writeln!(w, "  {}:", pool.name);
    let inst: Vec<&str> = pool.probes.iter().map(|q| q.authority.as_str()).collect();
    let _ = writeln!(w, "    instances: [{}]", inst.join(", "));
    if pool.probes.len() > 1 {
        let _ = writeln!(w, "    balance: least_loaded   # the same server at {} URLs: one pool, its instances balanced", pool.probes.len());
    }
    if p.https {
        let _ = writeln!(
            w,
            "    tls: {{}}               # the server is at an https URL"
        );
    }
    if !pool.federable() || p.eras == Eras::Legacy {
        let _ = writeln!(w, "    health: {{check: tcp}}");
    }
    if p.eras == Eras::Legacy {
        let version = p.versions.first().map_or("2025-11-25", String::as_str);
        let _ = writeln!(w, "    era: {}", era_value(version));
    }
}

/// A YAML string, quoted when it has to be.
fn quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/-_.".contains(c))
    {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

/// Words into lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    for word in text.split_whitespace() {
        let last = out.last_mut().expect("one line at least");
        if !last.is_empty() && last.len() + 1 + word.len() > width {
            out.push(word.to_string());
        } else {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(word);
        }
    }
    out
}
