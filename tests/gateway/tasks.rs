//! Tasks routing: tasks/* reach the instance that owns the task. Three separate `mcp-edge backend`
//! processes (no shared store: each task lives in the memory of the process that created it)
//! behind the gateway; every tasks/get reaches the owner, and a dead owner gives the client a
//! clean JSON-RPC error at once (not a hang, not "unknown task" from another instance).

use crate::support::config;
use crate::support::http::*;
use crate::support::metrics::{sample, scrape};
use crate::support::spawn::fleet;

use mcp_edge::gateway::RunningGateway;
use serde_json::json;
use std::time::{Duration, Instant};

#[test]
fn every_task_request_reaches_its_owner_and_a_dead_owner_is_a_clean_error() {
    let (mut procs, addrs) = fleet(3, None);
    let cfg = config(
        &[("default", &addrs, "balance: round_robin")],
        "default_route: {pool: default}\n",
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let g = gw.mcp_addr;

    // 12 long tasks, created round robin over the three processes.
    let mut tasks = Vec::new();
    for i in 0..12 {
        let r = call(
            g,
            i,
            "slow_compute",
            json!({"seconds": 120}),
            tasks_caps(),
            Some("alice"),
            json!({}),
        );
        let res = r.result();
        assert_eq!(res["resultType"], "task", "{res}");
        tasks.push((
            res["taskId"].as_str().unwrap().to_owned(),
            instance_of(&res),
        ));
    }
    let owners: std::collections::HashSet<&String> = tasks.iter().map(|(_, o)| o).collect();
    assert_eq!(
        owners.len(),
        3,
        "the tasks were created on all three processes"
    );

    // Every tasks/get (and a tasks/update) reaches the owner: no "unknown task" ever.
    let mut gets = 0;
    for (id, owner) in &tasks {
        for _ in 0..5 {
            let r = task_rpc(g, "tasks/get", id, json!({}), Some("alice"));
            let res = r.result();
            assert_eq!(res["taskId"], json!(id));
            assert_eq!(res["status"], "working");
            assert_eq!(
                &instance_of(&res),
                owner,
                "tasks/get of {id} reached another instance"
            );
            gets += 1;
        }
        let r = task_rpc(
            g,
            "tasks/update",
            id,
            json!({"inputResponses": {}}),
            Some("alice"),
        );
        assert_eq!(&instance_of(&r.result()), owner);
    }
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_task_routing_total", &["result=\"owner\""]) as u64,
        gets + tasks.len() as u64,
        "{m}"
    );
    // Task ids never become `name` labels (each is new; they would crowd out the tools).
    assert!(!tasks.iter().any(|(id, _)| m.contains(id.as_str())), "{m}");
    // The gateway checks Mcp-Name against params.taskId itself.
    let (id, _) = &tasks[1];
    let params = json!({"taskId": id, "_meta": meta(tasks_caps())});
    let r = rpc(
        g,
        json!(9),
        "tasks/get",
        params,
        &[("Mcp-Name", "0123456789abcdef.spoofed")],
    );
    assert_eq!((r.status, r.error_code()), (400, -32020), "{}", r.text());
    // A task id without a hint is balanced, and answered "unknown" by whoever gets it.
    let r = task_rpc(g, "tasks/get", "no-hint-here", json!({}), Some("alice"));
    assert_eq!(r.error_code(), -32602);
    assert_eq!(
        sample(
            &scrape(&gw),
            "mcp_edge_task_routing_total",
            &["result=\"no_hint\""]
        ) as u64,
        1
    );

    // Kill the owner of the first task: its tasks/get fails fast with a gateway error.
    let (dead_id, dead_owner) = tasks[0].clone();
    // Which process is it? Ask each backend directly (only the owner knows the task).
    let port_index = (0..3)
        .find(|&i| {
            task_rpc(addrs[i], "tasks/get", &dead_id, json!({}), Some("alice"))
                .code()
                .is_none()
        })
        .expect("some process owns the task");
    procs.0[port_index].kill().unwrap();
    procs.0[port_index].wait().unwrap();
    let started = Instant::now();
    let r = task_rpc(g, "tasks/get", &dead_id, json!({}), Some("alice"));
    let took = started.elapsed();
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.error_code(), -31003, "{}", r.text());
    assert_eq!(r.json()["id"], json!(7), "the request id is echoed");
    let msg = r.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        msg.contains(&addrs[port_index].to_string()),
        "names the owner: {msg}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // Tasks of the live processes are still served by their owners.
    for (id, owner) in tasks.iter().filter(|(_, o)| *o != dead_owner) {
        let res = task_rpc(g, "tasks/get", id, json!({}), Some("alice")).result();
        assert_eq!(&instance_of(&res), owner);
    }
}
