//! Resource subscriptions of a 2025-era session in front of the 2026-only reference backend:
//! `resources/subscribe` (sent to either of two replicas) makes the session's standalone
//! stream ask the fleet for the resource, and a change of it reaches the client as
//! `notifications/resources/updated`; `resources/unsubscribe` stops that.

use serde_json::{json, Value};
use std::net::SocketAddr;

use super::backend;
use super::raw::{on_session, open, stream_get};
use crate::support::http::{call, SseStream};
use crate::support::{sample, scrape};

/// Charge `cart` on the backend instance at `at` (both legs of the MRTR flow, as a 2026 client
/// would): the fleet's own change of `charges://<cart>`.
fn charge(at: SocketAddr, cart: &str) {
    let args = json!({"cart_id": cart, "amount": 2});
    let caps = json!({"elicitation": {}});
    let first = call(at, 1, "charge", args.clone(), caps.clone(), None, json!({})).result();
    let yes = json!({"inputResponses": {"confirm_charge": {"action": "accept", "content": {"confirm": true}}},
        "requestState": first["requestState"]});
    let done = call(at, 2, "charge", args, caps, None, yes).result();
    assert_eq!(done["structuredContent"]["alreadyCharged"], false, "{done}");
}

/// The session's standalone stream on `gw`, open once a tool change announced now reaches it.
fn standalone(gw: SocketAddr, sid: &str) -> SseStream {
    let mut stream = SseStream::send(gw, stream_get(gw, sid).as_bytes());
    assert_eq!(stream.status, 200);
    let trigger = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_trigger_tool_change", "arguments": {}}});
    assert_eq!(on_session(gw, sid, None, &trigger).status, 200);
    let n = stream.next_message().expect("the stream is open");
    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
    stream
}

fn subscription(gw: SocketAddr, sid: &str, method: &str, uri: &Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"uri": uri}});
    on_session(gw, sid, None, &body).json()
}

#[test]
fn a_subscribed_resources_change_reaches_the_stream_from_either_replica() {
    let pool = backend();
    let replicas = super::Replicas::start(&pool, "");
    let (a, b) = (&replicas.a, &replicas.b);
    let sid = open(a.mcp_addr, None);
    let mut stream = standalone(a.mcp_addr, &sid);
    // Subscribed on the replica that does not hold the stream: once answered, it is live.
    let r = subscription(
        b.mcp_addr,
        &sid,
        "resources/subscribe",
        &json!("charges://cart-r"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    charge(pool.addrs()[1], "cart-o");
    charge(pool.addrs()[0], "cart-r");
    let n = stream.next_message().expect("the resource's update");
    assert_eq!(n["method"], "notifications/resources/updated", "{n}");
    assert_eq!(n["params"]["uri"], "charges://cart-r", "{n}");
    assert!(
        n.get("id").is_none() && n["params"].get("_meta").is_none(),
        "{n}"
    );
    // Unsubscribed (here): the next change is not announced, the tool change after it is.
    let r = subscription(
        a.mcp_addr,
        &sid,
        "resources/unsubscribe",
        &json!("charges://cart-r"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    charge(pool.addrs()[1], "cart-r");
    let trigger = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "test_trigger_tool_change", "arguments": {}}});
    assert_eq!(on_session(b.mcp_addr, &sid, None, &trigger).status, 200);
    let n = stream.next_message().expect("the tool change");
    assert_eq!(n["method"], "notifications/tools/list_changed", "{n}");
    // A subscription without a URI is the client's fault, answered as such.
    let r = subscription(a.mcp_addr, &sid, "resources/subscribe", &json!(5));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (ma, mb) = (scrape(a), scrape(b));
    let change = |m: &str, c: &str| {
        let label = format!("change=\"{c}\"");
        sample(m, "mcp_edge_legacy_subscriptions_total", &[&label])
    };
    // Each change is kept on both replicas: made on one, told to the other.
    assert_eq!(
        (change(&ma, "subscribe"), change(&mb, "subscribe")),
        (1.0, 1.0)
    );
    assert_eq!(
        (change(&ma, "unsubscribe"), change(&mb, "unsubscribe")),
        (1.0, 1.0)
    );
    assert_eq!(change(&ma, "refused"), 1.0);
}

/// A stream opened after the subscription (a reconnection, or a client that subscribes first)
/// asks for it from the start, on the replica the subscription was made on or told to.
#[test]
fn a_stream_opened_after_the_subscription_asks_for_it_from_the_start() {
    let pool = backend();
    let gw = super::gateway(&pool, "");
    let a = gw.mcp_addr;
    let sid = open(a, None);
    let r = subscription(a, &sid, "resources/subscribe", &json!("charges://cart-l"));
    assert_eq!(r["result"], json!({}), "{r}");
    let mut stream = standalone(a, &sid);
    charge(pool.addrs()[0], "cart-l");
    let n = stream.next_message().expect("the resource's update");
    assert_eq!(n["params"]["uri"], "charges://cart-l", "{n}");
}

/// The official 2025-era clients subscribe with their own `subscribeResource` /
/// `subscribe_resource`, confirm a charge of the cart mid-call, and hear of the change on their
/// standalone stream, with their own notification handlers.
#[test]
fn the_v1_clients_hear_of_a_subscribed_resources_change() {
    let clients = super::Client::installed_ones();
    if clients.is_empty() {
        return;
    }
    let pool = backend();
    let gw = super::gateway(&pool, "");
    let url = format!("http://{}/mcp", gw.mcp_addr);
    for (i, c) in clients.iter().enumerate() {
        let uri = format!("charges://cart-sdk-{i}");
        let calls = format!("charge={{\"cart_id\":\"cart-sdk-{i}\",\"amount\":2}}");
        let env = [("MCP_EDGE_SUBSCRIBE", std::path::Path::new(&uri))];
        let out = c.run_with(&url, &calls, None, &env);
        assert_eq!(out["ok"], true, "{c:?}: {out}");
        assert_eq!(out["streamOpen"], true, "{c:?}: {out}");
        let text = &out["results"]["charge"]["text"];
        assert_eq!(
            text,
            &format!("Charged 2 to cart cart-sdk-{i}"),
            "{c:?}: {out}"
        );
        assert_eq!(out["updated"], json!([uri]), "{c:?}: {out}");
    }
    let m = scrape(&gw);
    let n = clients.len() as f64;
    let label = |c: &str| format!("change=\"{c}\"");
    let count = |c: &str| sample(&m, "mcp_edge_legacy_subscriptions_total", &[&label(c)]);
    assert_eq!((count("subscribe"), count("unsubscribe")), (n, n));
}

/// On a federated endpoint the stream's listen is the merged one: the subscription reaches
/// every pool, and the pool whose resource changed announces it.
#[test]
fn a_federated_endpoints_stream_carries_a_subscribed_resources_change() {
    let (p1, p2) = (backend(), backend());
    let cfg = crate::support::config(
        &[("a", p1.addrs(), ""), ("b", p2.addrs(), "")],
        "federation:\n  endpoints:\n    - { path: /mcp, pools: [a, b], collisions: prefix }\n",
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let a = gw.mcp_addr;
    let sid = open(a, None);
    let mut stream = SseStream::send(a, stream_get(a, &sid).as_bytes());
    assert_eq!(stream.status, 200);
    let r = subscription(a, &sid, "resources/subscribe", &json!("charges://cart-f"));
    assert_eq!(r["result"], json!({}), "{r}");
    charge(p2.addrs()[1], "cart-f");
    let n = stream.next_message().expect("the resource's update");
    assert_eq!(n["method"], "notifications/resources/updated", "{n}");
    assert_eq!(n["params"]["uri"], "charges://cart-f", "{n}");
}
