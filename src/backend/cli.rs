//! The command line of `mcp-edge backend`: its flags and how they become [`PoolOptions`]
//! (key files, the environment, advertised addresses).

use anyhow::Context;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::{PoolOptions, StateKey, StateKeys, STATE_KEY_ENV};

/// CLI options of `mcp-edge backend`.
#[derive(clap::Args, Debug, Clone)]
pub struct BackendArgs {
    /// How many instances to start, on consecutive ports from --base-port.
    #[arg(long, default_value_t = 3)]
    pub instances: u16,
    /// Port of the first instance.
    #[arg(long, default_value_t = 7001)]
    pub base_port: u16,
    /// Listen address of one instance (repeatable, e.g. 127.0.0.1:7001, port 0 = any free port);
    /// overrides --instances and --base-port.
    #[arg(long = "listen", value_name = "ADDR")]
    pub listen: Vec<SocketAddr>,
    /// IP address the --instances/--base-port listeners bind to.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// File holding the 32-byte requestState key, as 64 hex digits or base64 (e.g. from
    /// `openssl rand -hex 32`). Without it the key comes from the MCP_EDGE_STATE_KEY environment
    /// variable (same formats), and without that a random key is made, which only this process
    /// can verify.
    #[arg(long, value_name = "FILE")]
    pub state_key_file: Option<PathBuf>,
    /// File holding the previous key (same formats): states sealed with it are still accepted
    /// during a key rotation; new states are sealed with the current key.
    #[arg(long, value_name = "FILE")]
    pub previous_state_key_file: Option<PathBuf>,
    /// The address of an instance as the gateway's pool lists it (`host:port`; repeatable, one
    /// per instance in listen order). Its hash is the owner hint in the ids of the tasks the
    /// instance creates, which lets a gateway send tasks/* to the owner. Default: each
    /// instance's listen address.
    #[arg(long = "advertise", value_name = "HOST:PORT")]
    pub advertise: Vec<String>,
    /// Where the charge ledger (one-time use of confirmed charges) lives: `memory` (this
    /// process only) or `redis://host:port[/db]`, shared by every backend process pointed at
    /// it, so a replayed confirmation is refused on all of them.
    #[arg(
        long,
        default_value = "memory",
        value_name = "memory|redis://HOST:PORT"
    )]
    pub store: String,
    /// Take the caller's identity (what requestState and tasks are bound to) from this request
    /// header, e.g. x-mcp-edge-subject, instead of the bearer token. Only for a backend that
    /// is reachable through a gateway that verified the caller and sets (overwrites) it.
    #[arg(long, value_name = "HEADER")]
    pub principal_header: Option<String>,
    /// How long a task (Tasks extension) stays readable after its creation, e.g. 10m.
    #[arg(long, default_value = "10m", value_parser = crate::config::parse_duration)]
    pub task_ttl: Duration,
    /// How long an issued requestState stays valid, e.g. 30s, 10m, 1h.
    #[arg(long, default_value = "10m", value_parser = crate::config::parse_duration)]
    pub state_ttl: Duration,
    /// Answer every request this much later: a slow instance, to see balancing at work.
    #[arg(long, default_value = "0s", value_parser = crate::config::parse_duration)]
    pub delay: Duration,
    /// Answer tools/call of one tool later again, `TOOL=DURATION` (repeatable): tools of mixed
    /// latency.
    #[arg(long = "tool-delay", value_name = "TOOL=DURATION", value_parser = parse_tool_delay)]
    pub tool_delay: Vec<(String, Duration)>,
    /// Work on at most N requests at once per instance; more wait their turn, so latency rises
    /// with load as a real server's does (with --delay: a capacity of N / delay per second).
    /// 0: no bound.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_concurrent: usize,
    /// An Origin allowed to call the server besides localhost ones (repeatable; `*` = any).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// A Host name served besides localhost ones (repeatable; `*` = any). When listening only on
    /// loopback, other Host names are refused (DNS rebinding protection).
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
}

fn parse_tool_delay(s: &str) -> Result<(String, Duration), String> {
    let (tool, d) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: write TOOL=DURATION, e.g. echo=20ms"))?;
    Ok((tool.trim().to_string(), crate::config::parse_duration(d)?))
}

fn read_key_file(path: &PathBuf, what: &str) -> anyhow::Result<StateKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the {what} file {}", path.display()))?;
    StateKey::parse(&text).with_context(|| {
        format!(
            "the {what} file {} does not hold a usable key",
            path.display()
        )
    })
}

impl BackendArgs {
    /// The pool these options describe (reads key files and the environment).
    pub(crate) fn to_options(&self) -> anyhow::Result<PoolOptions> {
        let listen = if self.listen.is_empty() {
            (0..self.instances)
                .map(|i| {
                    let port = self
                        .base_port
                        .checked_add(i)
                        .context("--base-port + --instances goes past port 65535")?;
                    Ok(SocketAddr::new(self.host, port))
                })
                .collect::<anyhow::Result<Vec<_>>>()?
        } else {
            self.listen.clone()
        };
        let (current, source) = match (&self.state_key_file, std::env::var(STATE_KEY_ENV)) {
            (Some(p), _) => (
                read_key_file(p, "--state-key-file")?,
                format!("file {}", p.display()),
            ),
            (None, Ok(v)) if !v.trim().is_empty() => (
                StateKey::parse(&v)
                    .with_context(|| format!("{STATE_KEY_ENV} does not hold a usable key"))?,
                format!("${STATE_KEY_ENV}"),
            ),
            _ => {
                tracing::warn!("no --state-key-file and no {STATE_KEY_ENV}: using a random key, so only this process can verify the requestState it issues");
                (StateKey::random(), "random".into())
            }
        };
        tracing::info!(key_id = current.id(), "requestState key from {source}");
        let mut key = StateKeys::new(current);
        if let Some(p) = &self.previous_state_key_file {
            key = key.with_previous(read_key_file(p, "--previous-state-key-file")?);
        }
        Ok(PoolOptions {
            listen,
            key,
            state_ttl: self.state_ttl,
            allow_origins: self.allow_origin.clone(),
            allow_hosts: self.allow_host.clone(),
            advertise: self.advertise.clone(),
            task_ttl: self.task_ttl,
            store: self.store.clone(),
            principal_header: self.principal_header.clone(),
            delay: self.delay,
            tool_delays: self.tool_delay.clone(),
            max_concurrent: self.max_concurrent,
            ..PoolOptions::local(0)
        })
    }
}
