//! Requests of the Tasks extension: capabilities that declare it, `tasks/get|update|cancel`
//! for a task id (as a given user), and polling a task until it reaches a status.

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

use super::http::{meta, rpc, Reply};

/// Client capabilities that declare the Tasks extension (and elicitation).
pub fn tasks_caps() -> Value {
    json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// A `tasks/get|update|cancel` request for `task_id` (also in `Mcp-Name`), with the extension
/// declared, `extra_params` merged into params, as `user` (a bearer token) when given.
pub fn task_rpc(
    addr: SocketAddr,
    method: &str,
    task_id: &str,
    extra_params: Value,
    user: Option<&str>,
) -> Reply {
    let mut params = json!({"taskId": task_id, "_meta": meta(tasks_caps())});
    if let Value::Object(m) = extra_params {
        for (k, v) in m {
            params[k] = v;
        }
    }
    let auth = user.map(|u| format!("Bearer {u}"));
    let mut extra: Vec<(&str, &str)> = vec![("Mcp-Name", task_id)];
    if let Some(a) = &auth {
        extra.push(("Authorization", a));
    }
    rpc(addr, json!(7), method, params, &extra)
}

/// Poll `tasks/get` (every 50 ms, at most `within`) until the task's status is one of
/// `statuses`; returns the last `tasks/get` result. Panics on an error answer or a timeout.
pub fn wait_task(
    addr: SocketAddr,
    task_id: &str,
    user: Option<&str>,
    statuses: &[&str],
    within: Duration,
) -> Value {
    let deadline = std::time::Instant::now() + within;
    loop {
        let r = task_rpc(addr, "tasks/get", task_id, json!({}), user).result();
        if statuses.contains(&r["status"].as_str().unwrap_or_default()) {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task {task_id} did not reach {statuses:?} within {within:?}; last: {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
