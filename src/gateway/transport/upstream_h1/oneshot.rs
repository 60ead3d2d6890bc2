//! One request on its own connection, for the gateway's own calls to an instance (the
//! federation catalog, merged lists, merged listen streams): write the request, read the whole
//! response, bounded in size, or read it as it arrives ([`Streaming`]), with the same response
//! parser as the upstream leg ([`super::wire`]).

use bytes::BytesMut;
use pingora::http::ResponseHeader;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::wire::{decode, parse_head, Decoded, Framing, Head};

/// A whole MCP POST the gateway sends on its own (a health check, a catalog page): the request
/// line for `path`, `Host`, the JSON and MCP headers for `method`, `extra` headers, `Connection:
/// close` and the body with its `Content-Length`.
pub(crate) fn mcp_post(
    path: &str,
    host: &str,
    method: &str,
    extra: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    use crate::mcp::{header, PROTOCOL_VERSION};
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{}: {PROTOCOL_VERSION}\r\n{}: {method}\r\n",
        header::PROTOCOL_VERSION,
        header::METHOD,
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

/// A connection the gateway's own calls use (plain TCP or TLS).
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A response read as it arrives (an SSE stream): its head, then its body piece by piece.
pub(crate) struct Streaming<S> {
    stream: S,
    buf: BytesMut,
    framing: Framing,
    pub head: ResponseHeader,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Streaming<S> {
    /// Send `request` on `stream` and read the response head.
    pub(crate) async fn start(mut stream: S, request: &[u8]) -> Result<Streaming<S>, String> {
        stream
            .write_all(request)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut buf = BytesMut::with_capacity(8192);
        let Head {
            header, framing, ..
        } = loop {
            if let Some(head) = parse_head(&mut buf, false).map_err(|e| e.to_string())? {
                break head;
            }
            if read_more(&mut stream, &mut buf).await? == 0 {
                return Err("the connection closed before a response head".into());
            }
        };
        Ok(Streaming {
            stream,
            buf,
            framing,
            head: header,
        })
    }

    /// The next piece of the body (`None`: it ended).
    pub(crate) async fn next(&mut self) -> Result<Option<bytes::Bytes>, String> {
        loop {
            match decode(&mut self.buf, &mut self.framing).map_err(|e| e.to_string())? {
                Decoded::Data(d) => return Ok(Some(d)),
                Decoded::Done => return Ok(None),
                Decoded::NeedMore => {
                    if read_more(&mut self.stream, &mut self.buf).await? == 0 {
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
