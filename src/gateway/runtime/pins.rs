//! The admin API of pinned definitions (docs/pins.md): `GET /-/pins` shows every pool's pinned
//! and current definitions and how each stands (`?pool=P` for one pool, `?changed` for the held
//! and flagged ones only); `POST /-/pins/approve` with `{"pool": P, "tool": NAME}` (or
//! `"prompt": NAME`) pins what the pool serves now, writes the pins file and releases a held
//! tool at once on this replica (other replicas read the file on their next check). The
//! `mcp-edge pins` CLI and the console are clients of these.

use pingora::protocols::http::ServerSession;
use serde::Deserialize;
use serde_json::json;

use crate::gateway::journey::state::Gateway;
use crate::mcp::lists::Kind;

/// The largest approval document read.
const APPROVE_MAX: usize = 64 << 10;

/// `GET /-/pins`.
pub(crate) fn list(gw: &Gateway, query: Option<&str>) -> String {
    let mut pool = None;
    let mut changed = false;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("pool", v)) => pool = Some(v.to_string()),
            None if pair == "changed" => changed = true,
            _ => {}
        }
    }
    let rows: Vec<_> = gw
        .pins
        .report(|p| policy_of(gw, p))
        .into_iter()
        .filter(|r| pool.as_ref().is_none_or(|p| *p == r.pool))
        .filter(|r| !changed || matches!(r.status, "changed" | "unpinned"))
        .collect();
    let pinning: Vec<serde_json::Value> = gw
        .table
        .pools
        .iter()
        .zip(&gw.pin_policies)
        .filter(|(_, p)| **p != crate::config::pins::PinPolicy::Off)
        .map(|(n, p)| json!({"pool": n, "policy": p.label()}))
        .collect();
    let c = &gw.config.pins;
    json!({
        "file": c.file,
        "first_sight": match c.first_sight { crate::config::pins::FirstSight::Pin => "pin", crate::config::pins::FirstSight::Hold => "hold" },
        "pools": pinning,
        "definitions": rows,
    })
    .to_string()
}

fn policy_of(gw: &Gateway, pool: &str) -> crate::config::pins::PinPolicy {
    let i = gw.table.pools.iter().position(|p| p == pool);
    i.map(|i| gw.pin_policies[i]).unwrap_or_default()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Approval {
    pool: String,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
}

/// `POST /-/pins/approve`: the status and the answer's body (JSON, or a sentence saying why not).
pub(crate) async fn approve(gw: &Gateway, session: &mut ServerSession) -> (u16, String) {
    let mut doc = Vec::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) if doc.len() + chunk.len() <= APPROVE_MAX => {
                doc.extend_from_slice(&chunk)
            }
            Ok(Some(_)) => return (413, format!("an approval is at most {APPROVE_MAX} bytes\n")),
            Ok(None) => break,
            Err(e) => return (400, format!("the approval could not be read: {e}\n")),
        }
    }
    const SHAPE: &str =
        r#"send {"pool": "<pool>", "tool": "<name>"} or {"pool": "<pool>", "prompt": "<name>"}"#;
    let a: Approval = match serde_json::from_slice(&doc) {
        Ok(a) => a,
        Err(e) => return (400, format!("not an approval ({e}); {SHAPE}\n")),
    };
    let (kind, name) = match (a.tool, a.prompt) {
        (Some(t), None) => (Kind::Tools, t),
        (None, Some(p)) => (Kind::Prompts, p),
        _ => {
            return (
                400,
                format!("name exactly one of tool and prompt; {SHAPE}\n"),
            )
        }
    };
    if !gw.table.pools.contains(&a.pool) {
        return (
            404,
            format!("no pool {:?} in this gateway's config\n", a.pool),
        );
    }
    match gw.pins.approve(&a.pool, kind, &name) {
        Ok(v) => (200, v.to_string()),
        Err(why) if why.starts_with("pins.file") => (500, format!("{why}\n")),
        Err(why) => (404, format!("{why}\n")),
    }
}
