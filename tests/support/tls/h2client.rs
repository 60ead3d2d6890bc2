//! A small HTTP/2 client on the `h2` crate, over TLS (ALPN h2) or plain TCP (h2c with prior
//! knowledge). Unlike curl it can send duplicate fields and reset a stream.

use bytes::Bytes;
use h2::client::SendRequest;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// An h2 connection over TLS; the connection task runs on the current runtime.
pub async fn connect_tls(
    addr: SocketAddr,
    sni: &str,
    cfg: Arc<rustls::ClientConfig>,
) -> SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from(sni.to_string()).unwrap();
    let tls = tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "ALPN must pick h2"
    );
    let (send, conn) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// An h2c (prior knowledge) connection.
pub async fn connect_plain(addr: SocketAddr) -> SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// A POST /mcp request with these header fields, repeated names kept.
pub fn request(authority: &str, scheme: &str, headers: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::builder()
        .method("POST")
        .uri(format!("{scheme}://{authority}/mcp"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap()
}

/// One exchange; (status, headers, body).
pub async fn exchange(
    send: &mut SendRequest<Bytes>,
    req: http::Request<()>,
    body: &[u8],
) -> (u16, http::HeaderMap, Bytes) {
    let mut send = send.clone().ready().await.unwrap();
    let (resp, mut stream) = send.send_request(req, false).unwrap();
    // A server that answers before reading the body (a refusal on the headers) may reset the
    // stream first: the answer is what counts.
    let _ = stream.send_data(Bytes::copy_from_slice(body), true);
    let resp = tokio::time::timeout(Duration::from_secs(20), resp)
        .await
        .expect("an answer within 20 s")
        .unwrap();
    let (parts, mut body) = resp.into_parts();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    (parts.status.as_u16(), parts.headers, Bytes::from(out))
}
