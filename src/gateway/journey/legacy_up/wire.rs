//! The wire to a 2025-era instance: its requests (with the session, the legacy version header
//! and the headers the gateway sends upstream), `initialize` + `notifications/initialized` to
//! open a session, the client's answer to a question, the cancellation of a call, `DELETE`.
//! POSTs go on keep-alive connections the pool keeps (`PoolPeers::start`: over TLS for a TLS
//! pool), taken back once their answer is read to its end, so a call costs no new connection; a
//! paused call holds its own until it ends. The standalone stream and `DELETE` go on their own
//! (`Connection: close`).

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

use crate::gateway::stages::bridge::messages::Messages;
use crate::gateway::transport::upstream_h1::oneshot::{Stream, Streaming};
use crate::gateway::transport::upstream_tls::PoolPeers;
use crate::mcp::legacy::SESSION_ID;

/// Where and how to reach one legacy instance.
#[derive(Clone)]
pub(crate) struct Up {
    pub addr: SocketAddr,
    /// The instance as the pool lists it (`host:port`: TLS's server name) and the pool's way to
    /// it (plain TCP, or TLS with the pool's trust and client certificate).
    pub instance: String,
    pub peers: PoolPeers,
    pub path: String,
    pub version: &'static str,
    /// Headers sent as they are (the gateway's upstream credential or the caller's token, the
    /// identity headers it asserts, the trace context).
    pub carry: Vec<(String, String)>,
    pub connect: Duration,
    pub read: Duration,
    /// How long a connection is kept idle for the next request (`timeouts.upstream_idle`).
    pub idle: Duration,
    /// `legacy_connections_total`, counting the connections of the POSTs.
    pub counted: prometheus::IntCounterVec,
}

impl Up {
    fn request(&self, method: &str, session: Option<&str>, body: &[u8]) -> Vec<u8> {
        // Only a POST's answer ends on its own; the others close their connection.
        let connection = if method == "POST" {
            ""
        } else {
            "Connection: close\r\n"
        };
        let mut head = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {}\r\n",
            self.path, self.addr, self.version
        );
        if !body.is_empty() {
            head.push_str("Content-Type: application/json\r\n");
        }
        if let Some(s) = session {
            head.push_str(&format!("{SESSION_ID}: {s}\r\n"));
        }
        for (k, v) in &self.carry {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!(
            "{connection}Content-Length: {}\r\n\r\n",
            body.len()
        ));
        let mut out = head.into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// A connection to the instance (over TLS for a TLS pool), within the connect timeout.
    async fn connection(&self) -> Result<Box<dyn Stream>, String> {
        tokio::time::timeout(self.connect, self.peers.connect(self.addr, &self.instance))
            .await
            .map_err(|_| format!("connecting to {} timed out", self.addr))?
    }

    /// Send a POST and read its answer's head: its messages follow.
    pub(crate) async fn post(
        &self,
        session: Option<&str>,
        body: &[u8],
    ) -> Result<Messages, String> {
        let req = self.request("POST", session, body);
        let start = self
            .peers
            .start((self.addr, &self.instance), &req, (self.connect, self.idle));
        let (started, kept) = tokio::time::timeout(self.read, start)
            .await
            .map_err(|_| format!("{} sent no answer within {:?}", self.addr, self.read))??;
        let how = if kept { "kept" } else { "new" };
        self.counted.with_label_values(&["server", how]).inc();
        Ok(Messages::new(started))
    }

    /// `initialize` as the gateway's client: the session id the server gave (if any) and its
    /// result.
    async fn open(&self) -> Result<(Option<String>, Value), String> {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": self.version,
            "capabilities": {"elicitation": {}, "sampling": {}, "roots": {"listChanged": false}},
            "clientInfo": {"name": "mcp-edge", "version": env!("CARGO_PKG_VERSION")}}});
        let mut m = self.post(None, body.to_string().as_bytes()).await?;
        if m.status != 200 {
            return Err(format!("initialize answered HTTP {}", m.status));
        }
        let sid = m.header(SESSION_ID).map(str::to_owned);
        loop {
            match m.next().await? {
                Some(v) if v.get("result").is_some() => return Ok((sid, v["result"].clone())),
                Some(v) if v.get("error").is_some() => {
                    return Err(format!("initialize refused: {}", v["error"]))
                }
                Some(_) => continue,
                None => return Err("initialize: no response".into()),
            }
        }
    }

    /// Whether the instance answers a 2025-era `initialize`, and with a session id (closed
    /// again at once): the era check at start.
    pub(crate) async fn answers_initialize(&self) -> Result<bool, String> {
        let (sid, _) = self.open().await?;
        if let Some(s) = &sid {
            self.delete(s).await;
        }
        Ok(sid.is_some())
    }

    /// Open a session: `initialize` as the gateway's client, then `notifications/initialized`.
    /// The session id and the server's `initialize` result.
    pub(crate) async fn initialize(&self) -> Result<(String, Value), String> {
        let (sid, result) = self.open().await?;
        let sid = sid.ok_or("initialize answered without Mcp-Session-Id (not a Streamable HTTP server with sessions)")?;
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(Some(&sid), done.to_string().as_bytes()).await?;
        Ok((sid, result))
    }

    /// Send a message that needs no answer (the client's response to a question, a
    /// cancellation); the HTTP status.
    pub(crate) async fn tell(&self, session: &str, message: &Value) -> Result<u16, String> {
        let m = self
            .post(Some(session), message.to_string().as_bytes())
            .await?;
        Ok(m.status)
    }

    /// Open the session's standalone stream (`GET`): its messages, as they come.
    pub(crate) async fn listen(&self, session: &str) -> Result<Messages, String> {
        let req = self.request("GET", Some(session), b"");
        let stream = self.connection().await?;
        let started = tokio::time::timeout(self.read, Streaming::start(stream, &req))
            .await
            .map_err(|_| format!("{} sent no answer within {:?}", self.addr, self.read))??;
        Ok(Messages::new(started))
    }

    /// `DELETE` a session (best effort: the server may have dropped it already).
    pub(crate) async fn delete(&self, session: &str) {
        let req = self.request("DELETE", Some(session), b"");
        if let Ok(s) = self.connection().await {
            let _ = tokio::time::timeout(self.read, Streaming::start(s, &req)).await;
        }
    }
}
