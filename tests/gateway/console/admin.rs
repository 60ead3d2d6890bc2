//! The console's files and headers on the admin listener, its snapshot against `/metrics`,
//! a spoofed request in the refusal ring with both names, and no configured secret in any
//! admin answer.

use mcp_edge::gateway::RunningGateway;
use serde_json::Value;

use crate::support::auth::{auth_yaml, IntrospectServer, JwksServer};
use crate::support::http::raw;
use crate::support::*;

fn get(gw: &RunningGateway, path: &str) -> crate::support::http::Reply {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    raw(gw.admin_addr.unwrap(), req.as_bytes())
}

#[test]
fn the_console_is_served_with_a_policy_that_forbids_inline_and_remote_code() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    for path in [
        "/ui",
        "/ui/console.js",
        "/ui/charts.js",
        "/ui/console.css",
        "/ui/pools",
    ] {
        let r = get(&gw, path);
        assert_eq!(r.status, 200, "{path}");
        let csp = r.header("content-security-policy").expect("a CSP");
        assert!(
            csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
            "{csp}"
        );
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    }
    let page = get(&gw, "/ui").text();
    assert!(!page.contains("<script>") && !page.contains("http://") && !page.contains("https://"));
    assert_eq!(get(&gw, "/").header("location"), Some("/ui"));
}

#[test]
fn the_snapshot_counts_what_metrics_count_and_keeps_the_spoof_with_both_names() {
    let up = Upstreams::start(2);
    let gw = simple_gateway(&up, "");
    for i in 0..5 {
        let r = post(gw.mcp_addr, &refs(&call_headers("echo")), &call(i, "echo"));
        assert_eq!(r.status, 200);
    }
    let r = post(
        gw.mcp_addr,
        &refs(&call_headers("echo")),
        &call(9, "deploy"),
    );
    assert_eq!(r.status, 400);
    // A request is counted after its answer is written: wait for the sixth.
    let six = || sample(&scrape(&gw), "mcp_edge_requests_total", &[]) == 6.0;
    assert!(eventually(std::time::Duration::from_secs(5), six));
    let s: Value = serde_json::from_slice(&get(&gw, "/-/console.json").body).unwrap();
    let counted = sample(&scrape(&gw), "mcp_edge_requests_total", &[]);
    assert_eq!(s["totals"]["requests"].as_f64(), Some(counted));
    assert_eq!(s["totals"]["requests"], 6.0);
    assert_eq!(s["totals"]["by_side"]["client"], 1.0);
    assert_eq!(s["totals"]["spoofs_refused"], 1.0);
    let spoof = &s["refusals"][0];
    assert_eq!(spoof["reason"], "mcp-name-mismatch", "{s:#}");
    assert_eq!(spoof["claimed_name"], "echo");
    assert_eq!(spoof["body_name"], "deploy");
    assert!(
        spoof["message"].as_str().unwrap().contains("deploy"),
        "{spoof}"
    );
    let pool = &s["pools"][0];
    assert_eq!(pool["instances"].as_array().unwrap().len(), 2);
    assert!(pool["instances"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["usable"] == true));
    assert_eq!(s["tools"][0]["name"], "echo");
    assert_eq!(s["tools"][0]["calls"], 6.0);
    let resolved = s["config"]["resolved"].as_str().unwrap();
    assert!(
        resolved.contains("routes (first match wins)") && resolved.contains("listen.mcp"),
        "{resolved}"
    );
}

#[test]
fn no_configured_secret_appears_in_any_admin_answer() {
    let jwks = JwksServer::start(r#"{"keys":[]}"#.into());
    let intro = IntrospectServer::start();
    const SECRETS: [&str; 2] = ["intro-Secret-7f3a", "redis-Pass-91cd"];
    let extra = format!(
        "  introspection: {{url: '{}', client_id: edge, client_secret: {}}}\n",
        intro.url(),
        SECRETS[0]
    );
    let up = Upstreams::start(1);
    let cfg = config(
        &[("p", &up.addrs, "balance: round_robin")],
        &format!(
            "default_route: {{pool: p}}\n{}redis: {{url: 'redis://edge:{}@127.0.0.1:1'}}\nrate_limits:\n  - {{name: g, rate: 5/s, scope: global}}\n",
            auth_yaml("http://127.0.0.1/mcp", &crate::support::auth::url_jwks(&jwks), &extra),
            SECRETS[1]
        ),
    );
    let gw = RunningGateway::start(cfg).unwrap();
    let r = post(gw.mcp_addr, &refs(&call_headers("echo")), &call(1, "echo"));
    assert_eq!(r.status, 401);
    let explained = super::explain::explain(
        &gw,
        &serde_json::json!({"headers": {"Mcp-Method": "tools/call", "Mcp-Name": "echo",
            "MCP-Protocol-Version": "2026-07-28", "Content-Type": "application/json",
            "Authorization": "Bearer opaque-token-value"}, "body": call(1, "echo")}),
    );
    // Explain verifies the token as a request would: an inactive opaque token is auth's refusal.
    assert_eq!(explained["decided_by"], "auth", "{explained:#}");
    assert_eq!(explained["answer"]["status"], 401);
    let mut answers = vec![explained.to_string()];
    for path in [
        "/",
        "/ui",
        "/ui/console.js",
        "/-/console.json",
        "/metrics",
        "/catalog",
        "/readyz",
        "/healthz",
    ] {
        answers.push(get(&gw, path).text());
    }
    for (i, a) in answers.iter().enumerate() {
        for s in SECRETS.iter().chain(["opaque-token-value"].iter()) {
            assert!(!a.contains(s), "answer {i} shows {s}: {a}");
        }
    }
}

#[test]
fn state_changes_need_the_admin_token_once_one_is_configured() {
    let token = "adm-4b1d9e0c7f2a58e3";
    let file = std::env::temp_dir().join(format!("mcp-edge-admin-token-{}", std::process::id()));
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, &format!("admin_token_file: {}\n", file.display()));
    let post = |path: &str, auth: &str| {
        let req = format!("POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\n\r\n");
        raw(gw.admin_addr.unwrap(), req.as_bytes())
    };
    for path in ["/-/cache/purge", "/-/reload"] {
        let r = post(path, "");
        assert_eq!(r.status, 401, "{path}");
        assert!(r.header("www-authenticate").is_some());
        assert_eq!(
            post(path, "Authorization: Bearer adm-wrong-token-000\r\n").status,
            401
        );
    }
    let ok = post(
        "/-/cache/purge",
        &format!("Authorization: Bearer {token}\r\n"),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    // Reading stays open, and the token is in no answer.
    for path in ["/-/console.json", "/metrics", "/ui"] {
        let r = get(&gw, path);
        assert_eq!(r.status, 200);
        assert!(!r.text().contains(token));
    }
    let _ = std::fs::remove_file(&file);
}
