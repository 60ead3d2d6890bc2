//! The options of `mcp-edge loadtest` ([`LoadTestArgs`]): the command line (clap), its
//! defaults, parsing helpers (`--max-error-rate none`, `1%`), and validation (a shard's part of
//! the run, `--shard`, must hold a worker and a flow, and its report must go somewhere).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Parser;

use super::shard::{self, Shard};
use super::{feed, stages, tls, wire};
use crate::mcp::header::DEFAULT_UPSTREAM_HEADER;

/// Default target URL.
pub const DEFAULT_TARGET: &str = "http://127.0.0.1:8080/mcp";
/// Default run length when neither `--duration` nor `--flows` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

const SCENARIO_HELP: &str = "Scenario: a built-in name or a YAML/JSON file with weighted flows.\n\
Built-in: mixed (default), mrtr, multi-round, plain, create_repo, deploy, charge, onboard, echo, \
tasks (these call the reference backend's tools; tasks follows Tasks-extension tasks).\n\
auto: one flow per tool the target lists (arguments from each inputSchema; destructive or \
non-idempotent tools left out unless --include-destructive).\n\
File: {name, max_rounds?: 8, flows: [{tool: NAME | method: METHOD, arguments?: {..}, weight?: 1, \
answers?: {property: value | \"$args.ARG\"}, param_headers?: {HeaderSuffix: argument}, tasks?: false, \
checks?: [{is_error: false} | {pointer: /p, equals: V} | {pointer: /p, contains: T} | {pointer: /p, matches: RE} | \
{output_schema: true}]}]}\n\
String arguments may use $uuid, $seq, $rand(A,B) and $feed.COLUMN (with --feed).";

/// `--max-error-rate` and `--max-check-failure-rate`: a share, or none (the alias keeps clap
/// from reading the `Option` as "flag may be absent").
pub type MaybeRate = Option<f64>;

/// Parse `0.01`, `1%`, `none` / `off` (no limit).
pub fn parse_rate_limit(s: &str) -> Result<MaybeRate, String> {
    let t = s.trim();
    if matches!(t.to_ascii_lowercase().as_str(), "none" | "off") {
        return Ok(None);
    }
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("{s:?}: write a share (0.01), a percentage (1%) or none"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{s:?}: must be between 0 and 1 (0% and 100%)"));
    }
    Ok(Some(v))
}

/// Options of `mcp-edge loadtest`.
#[derive(clap::Args, Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LoadTestArgs {
    /// MCP endpoint to load (http:// or https://).
    #[arg(long, default_value = DEFAULT_TARGET)]
    pub target: String,
    /// Closed loop: this many workers, each running flows back to back.
    #[arg(long, default_value_t = 16, conflicts_with = "rate")]
    pub concurrency: usize,
    /// Open loop: start this many flows per second (latency counted from the intended start).
    #[arg(long)]
    pub rate: Option<f64>,
    /// How long to run (10s, 1m, 500ms, 1m30s). Default 10s unless --flows is given.
    #[arg(long, value_parser = crate::config::parse_duration)]
    #[serde(
        serialize_with = "wire::ser_opt_secs",
        deserialize_with = "wire::de_opt_secs"
    )]
    pub duration: Option<Duration>,
    /// Stop after this many flows (bad requests included).
    #[arg(long)]
    pub flows: Option<u64>,
    #[arg(long, default_value = "mixed", help = "Scenario name or file (see --help)", long_help = SCENARIO_HELP)]
    pub scenario: String,
    /// Generate this many principals (bearer tokens loadtest-user-1..N); they rotate per flow.
    #[arg(long)]
    pub principals: Option<usize>,
    /// A bearer token to use (repeatable); tokens rotate per flow.
    #[arg(long = "principal", value_name = "TOKEN")]
    pub principal: Vec<String>,
    /// Share of flows replaced by a deliberately mismatched request (wrong Mcp-Name), expected to
    /// be rejected with 400 / -32020 (counted apart, not as errors).
    #[arg(long, default_value_t = 0.0)]
    pub bad_share: f64,
    /// Response header naming the instance that served a request.
    #[arg(long, default_value = DEFAULT_UPSTREAM_HEADER)]
    pub upstream_header: String,
    /// Fail unless at least this fraction of retry legs was served by another instance than leg 1.
    #[arg(long, value_name = "FRACTION")]
    pub expect_cross_instance: Option<f64>,
    /// Fail when errors / requests exceeds this (0.01, 1%, or none; 0 allows no error).
    #[arg(long, value_name = "RATE", default_value = "0.01", value_parser = parse_rate_limit)]
    pub max_error_rate: MaybeRate,
    /// Fail when failed content checks / checks run exceeds this (0.01, 1%, or none).
    #[arg(long, value_name = "RATE", default_value = "0.01", value_parser = parse_rate_limit)]
    pub max_check_failure_rate: MaybeRate,
    /// One-liner: call this tool (instead of --scenario).
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// One-liner: the tool's arguments, a JSON object (templates such as $seq allowed).
    #[arg(long = "args", value_name = "JSON", requires = "tool")]
    pub tool_args: Option<String>,
    /// One-liner: the answer to an elicitation property, KEY=VALUE (VALUE as JSON, else text);
    /// repeatable.
    #[arg(long = "answer", value_name = "KEY=VALUE", requires = "tool")]
    pub answer: Vec<String>,
    /// A header sent with every request, 'Name: value' (repeatable): API keys, tenants. An
    /// Authorization header given here replaces the rotating bearer principals.
    /// Reports name these headers but never carry their values (API keys).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    #[serde(serialize_with = "ser_header_names")]
    pub header: Vec<String>,
    /// A content check on every tool call's final result (repeatable): no-error, schema,
    /// /pointer==VALUE, /pointer~=TEXT (contains), /pointer=~REGEX (matches).
    #[arg(long = "check", value_name = "CHECK")]
    pub check: Vec<String>,
    /// A data feed for $feed.COLUMN in arguments: a .csv file (header line) or .jsonl file.
    #[arg(long, value_name = "FILE")]
    pub feed: Option<PathBuf>,
    /// Which feed row a flow gets.
    #[arg(long, value_enum, default_value_t = feed::FeedOrder::RoundRobin)]
    pub feed_order: feed::FeedOrder,
    /// Ramp stages DURATION:TARGET,... (workers, or flows/s with --rate; e.g. 10s:16,30s:64,10s:0).
    #[arg(long, value_parser = stages::parse_stages, conflicts_with = "duration")]
    pub stages: Option<stages::Stages>,
    /// --scenario auto: also call tools marked destructive or not idempotent.
    #[arg(long)]
    pub include_destructive: bool,
    /// Share of flows that answer elicitations with `decline`.
    #[arg(long, default_value_t = 0.0)]
    pub decline_share: f64,
    /// Share of flows that answer elicitations with `cancel`.
    #[arg(long, default_value_t = 0.0)]
    pub cancel_share: f64,
    /// Share of the tasks of task-following flows (`--scenario tasks`) cancelled with
    /// `tasks/cancel` after their first poll.
    #[arg(long, default_value_t = 0.2)]
    pub task_cancel_share: f64,
    /// Longest a followed task may take, from its creating call to a terminal status; past
    /// it the task is cancelled and counted as abandoned.
    #[arg(long, default_value = "30s", value_parser = crate::config::parse_duration)]
    pub task_limit: Duration,
    /// https targets: accept any certificate (testing only).
    #[arg(long)]
    pub insecure: bool,
    /// https targets: trust the CA certificates in this PEM file (instead of the public roots).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Skip the preflight (server/discover, tools/list) before the run.
    #[arg(long)]
    pub no_preflight: bool,
    /// Run shard I of N of the run (I from 0; I may be $NAME, read from the environment, e.g.
    /// '$JOB_COMPLETION_INDEX/4'): its share of the rate, workers, --flows, $seq values and feed
    /// rows. Merge the shards' --json reports with `mcp-edge loadtest merge`.
    #[arg(long, value_name = "I/N", value_parser = shard::parse_shard)]
    pub shard: Option<Shard>,
    /// Begin the load at this UTC wall-clock time (2026-05-01T12:00:00Z, or $NAME), so that
    /// every shard follows the same clock; at most 10 min ahead, at most 5 s ago.
    #[arg(long, value_name = "TIME", value_parser = shard::parse_start_at)]
    #[serde(
        serialize_with = "wire::ser_opt_time",
        deserialize_with = "wire::de_opt_time"
    )]
    pub start_at: Option<std::time::SystemTime>,
    /// Write the JSON report here (`-`: to stdout, on one line).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the self-contained HTML report here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// No progress and no summary (checks failures are still printed).
    #[arg(long)]
    pub quiet: bool,
    /// Timeout of each request.
    #[arg(long, default_value = "10s", value_parser = crate::config::parse_duration)]
    #[serde(serialize_with = "wire::ser_secs", deserialize_with = "wire::de_secs")]
    pub timeout: Duration,
    /// Open loop: at most this many flows in flight (later ones wait, timed from their intended start).
    #[arg(long, default_value_t = 10_000, hide = true)]
    pub max_in_flight: usize,
}

fn ser_header_names<S: serde::Serializer>(h: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(h.iter().map(|h| {
        let name = h.split_once(':').map_or(h.as_str(), |(n, _)| n).trim();
        format!("{name}: (value not reported)")
    }))
}

#[derive(Parser)]
struct Standalone {
    #[command(flatten)]
    args: LoadTestArgs,
}

impl Default for LoadTestArgs {
    /// The CLI defaults.
    fn default() -> Self {
        LoadTestArgs::from_cli::<[&str; 0], _>([]).expect("defaults parse")
    }
}

impl LoadTestArgs {
    /// Parse options written as on the command line (without the program name), e.g.
    /// `LoadTestArgs::from_cli(["--target", url, "--flows", "100"])`.
    pub fn from_cli<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let argv = std::iter::once(std::ffi::OsString::from("loadtest"))
            .chain(args.into_iter().map(Into::into));
        Standalone::try_parse_from(argv).map(|s| s.args)
    }

    /// The run length: the stages, `--duration`, else 10 s unless `--flows` bounds the run.
    pub(crate) fn effective_duration(&self) -> Option<Duration> {
        if let Some(s) = &self.stages {
            return Some(s.total());
        }
        match (self.duration, self.flows) {
            (Some(d), _) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_DURATION),
        }
    }

    /// The bearer tokens, in rotation order.
    pub(crate) fn principal_tokens(&self) -> Vec<String> {
        if !self.principal.is_empty() {
            return self.principal.clone();
        }
        (1..=self.principals.unwrap_or(4).max(1))
            .map(|i| format!("loadtest-user-{i}"))
            .collect()
    }

    /// The TLS options of an https target.
    pub(crate) fn tls_options(&self) -> tls::TlsOptions {
        tls::TlsOptions {
            insecure: self.insecure,
            cacert: self.cacert.clone(),
        }
    }

    #[cfg(test)]
    /// Whether the run is open loop.
    pub(crate) fn is_open_loop(&self) -> bool {
        self.rate.is_some()
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                bail!("--rate must be a positive number of flows per second");
            }
        }
        if !(0.0..=1.0).contains(&self.bad_share) {
            bail!("--bad-share must be between 0 and 1");
        }
        for (name, v) in [
            ("--expect-cross-instance", self.expect_cross_instance),
            ("--max-error-rate", self.max_error_rate),
            ("--max-check-failure-rate", self.max_check_failure_rate),
            ("--decline-share", Some(self.decline_share)),
            ("--cancel-share", Some(self.cancel_share)),
            ("--task-cancel-share", Some(self.task_cancel_share)),
        ] {
            if v.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
                bail!("{name} must be between 0 and 1");
            }
        }
        if self.duration.is_some_and(|d| d.is_zero()) || self.flows == Some(0) {
            bail!("--duration and --flows must be positive");
        }
        if self.task_limit.is_zero() {
            bail!("--task-limit must be positive (e.g. 30s)");
        }
        if self.decline_share + self.cancel_share > 1.0 {
            bail!("--decline-share and --cancel-share add up to more than 1");
        }
        if self.stages.is_some() && self.flows.is_some() {
            bail!("--stages sets the run length; leave out --flows");
        }
        if self.timeout.is_zero() {
            bail!("--timeout must be positive");
        }
        if let Some(at) = self.start_at {
            shard::wait_until(at, std::time::SystemTime::now())?;
        }
        self.validate_shard()
    }

    /// The shard this process runs (the whole run without `--shard`).
    pub(crate) fn shard_or_whole(&self) -> Shard {
        self.shard.unwrap_or(Shard::WHOLE)
    }

    /// A shard's part of the workers and of --flows must hold at least one.
    fn validate_shard(&self) -> anyhow::Result<()> {
        let Some(s) = self.shard else { return Ok(()) };
        if self.json.is_none() {
            bail!("--shard {}: give --json FILE (or --json - for stdout): the merge reads the shards' reports", s.label());
        }
        let n = s.count;
        let workers = match (&self.stages, self.rate) {
            (_, Some(_)) => None,
            (Some(st), None) => Some((st.peak(0.0).ceil() as u64, "the stages' peak of")),
            (None, None) => Some((self.concurrency as u64, "--concurrency")),
        };
        if let Some((w, what)) = workers.filter(|(w, _)| *w < n) {
            bail!("{what} {w} workers cannot be split into {n} shards: give each shard at least one worker");
        }
        if let Some(f) = self.flows.filter(|f| *f < n) {
            bail!("--flows {f} cannot be split into {n} shards: give each shard at least one flow");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_mirror_the_cli() {
        let d = LoadTestArgs::default();
        assert_eq!(d.target, DEFAULT_TARGET);
        assert_eq!(d.concurrency, 16);
        assert_eq!(d.scenario, "mixed");
        assert_eq!(d.timeout, Duration::from_secs(10));
        assert_eq!(d.upstream_header, DEFAULT_UPSTREAM_HEADER);
        assert_eq!(d.effective_duration(), Some(DEFAULT_DURATION));
        assert_eq!(d.principal_tokens().len(), 4);
        let a = LoadTestArgs::from_cli([
            "--rate",
            "50",
            "--flows",
            "10",
            "--principal",
            "a",
            "--principal",
            "b",
        ])
        .unwrap();
        assert!(a.is_open_loop());
        assert_eq!(a.effective_duration(), None);
        assert_eq!(a.principal_tokens(), ["a", "b"]);
        assert!(LoadTestArgs::from_cli(["--rate", "5", "--concurrency", "3"]).is_err());
        assert_eq!(d.max_error_rate, Some(0.01));
        let h = LoadTestArgs::from_cli(["-H", "X-Api-Key: s3cret"]).unwrap();
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(v["header"][0], "X-Api-Key: (value not reported)");
        let none =
            LoadTestArgs::from_cli(["--max-error-rate", "none", "--max-check-failure-rate", "5%"])
                .unwrap();
        assert_eq!(
            (none.max_error_rate, none.max_check_failure_rate),
            (None, Some(0.05))
        );
        assert_eq!(
            LoadTestArgs::from_cli(["--max-error-rate", "0"])
                .unwrap()
                .max_error_rate,
            Some(0.0)
        );
        assert!(LoadTestArgs::from_cli(["--max-error-rate", "2"]).is_err());
        assert!(
            LoadTestArgs::from_cli(["--args", "{}"]).is_err(),
            "--args needs --tool"
        );
        let st = LoadTestArgs::from_cli(["--stages", "1s:2,2s:0"]).unwrap();
        assert_eq!(st.effective_duration(), Some(Duration::from_secs(3)));
        assert!(LoadTestArgs::from_cli(["--stages", "1s:2", "--duration", "3s"]).is_err());
        assert!(LoadTestArgs::from_cli(["--bad-share", "2"])
            .unwrap()
            .validate()
            .is_err());
    }
}
