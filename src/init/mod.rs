//! `mcp-edge init URL...`: a first gateway config written from the user's own MCP servers. It
//! asks each URL what it serves ([`probe`]: `server/discover` and its lists, a legacy
//! `initialize`, whether it wants a token), prints what it found and what it could not reach,
//! and writes a commented `gateway.yaml` that federates them ([`render`]): one pool per server,
//! one federated endpoint with the collision policy that fits the names found, metrics and the
//! console on the admin listener. It never overwrites a file unless told to (`--force`).
//!
//! It is a client only: it imports the load tester's HTTP client and the protocol module, never
//! the gateway.

pub(crate) mod probe;
pub(crate) mod render;
pub(crate) mod wire;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;

use probe::{Eras, Listing, Probe, Unreachable};

#[derive(Args, Debug, Clone)]
pub struct InitArgs {
    /// The URLs of the MCP servers (`http://host:port/mcp`); several URLs of one server become
    /// instances of one pool.
    #[arg(required = true, num_args = 1..)]
    pub urls: Vec<String>,
    /// Write the config here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Overwrite the `--output` file if it exists.
    #[arg(long)]
    pub force: bool,
    /// The gateway's MCP listener in the written config.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The gateway's admin listener (metrics, console) in the written config.
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub admin: SocketAddr,
    /// The longest any one request to a server may take (`5s`, `500ms`).
    #[arg(long, default_value = "5s", value_parser = crate::config::parse_duration)]
    pub timeout: Duration,
}

/// What `run` found: the report and the config, or why nothing could be written.
pub struct Outcome {
    /// What each URL said, for a person.
    pub report: String,
    /// The config, when at least one URL was reachable.
    pub config: Option<String>,
}

/// Probe every URL concurrently; the report and the config.
pub fn investigate(args: &InitArgs) -> anyhow::Result<Outcome> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results: Vec<Result<Probe, Unreachable>> = rt.block_on(futures::future::join_all(
        args.urls.iter().map(|u| probe::probe(u, args.timeout)),
    ));
    let mut report = String::new();
    let mut probes = Vec::new();
    let mut gone = Vec::new();
    for r in results {
        match r {
            Ok(p) => {
                describe(&mut report, &p);
                probes.push(p);
            }
            Err(u) => gone.push(u),
        }
    }
    for u in &gone {
        let _ = writeln!(report, "{}: NOT REACHED: {}", u.url, u.why);
    }
    if probes.is_empty() {
        let _ = writeln!(report, "no server could be reached: no config written");
        return Ok(Outcome {
            report,
            config: None,
        });
    }
    let plan = render::plan(&probes);
    let names: Vec<String> = plan
        .pools
        .iter()
        .map(|p| format!("{} ({} instance(s))", p.name, p.probes.len()))
        .collect();
    let _ = writeln!(report, "pools: {}", names.join(", "));
    for (kind, name, owners) in &plan.collisions {
        let _ = writeln!(
            report,
            "collision: {kind} {name:?} is served by {}",
            owners.join(", ")
        );
    }
    if plan.pools.iter().any(|p| p.federable()) {
        let _ = writeln!(report, "collisions: {}: {}", plan.policy, plan.why);
    } else {
        let _ = writeln!(
            report,
            "no federated endpoint: no server here can be federated yet (see the pools' comments)"
        );
    }
    for url in &plan.other_paths {
        let _ = writeln!(
            report,
            "warning: {url} is not at {}, the path the gateway will ask every server at",
            plan.path
        );
    }
    let config = render::yaml(&plan, args.listen, args.admin);
    Ok(Outcome {
        report,
        config: Some(config),
    })
}

/// `mcp-edge init`: `Ok(false)` when no server could be reached (nothing written).
pub fn run(args: InitArgs) -> anyhow::Result<bool> {
    if let Some(out) = &args.output {
        if out.exists() && !args.force {
            bail!(
                "{} exists; init does not overwrite it: pass --force, or another -o FILE",
                out.display()
            );
        }
    }
    let outcome = investigate(&args)?;
    let Some(config) = outcome.config else {
        eprint!("{}", outcome.report);
        return Ok(false);
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, &config).with_context(|| format!("writing {}", path.display()))?;
            print!("{}", outcome.report);
            println!(
                "wrote {p}: check it with `mcp-edge check --config {p}`, serve it with `mcp-edge serve --config {p}`",
                p = path.display()
            );
        }
        None => {
            eprint!("{}", outcome.report);
            print!("{config}");
        }
    }
    Ok(true)
}

fn describe(out: &mut String, p: &Probe) {
    let name = p.server_name.as_deref().unwrap_or("(no serverInfo)");
    let version = p.server_version.as_deref().unwrap_or("");
    let _ = writeln!(out, "{}: {name} {version}", p.url);
    if let Some(a) = &p.auth {
        let _ = writeln!(
            out,
            "  auth: wants a bearer token (401; WWW-Authenticate: {}; resource metadata: {})",
            a.www_authenticate.as_deref().unwrap_or("none"),
            a.resource_metadata.as_deref().unwrap_or("not given")
        );
        return;
    }
    let era = match p.eras {
        Eras::Both => "both eras: server/discover (2026-07-28) and initialize (2025-11-25)",
        Eras::Modern => "2026-07-28 only (no answer to a 2025-11-25 initialize)",
        Eras::Legacy => "a 2025-era server: initialize (2025-11-25) only, no server/discover",
    };
    let _ = writeln!(
        out,
        "  protocol versions: {} · {era}",
        p.versions.join(", ")
    );
    if let Some((ttl, scope)) = &p.discover_hints {
        let _ = writeln!(out, "  server/discover: ttlMs {ttl}, cacheScope {scope}");
    }
    for (kind, l) in [
        ("tools", &p.tools),
        ("prompts", &p.prompts),
        ("resources", &p.resources),
    ] {
        let _ = writeln!(out, "  {kind}: {}", listing(l));
    }
    let _ = writeln!(out, "  auth: none asked");
}

fn listing(l: &Listing) -> String {
    if !l.offered {
        return "not offered".into();
    }
    if let Some(e) = &l.error {
        if l.pages == 0 {
            return format!("failed: {e}");
        }
    }
    let mut s = format!("{} in {} page(s)", l.names.len(), l.pages);
    if !l.names.is_empty() {
        let _ = write!(s, " ({})", render::some_names(&l.names, 12));
    }
    let ttl: Vec<String> = l.ttl_ms.iter().map(u64::to_string).collect();
    let _ = write!(
        s,
        " · ttlMs {} · cacheScope {}",
        if ttl.is_empty() {
            "none".into()
        } else {
            ttl.join("/")
        },
        if l.scopes.is_empty() {
            "none".into()
        } else {
            l.scopes.join("/")
        }
    );
    if l.truncated {
        let _ = write!(s, " · more than {} pages: stopped there", probe::MAX_PAGES);
    }
    if let Some(e) = &l.error {
        let _ = write!(s, " · then failed: {e}");
    }
    s
}
