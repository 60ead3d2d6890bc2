//! MRTR across instances, pools and processes: the seed's walkthrough, retries that complete
//! on another instance, shared and foreign keys, the real binary, and charge idempotency.

use crate::support::http::*;
use mcp_edge::backend::{Pool, PoolOptions, StateKey, StateKeys};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn elicit() -> Value {
    json!({"elicitation": {}})
}

fn github_answer(state: &Value) -> Value {
    json!({"inputResponses": {"github_login": {"action": "accept", "content": {"name": "octocat"}}}, "requestState": state})
}

fn create_repo(a: SocketAddr, id: i64, repo: &str, user: Option<&str>, extra: Value) -> Reply {
    call(
        a,
        id,
        "create_repo",
        json!({"repo": repo}),
        elicit(),
        user,
        extra,
    )
}

/// The seed's "How to test it", step by step, with leg 1 on instance 1 and the rest on 2.
#[test]
fn seed_walkthrough() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let (i1, i2) = (pool.addrs()[0], pool.addrs()[1]);
    // 1. First leg.
    let leg1 = create_repo(i1, 1, "demo", Some("alice"), json!({}));
    assert_eq!(leg1.status, 200);
    let r1 = leg1.result();
    assert_eq!(r1["resultType"], "input_required");
    let ask = &r1["inputRequests"]["github_login"];
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["params"]["mode"], "form");
    assert_eq!(
        ask["params"]["message"],
        "Please provide your GitHub username"
    );
    assert_eq!(
        ask["params"]["requestedSchema"],
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    );
    assert_eq!(instance_of(&r1), pool.instance_ids()[0]);
    let state = r1["requestState"].clone();
    // 2. Retry on the other instance.
    let r2 = create_repo(i2, 2, "demo", Some("alice"), github_answer(&state)).result();
    assert_eq!(r2["resultType"], "complete");
    assert_eq!(first_text(&r2), "Created github.com/octocat/demo");
    assert_eq!(
        instance_of(&r2),
        pool.instance_ids()[1],
        "completed on the instance that got the retry"
    );
    // 3a. Tampered.
    let tampered = json!(format!("x{}", state.as_str().unwrap()));
    let r = create_repo(i2, 3, "demo", Some("alice"), github_answer(&tampered));
    assert_eq!(r.code(), Some(-32602), "{}", r.text());
    // 3b. Replayed by another user.
    let r = create_repo(i2, 4, "demo", Some("bob"), github_answer(&state));
    assert_eq!(r.code(), Some(-32602), "{}", r.text());
    // 3c. Replayed on different arguments.
    let r = create_repo(i1, 5, "prod", Some("alice"), github_answer(&state));
    assert_eq!(r.code(), Some(-32602), "{}", r.text());
    // 4. Capability missing.
    let r = call(
        i1,
        6,
        "create_repo",
        json!({"repo": "demo"}),
        json!({}),
        Some("alice"),
        json!({}),
    );
    assert_eq!((r.status, r.code()), (400, Some(-32021)));
    assert_eq!(
        r.json()["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );
}

#[test]
fn seed_expiry_with_a_short_ttl() {
    let pool = Pool::start(PoolOptions::local(2).with_ttl(Duration::from_millis(400))).unwrap();
    let state = create_repo(pool.addrs()[0], 1, "demo", Some("alice"), json!({})).result()
        ["requestState"]
        .clone();
    // Within the TTL it works on the other instance …
    let ok = create_repo(
        pool.addrs()[1],
        2,
        "demo",
        Some("alice"),
        github_answer(&state),
    );
    assert_eq!(ok.result()["resultType"], "complete");
    std::thread::sleep(Duration::from_millis(700));
    // … after it, it is refused.
    let r = create_repo(
        pool.addrs()[1],
        3,
        "demo",
        Some("alice"),
        github_answer(&state),
    );
    assert_eq!(r.code(), Some(-32602));
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{}",
        r.text()
    );
}

#[test]
fn declined_login_is_a_tool_error() {
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let a = pool.addrs()[0];
    let st = create_repo(a, 1, "demo", None, json!({})).result()["requestState"].clone();
    for (i, action) in ["decline", "cancel"].iter().enumerate() {
        let r = create_repo(
            a,
            2 + i as i64,
            "demo",
            None,
            json!({"inputResponses": {"github_login": {"action": action}}, "requestState": st}),
        );
        let res = r.result();
        assert_eq!(
            (res["resultType"].as_str(), res["isError"].as_bool()),
            (Some("complete"), Some(true))
        );
        assert!(first_text(&res).contains("not created"), "{res}");
    }
}

/// deploy: wrong confirmation asks again with a new state (round + 1), on any instance.
#[test]
fn deploy_rounds_across_instances() {
    let pool = Pool::start(PoolOptions::local(3)).unwrap();
    let a = pool.addrs();
    let args = json!({"service": "payments-service", "environment": "production"});
    let deploy = |i: usize, id: i64, extra: Value| {
        let mut params = json!({"name": "deploy", "arguments": args, "_meta": meta(elicit())});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        rpc(
            a[i],
            json!(id),
            "tools/call",
            params,
            &[
                ("Mcp-Param-Environment", "production"),
                ("Authorization", "Bearer dev"),
            ],
        )
    };
    let r1 = deploy(0, 1, json!({})).result();
    assert_eq!(
        r1["inputRequests"]["confirm"]["params"]["message"],
        "Type the service name to confirm deploying payments-service to production"
    );
    let answer = |s: &str, st: &Value| json!({"inputResponses": {"confirm": {"action": "accept", "content": {"confirmation": s}}}, "requestState": st});
    let r2 = deploy(1, 2, answer("payments", &r1["requestState"])).result();
    assert_eq!(r2["resultType"], "input_required");
    assert!(r2["inputRequests"]["confirm"]["params"]["message"]
        .as_str()
        .unwrap()
        .contains("did not match"));
    assert_ne!(r2["requestState"], r1["requestState"]);
    assert_eq!(instance_of(&r2), pool.instance_ids()[1]);
    let r3 = deploy(2, 3, answer("payments-service", &r2["requestState"])).result();
    assert_eq!(first_text(&r3), "Deployed payments-service to production");
    assert_eq!(instance_of(&r3), pool.instance_ids()[2]);
}

#[test]
fn onboard_two_rounds_carry_the_role() {
    let pool = Pool::start(PoolOptions::local(2)).unwrap();
    let a = pool.addrs();
    let args = json!({"team": "platform"});
    let r1 = call(a[0], 1, "onboard", args.clone(), elicit(), None, json!({})).result();
    assert_eq!(
        r1["inputRequests"]["role"]["params"]["requestedSchema"]["properties"]["role"]["type"],
        "string"
    );
    let r2 = call(a[1], 2, "onboard", args.clone(), elicit(), None,
        json!({"inputResponses": {"role": {"action": "accept", "content": {"role": "sre"}}}, "requestState": r1["requestState"]})).result();
    assert_eq!(
        r2["inputRequests"]["access"]["params"]["message"],
        "Grant sre access to platform?"
    );
    for (grant, text) in [
        (true, "Onboarded platform as sre"),
        (false, "Onboarded platform as sre without access"),
    ] {
        let r3 = call(a[0], 3, "onboard", args.clone(), elicit(), None,
            json!({"inputResponses": {"access": {"action": "accept", "content": {"grant": grant}}}, "requestState": r2["requestState"]})).result();
        assert_eq!(first_text(&r3), text);
    }
}

fn charge_count(a: SocketAddr, cart: &str) -> u64 {
    let r = call(
        a,
        99,
        "charge_count",
        json!({"cart_id": cart}),
        json!({}),
        None,
        json!({}),
    )
    .result();
    assert_eq!(r["structuredContent"]["cart_id"], cart);
    r["structuredContent"]["charges"].as_u64().unwrap()
}

#[test]
fn charge_never_double_charges() {
    let pool = Pool::start(PoolOptions::local(3)).unwrap();
    let a = pool.addrs();
    let args = json!({"cart_id": "cart-7", "amount": 12.5});
    let user = Some("shopper");
    // Re-running the first leg (as a retried request would) charges nothing.
    let mut first = Value::Null;
    for (i, addr) in a.iter().enumerate() {
        first = call(
            *addr,
            i as i64,
            "charge",
            args.clone(),
            elicit(),
            user,
            json!({}),
        )
        .result();
        assert_eq!(
            first["inputRequests"]["confirm_charge"]["params"]["message"],
            "Charge 12.5 to cart cart-7?"
        );
    }
    assert_eq!(charge_count(a[0], "cart-7"), 0);
    let yes = |st: &Value| json!({"inputResponses": {"confirm_charge": {"action": "accept", "content": {"confirm": true}}}, "requestState": st});
    // The confirming leg charges once …
    let r = call(
        a[1],
        10,
        "charge",
        args.clone(),
        elicit(),
        user,
        yes(&first["requestState"]),
    )
    .result();
    assert_eq!(first_text(&r), "Charged 12.5 to cart cart-7");
    assert_eq!(r["structuredContent"]["alreadyCharged"], false);
    // … and replaying the same confirmation on every instance does not charge again.
    for (i, addr) in a.iter().enumerate() {
        let r = call(
            *addr,
            11 + i as i64,
            "charge",
            args.clone(),
            elicit(),
            user,
            yes(&first["requestState"]),
        )
        .result();
        assert_eq!(first_text(&r), "Charged 12.5 to cart cart-7");
        assert_eq!(r["structuredContent"]["alreadyCharged"], true);
    }
    for addr in a {
        assert_eq!(charge_count(*addr, "cart-7"), 1);
    }
    // A "no" never charges; a new confirmed flow is a second, deliberate charge.
    let st = call(a[0], 20, "charge", args.clone(), elicit(), user, json!({})).result()
        ["requestState"]
        .clone();
    let no = json!({"inputResponses": {"confirm_charge": {"action": "accept", "content": {"confirm": false}}}, "requestState": st});
    assert_eq!(
        call(a[0], 21, "charge", args.clone(), elicit(), user, no).result()["isError"],
        true
    );
    assert_eq!(charge_count(a[2], "cart-7"), 1);
    let r = call(a[2], 22, "charge", args.clone(), elicit(), user, yes(&st)).result();
    assert_eq!(r["structuredContent"]["charges"], 2);
    // Another user cannot redeem the state.
    let r = call(a[0], 23, "charge", args, elicit(), Some("thief"), yes(&st));
    assert_eq!(r.code(), Some(-32602));
    assert_eq!(charge_count(a[0], "cart-7"), 2);
    // The count is also a resource.
    let r = rpc(
        a[0],
        json!(24),
        "resources/read",
        json!({"uri": "charges://cart-7"}),
        &[],
    )
    .result();
    assert!(r["contents"][0]["text"]
        .as_str()
        .unwrap()
        .contains("\"charges\":2"));
    assert_eq!(r["cacheScope"], "private");
}

/// Two pools (as two processes would be) sharing a key verify each other's state; pools with
/// different keys reject it; a rotated pool still accepts the previous key.
#[test]
fn pools_share_state_only_with_the_same_key() {
    let k1 = StateKey::random();
    let a = Pool::start(PoolOptions::local(1).with_key(StateKeys::new(k1.clone()))).unwrap();
    let b = Pool::start(PoolOptions::local(1).with_key(StateKeys::new(k1.clone()))).unwrap();
    let c = Pool::start(PoolOptions::local(1)).unwrap();
    let rotated = Pool::start(
        PoolOptions::local(1).with_key(StateKeys::new(StateKey::random()).with_previous(k1)),
    )
    .unwrap();
    let st = create_repo(a.addrs()[0], 1, "demo", Some("alice"), json!({})).result()
        ["requestState"]
        .clone();
    let done = create_repo(b.addrs()[0], 2, "demo", Some("alice"), github_answer(&st)).result();
    assert_eq!(first_text(&done), "Created github.com/octocat/demo");
    assert_eq!(instance_of(&done), b.instance_ids()[0]);
    let r = create_repo(c.addrs()[0], 3, "demo", Some("alice"), github_answer(&st));
    assert_eq!(r.code(), Some(-32602));
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("key"),
        "{}",
        r.text()
    );
    let done = create_repo(
        rotated.addrs()[0],
        4,
        "demo",
        Some("alice"),
        github_answer(&st),
    )
    .result();
    assert_eq!(done["resultType"], "complete");
    // States the rotated pool issues use its new key: the old pools cannot read them.
    let st2 = create_repo(rotated.addrs()[0], 5, "demo", Some("alice"), json!({})).result()
        ["requestState"]
        .clone();
    assert_eq!(
        create_repo(a.addrs()[0], 6, "demo", Some("alice"), github_answer(&st2)).code(),
        Some(-32602)
    );
}

/// Kills the child process when dropped, so a failing test leaves nothing behind.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_backend(key_file: &std::path::Path) -> (Proc, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["backend", "--listen", "127.0.0.1:0", "--state-key-file"])
        .arg(key_file)
        .env_remove("MCP_EDGE_STATE_KEY")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mcp-edge backend");
    let stdout = child.stdout.take().unwrap();
    let proc = Proc(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let url = line
        .split("http://")
        .nth(1)
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let addr: SocketAddr = url.trim().trim_end_matches("/mcp").parse().unwrap();
    (proc, addr)
}

#[test]
fn two_processes_with_one_key_file() {
    let dir = std::env::temp_dir().join(format!("mcp-edge-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key_file = dir.join("state.key");
    std::fs::write(
        &key_file,
        "8f1b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff0\n",
    )
    .unwrap();
    let (p1, a1) = spawn_backend(&key_file);
    let (p2, a2) = spawn_backend(&key_file);
    let r1 = create_repo(a1, 1, "demo", Some("alice"), json!({})).result();
    let r2 = create_repo(
        a2,
        2,
        "demo",
        Some("alice"),
        github_answer(&r1["requestState"]),
    )
    .result();
    assert_eq!(first_text(&r2), "Created github.com/octocat/demo");
    assert_ne!(
        instance_of(&r1),
        instance_of(&r2),
        "two processes, two instances"
    );
    drop((p1, p2));
    let _ = std::fs::remove_dir_all(&dir);
}
