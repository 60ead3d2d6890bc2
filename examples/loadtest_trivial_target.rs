//! A trivial HTTP target for measuring the load tester's own speed: answers every request with a
//! fixed `complete` JSON-RPC result (the request's numeric id copied in, so the tester counts it
//! as a success). Not an MCP server.
//!
//! `cargo run --release --example loadtest_trivial_target -- 127.0.0.1:9090 30`
//! (address, then how many seconds to live; it exits by itself).

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

/// The digits after the first `"id":` of a body, or `1`.
fn id_of(body: &[u8]) -> &[u8] {
    const KEY: &[u8] = b"\"id\":";
    let Some(at) = body.windows(KEY.len()).position(|w| w == KEY) else {
        return b"1";
    };
    let rest = &body[at + KEY.len()..];
    let n = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 {
        b"1"
    } else {
        &rest[..n]
    }
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id_of(&body));
    out.extend_from_slice(br#","result":{"resultType":"complete","content":[]}}"#);
    let mut r = Response::new(Full::new(Bytes::from(out)));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:9090".into());
    let secs: u64 = args.next().map_or(Ok(60), |s| s.parse())?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!(
        "trivial target on http://{} for {secs}s",
        listener.local_addr()?
    );
    let serve = async {
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(answer);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
        #[allow(unreachable_code)]
        Ok::<(), anyhow::Error>(())
    };
    tokio::select! {
        r = serve => r,
        _ = tokio::time::sleep(Duration::from_secs(secs)) => Ok(()),
    }
}
