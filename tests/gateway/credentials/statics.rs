//! Credentials towards the fleet, static secrets and config checks, over real loopback sockets:
//! a recording upstream shows what each pool received (the secret in its header, the caller's
//! token never), the health check carries the secret too, and a missing or empty secret is
//! refused with the file, line, key and fix — and printed nowhere. The OAuth modes, against a
//! real authorization server, are in `oauth`.

use crate::support::*;
use mcp_edge::config::Config;
use mcp_edge::gateway::RunningGateway;
use std::time::Duration;

const FILE_SECRET: &str = "file-secret-7f3a9c2e51";
const ENV_SECRET: &str = "env-secret-0b8d4e6a12";
const ENV_VAR: &str = "MCP_EDGE_TEST_CRED_SECRET";

fn secret_file(tag: &str, text: &str) -> std::path::PathBuf {
    let f = std::env::temp_dir().join(format!("mcp-edge-cred-{}-{tag}", std::process::id()));
    std::fs::write(&f, text).unwrap();
    f
}

fn two_pools(keys: &Upstreams, bearer: &Upstreams, file: &std::path::Path) -> String {
    format!(
        "work_stealing: true\nlisten: {{mcp: 127.0.0.1:{}, admin: 127.0.0.1:{}}}\npools:\n  keys:\n    instances: [{}]\n    health: {{interval: 200ms}}\n    credentials:\n      static: {{ secret: {{file: {}}}, header: x-api-key }}\n  bearer:\n    instances: [{}]\n    credentials:\n      static: {{ secret: {{env: {ENV_VAR}}} }}\nroutes:\n  - {{ match: {{name: \"key_*\"}}, pool: keys }}\ndefault_route: {{pool: bearer}}\nfederation: {{ endpoints: [{{path: /mcp/all, pools: [keys]}}] }}\n",
        free_port(),
        free_port(),
        keys.addrs[0],
        file.display(),
        bearer.addrs[0],
    )
}

fn call_with(gw: &RunningGateway, name: &str, extra: &[(&'static str, String)]) -> Reply {
    let mut h = call_headers(name);
    h.extend(extra.iter().cloned());
    crate::support::http::request(
        gw.mcp_addr,
        "POST",
        "/mcp",
        &refs(&h),
        call(1, name).as_bytes(),
    )
}

#[test]
fn a_static_secret_arrives_in_its_header_and_the_callers_token_never_does() {
    std::env::set_var(ENV_VAR, ENV_SECRET);
    let (keys, bearer) = (Upstreams::start(1), Upstreams::start(1));
    let file = secret_file("static", &format!("{FILE_SECRET}\n"));
    let yaml = two_pools(&keys, &bearer, &file);
    let gw = RunningGateway::start(Config::parse(&yaml, "creds.yaml").unwrap()).unwrap();
    let client = [
        ("Authorization", "Bearer the-callers-edge-token".to_string()),
        ("x-api-key", "forged-by-client".to_string()),
        ("X_Api_Key", "forged-underscore".to_string()),
    ];
    for name in ["key_lookup", "echo"] {
        let r = call_with(&gw, name, &client);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let calls = |up: &Upstreams| -> Vec<::http::HeaderMap> {
        up.received()
            .into_iter()
            .filter(|r| {
                r.headers
                    .get("mcp-method")
                    .is_some_and(|m| m == "tools/call")
            })
            .map(|r| r.headers)
            .collect()
    };
    let k = calls(&keys);
    assert_eq!(k.len(), 1);
    let got: Vec<_> = k[0].get_all("x-api-key").iter().collect();
    assert_eq!(got, [FILE_SECRET], "the secret, once, raw; no client copy");
    assert!(!k[0].contains_key("x_api_key") && !k[0].contains_key("authorization"));
    let b = calls(&bearer);
    assert_eq!(b.len(), 1);
    let got: Vec<_> = b[0].get_all("authorization").iter().collect();
    assert_eq!(got, [format!("Bearer {ENV_SECRET}").as_str()]);
    // Only a pool's own credential header is the gateway's: elsewhere a client header is just one.
    assert_eq!(b[0].get("x-api-key").unwrap(), "forged-by-client");

    // The active health check (server/discover) carries the pool's secret.
    let checked = eventually(Duration::from_secs(5), || {
        let log = keys.log.lock().unwrap();
        log.health_checks.iter().any(|h| {
            h.get("mcp-method").is_some_and(|m| m == "server/discover")
                && h.get("x-api-key").is_some_and(|v| v == FILE_SECRET)
        })
    });
    assert!(checked, "the health check carries the secret");
    // So does the federation catalog fetch (the gateway's own request, no caller).
    let fetched = eventually(Duration::from_secs(5), || {
        keys.received().iter().any(|r| {
            r.headers
                .get("user-agent")
                .is_some_and(|u| u == "mcp-edge-federation")
                && r.headers.get("x-api-key").is_some_and(|v| v == FILE_SECRET)
        })
    });
    assert!(fetched, "the catalog fetch carries the secret");

    // Nowhere to be read: metrics, admin endpoints, `check`.
    let admin = gw.admin_addr.unwrap();
    for path in ["/metrics", "/healthz", "/readyz"] {
        let r = crate::support::http::request(admin, "GET", path, &[], b"");
        let text = r.text();
        assert!(
            !text.contains(FILE_SECRET) && !text.contains(ENV_SECRET),
            "{path}"
        );
    }
    let cfg_file = secret_file("static.yaml", &yaml);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["check", "--config"])
        .arg(&cfg_file)
        .env(ENV_VAR, ENV_SECRET)
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    assert!(
        printed.contains("static secret") && printed.contains("x-api-key"),
        "{printed}"
    );
    assert!(
        !printed.contains(FILE_SECRET) && !printed.contains(ENV_SECRET),
        "{printed}"
    );
    let parsed = Config::parse(&yaml, "creds.yaml").unwrap();
    assert!(!format!("{parsed:?}").contains(FILE_SECRET));
    let _ = std::fs::remove_file(file);
    let _ = std::fs::remove_file(cfg_file);
}

/// The error of parsing `yaml`, which must fail.
fn refused(yaml: &str) -> String {
    Config::parse(yaml, "gw.yaml").unwrap_err().to_string()
}

fn one_pool(credentials: &str, extra: &str) -> String {
    format!(
        "pools:\n  tools:\n    instances: [127.0.0.1:7001]\n    credentials:\n{credentials}{extra}"
    )
}

#[test]
fn credentials_config_errors_name_the_file_line_key_and_fix() {
    let missing = std::env::temp_dir().join("mcp-edge-no-such-secret");
    let e = refused(&one_pool(
        &format!(
            "      static: {{ secret: {{file: {}}} }}\n",
            missing.display()
        ),
        "",
    ));
    assert!(e.starts_with("gw.yaml:5:"), "{e}");
    assert!(
        e.contains("pools.tools.credentials.static.secret")
            && e.contains("cannot read the secret file"),
        "{e}"
    );
    let empty = secret_file("empty", "  \n");
    let e = refused(&one_pool(
        &format!(
            "      static: {{ secret: {{file: {}}} }}\n",
            empty.display()
        ),
        "",
    ));
    assert!(e.contains("is empty; put the secret in it"), "{e}");
    std::env::set_var("MCP_EDGE_TEST_CRED_EMPTY", "");
    let e = refused(&one_pool(
        "      static: { secret: {env: MCP_EDGE_TEST_CRED_EMPTY} }\n",
        "",
    ));
    assert!(
        e.contains("environment variable MCP_EDGE_TEST_CRED_EMPTY is empty"),
        "{e}"
    );

    let e = refused(&one_pool("      {}\n", ""));
    assert!(
        e.contains("give exactly one of static:, client_credentials: or token_exchange:"),
        "{e}"
    );
    let full = secret_file("full", "s3cr3t-value");
    let oauth = |mode: &str, url: &str| {
        format!(
            "      {mode}:\n        token_url: {url}\n        client_id: gw\n        client_secret: {{file: {}}}\n        resource: https://tools.internal/mcp\n",
            full.display()
        )
    };
    let e = refused(&one_pool(
        &oauth("client_credentials", "http://login.example.com/token"),
        "",
    ));
    assert!(e.contains("token_url") && e.contains("https://"), "{e}");
    let e = refused(&one_pool(
        &oauth("token_exchange", "https://login.example.com/token"),
        "",
    ));
    assert!(
        e.contains(
            "token_exchange: exchanges the verified caller's token, so it needs an auth: section"
        ),
        "{e}"
    );
    let jwks = secret_file("jwks", r#"{"keys":[]}"#);
    let auth = format!(
        "auth:\n  resource: https://edge.test/mcp\n  issuer: https://login.example.com\n  jwks: {{file: {}}}\n  forward: {{token_to_pools: [tools]}}\n",
        jwks.display()
    );
    let e = refused(&one_pool(
        &oauth("token_exchange", "https://login.example.com/token"),
        &auth,
    ));
    assert!(
        e.contains("auth.forward.token_to_pools")
            && e.contains("never receives the caller's token"),
        "{e}"
    );
    assert!(
        e.starts_with("gw.yaml:14:"),
        "points at the token_to_pools entry: {e}"
    );
    assert!(!e.contains("s3cr3t-value"), "no error prints a secret");
    for f in [empty, full, jwks] {
        let _ = std::fs::remove_file(f);
    }
}
