//! One request on its own connection, for the gateway's own calls to an instance (the
//! federation catalog, merged lists, merged listen streams): write the request, read the whole
//! response, bounded in size, or read it as it arrives ([`Streaming`]), with the same response
//! parser as the upstream leg ([`super::wire`]).

use bytes::BytesMut;
use pingora::http::ResponseHeader;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use std::sync::Arc;
use std::time::Duration;

use super::wire::{decode, parse_head, Decoded, Framing, Head};
use super::Pool;

/// The JSON and MCP headers of every 2026 POST the gateway sends on its own, but `Mcp-Method`
/// (which [`mcp_post_headers`] adds): one list for the bytes [`mcp_post`] writes and the parsed
/// head of a bridged leg (`journey::bridge::inside`).
pub(crate) const MCP_POST_CONSTANT: [(&str, &str); 3] = [
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
    (
        crate::mcp::header::PROTOCOL_VERSION,
        crate::mcp::PROTOCOL_VERSION,
    ),
];

/// The JSON and MCP headers of a 2026 POST of `method` the gateway sends on its own, in order.
pub(crate) fn mcp_post_headers(method: &str) -> [(&'static str, &str); 4] {
    let [a, b, c] = MCP_POST_CONSTANT;
    [a, b, c, (crate::mcp::header::METHOD, method)]
}

/// A whole MCP POST the gateway sends on its own (a health check, a catalog page, a bridged
/// request): the request line for `path`, `Host`, the JSON and MCP headers for `method`, `extra`
/// headers, `Connection: close` unless the connection is `kept` for the next request, and the
/// body with its `Content-Length`.
pub(crate) fn mcp_post(
    (path, host): (&str, &str),
    method: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    kept: bool,
) -> Vec<u8> {
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {host}\r\n");
    for (k, v) in mcp_post_headers(method).iter().chain(extra) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !kept {
        head.push_str("Connection: close\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

/// A connection the gateway's own calls use (plain TCP or TLS).
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {
    /// Whether an idle connection may carry another request: nothing has arrived on it since
    /// its last answer ended, not even its end. Bytes an idle connection received (a close, a
    /// TLS alert, or a server writing past its answer) would otherwise be read as the next
    /// request's answer; such a connection is dropped, whatever it held.
    fn still_open(&self) -> bool;
}

impl Stream for tokio::net::TcpStream {
    fn still_open(&self) -> bool {
        let mut one = [0u8; 1];
        matches!(self.try_read(&mut one), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

/// Looks at the TCP connection under TLS: a TLS connection idle between answers has nothing
/// to read either.
impl Stream for tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    fn still_open(&self) -> bool {
        self.get_ref().0.still_open()
    }
}

/// A response read as it arrives (an SSE stream): its head, then its body piece by piece. Sent
/// on a connection kept for reuse ([`Streaming::resume`], [`Streaming::keep_in`]), the
/// connection goes back to its pool when the body was read to its end and both sides keep it
/// open; otherwise it is closed with the response.
pub(crate) struct Streaming<S> {
    /// `None` once given back to the pool.
    stream: Option<S>,
    buf: BytesMut,
    framing: Framing,
    pub head: ResponseHeader,
    /// The server keeps the connection open after this response.
    keep_alive: bool,
    /// The body was read to its end.
    done: bool,
    /// Where the connection goes when the response is done: a pool, the peer's key in it and
    /// how long it may stay idle there.
    keep: Option<(Arc<Pool<S>>, u64, Duration)>,
}

/// Why a request sent on a kept connection got no response head.
enum Failed {
    /// The connection was closed before any byte came back: the server closed it while idle
    /// and never read the request, which may go out again on a new connection.
    Stale,
    Other(String),
}

impl<S: AsyncRead + AsyncWrite + Unpin> Streaming<S> {
    /// Send `request` on `stream` and read the response head.
    pub(crate) async fn start(stream: S, request: &[u8]) -> Result<Streaming<S>, String> {
        Self::send(stream, request).await.map_err(|f| match f {
            Failed::Stale => "the connection closed before a response head".into(),
            Failed::Other(e) => e,
        })
    }

    /// Send `request` on `stream`, a connection taken from a pool, and read the response head;
    /// `Ok(None)` when the server had closed it (nothing came back: send the request on a new
    /// connection).
    pub(crate) async fn resume(stream: S, request: &[u8]) -> Result<Option<Streaming<S>>, String> {
        match Self::send(stream, request).await {
            Ok(s) => Ok(Some(s)),
            Err(Failed::Stale) => Ok(None),
            Err(Failed::Other(e)) => Err(e),
        }
    }

    async fn send(mut stream: S, request: &[u8]) -> Result<Streaming<S>, Failed> {
        let gone = |e: &std::io::Error| {
            use std::io::ErrorKind::*;
            matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted)
        };
        if let Err(e) = stream.write_all(request).await {
            return Err(if gone(&e) {
                Failed::Stale
            } else {
                Failed::Other(format!("write: {e}"))
            });
        }
        let mut buf = BytesMut::with_capacity(8192);
        let head = loop {
            if let Some(head) =
                parse_head(&mut buf, false).map_err(|e| Failed::Other(e.to_string()))?
            {
                break head;
            }
            buf.reserve(8192);
            match stream.read_buf(&mut buf).await {
                Ok(0) if buf.is_empty() => return Err(Failed::Stale),
                Ok(0) => {
                    return Err(Failed::Other(
                        "the connection closed inside a response head".into(),
                    ))
                }
                Ok(_) => {}
                Err(e) if buf.is_empty() && gone(&e) => return Err(Failed::Stale),
                Err(e) => return Err(Failed::Other(format!("read: {e}"))),
            }
        };
        let Head {
            header,
            framing,
            keep_alive,
        } = head;
        Ok(Streaming {
            stream: Some(stream),
            buf,
            framing,
            head: header,
            keep_alive,
            done: false,
            keep: None,
        })
    }

    /// Give the connection back to `pool` (under `key`, idle at most `idle`) once the response
    /// is done, if the connection may carry another request then.
    pub(crate) fn keep_in(mut self, pool: &Arc<Pool<S>>, key: u64, idle: Duration) -> Self {
        self.keep = Some((pool.clone(), key, idle));
        self
    }

    /// The next piece of the body (`None`: it ended).
    pub(crate) async fn next(&mut self) -> Result<Option<bytes::Bytes>, String> {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                return Ok(None);
            };
            match decode(&mut self.buf, &mut self.framing).map_err(|e| e.to_string())? {
                Decoded::Data(d) => return Ok(Some(d)),
                Decoded::Done => {
                    self.done = true;
                    return Ok(None);
                }
                Decoded::NeedMore => {
                    if read_more(stream, &mut self.buf).await? == 0 {
                        return match self.framing {
                            Framing::UntilClose => Ok(None),
                            _ => Err("the connection closed inside the response body".into()),
                        };
                    }
                }
            }
        }
    }
}

/// The longest the rest of a kept connection's answer is read after its reader let it go
/// ([`Streaming::finish`]), and the most bytes read then.
const FINISH_WITHIN: Duration = Duration::from_secs(1);
const FINISH_MAX: usize = 1024 * 1024;

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Streaming<S> {
    /// For an answer its reader lets go before its end: read what has already arrived, so the
    /// connection is kept when the end came with it. With `wait` (the reader has what it wanted:
    /// the response, before the end of the event stream it came in), the rest is read in the
    /// background too (bounded in time and bytes); without, or past those bounds, the
    /// connection closes with the answer.
    pub(crate) fn finish(&mut self, wait: bool) {
        if self.done || self.keep.is_none() || !self.keep_alive {
            return;
        }
        // Dropped outside a runtime (at shutdown): nothing to read it with; it closes.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for _ in 0..4 {
            match futures::FutureExt::now_or_never(self.next()) {
                Some(Ok(Some(_))) => continue,
                Some(Ok(None)) => return,
                _ => break,
            }
        }
        if !wait {
            return;
        }
        let (Some(stream), Some(keep)) = (self.stream.take(), self.keep.take()) else {
            return;
        };
        let buf = std::mem::take(&mut self.buf);
        let framing = self.framing;
        runtime.spawn(async move {
            let rest = drain(stream, buf, framing);
            if let Ok(Some(stream)) = tokio::time::timeout(FINISH_WITHIN, rest).await {
                let (pool, key, idle) = keep;
                pool.put(key, stream, Some(idle));
            }
        });
    }
}

/// Read a body to its end and give back its connection (`None`: it did not end cleanly, or was
/// larger than [`FINISH_MAX`]).
async fn drain<S: AsyncRead + Unpin>(
    mut stream: S,
    mut buf: BytesMut,
    mut framing: Framing,
) -> Option<S> {
    let mut read = 0;
    loop {
        match decode(&mut buf, &mut framing).ok()? {
            Decoded::Data(d) => {
                read += d.len();
                if read > FINISH_MAX {
                    return None;
                }
            }
            Decoded::Done => return buf.is_empty().then_some(stream),
            Decoded::NeedMore => {
                if read_more(&mut stream, &mut buf).await.ok()? == 0 {
                    return None;
                }
            }
        }
    }
}

/// A connection whose response was read to its end, with nothing after it, goes back to its
/// pool.
impl<S> Drop for Streaming<S> {
    fn drop(&mut self) {
        if !(self.done && self.keep_alive && self.buf.is_empty()) {
            return;
        }
        if let (Some((pool, key, idle)), Some(stream)) = (self.keep.take(), self.stream.take()) {
            pool.put(key, stream, Some(idle));
        }
    }
}

/// Send `request` (a whole HTTP/1.1 request, `Connection: close`) on `stream` and read the
/// response: its head and body (decoded), at most `max` body bytes.
pub(crate) async fn exchange<S>(
    mut stream: S,
    request: &[u8],
    max: usize,
) -> Result<(ResponseHeader, Vec<u8>), String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream
        .write_all(request)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = BytesMut::with_capacity(8192);
    let head = loop {
        if let Some(head) = parse_head(&mut buf, false).map_err(|e| e.to_string())? {
            break head;
        }
        if read_more(&mut stream, &mut buf).await? == 0 {
            return Err("the connection closed before a response head".into());
        }
    };
    let mut framing = head.framing;
    let mut body = Vec::new();
    loop {
        match decode(&mut buf, &mut framing).map_err(|e| e.to_string())? {
            Decoded::Data(d) => {
                if body.len() + d.len() > max {
                    return Err(format!("the response is larger than {max} bytes"));
                }
                body.extend_from_slice(&d);
            }
            Decoded::Done => return Ok((head.header, body)),
            Decoded::NeedMore => {
                if read_more(&mut stream, &mut buf).await? == 0 {
                    return match framing {
                        Framing::UntilClose => Ok((head.header, body)),
                        _ => Err("the connection closed inside the response body".into()),
                    };
                }
            }
        }
    }
}

async fn read_more<S: AsyncRead + Unpin>(s: &mut S, buf: &mut BytesMut) -> Result<usize, String> {
    buf.reserve(8192);
    s.read_buf(buf).await.map_err(|e| format!("read: {e}"))
}
