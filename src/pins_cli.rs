//! `mcp-edge pins list|diff|approve`: the admin API of pinned definitions (`GET /-/pins`,
//! `POST /-/pins/approve`, docs/pins.md) from a terminal. A plain HTTP/1.1 client of the admin
//! listener (which serves plain HTTP on a private address); it never reads the pins file itself,
//! so what it shows is what the running gateway enforces.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct PinsArgs {
    #[command(subcommand)]
    pub sub: PinsCommand,
    /// The gateway's admin listener (`listen.admin`).
    #[arg(long, global = true, default_value = "127.0.0.1:9090")]
    pub admin: String,
    /// A file holding the admin token (`admin_token_file`), needed by `approve` when the
    /// gateway has one.
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
pub enum PinsCommand {
    /// Every pinned or served tool and prompt of the pinning pools, and how each stands.
    List {
        #[arg(long)]
        pool: Option<String>,
        /// The admin API's JSON as it is.
        #[arg(long)]
        json: bool,
    },
    /// The changed (held or flagged) definitions: the pinned one against the one served now.
    Diff {
        #[arg(long)]
        pool: Option<String>,
    },
    /// Approve what a pool serves now under a name: it becomes the pin (a held tool is
    /// released).
    Approve {
        #[arg(long)]
        pool: String,
        #[arg(long, conflicts_with = "prompt", required_unless_present = "prompt")]
        tool: Option<String>,
        #[arg(long)]
        prompt: Option<String>,
    },
}

/// Run a `pins` command; the text to print, or why it failed.
pub fn run(args: PinsArgs) -> anyhow::Result<String> {
    let token = match &args.token_file {
        Some(p) => Some(std::fs::read_to_string(p)?.trim().to_string()),
        None => None,
    };
    match args.sub {
        PinsCommand::List { pool, json } => {
            let v = get(&args.admin, &query(pool.as_deref(), false))?;
            Ok(if json { format!("{v:#}\n") } else { table(&v) })
        }
        PinsCommand::Diff { pool } => Ok(diff(&get(&args.admin, &query(pool.as_deref(), true))?)),
        PinsCommand::Approve { pool, tool, prompt } => {
            let body = match (tool, prompt) {
                (Some(t), _) => json!({"pool": pool, "tool": t}),
                (None, p) => json!({"pool": pool, "prompt": p}),
            };
            let (status, text) = exchange(
                &args.admin,
                "POST",
                "/-/pins/approve",
                token.as_deref(),
                body.to_string().as_bytes(),
            )?;
            anyhow::ensure!(
                status == 200,
                "the gateway refused ({status}): {}",
                text.trim()
            );
            let v: Value = serde_json::from_str(&text)?;
            Ok(format!(
                "approved: pool {} {} {} is pinned at {}\n",
                v["pool"],
                v["kind"],
                v["name"],
                v["digest"].as_str().unwrap_or("")
            ))
        }
    }
}

fn query(pool: Option<&str>, changed: bool) -> String {
    let mut q = vec![];
    if let Some(p) = pool {
        q.push(format!("pool={p}"));
    }
    if changed {
        q.push("changed".to_string());
    }
    format!("/-/pins?{}", q.join("&"))
}

fn get(admin: &str, path: &str) -> anyhow::Result<Value> {
    let (status, text) = exchange(admin, "GET", path, None, b"")?;
    anyhow::ensure!(
        status == 200,
        "GET {path} answered {status}: {}",
        text.trim()
    );
    Ok(serde_json::from_str(&text)?)
}

/// One request on a fresh connection (`Connection: close`); the status and the body.
fn exchange(
    admin: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &[u8],
) -> anyhow::Result<(u16, String)> {
    let addr = admin
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("--admin {admin}: no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| anyhow::anyhow!("cannot reach the admin listener at {admin}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{auth}\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.take(64 << 20).read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("not an HTTP answer from {admin}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("not an HTTP answer from {admin}"))?;
    Ok((status, body.to_string()))
}

fn table(v: &Value) -> String {
    let mut out = String::new();
    let rows = v["definitions"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        out.push_str("no pinned or served definitions yet (a pinning pool's lists are read as they pass, or from its catalog)\n");
    }
    for r in rows {
        let digest = |side: &str| {
            r[side]["digest"]
                .as_str()
                .map_or("-".to_string(), |d| d.chars().take(19).collect())
        };
        out.push_str(&format!(
            "{:<16} {:<8} {:<24} {:<5} {:<9} pinned {:<19} now {}\n",
            r["pool"].as_str().unwrap_or(""),
            r["kind"].as_str().unwrap_or(""),
            r["name"].as_str().unwrap_or(""),
            r["policy"].as_str().unwrap_or(""),
            r["status"].as_str().unwrap_or(""),
            digest("pinned"),
            digest("current"),
        ));
    }
    out
}

fn diff(v: &Value) -> String {
    let rows = v["definitions"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return "no changed definitions\n".to_string();
    }
    let mut out = String::new();
    for r in rows {
        let (pool, name) = (
            r["pool"].as_str().unwrap_or(""),
            r["name"].as_str().unwrap_or(""),
        );
        let kind = if r["kind"] == "prompts" {
            "prompt"
        } else {
            "tool"
        };
        out.push_str(&format!(
            "== pool {pool}, {kind} {name} ({}, policy {})\n",
            r["status"].as_str().unwrap_or(""),
            r["policy"].as_str().unwrap_or("")
        ));
        let old = &r["pinned"]["definition"];
        let new = &r["current"]["definition"];
        let keys: std::collections::BTreeSet<&String> = old
            .as_object()
            .into_iter()
            .chain(new.as_object())
            .flat_map(|m| m.keys())
            .collect();
        for k in keys {
            if old.get(k) == new.get(k) {
                continue;
            }
            let show = |x: Option<&Value>| x.map_or("(absent)".to_string(), |x| x.to_string());
            out.push_str(&format!(
                "  {k}:\n  - {}\n  + {}\n",
                show(old.get(k)),
                show(new.get(k))
            ));
        }
        out.push_str(&format!(
            "  approve: mcp-edge pins approve --pool {pool} --{kind} {name}\n"
        ));
    }
    out
}
