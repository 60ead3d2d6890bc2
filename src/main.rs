//! The `mcp-edge` command: parse arguments, call into the library.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcp_edge::config::Config;

/// mimalloc instead of glibc malloc: pingora makes ~80 small allocations per proxied request,
/// and glibc's malloc/free/consolidate were ~9% of the gateway's CPU under load (see
/// docs/benchmarks-history.md). Set here, in the binary only: the library leaves the choice to
/// its user.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "mcp-edge",
    version,
    about = "An edge gateway for fleets of stateless MCP (2026-07-28) servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Serve {
        /// The gateway config file.
        #[arg(long, short, default_value = "gateway.yaml")]
        config: PathBuf,
        /// Write one access-log line per request.
        #[arg(long, value_enum, default_value = "off")]
        access_log: AccessLog,
        /// Take the listening sockets over from the gateway running with this config, with no
        /// connection refused: start the new process with --upgrade, then send the old one
        /// SIGQUIT; it hands its listeners over and drains.
        #[arg(long)]
        upgrade: bool,
    },
    /// Validate a config file and print the resolved route table.
    Check {
        #[arg(long, short, default_value = "gateway.yaml")]
        config: PathBuf,
    },
    /// Say what the gateway would do with a request, stage by stage, without sending it: the
    /// request file is `{"headers": {...}, "body": "<the request body>"}` (`-`: stdin).
    Explain {
        #[arg(long, short, default_value = "gateway.yaml")]
        config: PathBuf,
        #[arg(long, short)]
        request: PathBuf,
    },
    /// Print the JSON Schema of gateway.yaml (committed as schema/gateway.schema.json).
    Schema,
    /// Run the reference stateless MRTR backend as a pool of instances.
    Backend(mcp_edge::backend::BackendArgs),
    /// Drive MRTR flows through a gateway and check that retry legs land on any instance;
    /// `loadtest merge` adds up the reports of a sharded run (--shard I/N).
    Loadtest(Box<mcp_edge::loadtest::LoadtestCommand>),
    /// Start a backend pool, the gateway and a short MRTR load test in one process, and report.
    Demo(mcp_edge::demo::DemoArgs),
    /// Ask MCP servers what they serve and write a commented gateway.yaml that federates them
    /// (stdout, or -o FILE).
    Init(mcp_edge::init::InitArgs),
    /// Pinned tool definitions of a running gateway (its admin API): `list`, `diff` (pinned
    /// against served), `approve --pool P --tool T`.
    Pins(mcp_edge::pins_cli::PinsArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AccessLog {
    Off,
    Text,
    Json,
}

fn init_logging(access: AccessLog, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let default = match (access, quiet) {
        (_, true) => "warn",
        (AccessLog::Off, false) => "info,mcp_edge::access=off",
        _ => "info",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if access == AccessLog::Json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn load(path: &Path) -> Result<Config, ExitCode> {
    Config::load(path).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve {
            config,
            access_log,
            upgrade,
        } => {
            init_logging(access_log, false);
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(code) => return code,
            };
            tracing::info!(
                "mcp-edge gateway: MCP on {} (POST {}), admin on {:?}",
                cfg.listen.mcp,
                cfg.endpoint,
                cfg.listen.admin
            );
            mcp_edge::gateway::serve(cfg, config, upgrade)
        }
        Command::Explain { config, request } => return explain(&config, &request),
        Command::Check { config } => return check(&config),
        Command::Pins(args) => match mcp_edge::pins_cli::run(args) {
            Ok(text) => {
                print!("{text}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("mcp-edge pins: {e}");
                return ExitCode::from(1);
            }
        },
        Command::Schema => {
            print!("{}", mcp_edge::config::schema_json());
            Ok(())
        }
        Command::Backend(args) => mcp_edge::backend::run(args),
        Command::Init(args) => match mcp_edge::init::run(args) {
            Ok(true) => Ok(()),
            // No server reachable: the report said why for each.
            Ok(false) => return ExitCode::from(1),
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(2);
            }
        },
        Command::Demo(args) => {
            init_logging(AccessLog::Off, true);
            match mcp_edge::demo::run(args) {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::from(1),
                Err(e) => Err(e),
            }
        }
        Command::Loadtest(cmd) => match cmd.sub {
            Some(mcp_edge::loadtest::LoadtestSub::Merge(m)) => {
                match mcp_edge::loadtest::merge::run(&m) {
                    Ok(true) => Ok(()),
                    Ok(false) => return ExitCode::from(1),
                    // The reports cannot be merged (not of one run, unreadable).
                    Err(e) => {
                        eprintln!("error: {e:#}");
                        return ExitCode::from(2);
                    }
                }
            }
            None => return loadtest(cmd.args),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `mcp-edge check`: the config explained, its listeners with their protocols and certificates
/// (files read and checked), and warnings (a certificate near its expiry). Exit 2 on an error.
fn check(config: &std::path::Path) -> ExitCode {
    let cfg = match load(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (listeners, warnings) =
        match mcp_edge::gateway::transport::listeners::describe(&cfg, now, 14) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("error: {}: {e}", config.display());
                return ExitCode::from(2);
            }
        };
    // A closed stdout (`check | head`) ends the listing, not the process with a panic.
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = write!(
        out,
        "{}: OK\n\n{}\n{listeners}",
        config.display(),
        cfg.describe()
    );
    for w in &warnings {
        let _ = writeln!(out, "warning: {w}");
        eprintln!("warning: {w}");
    }
    ExitCode::SUCCESS
}

/// `mcp-edge loadtest`: exit 1 when a check fails, 2 when the preflight refuses the scenario.
fn loadtest(args: mcp_edge::loadtest::LoadTestArgs) -> ExitCode {
    match mcp_edge::loadtest::run(args) {
        Ok(true) => ExitCode::SUCCESS,
        // The failed checks were printed with their reasons.
        Ok(false) => ExitCode::from(1),
        // Refused before any load was sent (a scenario tool the target lacks).
        Err(e) if e.is::<mcp_edge::loadtest::PreflightError>() => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `mcp-edge explain`: the walk of one request through a gateway built from `config`, offline
/// (no listener, no health check: every instance counts as up).
fn explain(config: &Path, request: &Path) -> ExitCode {
    let cfg = match load(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let text = if request == Path::new("-") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map(|_| s)
    } else {
        std::fs::read_to_string(request)
    };
    let question = match text.map_err(|e| e.to_string()).and_then(|t| {
        serde_json::from_str::<mcp_edge::gateway::runtime::explain::Question>(&t)
            .map_err(|e| e.to_string())
    }) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("error: {}: {e}; write {{\"headers\": {{\"Mcp-Method\": \"tools/call\", ...}}, \"body\": \"<the request body>\"}}", request.display());
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let answer = runtime.map_err(anyhow::Error::from).and_then(|rt| {
        rt.block_on(async {
            let gw = std::sync::Arc::new(mcp_edge::gateway::Gateway::new(cfg, None)?);
            Ok(mcp_edge::gateway::runtime::explain::explain(&gw, &question).await)
        })
    });
    match answer {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: {e:#}", config.display());
            ExitCode::from(2)
        }
    }
}
