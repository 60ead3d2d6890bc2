//! One request on its own connection, for the gateway's own calls to an instance (the
//! federation catalog, merged lists): write the request, read the whole response, bounded in
//! size, with the same response parser as the upstream leg ([`super::wire`]).

use bytes::BytesMut;
use pingora::http::ResponseHeader;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::wire::{decode, parse_head, Decoded};

/// Send `request` (a whole HTTP/1.1 request, `Connection: close`) on `stream` and read the
/// response: its head and body (decoded), at most `max` body bytes.
pub async fn exchange<S>(
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
                        super::wire::Framing::UntilClose => Ok((head.header, body)),
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
