//! Requests one replica sends on to another: a client's answer or retry for a call another
//! replica holds, sent as it came plus a marker header that stops it going further; and a
//! message every other replica of `legacy.replicas` is told of ([`tell_others`]).

use crate::gateway::stages::answer::respond_as;
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
    let ct = ans
        .content_type
        .as_deref()
        .unwrap_or(crate::mcp::media::JSON);
    respond_as(session, ans.status, Some(ct), ans.body, &[]).await?;
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

/// Tell every other replica of `legacy.replicas` of a session's message `msg` (a cancellation
/// that ended no call here, a change of its resource subscriptions), as the client POSTed it
/// with its session id and `Authorization` (each replica checks the session again, and sends
/// it no further); done when each answered or failed. `None`: there are none to tell, or
/// another replica sent this message here.
pub(super) fn tell_others(
    bridge: &super::Bridge,
    input: &super::Input,
    msg: &serde_json::Value,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    use crate::mcp::legacy::SESSION_ID;
    let others: Vec<String> = bridge
        .replicas
        .iter()
        .filter(|r| **r != bridge.advertise)
        .cloned()
        .collect();
    if input.hopped || others.is_empty() {
        return None;
    }
    let body = serde_json::to_vec(msg).expect("a JSON value serializes");
    let (path, sid, auth) = (
        input.path.clone(),
        input.session_id.clone(),
        input.authorization.clone(),
    );
    let times = bridge.hop_times;
    Some(async move {
        let sends = others.iter().map(|replica| {
            let headers = [
                ("content-type", Some("application/json")),
                (SESSION_ID, sid.as_deref()),
                ("authorization", auth.as_deref()),
            ];
            let headers = headers.into_iter().filter_map(|(k, v)| Some((k, v?)));
            let (marker, path, body) = (super::HOPPED, &path, &body);
            async move {
                let sent = post_on((replica, marker), (path, headers), body, times).await;
                if let Err(e) = sent {
                    tracing::debug!("a session's message for another replica: {e}");
                }
            }
        });
        futures::future::join_all(sends).await;
    })
}
