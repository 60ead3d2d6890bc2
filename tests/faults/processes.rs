//! Faults without losses, under MRTR load through the gateway (loopback, bounded, every process
//! stopped): a backend instance killed and restarted, ten config reloads, a graceful shutdown
//! with requests in flight, and a client that stops reading an SSE stream.

use crate::one_at_a_time;
use crate::support;
use crate::support::spawn::{backend, fleet, Procs};
use crate::support::*;
use mcp_edge::gateway::RunningGateway;
use mcp_edge::loadtest::{self, LoadTestArgs};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn key_file() -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!(
        "mcp-edge-faults-{}-{}.key",
        std::process::id(),
        free_port()
    ));
    std::fs::write(&p, "7f".repeat(32)).unwrap();
    p
}

fn up_value(metrics: &str, instance: &str) -> Option<i64> {
    metrics
        .lines()
        .find(|l| {
            l.starts_with("mcp_edge_upstream_up{")
                && l.contains(&format!("upstream=\"{instance}\""))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn load(
    gw: &RunningGateway,
    duration: &str,
    concurrency: usize,
) -> std::thread::JoinHandle<loadtest::Report> {
    let target = format!("http://{}/mcp", gw.mcp_addr);
    let args = LoadTestArgs::from_cli([
        "--target",
        &target,
        "--scenario",
        "mrtr",
        "--duration",
        duration,
        "--concurrency",
        &concurrency.to_string(),
        "--quiet",
    ])
    .unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(loadtest::execute(&args)).unwrap()
    })
}

#[test]
fn killing_an_instance_loses_at_most_what_was_in_flight_and_it_is_ejected_then_readmitted() {
    let _serial = one_at_a_time();
    let key = key_file();
    let (mut procs, addrs) = fleet(3, Some(&key));
    let cfg = config(
        &[("default", &addrs, "balance: round_robin\n    health: {interval: 250ms, timeout: 200ms, healthy_threshold: 1, unhealthy_threshold: 1}")],
        "default_route: {pool: default}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let concurrency = 6;
    let running = load(&gw, "4s", concurrency);
    // Mid-load: once the gateway has answered a good share of calls.
    let served = || sample(&scrape(&gw), "mcp_edge_requests_total", &[]) >= 100.0;
    assert!(
        eventually(Duration::from_secs(10), served),
        "the load never got going"
    );

    // SIGKILL instance 3 mid-load.
    let victim = addrs[2].to_string();
    procs.0[2].kill().unwrap();
    procs.0[2].wait().unwrap();
    // Health probes of the victim that finished after it died, counted by the gateway itself:
    // it is ejected by the first failed one (unhealthy_threshold: 1), or sooner by a failed
    // request, so within two rounds whatever the machine's load does to the wall clock.
    let probes = |m: &str| {
        let label = format!("upstream=\"{victim}\"");
        sample(m, "mcp_edge_health_checks_total", &[&label])
    };
    let dead_since = probes(&scrape(&gw));
    let mut at_ejection = None;
    let ejected = eventually(Duration::from_secs(10), || {
        let m = scrape(&gw);
        let down = up_value(&m, &victim) == Some(0);
        if down {
            at_ejection = Some(probes(&m) - dead_since);
        }
        down
    });
    assert!(ejected, "not ejected");
    let rounds = at_ejection.unwrap();
    assert!(
        rounds <= 2.0,
        "ejected after {rounds} health probes since the kill, more than two rounds"
    );

    // Dead until a health probe of it has failed (counted by result), then back on the same
    // port: re-admitted by a passing probe.
    let counted = |m: &str, result: &str| {
        let (label, result) = (
            format!("upstream=\"{victim}\""),
            format!("result=\"{result}\""),
        );
        sample(m, "mcp_edge_health_checks_total", &[&label, &result])
    };
    assert!(
        eventually(Duration::from_secs(5), || counted(&scrape(&gw), "fail")
            >= 1.0),
        "no failed health probe of the killed instance was counted"
    );
    let passed_before = counted(&scrape(&gw), "pass");
    procs.0[2] = backend(addrs[2].port(), Some(&key));
    let restarted_at = Instant::now();
    assert!(
        eventually(Duration::from_secs(3), || up_value(&scrape(&gw), &victim)
            == Some(1)),
        "not re-admitted"
    );
    let readmitted_after = restarted_at.elapsed();
    assert!(
        counted(&scrape(&gw), "pass") > passed_before,
        "re-admitted without a passing health probe counted"
    );

    let r = running.join().unwrap();
    let m = &r.measures;
    eprintln!(
        "kill test: {} requests, {} errors ({} first legs, {} retry legs), ejected after {rounds} probes, re-admitted after {readmitted_after:?}",
        r.requests(), r.errors(), m.legs[0].errors, m.legs[1].errors
    );
    // Only requests in flight to the killed instance can fail (delivered, then the connection
    // dropped: never re-sent, a tools/call may have side effects); everything else completes.
    assert!(r.errors() <= concurrency as u64, "{}", r.summary_text());
    assert!(m.flows_completed > 200, "{}", r.summary_text());
    // The restarted instance serves again.
    assert!(m
        .landing
        .instances
        .get(&victim)
        .is_some_and(|c| c.first + c.retry > 0));
    let _ = std::fs::remove_file(key);
}

#[test]
fn ten_reloads_under_load_lose_nothing_and_keep_limiter_state() {
    let _serial = one_at_a_time();
    let key = key_file();
    let (_procs, addrs) = fleet(3, Some(&key));
    let limit = "rate_limits:\n  - {name: kept, match: {name: never_called}, key: [name], rate: 1/h, burst: 1}\n";
    let make = |sample: f64, two: bool| {
        let pools = if two { &addrs[..2] } else { &addrs[..] };
        config(
            &[("default", pools, "balance: round_robin")],
            &format!("default_route: {{pool: default}}\nvalidation: {{sample: {sample}}}\n{limit}"),
        )
    };
    let first = make(1.0, false);
    let (mcp, admin) = (first.listen.mcp, first.listen.admin);
    let gw = RunningGateway::start(first).unwrap();
    // Use up the one-per-hour bucket before the reloads.
    assert_eq!(
        post(
            gw.mcp_addr,
            &refs(&call_headers("never_called")),
            &call(1, "never_called")
        )
        .status,
        200
    );
    assert_eq!(
        post(
            gw.mcp_addr,
            &refs(&call_headers("never_called")),
            &call(2, "never_called")
        )
        .status,
        429
    );
    let running = load(&gw, "3s", 6);
    for i in 0..10 {
        std::thread::sleep(Duration::from_millis(200));
        let mut cfg = make(if i % 2 == 0 { 0.5 } else { 1.0 }, i % 3 == 0);
        cfg.listen.mcp = mcp;
        cfg.listen.admin = admin;
        gw.reload(cfg).unwrap();
    }
    let r = running.join().unwrap();
    assert_eq!(r.errors(), 0, "{}", r.summary_text());
    assert!(r.measures.flows_completed > 100);
    // The limiter's bucket survived ten reloads.
    assert_eq!(
        post(
            gw.mcp_addr,
            &refs(&call_headers("never_called")),
            &call(3, "never_called")
        )
        .status,
        429
    );
    let _ = std::fs::remove_file(key);
}

#[test]
fn a_bad_reload_is_refused_and_the_old_config_keeps_serving() {
    let _serial = one_at_a_time();
    let up = Upstreams::start(1);
    let dir = std::env::temp_dir().join(format!("mcp-edge-reload-{}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.yaml");
    let (mcp, admin) = (free_port(), free_port());
    let good = format!(
        "work_stealing: true\nlisten: {{mcp: 127.0.0.1:{mcp}, admin: 127.0.0.1:{admin}}}\npools:\n  default: {{instances: [{}]}}\ndefault_route: {{pool: default}}\n",
        up.addrs[0]
    );
    std::fs::write(&file, &good).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["serve", "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mcp_addr: SocketAddr = format!("127.0.0.1:{mcp}").parse().unwrap();
    let admin_addr: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    let listening = || {
        [mcp_addr, admin_addr]
            .iter()
            .all(|a| TcpStream::connect(a).is_ok())
    };
    assert!(eventually(Duration::from_secs(10), listening));
    // A broken file: SIGHUP is refused, the gateway keeps serving the old config.
    std::fs::write(&file, good.replace("default_route", "default_rout")).unwrap();
    let pid = child.id();
    assert!(support::programs::signal(pid, "HUP"));
    // The console's snapshot says when the reload was refused.
    let refused = || {
        let r = raw(
            admin_addr,
            b"GET /-/console.json HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
        v["config"]["last_reload"]["ok"] == serde_json::Value::Bool(false)
    };
    assert!(
        eventually(Duration::from_secs(10), refused),
        "SIGHUP's reload was never refused"
    );
    assert_eq!(
        post(mcp_addr, &refs(&call_headers("t")), &call(1, "t")).status,
        200
    );
    let r = raw(
        admin_addr,
        b"POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(r.status, 400);
    assert!(
        String::from_utf8_lossy(&r.body).contains("default_rout"),
        "{:?}",
        String::from_utf8_lossy(&r.body)
    );
    // A good change applies: a route for `special` to a pool that does not exist any more
    // would fail; instead send everything through a renamed instance header.
    std::fs::write(&file, format!("{good}upstream_header: x-reloaded\n")).unwrap();
    assert!(support::programs::signal(pid, "HUP"));
    assert!(eventually(Duration::from_secs(3), || post(
        mcp_addr,
        &refs(&call_headers("t")),
        &call(2, "t")
    )
    .header("x-reloaded")
    .is_some()));
    // SIGTERM: drains and exits 0.
    assert!(support::programs::signal(pid, "TERM"));
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("reload refused") && err.contains("default_rout"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn graceful_shutdown_finishes_requests_in_flight_and_refuses_new_connections() {
    let _serial = one_at_a_time();
    let up = Upstreams::start(1);
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        "default_route: {pool: default}\nshutdown: {grace_period: 2s, wind_down: 1s}\n",
    );
    let gw = RunningGateway::start_with(cfg, true).unwrap();
    let addr = gw.mcp_addr;
    // A streamed request that takes ~1 s (5 events, 200 ms apart).
    let mut h = call_headers("slow");
    h.push(("x-test-sse", "5".into()));
    let req = post_bytes(&refs(&h), call(1, "slow").as_bytes());
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (&s).write_all(&req).unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("200"), "{line}");
    gw.begin_shutdown();
    // New connections are refused once the listener closes.
    assert!(
        eventually(Duration::from_secs(2), || TcpStream::connect(addr).is_err()),
        "still accepting"
    );
    // The request in flight still gets every event.
    let mut rest = String::new();
    while !rest.contains("\"progress\":4") {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "stream cut during the drain: {rest}"
        );
        rest.push_str(&line);
    }
    gw.shutdown();
}

#[test]
fn a_client_that_stops_reading_an_sse_stream_is_dropped_after_the_write_timeout() {
    let _serial = one_at_a_time();
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts: {downstream_write: 500ms}\n");
    // 64 KiB events every 5 ms: socket buffers fill within a second if nobody reads.
    let mut h = call_headers("firehose");
    h.extend([
        ("x-test-sse", "2000".into()),
        ("x-test-sse-bytes", "65536".into()),
        ("x-test-sse-ms", "5".into()),
    ]);
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&post_bytes(&refs(&h), call(1, "firehose").as_bytes()))
        .unwrap();
    // Never read. The gateway must give up on this client and close the upstream stream.
    let started = Instant::now();
    assert!(
        eventually(Duration::from_secs(8), || !up
            .log
            .lock()
            .unwrap()
            .cancelled_streams
            .is_empty()),
        "the upstream stream was still open after {:?}",
        started.elapsed()
    );
    let (_, sent) = up.log.lock().unwrap().cancelled_streams[0];
    assert!(sent < 2000, "the whole stream was produced ({sent} events)");
    drop(s);
}

#[test]
fn a_zero_downtime_upgrade_hands_the_listeners_to_a_new_process() {
    let _serial = one_at_a_time();
    let up = Upstreams::start(1);
    let dir = std::env::temp_dir().join(format!("mcp-edge-upgrade-{}", free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.yaml");
    let sock = dir.join("upgrade.sock");
    let (mcp, admin) = (free_port(), free_port());
    std::fs::write(
        &file,
        format!(
            "listen: {{mcp: 127.0.0.1:{mcp}, admin: 127.0.0.1:{admin}}}\npools:\n  default: {{instances: [{}]}}\ndefault_route: {{pool: default}}\nshutdown: {{grace_period: 1s, wind_down: 1s, upgrade_socket: {}}}\n",
            up.addrs[0],
            sock.display()
        ),
    )
    .unwrap();
    let serve = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
            .args(["serve", "--config"])
            .arg(&file)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mcp_addr: SocketAddr = format!("127.0.0.1:{mcp}").parse().unwrap();
    let admin_addr: SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    let mut procs = Procs(vec![serve(&[])]);
    let listening = || {
        [mcp_addr, admin_addr]
            .iter()
            .all(|a| TcpStream::connect(a).is_ok())
    };
    assert!(eventually(Duration::from_secs(10), listening));

    // Clients keep calling through the whole hand-over, each on a new connection.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (stop2, served2) = (stop.clone(), served.clone());
    let clients = std::thread::spawn(move || {
        let (mut ok, mut failed) = (0, Vec::new());
        let deadline = Instant::now() + Duration::from_secs(20);
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
            let req = post_bytes(&refs(&call_headers("t")), call(1, "t").as_bytes());
            match TcpStream::connect(mcp_addr).and_then(|s| {
                s.set_read_timeout(Some(Duration::from_secs(5)))?;
                (&s).write_all(&req)?;
                read_reply(&mut BufReader::new(s))
            }) {
                Ok(r) if r.status == 200 => {
                    ok += 1;
                    served2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(r) => failed.push(format!("status {}", r.status)),
                Err(e) => failed.push(e.to_string()),
            }
        }
        (ok, failed)
    });
    // The old process serves some clients before the hand-over starts.
    let served_by = |n: usize| served.load(std::sync::atomic::Ordering::Relaxed) >= n;
    assert!(eventually(Duration::from_secs(10), || served_by(5)));
    procs.0.push(serve(&["--upgrade"]));
    // The new process waits on the upgrade socket once it has bound it (the old one retries its
    // connect until the new one listens).
    assert!(
        eventually(Duration::from_secs(10), || sock.exists()),
        "the new process never bound {}",
        sock.display()
    );
    let old_pid = procs.0[0].id();
    assert!(support::programs::signal(old_pid, "QUIT"));
    let old_status = procs.0[0].wait().unwrap();
    assert!(
        old_status.success(),
        "the old process should drain and exit 0: {old_status:?}"
    );
    // The new process serves both listeners.
    assert_eq!(
        raw(admin_addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
    // And the new one serves them after it.
    let before = served.load(std::sync::atomic::Ordering::Relaxed);
    assert!(eventually(Duration::from_secs(10), || served_by(
        before + 5
    )));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = clients.join().unwrap();
    assert!(ok > 20, "{ok} requests");
    assert!(
        failed.is_empty(),
        "{} of {} requests failed during the upgrade: {failed:?}",
        failed.len(),
        ok + failed.len()
    );
    let new_pid = procs.0[1].id();
    assert!(support::programs::signal(new_pid, "TERM"));
    assert!(procs.0[1].wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}
