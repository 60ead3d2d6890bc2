//! `mcp-edge init`: the command asks real servers over loopback (the reference backend, two
//! instances, and the TypeScript and Python SDK servers of tests/peers), writes a config,
//! `check` accepts it, `serve` serves it, and every tool of every server is listed through the
//! federated endpoint (by a plain client and by the official Python SDK client). Also: an
//! unreachable URL is reported with its reason, a URL that is not MCP or that wants a token is
//! said so, a 2025-era server is recognised and listed the 2025 way, and an existing file is
//! not overwritten.

use serde_json::{json, Value};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::Duration;

use crate::peers::{self, Peer, Sdk};
use crate::support::{self, free_port, http::request, raw::Raw};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
}

/// A scratch directory of its own, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let d = std::env::temp_dir().join(format!(
            "mcp-edge-init-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn url(a: SocketAddr) -> String {
    format!("http://{a}/mcp")
}

fn init(urls: &[String], out: &Path, extra: &[&str]) -> Output {
    bin()
        .arg("init")
        .args(urls)
        .arg("-o")
        .arg(out)
        .args(["--timeout", "3s"])
        .args(extra)
        .output()
        .expect("run mcp-edge init")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn check(path: &Path) {
    let o = bin()
        .arg("check")
        .arg("--config")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "check refused the written config:\n{}\n{}",
        text(&o),
        std::fs::read_to_string(path).unwrap()
    );
}

/// `mcp-edge serve` on a written config, killed when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every name of a list through the federated endpoint, following its cursors.
fn list_all(mcp: SocketAddr, method: &str, member: &str) -> Vec<String> {
    // A served gateway's admin listener (whose catalog `serve` waits for) may be up a moment
    // before its MCP listener: wait for this one to accept.
    let up = support::eventually(Duration::from_secs(10), || {
        std::net::TcpStream::connect(mcp).is_ok()
    });
    assert!(up, "nothing accepts connections on {mcp}");
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..50 {
        let mut params = json!({});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let r = support::http::rpc(mcp, json!(1), method, params, &[]);
        let result = r.result();
        for t in result[member]
            .as_array()
            .unwrap_or_else(|| panic!("{method}: {result}"))
        {
            out.push(t["name"].as_str().unwrap().to_string());
        }
        cursor = result["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            return out;
        }
    }
    panic!("{method}: more than 50 pages");
}

/// The names a server lists itself (one page is enough for these servers).
fn own_tools(addr: SocketAddr) -> Vec<String> {
    list_all(addr, "tools/list", "tools")
}

fn serve(config: &Path, admin: SocketAddr, pools: &[&str]) -> Served {
    let child = bin()
        .arg("serve")
        .arg("--config")
        .arg(config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let served = Served(child);
    let fresh = support::eventually(Duration::from_secs(30), || {
        let c = std::panic::catch_unwind(|| request(admin, "GET", "/catalog", &[], b"").json());
        c.is_ok_and(|c: Value| pools.iter().all(|p| c["pools"][p]["state"] == "fresh"))
    });
    assert!(fresh, "the served config's catalogs never became fresh");
    served
}

/// Every tool name the Python SDK client lists at `url` (following its cursors).
fn python_client_tools(url: &str) -> Vec<String> {
    let code = "import asyncio, json, sys
from mcp import Client
async def main():
    async with Client(sys.argv[1], mode='2026-07-28', cache=None) as c:
        names, cursor = [], None
        for _ in range(50):
            page = await c.list_tools(cursor=cursor)
            names += [t.name for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        print(json.dumps(names))
asyncio.run(main())
";
    let out = Command::new(peers::dir().join("venv/bin/python"))
        .arg("-c")
        .arg(code)
        .arg(url)
        .output()
        .expect("run the Python SDK client");
    assert!(
        out.status.success(),
        "the Python SDK client failed: {}",
        text(&out)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn init_federates_the_reference_backend_and_both_sdk_servers() {
    if !peers::installed(Sdk::TypeScript) || !peers::installed(Sdk::Python) {
        return;
    }
    let reference =
        mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(2)).unwrap();
    let ts = Peer::start(Sdk::TypeScript, "ts-0");
    let py = Peer::start(Sdk::Python, "py-0");
    let closed = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let dir = Scratch::new();
    let file = dir.path().join("gateway.yaml");
    let (mcp, admin) = (free_port(), free_port());
    let (listen, admin_s) = (format!("127.0.0.1:{mcp}"), format!("127.0.0.1:{admin}"));
    let mut urls: Vec<String> = reference.addrs().iter().map(|a| url(*a)).collect();
    urls.extend([url(ts.addr), url(py.addr), url(closed)]);
    let o = init(&urls, &file, &["--listen", &listen, "--admin", &admin_s]);
    let report = text(&o);
    assert!(o.status.success(), "{report}");
    // What it found: both eras on the SDK servers, the lists and their hints, the unreachable.
    assert!(
        report.contains(&format!("{}: NOT REACHED: connection refused", url(closed))),
        "{report}"
    );
    assert!(report.contains("both eras"), "{report}");
    assert!(
        report.contains("ttlMs 60000 · cacheScope public"),
        "{report}"
    );
    assert!(report.contains("collision: tool \"greet\""), "{report}");
    let yaml = std::fs::read_to_string(&file).unwrap();
    assert!(yaml.contains("collisions: prefix"), "{yaml}");
    assert!(
        yaml.contains(&format!(
            "instances: [{}, {}]",
            reference.addrs()[0],
            reference.addrs()[1]
        )),
        "{yaml}"
    );
    check(&file);
    let cfg = mcp_edge::config::Config::load(&file).unwrap();
    let pools: Vec<&str> = cfg.pools.keys().map(String::as_str).collect();
    assert_eq!(pools.len(), 3, "one pool per server: {pools:?}");
    let _served = serve(&file, SocketAddr::from(([127, 0, 0, 1], admin)), &pools);
    let through = list_all(
        SocketAddr::from(([127, 0, 0, 1], mcp)),
        "tools/list",
        "tools",
    );
    let own = [
        (reference.addrs()[0], "mcp-edge-backend"),
        (ts.addr, "ts-peer"),
    ];
    let mut expected = Vec::new();
    for (addr, pool) in own {
        for t in own_tools(addr) {
            expected.push(format!("{pool}__{t}"));
        }
    }
    let py_pool = pools
        .iter()
        .find(|p| !["mcp-edge-backend", "ts-peer"].contains(p))
        .unwrap();
    for t in own_tools(py.addr) {
        expected.push(format!("{py_pool}__{t}"));
    }
    for t in &expected {
        assert!(
            through.contains(t),
            "{t} is not listed through the gateway: {through:?}"
        );
    }
    assert_eq!(through.len(), expected.len(), "{through:?}");
    // The official Python SDK client (2026-07-28) sees the same tools through it.
    let sdk = python_client_tools(&url(SocketAddr::from(([127, 0, 0, 1], mcp))));
    let (mut a, mut b) = (sdk.clone(), through.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "the Python SDK client's tools/list");
    // A call reaches the server that owns the name.
    let r = support::http::rpc(
        SocketAddr::from(([127, 0, 0, 1], mcp)),
        json!(2),
        "tools/call",
        json!({"name": "ts-peer__add", "arguments": {"a": 2, "b": 3}}),
        &[],
    );
    assert_eq!(support::http::first_text(&r.result()), "sum 5");
}

/// A one-answer HTTP server: every request gets `answer`.
fn answering(answer: &'static str) -> Raw {
    Raw::start(move |_, s| {
        let _ = s.write_all(answer.as_bytes());
        false
    })
}

#[test]
fn init_says_why_each_url_failed_and_writes_nothing_when_none_answers() {
    let closed = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let not_mcp = answering(
        "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot here\n",
    );
    let token = answering("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer resource_metadata=\"http://127.0.0.1:1/.well-known/oauth-protected-resource\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let dir = Scratch::new();
    let file = dir.path().join("none.yaml");
    let o = init(
        &[url(closed), url(not_mcp.server.addr), "ftp://x/mcp".into()],
        &file,
        &[],
    );
    let report = text(&o);
    assert_eq!(o.status.code(), Some(1), "{report}");
    assert!(!file.exists(), "nothing is written when no server answers");
    assert!(report.contains("connection refused"), "{report}");
    assert!(
        report.contains("not an MCP server: HTTP 404 not here"),
        "{report}"
    );
    assert!(
        report.contains("ftp://x/mcp: NOT REACHED: target scheme \"ftp\""),
        "{report}"
    );

    // A server that wants a token is reachable: its pool is written, left out of the endpoint.
    let o = init(&[url(token.server.addr), url(closed)], &file, &[]);
    let report = text(&o);
    assert!(o.status.success(), "{report}");
    assert!(
        report.contains("wants a bearer token") && report.contains("oauth-protected-resource"),
        "{report}"
    );
    let yaml = std::fs::read_to_string(&file).unwrap();
    assert!(
        yaml.contains("health: {check: tcp}") && yaml.contains("default_route:"),
        "{yaml}"
    );
    check(&file);

    // An existing file is kept unless --force.
    let o = init(&[url(token.server.addr)], &file, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), yaml);
    let o = init(&[url(token.server.addr)], &file, &["--force"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn init_on_one_reference_pool_keeps_names_as_served_and_serves() {
    let reference =
        mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(2)).unwrap();
    let dir = Scratch::new();
    let file = dir.path().join("gateway.yaml");
    let (mcp, admin) = (free_port(), free_port());
    let urls: Vec<String> = reference.addrs().iter().map(|a| url(*a)).collect();
    let o = init(
        &urls,
        &file,
        &[
            "--listen",
            &format!("127.0.0.1:{mcp}"),
            "--admin",
            &format!("127.0.0.1:{admin}"),
        ],
    );
    let report = text(&o);
    assert!(o.status.success(), "{report}");
    assert!(
        report.contains("mcp-edge-backend (2 instance(s))"),
        "{report}"
    );
    let yaml = std::fs::read_to_string(&file).unwrap();
    assert!(yaml.contains("collisions: priority"), "{yaml}");
    check(&file);
    let _served = serve(
        &file,
        SocketAddr::from(([127, 0, 0, 1], admin)),
        &["mcp-edge-backend"],
    );
    let through = list_all(
        SocketAddr::from(([127, 0, 0, 1], mcp)),
        "tools/list",
        "tools",
    );
    let mut own = own_tools(reference.addrs()[0]);
    let mut seen = through.clone();
    own.sort();
    seen.sort();
    assert_eq!(seen, own, "every tool, under its own name");
}

#[test]
fn init_says_a_2025_era_server_is_one_and_lists_its_tools_the_2025_way() {
    use crate::support::scripted::{Script, Scripted};
    // Answers initialize (2025-11-25) and its lists; server/discover is a method it lacks.
    let old = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => Script::Result(
            json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "old-server", "version": "0.9"}}),
            Duration::ZERO,
        ),
        "tools/list" => Script::Result(
            json!({"tools": [{"name": "old_tool", "inputSchema": {"type": "object"}}]}),
            Duration::ZERO,
        ),
        "notifications/initialized" => Script::Result(json!({}), Duration::ZERO),
        _ => Script::Error(-32601),
    });
    let dir = Scratch::new();
    let file = dir.path().join("gateway.yaml");
    let o = init(&[url(old.addr)], &file, &[]);
    let report = text(&o);
    assert!(o.status.success(), "{report}");
    assert!(report.contains("a 2025-era server"), "{report}");
    assert!(
        report.contains("tools: 1 in 1 page(s) (old_tool)"),
        "{report}"
    );
    let yaml = std::fs::read_to_string(&file).unwrap();
    assert!(
        yaml.contains("\n    era: 2025-11-25") && yaml.contains("health: {check: tcp}"),
        "{yaml}"
    );
    check(&file);
    // Its list was asked the 2025 way: the era's version header, no Mcp-Method.
    let heads = old.headers_of("tools/list");
    assert!(!heads.is_empty());
    assert_eq!(heads[0]["mcp-protocol-version"], "2025-11-25");
    assert!(heads[0].get("mcp-method").is_none());
}

/// A real 2025-era server (TypeScript SDK v1, sessions) beside a 2026 one: `init` writes its
/// `era:` and federates both, and the written config serves a 2026 client both servers' tools,
/// the 2025-era one's called over the gateway's session with it.
#[test]
fn init_federates_a_2025_era_server_beside_a_2026_one_and_the_config_serves_both() {
    use crate::bridge::{LegacyServer, ServerKind};
    if !ServerKind::TypeScriptV1.installed() {
        return;
    }
    let old = LegacyServer::start(ServerKind::TypeScriptV1, 0);
    let reference =
        mcp_edge::backend::Pool::start(mcp_edge::backend::PoolOptions::local(1)).unwrap();
    let dir = Scratch::new();
    let file = dir.path().join("gateway.yaml");
    let (mcp, admin) = (free_port(), free_port());
    let urls = [url(reference.addrs()[0]), url(old.addr)];
    let listen = format!("127.0.0.1:{mcp}");
    let admin_at = format!("127.0.0.1:{admin}");
    let o = init(&urls, &file, &["--listen", &listen, "--admin", &admin_at]);
    let report = text(&o);
    assert!(o.status.success(), "{report}");
    let yaml = std::fs::read_to_string(&file).unwrap();
    assert!(yaml.contains("\n    era: 2025-11-25"), "{yaml}");
    assert!(!yaml.contains("left out of this endpoint"), "{yaml}");
    check(&file);
    let _served = serve(&file, admin_at.parse().unwrap(), &[]);
    let mcp: SocketAddr = listen.parse().unwrap();
    let mut tools = Vec::new();
    let listed = support::eventually(Duration::from_secs(30), || {
        tools =
            std::panic::catch_unwind(|| list_all(mcp, "tools/list", "tools")).unwrap_or_default();
        tools.iter().any(|t| t.ends_with("confirm_deploy"))
            && tools.iter().any(|t| t.ends_with("echo"))
    });
    assert!(
        listed,
        "both servers' tools through the federated endpoint: {tools:?}"
    );
    let add = tools
        .iter()
        .find(|t| t.ends_with("add"))
        .expect("the 2025-era server's add");
    let r = support::http::call(
        mcp,
        7,
        add,
        json!({"a": 2, "b": 3}),
        json!({}),
        None,
        json!({}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        support::http::first_text(&r.result()).starts_with("5 (from"),
        "{}",
        r.text()
    );
}
