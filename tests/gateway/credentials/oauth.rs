//! Credentials towards the fleet against a real authorization server (node-oidc-provider on
//! loopback, `tests/oidc/`): the callers' edge tokens, the gateway's client-credentials tokens
//! and the exchanged tokens all come from it, and what each pool receives is verified against
//! its published JWKS, as an instance would. Client credentials: one fetch for many requests,
//! refreshed before expiry without stalling. Token exchange: the pool's audience and the
//! caller's subject, never another caller's token, never the edge token. The token endpoint
//! down: 503 blamed on the dependency, recovery when it returns; a refusal: 502. And no secret
//! or token in a spawned `mcp-edge serve`'s logs, `/metrics`, the admin endpoints or `check`.

use crate::oidc::AuthServer;
use crate::support::auth::call_as;
use crate::support::*;
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;
use serde_json::{json, Value};
use std::time::Duration;

const EDGE: &str = "https://edge.test/mcp";
const TOOLS: &str = "https://tools.internal/mcp";
const API: &str = "https://api.internal/mcp";
const GW_SECRET: &str = "gw-client-secret-5c1e0f9a";
const TE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const CC: &str = "client_credentials";

fn client(id: &str, secret: &str, grants: &[&str]) -> Value {
    json!({"client_id": id, "client_secret": secret, "grant_types": grants, "redirect_uris": [], "response_types": []})
}

/// The authorization server: the edge's resource, the two pools' resources (`api_ttl` seconds
/// for the API's tokens), the gateway's client and two callers.
fn start_as(api_ttl: u64) -> Option<AuthServer> {
    let resources = json!({
        EDGE: {"scope": "mcp tools:read tools:write", "ttl": 300},
        TOOLS: {"scope": "tools:read tools:write", "ttl": 60},
        API: {"scope": "api:read", "ttl": api_ttl},
    });
    let clients = json!([
        client("gw", GW_SECRET, &[CC, TE]),
        client("alice", "alice-secret-1", &[CC]),
        client("bob", "bob-secret-2", &[CC]),
    ]);
    AuthServer::start(EDGE, &resources, &clients)
}

fn edge_token(a: &AuthServer, who: &str) -> String {
    let secret = if who == "alice" {
        "alice-secret-1"
    } else {
        "bob-secret-2"
    };
    a.client_token(who, secret, EDGE, "mcp tools:read")
}

fn secret_file(tag: &str, text: &str) -> std::path::PathBuf {
    let f = std::env::temp_dir().join(format!("mcp-edge-oauth-{}-{tag}", std::process::id()));
    std::fs::write(&f, text).unwrap();
    f
}

/// The config body (no `listen:`): `api` with client credentials, `tools` with token exchange,
/// `refused` with a wrong client secret; `health` for every pool.
fn body(a: &AuthServer, api: &Upstreams, tools: &Upstreams, health: &str) -> String {
    let good = secret_file("gw", GW_SECRET);
    let bad = secret_file("wrong", "not-the-secret");
    let oauth = |mode: &str, resource: &str, scope: &str, file: &std::path::Path| {
        format!(
            "    credentials:\n      {mode}:\n        token_url: {}\n        client_id: gw\n        client_secret: {{file: {}}}\n        resource: {resource}\n        scopes: [{scope}]\n",
            a.token_url(),
            file.display()
        )
    };
    format!(
        "auth:\n  resource: {EDGE}\n  issuer: {}\n  jwks: {{url: {}}}\n  scopes: [mcp]\npools:\n  api:\n    instances: [{}]\n    health: {health}\n{}  tools:\n    instances: [{}]\n    health: {health}\n{}  refused:\n    instances: [{}]\n    health: {{check: off}}\n{}routes:\n  - {{ match: {{name: \"api_*\"}}, pool: api }}\n  - {{ match: {{name: \"refused_*\"}}, pool: refused }}\ndefault_route: {{pool: tools}}\n",
        a.issuer(),
        a.jwks_url(),
        api.addrs[0],
        oauth("client_credentials", API, "api:read", &good),
        tools.addrs[0],
        oauth("token_exchange", TOOLS, "tools:read", &good),
        api.addrs[0],
        oauth("client_credentials", API, "api:read", &bad),
    )
}

fn gateway(a: &AuthServer, api: &Upstreams, tools: &Upstreams, health: &str) -> RunningGateway {
    let y = format!(
        "work_stealing: true\nlisten: {{mcp: 127.0.0.1:{}, admin: 127.0.0.1:{}}}\n{}",
        free_port(),
        free_port(),
        body(a, api, tools, health)
    );
    RunningGateway::start(Config::parse(&y, "oauth.yaml").unwrap_or_else(|e| panic!("{e}\n{y}")))
        .unwrap()
}

/// The bearer tokens of the tools/call requests an upstream received, in order.
fn tokens(up: &Upstreams) -> Vec<String> {
    up.received()
        .iter()
        .filter(|r| {
            r.headers
                .get("mcp-method")
                .is_some_and(|m| m == "tools/call")
        })
        .map(|r| {
            let all: Vec<_> = r.headers.get_all("authorization").iter().collect();
            assert_eq!(all.len(), 1, "one Authorization: {:?}", r.headers);
            all[0]
                .to_str()
                .unwrap()
                .strip_prefix("Bearer ")
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn client_credentials_are_fetched_once_for_many_requests_and_refreshed_before_expiry() {
    let Some(a) = start_as(4) else { return };
    let (api, tools) = (Upstreams::start(1), Upstreams::start(1));
    let gw = gateway(&a, &api, &tools, "{check: off}");
    let alice = edge_token(&a, "alice");
    // One request first, to another pool: the gateway loads the issuer's keys on first use
    // (concurrent first requests would race that load; see the report on auth cold starts).
    assert_eq!(
        call_as(&gw, "/mcp", Some(&alice), "echo", "echo", 100).status,
        200
    );
    std::thread::scope(|s| {
        let calls: Vec<_> = (0..20)
            .map(|i| {
                let (gw, alice) = (&gw, &alice);
                s.spawn(move || call_as(gw, "/mcp", Some(alice), "api_get", "api_get", i))
            })
            .collect();
        for c in calls {
            let r = c.join().unwrap();
            assert_eq!(r.status, 200, "{}", r.text());
        }
    });
    assert_eq!(
        a.issued(CC, "gw"),
        1,
        "one token request for twenty concurrent requests"
    );
    let first = tokens(&api);
    assert_eq!(first.len(), 20);
    for t in &first {
        assert_ne!(t, &alice, "the edge token never reaches the pool");
        let claims = a.verify(t, API);
        assert_eq!(
            (claims["sub"].as_str(), claims["scope"].as_str()),
            (Some("gw"), Some("api:read"))
        );
    }
    assert!(first.iter().all(|t| t == &first[0]));

    // Past the refresh point (half of 4 s): served at once with the valid token, refreshed behind.
    std::thread::sleep(Duration::from_millis(2300));
    let t = std::time::Instant::now();
    assert_eq!(
        call_as(&gw, "/mcp", Some(&alice), "api_get", "api_get", 21).status,
        200
    );
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "not stalled by the refresh"
    );
    // The refreshed token is in the gateway's cell once its fetch is counted (stored first).
    let fetched_ok = || {
        let m = scrape(&gw);
        sample(
            &m,
            "mcp_edge_credential_fetches_total",
            &["pool=\"api\"", "result=\"ok\""],
        )
    };
    assert!(eventually(Duration::from_secs(3), || fetched_ok() == 2.0));
    assert_eq!(a.issued(CC, "gw"), 2);
    assert_eq!(
        call_as(&gw, "/mcp", Some(&alice), "api_get", "api_get", 22).status,
        200
    );
    let all = tokens(&api);
    assert_eq!(
        all[20], first[0],
        "the still-valid token while the refresh ran"
    );
    assert_ne!(all[21], first[0], "the refreshed token after it");
    a.verify(&all[21], API);
    let m = scrape(&gw);
    let has = |outcome: &str| {
        sample(
            &m,
            "mcp_edge_credential_cache_total",
            &["pool=\"api\"", outcome],
        )
    };
    assert!(
        has("outcome=\"stale_refresh\"") >= 1.0 && has("outcome=\"hit\"") >= 1.0,
        "{m}"
    );
    let ok = sample(
        &m,
        "mcp_edge_credential_fetches_total",
        &["pool=\"api\"", "result=\"ok\""],
    );
    assert_eq!(ok, 2.0);
}

#[test]
fn token_exchange_gives_each_caller_a_token_for_the_pools_audience_and_never_anothers() {
    let Some(a) = start_as(60) else { return };
    let (api, tools) = (Upstreams::start(1), Upstreams::start(1));
    let gw = gateway(&a, &api, &tools, "{interval: 300ms}");
    let (alice, bob) = (edge_token(&a, "alice"), edge_token(&a, "bob"));
    for (i, who) in [&alice, &alice, &bob, &bob].into_iter().enumerate() {
        let r = call_as(&gw, "/mcp", Some(who), "echo", "echo", i as u64);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let got = tokens(&tools);
    assert_eq!(got.len(), 4);
    for (t, sub) in got.iter().zip(["alice", "alice", "bob", "bob"]) {
        assert!(
            t != &alice && t != &bob,
            "the edge token never reaches the pool"
        );
        let c = a.verify(t, TOOLS);
        assert_eq!(c["sub"], sub, "the caller's subject");
        assert_eq!(
            c["scope"], "tools:read",
            "the narrower scope the pool asks for"
        );
        assert_eq!(c["act"]["sub"], "gw", "exchanged by the gateway");
    }
    assert_eq!(got[0], got[1], "cached per caller");
    assert_ne!(got[0], got[2], "two callers never share an exchanged token");
    assert_eq!(a.issued(TE, "gw"), 2);
    // The health check has no caller: the exchange client's own token for the same audience.
    let service = eventually(Duration::from_secs(5), || {
        let log = tools.log.lock().unwrap();
        log.health_checks.iter().any(|h| {
            let t = h.get("authorization").and_then(|v| v.to_str().ok());
            t.and_then(|t| t.strip_prefix("Bearer "))
                .is_some_and(|t| a.verify(t, TOOLS)["sub"] == "gw")
        })
    });
    assert!(service, "the health check carries the gateway's own token");
    let m = scrape(&gw);
    let hits = sample(
        &m,
        "mcp_edge_credential_cache_total",
        &["pool=\"tools\"", "token_exchange", "outcome=\"hit\""],
    );
    assert!(hits >= 2.0, "{m}");
}

#[test]
fn a_token_endpoint_down_is_blamed_on_the_dependency_and_recovers_when_it_returns() {
    let Some(mut a) = start_as(60) else { return };
    let (api, tools) = (Upstreams::start(1), Upstreams::start(1));
    let gw = gateway(&a, &api, &tools, "{check: off}");
    let (alice, bob) = (edge_token(&a, "alice"), edge_token(&a, "bob"));
    assert_eq!(
        call_as(&gw, "/mcp", Some(&alice), "echo", "echo", 1).status,
        200
    );

    // A refusal (wrong client secret): 502, the authorization server's error code.
    let r = call_as(&gw, "/mcp", Some(&alice), "refused_x", "refused_x", 2);
    assert_eq!(r.status, 502, "{}", r.text());
    let e = &r.json()["error"];
    assert_eq!(
        (e["code"].as_i64(), r.json()["id"].as_i64()),
        (Some(-31012), Some(2))
    );
    assert_eq!(e["data"]["error"], "invalid_client");
    assert_eq!(e["data"]["dependency"], "token_endpoint");

    a.stop();
    let before = tokens(&tools).len();
    for id in 3..8 {
        let r = call_as(&gw, "/mcp", Some(&bob), "echo", "echo", id);
        assert_eq!(r.status, 503, "{}", r.text());
        assert_eq!(r.header("retry-after"), Some("1"));
        let v = r.json();
        assert_eq!(
            (v["error"]["code"].as_i64(), v["id"].as_i64()),
            (Some(-31012), Some(id as i64))
        );
        assert_eq!(v["error"]["data"]["pool"], "tools");
        assert_eq!(v["error"]["data"]["reason"], "unreachable");
        assert!(
            r.header("x-mcp-edge-upstream").is_none(),
            "no instance is named"
        );
    }
    assert_eq!(
        tokens(&tools).len(),
        before,
        "no request reached the instance"
    );
    // Alice's exchanged token is still valid and cached: she is served while the endpoint is down.
    assert_eq!(
        call_as(&gw, "/mcp", Some(&alice), "echo", "echo", 9).status,
        200
    );
    let m = scrape(&gw);
    assert_eq!(
        sample(&m, "mcp_edge_upstream_ejections_total", &["pool=\"tools\""]),
        0.0
    );
    let down = sample(
        &m,
        "mcp_edge_credential_failures_total",
        &["pool=\"tools\"", "reason=\"unreachable\""],
    );
    assert_eq!(down, 5.0, "{m}");

    a.restart();
    let back = eventually(Duration::from_secs(5), || {
        call_as(&gw, "/mcp", Some(&bob), "echo", "echo", 10).status == 200
    });
    assert!(back, "served again once the token endpoint is back");
    let last = tokens(&tools).pop().unwrap();
    assert_eq!(a.verify(&last, TOOLS)["sub"], "bob");
}

#[test]
fn no_secret_or_token_appears_in_logs_check_metrics_or_admin_endpoints() {
    let Some(mut a) = start_as(60) else { return };
    let (api, tools) = (Upstreams::start(1), Upstreams::start(1));
    let (mcp, admin) = (free_port(), free_port());
    let yaml = format!(
        "listen: {{mcp: 127.0.0.1:{mcp}, admin: 127.0.0.1:{admin}}}\n{}",
        body(&a, &api, &tools, "{interval: 300ms}")
    );
    let file = secret_file("serve.yaml", &yaml);
    let log = secret_file("serve.log", "");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["serve", "--access-log", "text", "--config"])
        .arg(&file)
        .env("RUST_LOG", "info,mcp_edge=debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let _serve = spawn::Procs(vec![child]);
    let mcp: std::net::SocketAddr = format!("127.0.0.1:{mcp}").parse().unwrap();
    let admin: std::net::SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    assert!(eventually(Duration::from_secs(20), || {
        std::net::TcpStream::connect(mcp).is_ok()
    }));
    let (alice, bob) = (edge_token(&a, "alice"), edge_token(&a, "bob"));
    let call = |token: &str, name: &str, id: u64| {
        let mut h = call_headers(name);
        h.push(("Authorization", format!("Bearer {token}")));
        crate::support::http::request(
            mcp,
            "POST",
            "/mcp",
            &refs(&h),
            crate::support::call(id, name).as_bytes(),
        )
    };
    assert_eq!(call(&alice, "echo", 1).status, 200);
    assert_eq!(call(&alice, "api_get", 2).status, 200);
    assert_eq!(call(&alice, "refused_x", 3).status, 502);
    a.stop();
    assert_eq!(call(&bob, "echo", 4).status, 503);
    std::thread::sleep(Duration::from_millis(700)); // health checks fail to get a token: logged

    let mut secrets = vec![GW_SECRET.to_string(), alice.clone(), bob.clone()];
    secrets.extend(tokens(&api));
    secrets.extend(tokens(&tools));
    let mut seen = vec![("log", std::fs::read_to_string(&log).unwrap())];
    for path in ["/metrics", "/healthz", "/readyz"] {
        seen.push((
            path,
            crate::support::http::request(admin, "GET", path, &[], b"").text(),
        ));
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    seen.push((
        "check",
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ));
    assert!(
        seen[0].1.contains("token request failed"),
        "the failure is logged: {}",
        seen[0].1
    );
    assert!(
        seen[4].1.contains("client credentials from"),
        "{}",
        seen[4].1
    );
    for (what, text) in &seen {
        for s in &secrets {
            assert!(
                !text.contains(s.as_str()),
                "a secret or token appears in {what}"
            );
        }
    }
    let _ = std::fs::remove_file(file);
    let _ = std::fs::remove_file(log);
}
