//! A cold gateway (its JWKS never fetched yet) under a burst of authenticated first requests:
//! they all wait on one fetch from a slow issuer and all succeed; after a failed first fetch the
//! next request fetches again.

use crate::support::auth::testkeys::{self, *};
use crate::support::auth::*;
use crate::support::*;
use std::time::Duration;

const RESOURCE: &str = "https://mcp.test/mcp";

#[test]
fn concurrent_first_requests_on_a_cold_gateway_share_one_jwks_fetch() {
    let k = ed("cold-1");
    let jwks = JwksServer::start(testkeys::jwks(&[&k]));
    jwks.set_delay(Duration::from_millis(300));
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, &auth_yaml(RESOURCE, &url_jwks(&jwks), ""));
    assert_eq!(jwks.hits(), 0, "the gateway fetched before any request");
    let token = sign(&k, &claims(ISS, RESOURCE, "alice", ""));

    const N: u64 = 16;
    let barrier = std::sync::Barrier::new(N as usize);
    let statuses: Vec<(u16, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let (gw, token, barrier) = (&gw, &token, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let r = call_as(gw, "/mcp", Some(token), "echo", "echo", i);
                    (r.status, r.text())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, (status, text)) in statuses.iter().enumerate() {
        assert_eq!(*status, 200, "request {i}: {text}");
    }
    assert_eq!(
        jwks.hits(),
        1,
        "{N} cold requests made {} fetches",
        jwks.hits()
    );
    assert_eq!(up.received().len(), N as usize);
}

#[test]
fn a_failed_first_fetch_is_not_kept_the_next_request_fetches_again() {
    let k = ed("cold-2");
    let jwks = JwksServer::start("not json".into());
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, &auth_yaml(RESOURCE, &url_jwks(&jwks), ""));
    let token = sign(&k, &claims(ISS, RESOURCE, "alice", ""));
    let r = call_as(&gw, "/mcp", Some(&token), "echo", "echo", 1);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -31010, "{}", r.text());
    let failed = jwks.hits();
    assert!(failed >= 1);

    // The issuer recovers: the very next request fetches and is served.
    jwks.set(testkeys::jwks(&[&k]));
    let r = call_as(&gw, "/mcp", Some(&token), "echo", "echo", 2);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(jwks.hits() > failed);
}
