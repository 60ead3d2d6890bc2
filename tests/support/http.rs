//! The tests' HTTP client: a tiny blocking HTTP/1.1 client over `std::net::TcpStream` (so
//! tests control every header byte), JSON-RPC request builders for MCP 2026-07-28, and an
//! incremental SSE reader.
//!
//! Every request sends `Connection: close` and reads until the server closes, with a read
//! timeout so a hung server fails the test instead of hanging it.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The Tasks helpers live in `support::tasks`; these names stay for existing callers.
pub use super::tasks::{task_rpc, tasks_caps, wait_task};

pub const VERSION: &str = "2026-07-28";
const TIMEOUT: Duration = Duration::from_secs(10);

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// Header names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; for an SSE body, the last message (the final response).
    pub fn json(&self) -> Value {
        if self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            return self
                .sse_messages()
                .pop()
                .unwrap_or_else(|| panic!("empty SSE body: {}", self.text()));
        }
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }

    /// The JSON messages of an SSE body, in order (read with the shared `mcp::sse` parser).
    pub fn sse_messages(&self) -> Vec<Value> {
        mcp_edge::mcp::sse::events(&self.body)
            .iter()
            .map(|e| serde_json::from_slice(&e.data).expect("SSE data is JSON"))
            .collect()
    }

    /// `error.code` of a JSON-RPC error body.
    pub fn code(&self) -> Option<i64> {
        self.json()["error"]["code"].as_i64()
    }

    /// `error.code` of a body that must be a JSON-RPC error (panics with the body otherwise).
    pub fn error_code(&self) -> i64 {
        self.code().unwrap_or_else(|| {
            panic!(
                "expected a JSON-RPC error, got HTTP {} {}",
                self.status,
                self.text()
            )
        })
    }

    /// `result` of a JSON-RPC success body (panics with the body otherwise).
    pub fn result(&self) -> Value {
        let v = self.json();
        assert!(
            v.get("result").is_some(),
            "expected a result, got HTTP {} {v}",
            self.status
        );
        v["result"].clone()
    }
}

/// Send raw bytes, read one response.
pub fn raw(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(request).expect("write request");
    read_reply(&mut BufReader::new(s)).expect("read response")
}

/// Send raw bytes from a socket bound to `from` (another loopback address, 127.0.0.2 and up,
/// is another client), read one response.
pub fn raw_from(from: std::net::IpAddr, addr: SocketAddr, request: &[u8]) -> Reply {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::new(from, 0))?;
            socket.connect(addr).await?.into_std()
        })
        .expect("connect from a chosen address");
    s.set_nonblocking(false).unwrap();
    let mut s = s;
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(request).expect("write request");
    read_reply(&mut BufReader::new(s)).expect("read response")
}

/// POST /mcp with exactly these headers and body, from `from`.
pub fn post_from(
    from: std::net::IpAddr,
    addr: SocketAddr,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    raw_from(
        from,
        addr,
        &build(addr, "POST", "/mcp", headers, body.as_bytes()),
    )
}

/// Read one response from a connection (interim 1xx responses are skipped). Without a length
/// or chunking, the body runs to the end of the connection.
pub fn read_reply(r: &mut impl BufRead) -> std::io::Result<Reply> {
    let (status, headers) = loop {
        let (status, headers) = read_head(r)?;
        if !(100..200).contains(&status) {
            break (status, headers);
        }
    };
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.parse::<usize>().expect("numeric Content-Length"));
    let mut body = Vec::new();
    if chunked {
        while let Some(chunk) = read_chunk(r) {
            body.extend_from_slice(&chunk);
        }
    } else if let Some(len) = length {
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    } else if !matches!(status, 202 | 204 | 304) {
        r.read_to_end(&mut body)?;
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn read_head(r: &mut impl BufRead) -> std::io::Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed before a response",
        ));
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l
            .split_once(':')
            .ok_or_else(|| std::io::Error::other(format!("bad header line {l:?}")))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    Ok((status, headers))
}

/// One chunk of a chunked body; `None` at the last chunk or EOF.
fn read_chunk(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
    if size == 0 {
        return None;
    }
    let mut buf = vec![0; size + 2];
    r.read_exact(&mut buf).ok()?;
    buf.truncate(size);
    Some(buf)
}

/// An HTTP request with arbitrary method, path, headers and body (adds Host, Content-Length and
/// Connection: close).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    raw(addr, &build(addr, method, path, headers, body))
}

fn build(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut out = req.into_bytes();
    out.extend_from_slice(body);
    out
}

/// Borrow owned header pairs as `(&str, &str)`.
pub fn hdrs(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// POST /mcp with exactly these headers and body.
pub fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> Reply {
    request(addr, "POST", "/mcp", headers, body.as_bytes())
}

/// The `_meta` of a 2026-07-28 request with these client capabilities.
pub fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-edge-tests", "version": "0"},
    })
}

/// The correct headers for `method` (and `Mcp-Name` when the method needs it).
pub fn good_headers(method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".into(), "application/json".into()),
        (
            "Accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("MCP-Protocol-Version".into(), VERSION.into()),
        ("Mcp-Method".into(), method.into()),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name".into(), n.into()));
    }
    h
}

/// A well-formed request: correct headers plus `extra` (which may override by name), `params`
/// with `_meta` (caps `{}`) added when missing.
pub fn rpc(
    addr: SocketAddr,
    id: Value,
    method: &str,
    mut params: Value,
    extra: &[(&str, &str)],
) -> Reply {
    if params.get("_meta").is_none() {
        params["_meta"] = meta(json!({}));
    }
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let name = if matches!(method, "tools/call" | "prompts/get" | "resources/read") {
        name
    } else {
        None
    };
    let mut headers = good_headers(method, name.as_deref());
    for (k, v) in extra {
        headers.retain(|(hk, _)| !hk.eq_ignore_ascii_case(k));
        headers.push((k.to_string(), v.to_string()));
    }
    headers.retain(|(_, v)| v != "<omit>");
    let hs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    post(addr, &hs, &body.to_string())
}

/// tools/call `name` with `args`, client capabilities `caps`, as `user` (bearer token) if any,
/// plus MRTR fields (`inputResponses`, `requestState`) from `extra_params`.
pub fn call(
    addr: SocketAddr,
    id: i64,
    name: &str,
    args: Value,
    caps: Value,
    user: Option<&str>,
    extra_params: Value,
) -> Reply {
    let mut params = json!({"name": name, "arguments": args, "_meta": meta(caps)});
    if let Value::Object(m) = extra_params {
        for (k, v) in m {
            params[k] = v;
        }
    }
    let auth = user.map(|u| format!("Bearer {u}"));
    let mut extra: Vec<(&str, &str)> = Vec::new();
    if let Some(a) = &auth {
        extra.push(("Authorization", a));
    }
    rpc(addr, json!(id), "tools/call", params, &extra)
}

/// The text of the first content block of a tools/call result.
pub fn first_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
        .to_owned()
}

/// The instance id a result names in `_meta`.
pub fn instance_of(result: &Value) -> String {
    result["_meta"]["io.mcp-edge/instance"]
        .as_str()
        .unwrap_or_else(|| panic!("no instance in {result}"))
        .to_owned()
}

/// An open SSE response read event by event.
pub struct SseStream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    pending: Vec<u8>,
}

impl SseStream {
    /// POST /mcp and keep the response open.
    pub fn open(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> SseStream {
        SseStream::send(addr, &build(addr, "POST", "/mcp", headers, body.as_bytes()))
    }

    /// POST `path` and keep the response open.
    pub fn open_at(
        addr: SocketAddr,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> SseStream {
        SseStream::send(addr, &build(addr, "POST", path, headers, body.as_bytes()))
    }

    /// Send this request (as it is: `open`'s adds `Connection: close`) and keep the response
    /// open.
    pub fn send(addr: SocketAddr, request: &[u8]) -> SseStream {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        s.write_all(request).unwrap();
        let mut reader = BufReader::new(s);
        let (status, headers) = read_head(&mut reader).expect("read response head");
        SseStream {
            status,
            headers,
            reader,
            pending: Vec::new(),
        }
    }

    /// The connection, for what comes after the stream (read its end with `next_message`
    /// returning `None` first).
    #[allow(dead_code)]
    pub fn connection(&mut self) -> &mut BufReader<TcpStream> {
        &mut self.reader
    }

    /// The next `data:` message, or `None` when the stream ended (or stayed silent for 10 s).
    pub fn next_message(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.pending.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                if let Some(d) = text.lines().find_map(|l| l.strip_prefix("data:")) {
                    return Some(serde_json::from_str(d.trim()).expect("SSE data is JSON"));
                }
                continue; // a comment (keep-alive)
            }
            let chunk = read_chunk(&mut self.reader)?;
            self.pending.extend_from_slice(&chunk);
        }
    }
}

/// Wait on an idle keep-alive connection until the gateway closes it: no byte arrives, and the
/// close comes no sooner than `at_least` and before `before`.
#[allow(dead_code)]
pub fn assert_closed_when_idle(r: &mut impl Read, at_least: Duration, before: Duration) {
    let idle_since = Instant::now();
    let mut buf = [0u8; 16];
    let n = r.read(&mut buf).unwrap_or(0);
    assert_eq!(
        n, 0,
        "the idle connection got bytes instead of being closed"
    );
    let idle = idle_since.elapsed();
    assert!(idle >= at_least && idle < before, "{idle:?}");
}
