//! `mcp-edge loadtest`: drives real MRTR flows (a `tools/call` answered `input_required`, then
//! retries with a new id, the answers and the exact `requestState`) through the gateway, and
//! proves that retry legs may land on any instance and still complete.
//!
//! This module owns the entry points ([`run`], [`execute`]); the options are `args`
//! ([`LoadTestArgs`]).
//! - Before the run: [`preflight`] (server/discover, tools/list, refusal), `plan` (which
//!   scenario, compiled flows, headers, checks, feed), [`auto`] (`--scenario auto`), `gen`
//!   (values from a JSON Schema);
//! - flows: [`scenario`] (built-ins, files, one-liners, the weighted pick), [`template`] (each
//!   leg's body), [`answer`] (answers to `inputRequests`), [`reply`] (reading a reply),
//!   [`feed`] (templates and data feeds), [`checks`] (content checks); [`flows`] re-exports the
//!   first four;
//! - the run: `run` (closed and open loop, [`stages`]), `flow` (one flow), `leg` (one leg on the
//!   wire), `task_flow` (a task a call created, followed to its end: Tasks extension),
//!   `progress`, [`client`] and [`tls`] (HTTP/1.1, https, HTTP/2);
//! - results: [`measure`] (histograms and counters, with [`stats`]; [`task_measure`] for
//!   tasks), [`tally`] (error messages, checks, stages),
//!   [`report`] (summary, JSON and HTML reports, exit criteria);
//! - past one machine: [`shard`] (`--shard I/N`, `--start-at`: a shard's part of the run),
//!   [`wire`] (the lossless measures in the JSON report), [`merge`] (`loadtest merge`: the
//!   shards' reports added up exactly).
//!
//! Speed (2-core machine, release build, against `examples/loadtest_trivial_target.rs` on the
//! same machine, 64 connections, 5 s, `--scenario echo`): about 46 000 requests/s (38 000-40 000
//! with hyper_util's pooled client, which it no longer has); `wrk -t2 -c64` with the same POST
//! body does 58 000-62 000 and `wrk -t1 -c64` 42 600. The tester builds every body, parses
//! every reply and records every leg; the target shares the two cores.

pub(crate) mod answer;
mod args;
pub(crate) mod auto;
pub(crate) mod checks;
pub mod client;
mod ctx;
pub(crate) mod feed;
mod flow;
pub mod flows;
mod gen;
mod leg;
pub mod measure;
mod measure_tasks;
pub mod merge;
mod plan;
pub mod preflight;
mod progress;
pub(crate) mod reply;
pub mod report;
mod run;
pub(crate) mod scenario;
pub mod shard;
pub(crate) mod stages;
pub(crate) mod stats;
pub(crate) mod tally;
mod task_flow;
pub mod task_measure;
pub(crate) mod template;
pub(crate) mod tls;
pub(crate) mod trial;
pub mod wire;

use anyhow::Context as _;

pub use args::{parse_rate_limit, LoadTestArgs, MaybeRate, DEFAULT_DURATION, DEFAULT_TARGET};
pub use flows::{FlowSpec, Scenario, BUILTIN_SCENARIOS};
pub use preflight::PreflightError;
pub use report::Report;
pub use shard::Shard;

/// Async core, for the demo and the tests: run the load and return the report. Prints nothing.
pub async fn execute(opts: &LoadTestArgs) -> anyhow::Result<Report> {
    run::execute(opts, false).await
}

/// Like [`execute`], with the live progress display on stderr when `show_progress` (a bar on a
/// terminal, plain lines otherwise).
pub(crate) async fn execute_with_progress(
    opts: &LoadTestArgs,
    show_progress: bool,
) -> anyhow::Result<Report> {
    run::execute(opts, show_progress).await
}

/// `mcp-edge loadtest`: a run, or `loadtest merge`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoadtestCommand {
    #[command(subcommand)]
    pub sub: Option<LoadtestSub>,
    #[command(flatten)]
    pub args: LoadTestArgs,
}

/// What `mcp-edge loadtest` can do besides a run.
#[derive(clap::Subcommand, Debug)]
pub enum LoadtestSub {
    /// Add up the JSON reports of a sharded run's shards (--shard I/N) into one exact report;
    /// the checks are evaluated on the merged totals. Exit 1 when a check fails or shards are
    /// missing (unless --allow-partial), 2 when the reports are not of one run.
    Merge(merge::MergeArgs),
}

/// `--json -`: the report goes to stdout, on one line (a pod's log collects it).
fn is_stdout(p: &std::path::Path) -> bool {
    p.as_os_str() == "-"
}

fn write_json(p: &std::path::Path, v: &serde_json::Value) -> anyhow::Result<()> {
    if is_stdout(p) {
        println!("{}", serde_json::to_string(v)?);
        return Ok(());
    }
    let text = serde_json::to_string_pretty(v)?;
    std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))
}

/// A shard that could not run still writes a report, saying why, so that the merge names it
/// as failed rather than missing.
fn write_failed_shard(opts: &LoadTestArgs, e: &anyhow::Error) {
    let (Some(shard), Some(p)) = (opts.shard, &opts.json) else {
        return;
    };
    let v = serde_json::json!({
        "schema": report::json::SCHEMA, "shard": shard, "error": format!("{e:#}"),
        "config": serde_json::to_value(opts).unwrap_or_default(),
    });
    if let Err(w) = write_json(p, &v) {
        eprintln!("error: {w:#}");
    }
}

/// Write the reports `--json` and `--html` ask for.
pub fn write_reports(report: &Report, opts: &LoadTestArgs) -> anyhow::Result<()> {
    if let Some(p) = &opts.json {
        write_json(p, &report.to_json())?;
    }
    if let Some(p) = &opts.html {
        std::fs::write(p, report.to_html()).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// Blocking entry point of `mcp-edge loadtest`: run, print the summary, write the reports, and
/// return whether every check passed (each failure is printed with its reason).
pub fn run(args: LoadTestArgs) -> anyhow::Result<bool> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(8),
        )
        .enable_all()
        .build()?;
    let report = match rt.block_on(execute_with_progress(&args, !args.quiet)) {
        Ok(r) => r,
        Err(e) => {
            write_failed_shard(&args, &e);
            return Err(e);
        }
    };
    // With `--json -` stdout holds the report alone.
    let to_stdout = args.json.as_deref().is_some_and(is_stdout);
    if !args.quiet {
        let summary = report.summary_text();
        match to_stdout {
            true => eprintln!("{summary}"),
            false => println!("{summary}"),
        }
    }
    write_reports(&report, &args)?;
    if !args.quiet {
        for (flag, path) in [("json", &args.json), ("html", &args.html)] {
            if let Some(p) = path.as_deref().filter(|p| !is_stdout(p)) {
                println!("{flag} report: {}", p.display());
            }
        }
    }
    let failures = report.check(&args);
    if let Some(s) = args.shard {
        // One shard's figures are not the run's: the merge evaluates the checks.
        for f in &failures {
            eprintln!("shard {}: on this shard alone: {f}", s.label());
        }
        return Ok(true);
    }
    for f in &failures {
        eprintln!("loadtest check failed: {f}");
    }
    Ok(failures.is_empty())
}
