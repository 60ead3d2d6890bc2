//! Headers the gateway asserts to an upstream are authoritative: the identity headers of
//! `auth.forward.headers` (subject, tenant) and the trace context it propagates. For each, a
//! client that lists it in `Connection` (so that hop-by-hop removal would delete it after the
//! gateway set it), sends it with `_` for `-` (what CGI/WSGI readers fold onto it), in another
//! case, or twice, gets the gateway's value through, alone.

use crate::support::auth::testkeys::{claims, jwks, rsa, sign};
use crate::support::auth::{auth_yaml, url_jwks, JwksServer, ISS};
use crate::support::{call, call_headers, config, refs, Upstreams};

const RESOURCE: &str = "https://mcp.test/mcp";

/// The spellings a client can try for an asserted `name` (lower case, with dashes).
fn attacks(name: &str, fake: &str) -> Vec<Vec<(String, String)>> {
    let underscored = name.replace('-', "_");
    let shouted = name.to_ascii_uppercase();
    let mixed = name.replacen('-', "_", 1);
    vec![
        vec![("Connection".into(), format!("keep-alive, {name}"))],
        vec![(underscored.clone(), fake.into())],
        vec![(mixed, fake.into())],
        vec![(shouted.replace('-', "_"), fake.into())],
        vec![(name.into(), fake.into())],
        vec![
            (name.into(), fake.into()),
            (name.into(), format!("{fake}-2")),
        ],
        vec![
            ("Connection".into(), name.into()),
            (underscored, fake.into()),
        ],
    ]
}

/// Every field of `name` (folded as readers fold) the upstream received.
fn seen_as(h: &http::HeaderMap, name: &str) -> Vec<String> {
    h.iter()
        .filter(|(k, _)| mcp_edge::mcp::header::folds_to(k.as_str(), name))
        .map(|(_, v)| v.to_str().unwrap().to_string())
        .collect()
}

/// A tools/call with `base` headers (besides the MCP ones) and the attack's `extra` fields,
/// answered 200; the headers the upstream received for it (its `n`-th request, from 1).
fn forwarded(
    gw: &mcp_edge::gateway::RunningGateway,
    up: &Upstreams,
    base: (&'static str, String),
    extra: &[(String, String)],
    n: usize,
) -> http::HeaderMap {
    let mut h = call_headers("echo");
    h.push(base);
    let mut all = refs(&h);
    all.extend(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let r = crate::support::http::request(
        gw.mcp_addr,
        "POST",
        "/mcp",
        &all,
        call(1, "echo").as_bytes(),
    );
    assert_eq!(r.status, 200, "{extra:?}: {}", r.text());
    let got = up.received();
    assert_eq!(got.len(), n, "one request reached the upstream per call");
    got[n - 1].headers.clone()
}

#[test]
fn a_client_can_neither_delete_nor_shadow_the_identity_the_gateway_asserts() {
    let k = rsa("asserted");
    let jwks_server = JwksServer::start(jwks(&[&k]));
    let up = Upstreams::start(1);
    let forward = "  forward:\n    headers: {x-mcp-edge-subject: principal, x-tenant: tenant}\n";
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!(
            "default_route: {{pool: default}}\n{}",
            auth_yaml(RESOURCE, &url_jwks(&jwks_server), forward)
        ),
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let mut c = claims(ISS, RESOURCE, "alice", "mcp");
    c["tenant"] = serde_json::json!("acme");
    let token = format!("Bearer {}", sign(&k, &c));
    let mut sent = 0;
    for (name, real) in [("x-mcp-edge-subject", "alice"), ("x-tenant", "acme")] {
        for extra in attacks(name, "admin") {
            sent += 1;
            let last = &forwarded(&gw, &up, ("Authorization", token.clone()), &extra, sent);
            assert_eq!(seen_as(last, name), [real], "{extra:?} -> {last:?}");
        }
    }
}

#[test]
fn the_trace_context_the_gateway_propagates_cannot_be_shadowed() {
    let up = Upstreams::start(1);
    // An OTLP endpoint nobody listens on: spans are dropped, propagation still happens.
    let tracing = format!(
        "tracing: {{ enabled: true, endpoint: \"http://127.0.0.1:{}/v1/traces\", sample_ratio: 1.0 }}\n",
        crate::support::free_port()
    );
    let cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        &format!("default_route: {{pool: default}}\n{tracing}"),
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut sent = 0;
    for extra in attacks(
        "traceparent",
        "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01",
    ) {
        sent += 1;
        let last = &forwarded(&gw, &up, ("traceparent", parent.to_string()), &extra, sent);
        let seen = seen_as(last, "traceparent");
        assert_eq!(seen.len(), 1, "{extra:?} -> {last:?}");
        assert!(seen[0].starts_with("00-"), "{seen:?}");
        assert!(
            !seen[0].contains("ffffffff"),
            "the client's spoof never reaches the upstream: {seen:?}"
        );
    }
}
