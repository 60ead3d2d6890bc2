//! One load test run as shards (`--shard I/N`, `--start-at`) by separate `mcp-edge loadtest`
//! processes against the gateway in front of three `mcp-edge backend` processes, and merged
//! (`mcp-edge loadtest merge`): the merged totals are the sums of the shards', the merged
//! percentiles those of the shards' histograms added up, a missing or failed shard is named
//! and fails the merge unless `--allow-partial`, reports of different runs are refused, and the
//! checks on the merged totals decide the exit code. The shard index is read from the
//! environment as the Kubernetes Job passes it; the Job's arguments are ones the CLI accepts.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::support::spawn::Procs;
use crate::support::*;
use mcp_edge::gateway::RunningGateway;
use mcp_edge::loadtest::{merge::read_report, wire, LoadTestArgs, Shard};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-edge");

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mcp-edge-shards-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn key_file(d: &Path) -> PathBuf {
    let p = d.join("state.key");
    std::fs::write(&p, "7c".repeat(32)).unwrap();
    p
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Wait for every process, at most `bound` in all; kill (by drop) whatever is still running.
fn wait_all(mut procs: Procs, bound: Duration) -> Vec<std::process::ExitStatus> {
    let end = Instant::now() + bound;
    let mut done = vec![None; procs.0.len()];
    while done.iter().any(Option::is_none) {
        assert!(
            Instant::now() < end,
            "the shards did not finish within {bound:?}"
        );
        for (c, d) in procs.0.iter_mut().zip(&mut done) {
            if d.is_none() {
                *d = c.try_wait().unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done.into_iter().map(Option::unwrap).collect()
}

fn merge(args: &[&Path], extra: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["loadtest", "merge"]).args(args).args(extra);
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Shards 0 and 1 write their reports to files; shard 2 takes its index from
/// `$JOB_COMPLETION_INDEX` and prints its report to stdout (its "log").
fn run_shards(gw: &RunningGateway, d: &Path) -> [PathBuf; 3] {
    let target = format!("http://{}/mcp", gw.mcp_addr);
    let start = rfc3339(SystemTime::now() + Duration::from_secs(4));
    let files = [d.join("s0.json"), d.join("s1.json"), d.join("s2.log")];
    let common = [
        "loadtest",
        "--target",
        &target,
        "--start-at",
        &start,
        "--scenario",
        "mrtr",
        "--flows",
        "300",
        "--concurrency",
        "6",
        "--duration",
        "40s",
        "--timeout",
        "5s",
        "--max-error-rate",
        "0",
        "--expect-cross-instance",
        "0.3",
        "--quiet",
    ];
    let mut children: Vec<Child> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let mut cmd = Command::new(BIN);
        cmd.args(common).stdin(Stdio::null()).stderr(Stdio::null());
        if i < 2 {
            cmd.args(["--shard", &format!("{i}/3"), "--json"]).arg(f);
            cmd.stdout(Stdio::null());
        } else {
            cmd.args(["--shard", "$JOB_COMPLETION_INDEX/3", "--json", "-"]);
            cmd.env("JOB_COMPLETION_INDEX", "2");
            cmd.stdout(std::fs::File::create(f).unwrap());
        }
        children.push(cmd.spawn().unwrap());
    }
    let status = wait_all(Procs(children), Duration::from_secs(90));
    assert!(
        status.iter().all(|s| s.success()),
        "shards exited {status:?}"
    );
    files
}

fn u(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} in {v:.300}"))
}

/// The merged report's totals against the sums of the shards'.
fn assert_sums(merged: &Value, shards: &[Value]) {
    for ptr in [
        "/requests/total",
        "/requests/errors",
        "/flows/started",
        "/flows/completed",
        "/landing/retry_legs_known",
        "/landing/cross_instance",
        "/latency_ms/first/count",
        "/latency_ms/retry/count",
        "/latency_ms/flow/count",
    ] {
        let sum: u64 = shards.iter().map(|s| u(s, ptr)).sum();
        assert_eq!(u(merged, ptr), sum, "{ptr}");
    }
    assert_eq!(
        u(merged, "/flows/completed"),
        300,
        "the whole run's --flows"
    );
    let per_instance = |v: &Value| -> Vec<(String, u64)> {
        let a = v.pointer("/landing/instances").unwrap().as_array().unwrap();
        a.iter()
            .map(|i| (i["name"].as_str().unwrap().to_string(), u(i, "/retry")))
            .collect()
    };
    for (name, retry) in per_instance(merged) {
        let sum: u64 = shards
            .iter()
            .flat_map(per_instance)
            .filter(|(n, _)| *n == name)
            .map(|(_, r)| r)
            .sum();
        assert_eq!(retry, sum, "retry legs on {name}");
    }
    // Percentiles: those of the shards' histograms added up, sample for sample.
    let hist = |v: &Value| {
        let m = v.pointer("/lossless/measures/legs/0/hist").unwrap();
        wire::decode(m.as_str().unwrap()).unwrap()
    };
    let mut all = hist(&shards[0]);
    for s in &shards[1..] {
        all.add(hist(s)).unwrap();
    }
    assert_eq!(hist(merged), all);
    let p99 = merged
        .pointer("/latency_ms/first/p99")
        .unwrap()
        .as_f64()
        .unwrap();
    assert_eq!(p99, all.value_at_quantile(0.99) as f64 / 1000.0);
}

#[test]
fn shards_of_one_run_merge_into_its_exact_totals_and_the_merge_decides() {
    let d = dir();
    let (_backends, addrs) = spawn::fleet(3, Some(&key_file(&d)));
    let cfg = config(
        &[("default", &addrs, "balance: round_robin")],
        "default_route: {pool: default}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let files = run_shards(&gw, &d);
    let shards: Vec<Value> = files.iter().map(|f| read_report(f).unwrap()).collect();
    for (i, s) in shards.iter().enumerate() {
        assert_eq!(s["shard"], serde_json::json!({"index": i, "count": 3}));
        assert_eq!(
            u(s, "/flows/started"),
            100,
            "shard {i}: a third of --flows 300"
        );
    }

    let out = d.join("merged.json");
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let ok = merge(&paths, &["--json", out.to_str().unwrap(), "--quiet"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_sums(&merged, &shards);
    assert_eq!(merged["merge"]["ran"], serde_json::json!([0, 1, 2]));
    assert_eq!(merged["merge"]["partial"], false);
    assert_eq!(merged["passed"], true);

    // The checks on the merged totals decide: no shard failed, but the whole run misses 99%.
    let strict = merge(&paths, &["--expect-cross-instance", "0.99", "--quiet"]);
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    assert!(
        stderr(&strict).contains("required ≥ 99.0%"),
        "{}",
        stderr(&strict)
    );

    missing_failed_and_foreign_shards(&gw, &d, &files);
    let _ = std::fs::remove_dir_all(&d);
}

/// A missing shard fails the merge unless --allow-partial; a shard that could not run is named
/// as failed; reports of different runs are refused.
fn missing_failed_and_foreign_shards(gw: &RunningGateway, d: &Path, files: &[PathBuf; 3]) {
    let two = [files[0].as_path(), files[1].as_path()];
    let partial = d.join("partial.json");
    let refused = merge(&two, &["--quiet", "--json", partial.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("missing: 2"),
        "{}",
        stderr(&refused)
    );
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&partial).unwrap()).unwrap();
    assert_eq!(
        (p["merge"]["partial"].clone(), p["passed"].clone()),
        (true.into(), false.into())
    );

    let allowed = merge(&two, &["--allow-partial"]);
    assert!(allowed.status.success(), "{}", stderr(&allowed));
    let text = String::from_utf8_lossy(&allowed.stdout);
    assert!(text.contains("PARTIAL merge: 2 of 3 shards"), "{text}");

    // A shard that cannot run (its pod started after the common start) writes a report that
    // says why.
    let stub = d.join("failed.json");
    let late = rfc3339(SystemTime::now() - Duration::from_secs(60));
    let target = format!("http://{}/mcp", gw.mcp_addr);
    let st = Command::new(BIN)
        .args([
            "loadtest",
            "--target",
            &target,
            "--start-at",
            &late,
            "--shard",
            "2/3",
            "--timeout",
            "1s",
            "--quiet",
        ])
        .args(["--flows", "300", "--json"])
        .arg(&stub)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!st.status.success());
    let failed = merge(
        &[files[0].as_path(), files[1].as_path(), &stub],
        &["--quiet"],
    );
    assert_eq!(failed.status.code(), Some(1));
    assert!(
        stderr(&failed).contains("shard 2 failed:"),
        "{}",
        stderr(&failed)
    );

    // Shard 1 of another run (other options) is refused, naming what differs.
    let mut other = read_report(&files[1]).unwrap();
    other["config"]["concurrency"] = 12.into();
    let foreign = d.join("foreign.json");
    std::fs::write(&foreign, other.to_string()).unwrap();
    let mixed = merge(&[files[0].as_path(), &foreign, files[2].as_path()], &[]);
    assert_eq!(mixed.status.code(), Some(2));
    assert!(
        stderr(&mixed).contains("concurrency (6 vs 12)"),
        "{}",
        stderr(&mixed)
    );
}

/// Set in the child process that [`the_kubernetes_job_runs_the_shard_of_its_completion_index`]
/// starts: the child parses the Job's arguments.
const POD: &str = "MCP_EDGE_TEST_K8S_POD";

/// The arguments of deploy/k8s/loadtest's Job, with the environment Kubernetes gives the pod
/// of completion index 3, are a run of shard 3 of `completions`. The environment is the
/// process's, shared by every test of this binary: the test runs itself again as a child process
/// (this test only) given the pod's environment, and that child parses the arguments.
#[test]
fn the_kubernetes_job_runs_the_shard_of_its_completion_index() {
    let Some(start_at) = std::env::var_os(POD) else {
        let start = SystemTime::now() + Duration::from_secs(120);
        // module_path!() is `loadtest::shards`; the test's name drops the crate's.
        let name = module_path!().split_once("::").unwrap().1.to_string()
            + "::the_kubernetes_job_runs_the_shard_of_its_completion_index";
        let out = Command::new(std::env::current_exe().unwrap())
            .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
            .env(POD, rfc3339(start))
            .env("JOB_COMPLETION_INDEX", "3")
            .env("START_AT", rfc3339(start))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "the pod's parse failed: {text}{}",
            stderr(&out)
        );
        return;
    };
    let start = humantime::parse_rfc3339(start_at.to_str().unwrap()).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s/loadtest/loadtest-job.yaml");
    let job: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let n = spec["completions"].as_u64().unwrap();
    assert_eq!(spec["parallelism"].as_u64(), Some(n));
    let c = &spec["template"]["spec"]["containers"][0];
    let argv: Vec<String> = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(argv[0], "loadtest");
    let a = LoadTestArgs::from_cli(&argv[1..]).unwrap();
    a.validate().unwrap();
    assert_eq!(a.shard, Some(Shard { index: 3, count: n }));
    let at = a.start_at.unwrap();
    assert!(at.duration_since(start).unwrap_or_default() < Duration::from_secs(1));
    assert_eq!(a.json.as_deref(), Some(Path::new("-")));
    let env = c["env"].as_sequence().unwrap();
    assert!(env.iter().any(|e| e["name"].as_str() == Some("START_AT")));
}
