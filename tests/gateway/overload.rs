//! Overload over real sockets: a fleet of reference backends that work on 4 requests at once
//! each (`max_concurrent`, 20 ms a request; more wait their turn) is offered far more concurrent
//! calls than it can take. The pool's adaptive limit settles near the fleet's capacity, the
//! excess is shed with 503 + `Retry-After` + -31018, and MRTR flows started before the flood
//! complete: their retry legs are admitted before new calls.

use crate::support::http::{self, call as mcp_call};
use crate::support::{config, eventually, sample, scrape};
use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Two instances of 4 slots each: 8 requests at once, ~400 a second.
const INSTANCES: usize = 2;
const SLOTS: usize = 4;
const CAPACITY: f64 = (INSTANCES * SLOTS) as f64;

fn fleet() -> Pool {
    let mut opts = PoolOptions::local(INSTANCES);
    opts.delay = Duration::from_millis(20);
    opts.max_concurrent = SLOTS;
    Pool::start(opts).unwrap()
}

fn gateway(pool: &Pool, concurrency: &str) -> RunningGateway {
    let settings =
        format!("balance: round_robin\n    health: {{check: off}}\n    concurrency: {concurrency}");
    let cfg = config(
        &[("fleet", pool.addrs(), &settings)],
        "default_route: {pool: fleet}\n",
    );
    RunningGateway::start(cfg).unwrap()
}

fn first_leg(gw: SocketAddr, id: i64) -> Value {
    let r = mcp_call(
        gw,
        id,
        "create_repo",
        json!({"repo": "demo"}),
        json!({"elicitation": {}}),
        Some("alice"),
        json!({}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json()["result"].clone();
    assert_eq!(v["resultType"], "input_required", "{v}");
    v
}

fn retry_leg(gw: SocketAddr, id: i64, state: &Value) -> http::Reply {
    let extra = json!({"inputResponses": {"github_login": {"action": "accept", "content": {"name": "octocat"}}}, "requestState": state});
    mcp_call(
        gw,
        id,
        "create_repo",
        json!({"repo": "demo"}),
        json!({"elicitation": {}}),
        Some("alice"),
        extra,
    )
}

/// What the flood saw: answers by kind, and one shed answer to look at.
#[derive(Default)]
struct Seen {
    ok: usize,
    shed: usize,
    other: Vec<String>,
    a_shed: Option<http::Reply>,
}

/// `clients` callers each calling `echo` back to back (ignoring `Retry-After`) until `stop`, at
/// most `per_client` calls each.
fn flood(
    gw: SocketAddr,
    clients: usize,
    per_client: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Seen> {
    std::thread::spawn(move || {
        let callers: Vec<_> = (0..clients)
            .map(|c| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut seen = Seen::default();
                    for i in 0..per_client {
                        if stop.load(Ordering::Acquire) {
                            break;
                        }
                        let id = (10_000 + c * per_client + i) as i64;
                        let r = mcp_call(
                            gw,
                            id,
                            "echo",
                            json!({"text": "x"}),
                            json!({}),
                            None,
                            json!({}),
                        );
                        match (r.status, r.code()) {
                            (200, None) => seen.ok += 1,
                            (503, Some(-31018)) => {
                                seen.shed += 1;
                                seen.a_shed.get_or_insert(r);
                            }
                            _ => seen.other.push(format!("{} {}", r.status, r.text())),
                        }
                    }
                    seen
                })
            })
            .collect();
        let mut all = Seen::default();
        for c in callers {
            let s = c.join().unwrap();
            all.ok += s.ok;
            all.shed += s.shed;
            all.other.extend(s.other);
            if all.a_shed.is_none() {
                all.a_shed = s.a_shed;
            }
        }
        all
    })
}

#[test]
fn a_flood_is_shed_near_capacity_and_flows_already_started_complete() {
    let pool = fleet();
    let gw = gateway(
        &pool,
        "{adaptive: true, min: 2, max: 200, initial: 4, window: 100ms, first_leg_share: 0.75, priority_wait: 2s, retry_after: 2s}",
    );
    // Four flows start before the flood.
    let states: Vec<Value> = (0..4)
        .map(|i| first_leg(gw.mcp_addr, i)["requestState"].clone())
        .collect();

    // 32 callers against a fleet that takes 8 at once.
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = flood(gw.mcp_addr, 32, 5_000, stop.clone());
    let shed = |m: &str| {
        sample(
            m,
            "mcp_edge_pool_concurrency_decisions_total",
            &["pool=\"fleet\"", "leg=\"first\"", "decision=\"shed\""],
        )
    };
    assert!(
        eventually(Duration::from_secs(20), || shed(&scrape(&gw)) >= 50.0),
        "{}",
        scrape(&gw)
    );
    // Let the limit settle for a while under the flood, then finish the flows in the middle of it.
    let settle_until = Instant::now() + Duration::from_secs(2);
    let mut limits = Vec::new();
    while Instant::now() < settle_until {
        limits.push(sample(
            &scrape(&gw),
            "mcp_edge_pool_concurrency_limit",
            &["pool=\"fleet\""],
        ));
        std::thread::sleep(Duration::from_millis(100));
    }
    for (i, state) in states.iter().enumerate() {
        let r = retry_leg(gw.mcp_addr, 100 + i as i64, state);
        assert_eq!(
            r.status,
            200,
            "a flow started before the flood is finished in it: {}",
            r.text()
        );
        assert_eq!(r.json()["result"]["resultType"], "complete", "{}", r.text());
    }
    let m = scrape(&gw);
    stop.store(true, Ordering::Release);
    let seen = flooding.join().unwrap();

    // Admitted calls succeed; the rest is shed, and a client can act on the answer.
    assert!(
        seen.other.is_empty(),
        "only 200 or 503/-31018: {:?}",
        &seen.other[..seen.other.len().min(3)]
    );
    // (Calls admitted in the flood's few seconds depend on the machine: a full parallel run of
    // the test binary saw 96; a gateway that sheds everything admits none.)
    assert!(
        seen.ok > 50 && seen.shed > 50,
        "ok {}, shed {}",
        seen.ok,
        seen.shed
    );
    let r = seen.a_shed.unwrap();
    assert_eq!(r.header("retry-after"), Some("2"));
    let v = r.json();
    assert!(v["id"].as_i64().is_some_and(|id| id >= 10_000), "{v}");
    assert_eq!(v["error"]["data"]["pool"], "fleet");
    assert_eq!(v["error"]["data"]["leg"], "first");
    // The limit stayed bounded under the flood: over its last second it kept near the fleet's
    // capacity (its median at most four times it, under the 32 callers) and never ran away
    // towards its max (200), nor under its min (2). Where it settles inside that depends on the
    // best latency the machine allows (on two shared cores, with other tests running, the debug
    // gateway's own latency moves it, and a sample may briefly pass the callers' number): how
    // close it comes to the fleet's capacity is measured by bench/overload.sh, not asserted here.
    let mut settled = limits[limits.len() / 2..].to_vec();
    settled.sort_by(f64::total_cmp);
    let median = settled[settled.len() / 2];
    assert!(
        (2.0..=CAPACITY * 4.0).contains(&median),
        "median {median} of the limit over the last second of the flood: {limits:?}"
    );
    assert!(
        settled.iter().all(|&l| (2.0..100.0).contains(&l)),
        "limit over the last second of the flood: {limits:?}"
    );
    // The retry legs were admitted (at once or after a short wait), never shed.
    let started = |d: &str| {
        sample(
            &m,
            "mcp_edge_pool_concurrency_decisions_total",
            &[
                "pool=\"fleet\"",
                "leg=\"started\"",
                &format!("decision=\"{d}\""),
            ],
        )
    };
    assert_eq!(started("admitted") + started("queued"), 4.0, "{m}");
    assert_eq!(started("shed"), 0.0, "{m}");
    assert!(
        sample(&m, "mcp_edge_requests_total", &["code=\"-31018\""]) >= 50.0,
        "{m}"
    );
    // Once the flood is over, every slot is given back.
    let free = eventually(Duration::from_secs(10), || {
        sample(
            &scrape(&gw),
            "mcp_edge_pool_concurrency_in_flight",
            &["pool=\"fleet\""],
        ) == 0.0
    });
    assert!(free, "{}", scrape(&gw));
}

#[test]
fn a_fixed_pool_limit_sheds_new_calls_past_their_share_and_explain_shows_it() {
    // The same fleet behind a fixed limit of 8: new calls get 6 (75%), the rest waits for legs.
    let pool = fleet();
    let gw = gateway(&pool, "{max: 8, first_leg_share: 0.75, priority_wait: 0s}");
    assert_eq!(
        sample(
            &scrape(&gw),
            "mcp_edge_pool_concurrency_limit",
            &["pool=\"fleet\""]
        ),
        8.0
    );
    let stop = Arc::new(AtomicBool::new(false));
    let seen = flood(gw.mcp_addr, 16, 20, stop).join().unwrap();
    assert!(seen.other.is_empty(), "{:?}", seen.other);
    assert!(
        seen.shed > 0 && seen.ok > 0,
        "ok {}, shed {}",
        seen.ok,
        seen.shed
    );
    let q = json!({"headers": {"Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, "body": crate::support::call(1, "echo")});
    let body = q.to_string();
    let req = format!(
        "POST /-/explain HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let r = http::raw(gw.admin_addr.unwrap(), req.as_bytes());
    let explained: Value = serde_json::from_slice(&r.body).unwrap();
    let capacity = explained["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "capacity")
        .cloned()
        .unwrap_or_default();
    assert_eq!(capacity["detail"]["limit"], 8, "{explained}");
    assert_eq!(capacity["detail"]["first_leg_limit"], 6, "{explained}");
    // The console's pools view shows the limit and what is in flight.
    let req = "GET /-/console.json HTTP/1.1\r\nHost: x\r\n\r\n";
    let snap: Value =
        serde_json::from_slice(&http::raw(gw.admin_addr.unwrap(), req.as_bytes()).body).unwrap();
    let c = &snap["pools"][0]["concurrency"];
    assert_eq!(
        (c["limit"].as_u64(), c["adaptive"].as_bool()),
        (Some(8), Some(false)),
        "{snap}"
    );
    assert!(c["in_flight"].as_u64().is_some(), "{c}");
}

#[test]
fn a_tool_with_its_own_limit_is_shed_alone() {
    let mut opts = PoolOptions::local(1);
    opts.tool_delays = vec![("charge_count".into(), Duration::from_millis(1500))];
    let pool = Pool::start(opts).unwrap();
    let gw = gateway(
        &pool,
        "{max: 50, tools: {charge_count: {max: 2, first_leg_share: 1.0, priority_wait: 0s}}}",
    );
    let addr = gw.mcp_addr;
    let count = move |id: i64| {
        mcp_call(
            addr,
            id,
            "charge_count",
            json!({"cart_id": "c1"}),
            json!({}),
            None,
            json!({}),
        )
    };
    let slow: Vec<_> = (0..2)
        .map(|i| std::thread::spawn(move || count(i).status))
        .collect();
    let label = ["pool=\"fleet/charge_count\""];
    let full = eventually(Duration::from_secs(10), || {
        sample(&scrape(&gw), "mcp_edge_pool_concurrency_in_flight", &label) == 2.0
    });
    assert!(full, "{}", scrape(&gw));
    // The tool's limit is full: its next call is shed, naming the tool.
    let r = count(3);
    assert_eq!((r.status, r.code()), (503, Some(-31018)), "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["tool"], "charge_count");
    // Other tools take the pool's limit, which has room.
    let r = mcp_call(
        addr,
        4,
        "echo",
        json!({"text": "x"}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    for s in slow {
        assert_eq!(s.join().unwrap(), 200);
    }
}
