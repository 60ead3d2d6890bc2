//! `mcp-edge loadtest merge`: the JSON reports of a sharded run's shards added up into one
//! report, exactly: counters summed, landing tables, error groups and content checks added,
//! every latency histogram (HdrHistogram's own encoding, [`super::wire`]) added, so merged
//! percentiles are those of one histogram of every sample. The checks are evaluated again on
//! the merged totals. Refused: reports of different runs (shard count, options or scenario);
//! a merge without every shard (missing, failed, given twice) is labelled partial and fails
//! unless `--allow-partial`. What the merged report says of its shards is [`MergeInfo`]; the
//! command is [`run`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde_json::Value;

use super::args::{parse_rate_limit, MaybeRate};
use super::measure::Measures;
pub(crate) use super::report::shards::{FailedShard, MergeInfo};
use super::report::{json::SCHEMA, Report};
use super::scenario::Scenario;
use super::shard::Shard;
use super::{wire, LoadTestArgs};

/// Options of `mcp-edge loadtest merge`. The checks are those the shards ran with unless given
/// here.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MergeArgs {
    /// The shards' JSON reports: files written by --json, or logs holding one (the last line
    /// that is a report counts, as `loadtest --json -` prints it).
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// Write the merged JSON report here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the merged self-contained HTML report here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Merge what there is when shards are missing, failed or given twice (the report says
    /// partial); without it such a merge exits 1.
    #[arg(long)]
    pub allow_partial: bool,
    /// Check on the merged totals instead of the shards' own --expect-cross-instance.
    #[arg(long, value_name = "FRACTION")]
    pub expect_cross_instance: Option<f64>,
    /// Check on the merged totals instead of the shards' own --max-error-rate (or none).
    #[arg(long, value_name = "RATE", value_parser = parse_rate_limit)]
    pub max_error_rate: Option<MaybeRate>,
    /// Check on the merged totals instead of the shards' own --max-check-failure-rate.
    #[arg(long, value_name = "RATE", value_parser = parse_rate_limit)]
    pub max_check_failure_rate: Option<MaybeRate>,
    /// No summary (failed checks are still printed).
    #[arg(long)]
    pub quiet: bool,
}

/// The report in `path`: the whole file, or its last line that is a report (a pod's log).
pub fn read_report(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let is_report = |v: &Value| v.get("schema").and_then(Value::as_str) == Some(SCHEMA);
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        if is_report(&v) {
            return Ok(v);
        }
    }
    text.lines()
        .rev()
        .map(str::trim)
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(is_report)
        .with_context(|| {
            format!(
                "{}: no {SCHEMA} report in it (a file written by --json, or the log of a shard run with --json -)",
                path.display()
            )
        })
}

/// One input report: which shard, and its JSON.
struct Input {
    path: PathBuf,
    shard: Shard,
    value: Value,
}

fn shard_of(path: &Path, v: &Value) -> anyhow::Result<Shard> {
    match v.get("shard") {
        Some(s) if !s.is_null() => serde_json::from_value(s.clone()).with_context(|| {
            format!(
                "{}: the member `shard` is not {{index, count}}",
                path.display()
            )
        }),
        _ if v.get("merge").is_some_and(|m| !m.is_null()) => bail!(
            "{} is a merged report already: merge the shards' own reports",
            path.display()
        ),
        _ => bail!(
            "{} is the report of a whole run, not of a shard: run each part with --shard I/N",
            path.display()
        ),
    }
}

/// The reports, one per shard, with what is missing, failed or duplicated.
fn sort_inputs(inputs: Vec<Input>, allow_partial: bool) -> anyhow::Result<(Vec<Input>, MergeInfo)> {
    let count = inputs[0].shard.count;
    if let Some(odd) = inputs.iter().find(|i| i.shard.count != count) {
        bail!(
            "{} is shard {} but {} is shard {}: these are not the shards of one run",
            inputs[0].path.display(),
            inputs[0].shard.label(),
            odd.path.display(),
            odd.shard.label()
        );
    }
    let mut by_index: BTreeMap<u64, Input> = BTreeMap::new();
    let mut info = MergeInfo {
        count,
        allow_partial,
        ..MergeInfo::default()
    };
    for i in inputs {
        match by_index.entry(i.shard.index) {
            std::collections::btree_map::Entry::Occupied(_) => info.duplicates.push(i.shard.index),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(i);
            }
        }
    }
    let mut ran = Vec::new();
    for index in 0..count {
        match by_index.remove(&index) {
            None => info.missing.push(index),
            Some(i) => match i.value.get("error").and_then(Value::as_str) {
                Some(e) => info.failed.push(FailedShard {
                    index,
                    error: e.to_string(),
                }),
                None => ran.push(i),
            },
        }
    }
    info.ran = ran.iter().map(|i| i.shard.index).collect();
    info.partial = !info.missing.is_empty() || !info.failed.is_empty();
    if ran.is_empty() {
        bail!("no shard's report holds measures: {}", info.describe());
    }
    Ok((ran, info))
}

/// The options that describe the run, without what differs between its shards.
fn run_options(v: &Value) -> Value {
    let mut c = v.get("config").cloned().unwrap_or(Value::Null);
    if let Some(o) = c.as_object_mut() {
        for k in ["shard", "json", "html", "quiet"] {
            o.remove(k);
        }
    }
    c
}

/// Refuse reports of different runs, naming what differs.
fn same_run(ran: &[Input]) -> anyhow::Result<()> {
    let (first, want) = (&ran[0], run_options(&ran[0].value));
    for i in &ran[1..] {
        let got = run_options(&i.value);
        if got != want {
            let keys: Vec<String> = want
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, v)| got.get(k.as_str()) != Some(*v))
                .map(|(k, v)| {
                    format!(
                        "{k} ({v} vs {})",
                        got.get(k.as_str()).unwrap_or(&Value::Null)
                    )
                })
                .collect();
            bail!(
                "{} and {} are not shards of one run: their options differ: {}",
                first.path.display(),
                i.path.display(),
                keys.join(", ")
            );
        }
        if i.value.get("scenario") != first.value.get("scenario") {
            bail!(
                "{} and {} are not shards of one run: they ran different scenarios",
                first.path.display(),
                i.path.display()
            );
        }
    }
    Ok(())
}

fn measures_of(i: &Input) -> anyhow::Result<Measures> {
    let m = i
        .value
        .pointer("/lossless/measures")
        .filter(|m| !m.is_null())
        .with_context(|| format!("{}: no lossless measures in it", i.path.display()))?;
    serde_json::from_value(m.clone())
        .with_context(|| format!("{}: its lossless measures cannot be read", i.path.display()))
}

/// Each second's histogram added over the shards: (encoded windows, p99 µs per second).
fn merged_windows(ran: &[Input]) -> anyhow::Result<(Vec<String>, Vec<Option<u64>>)> {
    let mut sum: Vec<hdrhistogram::Histogram<u64>> = Vec::new();
    for i in ran {
        let ws = i.value.pointer("/lossless/timeline_windows");
        for (t, w) in ws
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let h = wire::decode(w.as_str().unwrap_or_default())
                .map_err(|e| anyhow::anyhow!("{}: second {t}: {e}", i.path.display()))?;
            if sum.len() <= t {
                sum.resize_with(t + 1, super::measure::new_hist);
            }
            sum[t].add(&h).expect("auto-resizing histogram");
        }
    }
    let p99 = sum
        .iter()
        .map(|h| (!h.is_empty()).then(|| h.value_at_quantile(0.99)))
        .collect();
    let enc = sum
        .iter()
        .map(|h| wire::encode(h).unwrap_or_default())
        .collect();
    Ok((enc, p99))
}

/// Add the shards' reports up into one report (see the module documentation).
pub(crate) fn merge(args: &MergeArgs) -> anyhow::Result<Report> {
    if args
        .expect_cross_instance
        .is_some_and(|f| !(0.0..=1.0).contains(&f))
    {
        bail!("--expect-cross-instance must be between 0 and 1");
    }
    let mut inputs = Vec::new();
    for p in &args.reports {
        let value = read_report(p)?;
        let shard = shard_of(p, &value)?;
        inputs.push(Input {
            path: p.clone(),
            shard,
            value,
        });
    }
    let (ran, info) = sort_inputs(inputs, args.allow_partial)?;
    same_run(&ran)?;
    let first = &ran[0].value;
    let mut opts: LoadTestArgs = serde_json::from_value(first["config"].clone())
        .context("the shards' options cannot be read")?;
    opts.shard = None;
    (opts.json, opts.html, opts.quiet) = (args.json.clone(), args.html.clone(), args.quiet);
    if args.expect_cross_instance.is_some() {
        opts.expect_cross_instance = args.expect_cross_instance;
    }
    opts.max_error_rate = args.max_error_rate.unwrap_or(opts.max_error_rate);
    opts.max_check_failure_rate = args
        .max_check_failure_rate
        .unwrap_or(opts.max_check_failure_rate);
    let scenario: Scenario = serde_json::from_value(first["scenario"].clone())
        .context("the shards' scenario cannot be read")?;
    let mut total = measures_of(&ran[0])?;
    for i in &ran[1..] {
        let m = measures_of(i)?;
        let labels = |m: &Measures| m.ops.iter().map(|o| o.label.clone()).collect::<Vec<_>>();
        if labels(&m) != labels(&total) {
            bail!(
                "{} ran other flows than {}",
                i.path.display(),
                ran[0].path.display()
            );
        }
        total.merge(&m);
    }
    let num = |i: &Input, k: &str| i.value.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let started = ran
        .iter()
        .map(|i| num(i, "started_at_unix_ms") as u64)
        .min();
    let elapsed = ran.iter().map(|i| num(i, "elapsed_s")).fold(0.0, f64::max);
    let (windows, p99) = merged_windows(&ran)?;
    let mut report = Report::new(
        opts,
        scenario,
        started.unwrap_or(0),
        Duration::from_secs_f64(elapsed),
        total,
        p99,
    );
    report.windows = windows;
    report.merge = Some(info);
    Ok(report)
}

/// `mcp-edge loadtest merge`: merge, print the summary, write the reports, and return whether
/// every check on the merged totals passed (each failure printed with its reason).
pub fn run(args: &MergeArgs) -> anyhow::Result<bool> {
    let report = merge(args)?;
    if !args.quiet {
        println!("{}", report.summary_text());
    }
    if let Some(p) = &args.json {
        let mut v = report.to_json();
        // What the first shard's preflight saw (every shard asked the same target).
        v["preflight"] = read_report(&args.reports[0])?["preflight"].take();
        std::fs::write(p, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.html {
        std::fs::write(p, report.to_html()).with_context(|| format!("writing {}", p.display()))?;
    }
    let failures = report.check(&report.args);
    for f in &failures {
        eprintln!("loadtest merge: check failed: {f}");
    }
    Ok(failures.is_empty())
}
