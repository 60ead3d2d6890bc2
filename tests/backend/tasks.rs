//! The Tasks extension (SEP-2663) in the reference backend, over HTTP on 127.0.0.1: a long
//! task that asks for input and reports progress, ownership by principal, expiry, cancel, the
//! capability gate and the `Mcp-Name` ↔ `params.taskId` check, and owner hints in task ids.

use crate::support::http::*;

use mcp_edge::backend::{Pool, PoolOptions};
use mcp_edge::mcp::tasks::{owner_hint, parse_owner_hint};
use serde_json::{json, Value};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(30);

fn create(addr: std::net::SocketAddr, tool: &str, args: Value, user: Option<&str>) -> Value {
    let r = call(addr, 1, tool, args, tasks_caps(), user, json!({})).result();
    assert_eq!(r["resultType"], "task", "{tool} did not create a task: {r}");
    r
}

#[test]
fn deploy_async_asks_reports_progress_and_completes() {
    let p = Pool::start(PoolOptions::local(1)).unwrap();
    let a = p.addrs()[0];
    let created = create(
        a,
        "deploy_async",
        json!({"service": "web", "environment": "prod", "seconds": 2}),
        Some("alice"),
    );
    let id = created["taskId"].as_str().unwrap().to_owned();
    assert_eq!(created["status"], "working");
    for k in ["createdAt", "lastUpdatedAt"] {
        assert!(
            created[k].as_str().unwrap().ends_with('Z'),
            "{k}: {created}"
        );
    }
    assert!(created["ttlMs"].as_u64().unwrap() > 0 && created["pollIntervalMs"].as_u64().is_some());
    assert!(created.get("requestState").is_none() && created.get("result").is_none());

    let waiting = wait_task(a, &id, Some("alice"), &["input_required"], LONG);
    let q = &waiting["inputRequests"]["confirm"];
    assert_eq!(q["method"], "elicitation/create", "{waiting}");
    let ack = task_rpc(
        a,
        "tasks/update",
        &id,
        json!({"inputResponses": {"confirm": {"action": "accept", "content": {"confirmation": "web"}}}}),
        Some("alice"),
    )
    .result();
    assert_eq!(ack["resultType"], "complete");
    assert!(
        ack.get("status").is_none() && ack.get("taskId").is_none(),
        "{ack}"
    );

    // Progress shows in statusMessage while the rollout runs (5 steps over 2 s, polled every 50 ms).
    let mut saw_progress = false;
    let done = loop {
        let r = task_rpc(a, "tasks/get", &id, json!({}), Some("alice")).result();
        if r["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("step"))
        {
            saw_progress = true;
        }
        if r["status"] != "working" {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(saw_progress, "no progress was reported");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(first_text(&done["result"]), "Deployed web to prod");
}

#[test]
fn a_task_belongs_to_its_principal() {
    let p = Pool::start(PoolOptions::local(1)).unwrap();
    let a = p.addrs()[0];
    let id = create(a, "slow_compute", json!({"seconds": 60}), Some("alice"))["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    for other in [Some("mallory"), None] {
        for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
            let r = task_rpc(a, method, &id, json!({"inputResponses": {}}), other);
            assert_eq!(r.status, 200);
            assert_eq!(
                r.error_code(),
                -32602,
                "{method} as {other:?}: {}",
                r.text()
            );
        }
    }
    // The owner still sees it running: the foreign cancel did nothing.
    let r = task_rpc(a, "tasks/get", &id, json!({}), Some("alice")).result();
    assert_eq!(r["status"], "working");
    assert_eq!(
        task_rpc(a, "tasks/cancel", &id, json!({}), Some("alice")).result()["resultType"],
        "complete"
    );
    wait_task(a, &id, Some("alice"), &["cancelled"], LONG);
    // Cancelling a terminal task is the same empty ack.
    let again = task_rpc(a, "tasks/cancel", &id, json!({}), Some("alice")).result();
    assert_eq!(
        again,
        json!({"resultType": "complete", "_meta": again["_meta"]})
    );
}

#[test]
fn tasks_expire_after_their_ttl() {
    let p = Pool::start(PoolOptions {
        task_ttl: Duration::from_millis(400),
        ..PoolOptions::local(1)
    })
    .unwrap();
    let a = p.addrs()[0];
    let created = create(a, "slow_compute", json!({"seconds": 0}), None);
    assert_eq!(created["ttlMs"], 400);
    let id = created["taskId"].as_str().unwrap().to_owned();
    wait_task(a, &id, None, &["completed"], LONG);
    std::thread::sleep(Duration::from_millis(600));
    let r = task_rpc(a, "tasks/get", &id, json!({}), None);
    assert_eq!(r.error_code(), -32602, "{}", r.text());
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expired"));
}

#[test]
fn task_methods_need_the_extension_and_a_matching_mcp_name() {
    let p = Pool::start(PoolOptions::local(1)).unwrap();
    let a = p.addrs()[0];
    let id = create(a, "slow_compute", json!({"seconds": 60}), None)["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // Without the extension declared: 400 / -32021 naming it.
    let params = json!({"taskId": id, "_meta": meta(json!({}))});
    let r = rpc(a, json!(3), "tasks/get", params, &[("Mcp-Name", &id)]);
    assert_eq!((r.status, r.error_code()), (400, -32021), "{}", r.text());
    assert!(
        r.json()["error"]["data"]["requiredCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"]
            .is_object()
    );
    // A tools/call of a task-only tool without the extension: the same refusal.
    let r = call(
        a,
        4,
        "deploy_async",
        json!({"service": "s", "environment": "e"}),
        json!({"elicitation": {}}),
        None,
        json!({}),
    );
    assert_eq!((r.status, r.error_code()), (400, -32021), "{}", r.text());
    // Mcp-Name must mirror params.taskId, and must be there.
    let params = json!({"taskId": id, "_meta": meta(tasks_caps())});
    let r = rpc(
        a,
        json!(5),
        "tasks/get",
        params.clone(),
        &[("Mcp-Name", "someone-else")],
    );
    assert_eq!((r.status, r.error_code()), (400, -32020), "{}", r.text());
    let r = rpc(a, json!(6), "tasks/get", params, &[]);
    assert_eq!((r.status, r.error_code()), (400, -32020), "{}", r.text());
    // Removed v1 methods are unknown.
    let r = rpc(
        a,
        json!(7),
        "tasks/list",
        json!({"_meta": meta(tasks_caps())}),
        &[],
    );
    assert_eq!(r.error_code(), -32601);
    // An optional-task tool runs inline for a client without the extension.
    let r = call(
        a,
        8,
        "slow_compute",
        json!({"seconds": 0, "label": "x"}),
        json!({}),
        None,
        json!({}),
    )
    .result();
    assert_eq!(r["resultType"], "complete");
    assert!(first_text(&r).contains("\"x\""));
}

#[test]
fn task_ids_carry_the_owner_hint_of_the_advertised_address() {
    let p = Pool::start(PoolOptions {
        advertise: vec![
            "backend-a.internal:7001".into(),
            "backend-b.internal:7001".into(),
        ],
        ..PoolOptions::local(2)
    })
    .unwrap();
    for (addr, adv) in p
        .addrs()
        .iter()
        .zip(["backend-a.internal:7001", "backend-b.internal:7001"])
    {
        let r = create(*addr, "slow_compute", json!({"seconds": 0}), None);
        let id = r["taskId"].as_str().unwrap();
        assert_eq!(parse_owner_hint(id), Some(owner_hint(adv).as_str()), "{id}");
    }
    // Default: the bound listen address.
    let p = Pool::start(PoolOptions::local(1)).unwrap();
    let a = p.addrs()[0];
    let r = create(a, "slow_compute", json!({"seconds": 0}), None);
    assert_eq!(
        parse_owner_hint(r["taskId"].as_str().unwrap()),
        Some(owner_hint(&a.to_string()).as_str())
    );
    // A wrong number of --advertise addresses is a clear error.
    let err = Pool::start(PoolOptions {
        advertise: vec!["x:1".into()],
        ..PoolOptions::local(2)
    })
    .err()
    .unwrap();
    assert!(format!("{err:#}").contains("--advertise"), "{err:#}");
}

#[test]
fn the_principal_can_come_from_a_header_set_by_the_gateway() {
    let p = Pool::start(PoolOptions {
        principal_header: Some("x-mcp-edge-subject".into()),
        ..PoolOptions::local(1)
    })
    .unwrap();
    let a = p.addrs()[0];
    let with = |subject: &str, bearer: &str, method: &str, id: &str| {
        let params = json!({"taskId": id, "_meta": meta(tasks_caps())});
        let auth = format!("Bearer {bearer}");
        rpc(
            a,
            json!(1),
            method,
            params,
            &[
                ("Mcp-Name", id),
                ("x-mcp-edge-subject", subject),
                ("Authorization", &auth),
            ],
        )
    };
    let params =
        json!({"name": "slow_compute", "arguments": {"seconds": 60}, "_meta": meta(tasks_caps())});
    let r = rpc(
        a,
        json!(1),
        "tools/call",
        params,
        &[
            ("x-mcp-edge-subject", "alice@example.com"),
            ("Authorization", "Bearer t1"),
        ],
    )
    .result();
    let id = r["taskId"].as_str().unwrap().to_owned();
    // The same subject with another token is the same caller; another subject with the same
    // token is not: the header decides, the token does not.
    assert_eq!(
        with("alice@example.com", "t2", "tasks/get", &id).result()["status"],
        "working"
    );
    assert_eq!(
        with("bob@example.com", "t1", "tasks/get", &id).error_code(),
        -32602
    );
    assert_eq!(
        with("alice@example.com", "t2", "tasks/cancel", &id).result()["resultType"],
        "complete"
    );
    // A bad header name is a start-up error naming the flag.
    let err = Pool::start(PoolOptions {
        principal_header: Some("bad header".into()),
        ..PoolOptions::local(1)
    })
    .err()
    .unwrap();
    assert!(format!("{err:#}").contains("--principal-header"), "{err:#}");
}
