//! Requests one replica sends on to another: a client's answer or retry for a call another
//! replica holds, sent as it came plus a marker header that stops it going further.

use std::net::SocketAddr;
use std::time::Duration;

use super::hop::{post, Answer};

/// A replica named in a sealed token (`http://host:port`), as an address.
pub(crate) fn replica_addr(replica: &str) -> Option<SocketAddr> {
    let a = replica.strip_prefix("http://")?;
    a.parse()
        .ok()
        .or_else(|| std::net::ToSocketAddrs::to_socket_addrs(a).ok()?.next())
}

/// Send a client's POST on to the replica that holds its call, as it came (`headers`, `body`)
/// plus `marker` (the header that stops it going further), and write that replica's answer to
/// the client; `Err(message)` when the replica cannot be reached (the caller refuses).
pub(crate) async fn send_on<'a>(
    session: &mut pingora::proxy::Session,
    (replica, marker): (&str, &str),
    (path, headers): (&str, impl Iterator<Item = (&'a str, &'a str)>),
    body: &[u8],
    times: (Duration, Duration),
) -> pingora::Result<Result<bool, String>> {
    let ans = match post_on((replica, marker), (path, headers), body, times).await {
        Ok(a) => a,
        Err(e) => return Ok(Err(e)),
    };
    let ct = ans.content_type.as_deref().unwrap_or("application/json");
    let mut resp = pingora::http::ResponseHeader::build(ans.status, Some(2))?;
    resp.insert_header(http::header::CONTENT_TYPE, ct)?;
    resp.insert_header(http::header::CONTENT_LENGTH, ans.body.len().to_string())?;
    session.write_response_header(Box::new(resp), false).await?;
    let body = bytes::Bytes::from(ans.body);
    session.write_response_body(Some(body), true).await?;
    Ok(Ok(true))
}

/// [`send_on`]'s POST to another replica, its answer read whole.
pub(crate) async fn post_on<'a>(
    (replica, marker): (&str, &str),
    (path, headers): (&str, impl Iterator<Item = (&'a str, &'a str)>),
    body: &[u8],
    (connect, read): (Duration, Duration),
) -> Result<Answer, String> {
    let Some(target) = replica_addr(replica) else {
        return Err(format!("{replica} cannot be addressed"));
    };
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {target}\r\n{marker}: 1\r\n");
    for (k, v) in headers {
        let hop_by_hop = [
            "host",
            "content-length",
            "connection",
            "transfer-encoding",
            "expect",
        ];
        if !hop_by_hop.iter().any(|h| k.eq_ignore_ascii_case(h)) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    head.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    post(target, &bytes, None, (connect, read))
        .await
        .map_err(|e| format!("{replica} could not be reached: {e}"))
}
