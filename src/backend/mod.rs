//! `mcp-edge backend`: the reference stateless MRTR server, run as a pool of instances.
//!
//! Each instance is an independent HTTP/1.1 listener (hyper 1) with its own instance id; all
//! instances of a pool share one `requestState` key, so a retry completes on whichever
//! instance receives it. Separate processes (or machines) started with the same key file
//! verify each other's state too.
//!
//! - [`BackendArgs`] / [`run`]: the command line.
//! - [`PoolOptions`] / [`Pool`]: the programmatic API used by tests and the demo. A pool binds
//!   every listener before [`Pool::start`] returns and runs on its own thread and tokio
//!   runtime, so it can be started from a plain `#[test]` or from inside another runtime.
//! - [`http`]: the validation ladder; `dispatch`: the answer per method; `mrtr`: tools/call
//!   and prompts/get rounds; `stream`: SSE answers and listen streams.
//! - [`tools`]: what the server offers; [`state`]: the sealed `requestState`; [`ledger`]: the
//!   charge ledger (one-time use of a confirmed state).

mod cli;
mod dispatch;
pub(crate) mod http;
pub(crate) mod instance;
pub mod ledger;
mod mrtr;
mod respond;
pub mod state;
mod stream;
pub(crate) mod tasks;
pub mod tools;

pub use cli::BackendArgs;
pub use state::{StateCodec, StateKey, StateKeys};

use anyhow::Context;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

use self::instance::{Instance, Shared};

/// Environment variable that may hold the state key (when no --state-key-file is given).
pub(crate) const STATE_KEY_ENV: &str = "MCP_EDGE_STATE_KEY";
/// Default largest request body.
pub(crate) const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// Programmatic options of a pool.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// One listener per address; port 0 picks a free port.
    pub listen: Vec<SocketAddr>,
    /// The state keys shared by every instance.
    pub key: StateKeys,
    pub state_ttl: Duration,
    /// Origins allowed besides localhost ones (`*` = any).
    pub allow_origins: Vec<String>,
    /// Host names served besides localhost ones (`*` = any).
    pub allow_hosts: Vec<String>,
    /// Largest request body (413 above it).
    pub body_limit: usize,
    /// Tokio worker threads of the pool's runtime.
    pub worker_threads: usize,
    /// The address of each instance as a gateway's pool lists it (`host:port`), hashed into
    /// the owner hint of its task ids; empty = each instance's bound listen address.
    pub advertise: Vec<String>,
    /// How long a task (Tasks extension) stays readable after its creation.
    pub task_ttl: Duration,
    /// Where the charge ledger lives: `memory` (this process) or `redis://host:port[/db]`
    /// (shared by every process pointed at it).
    pub store: String,
    /// Take the caller's identity from this header (e.g. `x-mcp-edge-subject`, set by a
    /// gateway that verified the caller) instead of the bearer token.
    pub principal_header: Option<String>,
    /// Answer every request this much later (a slow instance, for balancing benchmarks).
    pub delay: Duration,
    /// Answer `tools/call` of these tools this much later again (tools of mixed latency).
    pub tool_delays: Vec<(String, Duration)>,
    /// Most requests each instance works on at once; more wait their turn (0: no bound).
    pub max_concurrent: usize,
}

impl PoolOptions {
    /// `n` instances on 127.0.0.1 with ephemeral ports, a fresh random key, a 10-minute TTL.
    pub fn local(n: usize) -> Self {
        PoolOptions {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 0)); n],
            key: StateKeys::random(),
            state_ttl: Duration::from_secs(600),
            allow_origins: Vec::new(),
            allow_hosts: Vec::new(),
            body_limit: DEFAULT_BODY_LIMIT,
            worker_threads: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(4),
            advertise: Vec::new(),
            task_ttl: tasks::DEFAULT_TTL,
            store: "memory".into(),
            principal_header: None,
            delay: Duration::ZERO,
            tool_delays: Vec::new(),
            max_concurrent: 0,
        }
    }

    pub fn with_key(mut self, key: StateKeys) -> Self {
        self.key = key;
        self
    }

    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.state_ttl = ttl;
        self
    }
}

/// A running pool of backend instances. Dropping it shuts it down.
pub struct Pool {
    addrs: Vec<SocketAddr>,
    ids: Vec<String>,
    shutdown: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Pool {
    /// Bind every listener, then serve on a thread with its own runtime.
    pub fn start(opts: PoolOptions) -> anyhow::Result<Pool> {
        anyhow::ensure!(
            !opts.listen.is_empty(),
            "a backend pool needs at least one listen address"
        );
        let mut listeners = Vec::new();
        for a in &opts.listen {
            let l = StdListener::bind(a).with_context(|| {
                format!("cannot listen on {a}: port {} is in use or not allowed; pick another --base-port / --listen", a.port())
            })?;
            l.set_nonblocking(true)?;
            listeners.push(l);
        }
        let addrs: Vec<SocketAddr> = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<Result<_, _>>()?;
        anyhow::ensure!(
            opts.advertise.is_empty() || opts.advertise.len() == addrs.len(),
            "--advertise was given {} time(s) for {} instance(s): give one address per instance, in listen order, or none",
            opts.advertise.len(),
            addrs.len()
        );
        let advertise: Vec<String> = if opts.advertise.is_empty() {
            addrs.iter().map(SocketAddr::to_string).collect()
        } else {
            opts.advertise.clone()
        };
        let tag = state::hex(&rand::random::<[u8; 3]>());
        let ids: Vec<String> = (1..=addrs.len()).map(|i| format!("be-{tag}-{i}")).collect();

        let hosts = host_policy(&opts.allow_hosts, &addrs);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (changes, _) = broadcast::channel(64);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(opts.worker_threads.max(1))
            .thread_name("mcp-edge-backend")
            .enable_all()
            .build()
            .context("cannot start the backend's tokio runtime")?;
        let ledger = rt.block_on(ledger::Ledger::connect(&opts.store))?;
        let principal_header = match &opts.principal_header {
            None => None,
            Some(h) => Some(::http::HeaderName::from_bytes(h.trim().as_bytes()).map_err(|_| {
                anyhow::anyhow!("--principal-header {h:?} is not a valid HTTP header name (e.g. x-mcp-edge-subject)")
            })?),
        };
        let shared = Arc::new(Shared {
            codec: StateCodec::new(opts.key.clone(), opts.state_ttl),
            ledger,
            principal_header,
            origins: crate::config::OriginsConfig::local_and(&opts.allow_origins),
            hosts,
            changes,
            tasks: tasks::TaskStore::new(opts.task_ttl),
            shutdown: shutdown_rx.clone(),
            body_limit: opts.body_limit,
            delay: opts.delay,
            tool_delays: opts.tool_delays.clone(),
            max_concurrent: opts.max_concurrent,
        });
        let instances: Vec<Arc<Instance>> = ids
            .iter()
            .zip(&advertise)
            .map(|(id, adv)| Arc::new(Instance::new(id.clone(), shared.clone(), adv)))
            .collect();
        let thread = std::thread::Builder::new()
            .name("mcp-edge-backend-pool".into())
            .spawn(move || {
                rt.block_on(serve_all(listeners, instances, shutdown_rx));
                rt.shutdown_timeout(Duration::from_millis(200));
            })
            .context("cannot start the backend pool thread")?;
        Ok(Pool {
            addrs,
            ids,
            shutdown,
            thread: Some(thread),
        })
    }

    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub fn instance_ids(&self) -> &[String] {
        &self.ids
    }

    /// Stop accepting, end listen streams with their final result, close connections (waiting
    /// at most ~2 s for in-flight responses), and join the pool thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Host names to accept: `None` (any) when `*` is allowed or some listener is not on loopback
/// and no list was given.
fn host_policy(allow: &[String], addrs: &[SocketAddr]) -> Option<Vec<String>> {
    if allow.iter().any(|h| h == "*") {
        return None;
    }
    if allow.is_empty() && !addrs.iter().all(|a| a.ip().is_loopback()) {
        return None;
    }
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    hosts.extend(allow.iter().cloned());
    Some(hosts)
}

async fn serve_all(
    listeners: Vec<StdListener>,
    instances: Vec<Arc<Instance>>,
    shutdown: watch::Receiver<bool>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut loops = Vec::new();
    for (l, inst) in listeners.into_iter().zip(instances) {
        let listener = match tokio::net::TcpListener::from_std(l) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(instance = %inst.id, "cannot register the listener with tokio: {e}");
                continue;
            }
        };
        loops.push(tokio::spawn(accept_loop(
            listener,
            inst,
            shutdown.clone(),
            active.clone(),
        )));
    }
    for l in loops {
        let _ = l.await;
    }
    // Let connections finish their in-flight responses (listen streams end on shutdown).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while active.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    inst: Arc<Instance>,
    mut shutdown: watch::Receiver<bool>,
    active: Arc<AtomicUsize>,
) {
    loop {
        if *shutdown.borrow_and_update() {
            return;
        }
        let (stream, _peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(instance = %inst.id, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let inst = inst.clone();
        let mut shutdown = shutdown.clone();
        let active = active.clone();
        active.fetch_add(1, Ordering::AcqRel);
        tokio::spawn(async move {
            let svc_inst = inst.clone();
            let svc = service_fn(move |req| http::handle(svc_inst.clone(), req));
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            let shutting_down = *shutdown.borrow_and_update();
            if shutting_down {
                conn.as_mut().graceful_shutdown();
            }
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = shutdown.changed(), if !shutting_down => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(2), conn.as_mut()).await;
                }
            }
            active.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// Blocking entry point of `mcp-edge backend`: start the pool, log the addresses and instance
/// ids, run until Ctrl-C or SIGTERM.
pub fn run(args: BackendArgs) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let opts = args.to_options()?;
    let ttl = opts.state_ttl;
    let pool = Pool::start(opts)?;
    for (addr, id) in pool.addrs().iter().zip(pool.instance_ids()) {
        // stdout, one line per instance, so scripts can read the ports of --listen ...:0.
        println!("mcp-edge backend instance {id} listening on http://{addr}/mcp");
        tracing::info!(instance = %id, %addr, "listening");
    }
    tracing::info!(state_ttl = ?ttl, "backend pool of {} instance(s) ready; Ctrl-C or SIGTERM stops it", pool.addrs().len());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    signals.block_on(async {
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r?,
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        tokio::signal::ctrl_c().await?;
        anyhow::Ok(())
    })?;
    tracing::info!("shutting down the backend pool");
    pool.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests;
