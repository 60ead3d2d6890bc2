//! Hostile keys against the replica's rate-limit store, over real sockets: a flood of
//! invented bearer tokens cannot push a steady caller into limiting, and a request with two
//! `Authorization` headers is refused.

use crate::support::limits::Client;
use crate::support::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_flood_of_fresh_keys_never_pushes_a_steady_caller_into_limiting() {
    let up = Upstreams::start(1);
    // 256 keys at most; each caller 10/s with a burst of 10.
    let gw = simple_gateway(
        &up,
        "rate_limits:\n  - {name: per-caller, key: [principal], rate: 10/s, burst: 10, max_keys: 256}\n",
    );
    let addr = gw.mcp_addr;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    // Two flooders, each a fresh token per request; bounded in count and time.
    let flooders: Vec<_> = (0..2)
        .map(|f| {
            let (stop, sent) = (stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut c = Client::new(addr);
                let end = Instant::now() + Duration::from_secs(30);
                for i in 0..20_000 {
                    if stop.load(Ordering::Relaxed) || Instant::now() > end {
                        break;
                    }
                    let r = c
                        .call("t", &format!("invented-{f}-{i}"))
                        .expect("flood request");
                    assert_eq!(r.status, 200, "a fresh key is within its own burst");
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // The steady caller arrives once the store is full (well past 256 keys)...
    assert!(
        eventually(Duration::from_secs(20), || sent.load(Ordering::Relaxed)
            > 1000),
        "the flood did not get going"
    );
    // ...and calls at 5/s, within its limit, while the flood goes on.
    let mut c = Client::new(addr);
    let mut refused = Vec::new();
    for i in 0..15 {
        let r = c.call("t", "steady-alice").unwrap();
        if r.status != 200 {
            refused.push((i, r.status));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let flooded = sent.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.join().unwrap();
    }
    assert!(
        refused.is_empty(),
        "steady caller refused: {refused:?} (flood of {flooded} keys)"
    );
    assert!(flooded > 1000, "{flooded}");
    // The limit still limits: the steady caller over its burst is refused.
    let over = (0..30)
        .filter(|_| c.call("t", "steady-alice").unwrap().status == 429)
        .count();
    assert!(over >= 10, "only {over} of 30 back-to-back calls refused");
}

#[test]
fn two_authorization_headers_are_refused_with_a_json_rpc_error() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let base = call_headers("t");
    let mut h = refs(&base);
    h.push(("Authorization", "Bearer alice"));
    h.push(("Authorization", "Bearer bob"));
    let r = post(gw.mcp_addr, &h, &call(7, "t"));
    assert_eq!(r.status, 400);
    assert_eq!(r.error_code(), -32600);
    assert!(
        r.text()
            .contains("authorization header is sent more than once"),
        "{}",
        r.text()
    );
    assert_eq!(up.count(), 0, "the upstream never saw it");
    // One header is fine.
    let r = post(gw.mcp_addr, &h[..h.len() - 1], &call(8, "t"));
    assert_eq!(r.status, 200);
}
