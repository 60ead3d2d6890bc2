//! Latency outliers over real sockets, against `mcp-edge backend` processes one of which answers
//! ten times slower (`--delay`): under round robin it is ejected after a window and gets no
//! calls, explain says why it is skipped, and it takes its share back once it is fast again
//! (restarted without the delay on the same port, while ejected). With two slow instances of
//! three and `max_ejected_percent: 34`, never more than one is out at once. On a hash pool (of
//! recording upstreams, whose delay changes at run time), the keys homed on an ejected instance
//! go to the next one on the ring and come home when the ejection ends.

use mcp_edge::gateway::RunningGateway;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support::http::raw;
use crate::support::spawn::{backend_with, Procs};
use crate::support::*;

const SLOW: &str = "30ms";

/// A round-robin gateway over `addrs` with `outliers` (a YAML flow map), health checks off so
/// that only the detector takes instances out.
fn gateway(addrs: &[SocketAddr], outliers: &str) -> RunningGateway {
    gateway_with(addrs, "round_robin", outliers)
}

fn gateway_with(addrs: &[SocketAddr], balance: &str, outliers: &str) -> RunningGateway {
    let listen = [free_port(), free_port()].map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
    RunningGateway::start(config_on(listen, addrs, balance, Some(outliers))).unwrap()
}

/// The config of [`gateway_with`] on the `listen` pair (mcp, admin); `outliers: None` is off.
fn config_on(
    [mcp, admin]: [SocketAddr; 2],
    addrs: &[SocketAddr],
    balance: &str,
    outliers: Option<&str>,
) -> mcp_edge::config::Config {
    let list: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let outliers = outliers.map_or(String::new(), |o| format!("    outliers: {o}\n"));
    let y = format!(
        "work_stealing: true\nlisten:\n  mcp: {mcp}\n  admin: {admin}\npools:\n  default:\n    instances: [{}]\n    balance: {balance}\n    health: {{check: off}}\n{outliers}default_route: {{pool: default}}\n",
        list.join(", ")
    );
    mcp_edge::config::Config::parse(&y, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{y}"))
}

/// Three backends on free ports, the ones in `slow` answering after [`SLOW`].
fn fleet(slow: &[usize]) -> (Procs, Vec<u16>) {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let procs = (ports.iter().enumerate())
        .map(|(i, &p)| match slow.contains(&i) {
            true => backend_with(p, &["--delay", SLOW]),
            false => backend_with::<&str>(p, &[]),
        })
        .collect();
    (Procs(procs), ports)
}

fn addrs(ports: &[u16]) -> Vec<SocketAddr> {
    ports
        .iter()
        .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
        .collect()
}

/// One call of tool `name`; the instance that served it.
fn served(gw: &RunningGateway, name: &str) -> String {
    let r = post(gw.mcp_addr, &refs(&call_headers(name)), &call(1, name));
    assert_eq!(r.status, 200, "{}", r.text());
    r.header("x-mcp-edge-upstream").unwrap().to_string()
}

/// `n` echo calls in a row; how many each instance served.
fn calls(gw: &RunningGateway, n: usize) -> HashMap<String, usize> {
    let mut by = HashMap::new();
    for k in 0..n {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{k},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hi"}},{META}}}}}"#
        );
        let r = post(gw.mcp_addr, &refs(&call_headers("echo")), &body);
        assert_eq!(r.status, 200, "{}", r.text());
        let inst = r.header("x-mcp-edge-upstream").unwrap().to_string();
        *by.entry(inst).or_default() += 1;
    }
    by
}

/// The outlier gauge and counter of `inst`.
fn outlier(gw: &RunningGateway, inst: &str) -> (f64, f64) {
    let m = scrape(gw);
    let label = format!("upstream=\"{inst}\"");
    (
        sample(&m, "mcp_edge_upstream_outlier_ejected", &[&label]),
        sample(&m, "mcp_edge_upstream_outlier_ejections_total", &[&label]),
    )
}

/// Drive calls until `done` holds (checked after each batch), for at most 30 s.
fn drive_until(gw: &RunningGateway, mut done: impl FnMut() -> bool) -> HashMap<String, usize> {
    let end = Instant::now() + Duration::from_secs(30);
    let mut total: HashMap<String, usize> = HashMap::new();
    while Instant::now() < end {
        for (k, v) in calls(gw, 20) {
            *total.entry(k).or_default() += v;
        }
        if done() {
            return total;
        }
    }
    panic!("not within 30 s; served: {total:?}");
}

/// The balance step of `POST /-/explain` for an echo call.
fn explain_balance(gw: &RunningGateway) -> serde_json::Value {
    let q = serde_json::json!({"headers": {"Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
        "body": call(1, "echo")});
    let body = q.to_string();
    let req = format!(
        "POST /-/explain HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let r = raw(gw.admin_addr.unwrap(), req.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let steps = v["steps"].as_array().unwrap();
    steps.iter().find(|s| s["step"] == "balance").unwrap()["detail"].clone()
}

#[test]
fn a_ten_times_slower_instance_is_ejected_then_takes_its_share_back_once_fast() {
    let (mut procs, ports) = fleet(&[2]);
    let gw = gateway(
        &addrs(&ports),
        "{min_samples: 5, interval: 500ms, base_ejection: 5s}",
    );
    let slow = format!("127.0.0.1:{}", ports[2]);
    let before = drive_until(&gw, || outlier(&gw, &slow).0 == 1.0);
    assert!(before.get(&slow).copied().unwrap_or(0) >= 5, "{before:?}");
    assert_eq!(outlier(&gw, &slow).1, 1.0, "one ejection");
    // Explain names it among the skipped instances, with the reason.
    let d = explain_balance(&gw);
    assert_eq!(d["outliers"], true, "{d:#}");
    let skipped = d["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{d:#}");
    assert_eq!(skipped[0]["instance"], slow.as_str());
    let why = skipped[0]["why"].as_str().unwrap();
    assert!(why.starts_with("ejected as a latency outlier"), "{why}");
    // The console's pools view marks it.
    let r = raw(
        gw.admin_addr.unwrap(),
        b"GET /-/console.json HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let console: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let insts = console["pools"][0]["instances"].as_array().unwrap();
    let marked: Vec<&str> = (insts.iter())
        .filter(|i| i["outlier"] == true && i["usable"] == false)
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(marked, [slow.as_str()], "{console:#}");
    // While ejected (5 s; these calls take well under that), it gets none.
    let t = Instant::now();
    let during = calls(&gw, 60);
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert_eq!(during.get(&slow), None, "{during:?}");
    assert_eq!(outlier(&gw, &slow).0, 1.0, "still ejected");
    // Fast again: restarted without the delay, on the same port, while it is out.
    let old = &mut procs.0[2];
    old.kill().unwrap();
    old.wait().unwrap();
    procs.0[2] = backend_with::<&str>(ports[2], &[]);
    let back = Instant::now();
    drive_until(&gw, || outlier(&gw, &slow).0 == 0.0);
    // Back: about its third of the calls over the next windows, and not ejected again.
    let t = Instant::now();
    let mut after: HashMap<String, usize> = HashMap::new();
    while t.elapsed() < Duration::from_millis(1500) {
        for (k, v) in calls(&gw, 30) {
            *after.entry(k).or_default() += v;
        }
    }
    let total: usize = after.values().sum();
    let share = after.get(&slow).copied().unwrap_or(0) as f64 / total as f64;
    assert!(share > 0.25, "{after:?}");
    assert_eq!(outlier(&gw, &slow), (0.0, 1.0), "not ejected again");
    eprintln!("back within {:?} of the restart", back.elapsed());
}

#[test]
fn with_two_slow_instances_of_three_the_cap_keeps_all_but_one_in() {
    let (_procs, ports) = fleet(&[1, 2]);
    let gw = gateway(
        &addrs(&ports),
        "{min_samples: 5, interval: 500ms, base_ejection: 3s, baseline: 0, max_ejected_percent: 34}",
    );
    let names: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = |gw: &RunningGateway| {
        let m = scrape(gw);
        let all = sample(&m, "mcp_edge_upstream_outlier_ejected", &[]);
        let ever = sample(&m, "mcp_edge_upstream_outlier_ejections_total", &[]);
        (all, ever)
    };
    drive_until(&gw, || out(&gw).1 >= 1.0);
    // Three more windows: never more than one out, and the other slow one keeps serving.
    let t = Instant::now();
    let mut served: HashMap<String, usize> = HashMap::new();
    while t.elapsed() < Duration::from_millis(1600) {
        for (k, v) in calls(&gw, 20) {
            *served.entry(k).or_default() += v;
        }
        let (now_out, _) = out(&gw);
        assert!(now_out <= 1.0, "{now_out} instances ejected at once");
    }
    // Round robin over what is left: the fast one and a slow one, about half each; had the
    // cap not held, the fast one would have served everything.
    let slow_served =
        served.get(&names[1]).copied().unwrap_or(0) + served.get(&names[2]).copied().unwrap_or(0);
    let total: usize = served.values().sum();
    assert!(slow_served * 3 >= total, "{served:?}");
    let m = scrape(&gw);
    assert_eq!(
        sample(
            &m,
            "mcp_edge_upstream_outlier_ejected",
            &[&format!("upstream=\"{}\"", names[0])]
        ),
        0.0
    );
}

#[test]
fn a_hash_key_homed_on_an_ejected_instance_moves_to_the_next_and_comes_back() {
    let up = Upstreams::start(3);
    let gw = gateway_with(
        &up.addrs,
        "hash",
        "{min_samples: 5, interval: 300ms, base_ejection: 2s}",
    );
    let slow = up.instance_names()[2].clone();
    let keys: Vec<String> = (0..30).map(|k| format!("tool_{k}")).collect();
    let homed: Vec<&String> = keys.iter().filter(|k| served(&gw, k) == slow).collect();
    assert!(!homed.is_empty(), "no key of 30 homed on {slow}");
    up.set_delay(2, Duration::from_millis(40));
    let pass = || keys.iter().for_each(|k| drop(served(&gw, k)));
    let wait_for = |ejected: f64| {
        let end = Instant::now() + Duration::from_secs(30);
        while outlier(&gw, &slow).0 != ejected {
            assert!(Instant::now() < end, "outlier gauge never {ejected}");
            pass();
        }
    };
    wait_for(1.0);
    for k in &homed {
        assert_ne!(served(&gw, k), slow, "{k} went to the ejected instance");
    }
    // Fast again: when the ejection ends, its keys come home.
    up.set_delay(2, Duration::ZERO);
    wait_for(0.0);
    for k in &homed {
        assert_eq!(served(&gw, k), slow, "{k} did not come home");
    }
}

#[test]
fn a_reload_keeps_an_ejection_and_turning_outliers_off_ends_it() {
    let up = Upstreams::start(3);
    let listen = [free_port(), free_port()].map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
    let on = "{min_samples: 5, interval: 300ms, base_ejection: 60s}";
    let cfg = |o| config_on(listen, &up.addrs, "round_robin", o);
    let gw = RunningGateway::start(cfg(Some(on))).unwrap();
    let slow = up.instance_names()[2].clone();
    up.set_delay(2, Duration::from_millis(40));
    drive_until(&gw, || outlier(&gw, &slow).0 == 1.0);
    // The same pool after a reload: still out.
    gw.reload(cfg(Some(on))).unwrap();
    assert_eq!(calls(&gw, 30).get(&slow), None);
    assert_eq!(outlier(&gw, &slow).0, 1.0);
    // Outliers off: it is back at once, and the gauge is gone.
    gw.reload(cfg(None)).unwrap();
    let back = calls(&gw, 30);
    assert_eq!(back.get(&slow), Some(&10), "{back:?}");
    let m = scrape(&gw);
    assert!(!m.contains("mcp_edge_upstream_outlier_ejected{"), "{m}");
}
