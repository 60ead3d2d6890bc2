//! The gateway's own keep-alive requests ([`oneshot::Streaming`] with a [`Pool`]), over real
//! loopback connections to a small HTTP/1.1 server that counts the connections it accepts.

use super::oneshot::{Stream, Streaming};
use super::Pool;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the test server answers each request.
#[derive(Clone, Copy)]
enum Serve {
    /// `ok` with its length; the connection stays open.
    KeepOpen,
    /// `ok` with its length, then the server closes the connection without saying so.
    CloseSilently,
    /// `ok` with its length and `Connection: close`.
    SayClose,
    /// A body of 64 KiB.
    Big,
    /// A chunked `ok`, its last chunk 50 ms later (an event stream that ends after its
    /// response).
    LateEnd,
    /// `ok` with its length, then 20 ms later a second answer nobody asked for.
    Trailing,
    /// Closes each connection at once, reading nothing.
    CloseAtOnce,
}

/// A server on loopback and the number of connections it accepted.
async fn server(serve: Serve) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            if matches!(serve, Serve::CloseAtOnce) {
                continue;
            }
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let mut chunk = [0u8; 1024];
                    let n = match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    buf.drain(..end + 4);
                    let answer = match serve {
                        Serve::SayClose => {
                            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
                                .to_string()
                        }
                        Serve::Big => format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n\r\n{}",
                            "x".repeat(65536)
                        ),
                        _ => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_string(),
                    };
                    if matches!(serve, Serve::LateEnd) {
                        let first =
                            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n";
                        if s.write_all(first.as_bytes()).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        if s.write_all(b"0\r\n\r\n").await.is_err() {
                            return;
                        }
                        continue;
                    }
                    if s.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                    if matches!(serve, Serve::CloseSilently | Serve::SayClose) {
                        return;
                    }
                    if matches!(serve, Serve::Trailing) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let evil = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil";
                        let _ = s.write_all(evil.as_bytes()).await;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
const IDLE: Duration = Duration::from_secs(30);

/// One request: on a kept connection when the pool has a live one, else on a new one; the
/// body read to its end. Whether the connection was a kept one ([`answer`]: and the body).
/// The pool holds boxed connections, as a legacy pool's do (plain or TLS).
async fn request(pool: &Arc<Pool<Box<dyn Stream>>>, addr: SocketAddr) -> bool {
    answer(pool, addr).await.0
}

async fn answer(pool: &Arc<Pool<Box<dyn Stream>>>, addr: SocketAddr) -> (bool, Vec<u8>) {
    let mut kept = false;
    let mut answer = None;
    while let Some(conn) = pool.take(1) {
        if let Some(s) = Streaming::resume(conn, REQUEST).await.unwrap() {
            answer = Some(s);
            kept = true;
            break;
        }
    }
    let mut answer = match answer {
        Some(a) => a.keep_in(pool, 1, IDLE),
        None => started(addr, pool).await,
    };
    assert_eq!(answer.head.status.as_u16(), 200);
    let mut body = Vec::new();
    while let Some(piece) = answer.next().await.unwrap() {
        body.extend_from_slice(&piece);
    }
    (kept, body)
}

/// A connection as a pool of its kind holds it: plain, as the hop's, or boxed, as a legacy
/// pool's.
trait Conn: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Sized {
    fn of(tcp: TcpStream) -> Self;
}

impl Conn for TcpStream {
    fn of(tcp: TcpStream) -> Self {
        tcp
    }
}

impl Conn for Box<dyn Stream> {
    fn of(tcp: TcpStream) -> Self {
        Box::new(tcp)
    }
}

/// A request on a new connection to `addr`, its answer's head read, its connection to go back
/// to `pool` when the answer is done.
async fn started<S: Conn>(addr: SocketAddr, pool: &Arc<Pool<S>>) -> Streaming<S> {
    let conn = S::of(TcpStream::connect(addr).await.unwrap());
    Streaming::start(conn, REQUEST)
        .await
        .unwrap()
        .keep_in(pool, 1, IDLE)
}

#[tokio::test]
async fn an_answer_read_to_its_end_leaves_its_connection_for_the_next_request() {
    let (addr, accepted) = server(Serve::KeepOpen).await;
    let pool = Arc::new(Pool::new(4));
    assert!(!request(&pool, addr).await, "the first request opens one");
    assert_eq!(pool.idle_count(), 1);
    for _ in 0..5 {
        assert!(request(&pool, addr).await, "the next ones reuse it");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_kept_connection_the_server_closed_is_dropped_and_the_request_still_answered() {
    let (addr, accepted) = server(Serve::CloseSilently).await;
    let pool = Arc::new(Pool::new(4));
    assert!(!request(&pool, addr).await);
    assert_eq!(pool.idle_count(), 1);
    // The server closed it after answering: the next request finds that out (when it is taken,
    // or by sending on it) and goes on a new connection.
    assert!(!request(&pool, addr).await, "a new connection carried it");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_request_sent_on_a_connection_the_server_closed_is_given_back_unsent() {
    let (addr, _) = server(Serve::CloseAtOnce).await;
    let conn: Box<dyn Stream> = Box::new(TcpStream::connect(addr).await.unwrap());
    // Nothing comes back: `resume` says so, and the caller sends the request on a new one.
    let resumed = Streaming::resume(conn, REQUEST).await.unwrap();
    assert!(resumed.is_none());
}

#[tokio::test]
async fn a_connection_that_received_bytes_past_its_answer_is_never_reused() {
    let (addr, accepted) = server(Serve::Trailing).await;
    let pool = Arc::new(Pool::new(4));
    assert_eq!(answer(&pool, addr).await, (false, b"ok".to_vec()));
    assert_eq!(pool.idle_count(), 1);
    // The server writes a second answer into the idle connection: it must not become the next
    // request's answer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(answer(&pool, addr).await, (false, b"ok".to_vec()));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_plain_tcp_connection_the_server_closed_is_dropped_when_taken() {
    let (addr, _) = server(Serve::CloseSilently).await;
    let pool: Arc<Pool<TcpStream>> = Arc::new(Pool::new(4));
    let mut answer = started(addr, &pool).await;
    while answer.next().await.unwrap().is_some() {}
    drop(answer);
    assert_eq!(pool.idle_count(), 1);
    // The close arrives on our side: the liveness check at take sees it (wait for it, bounded).
    for _ in 0..100 {
        match pool.take(1) {
            None => return,
            Some(still) => {
                pool.put(1, still, Some(IDLE));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    panic!("a closed connection was still handed out after 1 s");
}

#[tokio::test]
async fn an_answer_saying_close_or_not_read_to_its_end_closes_its_connection() {
    let (addr, _) = server(Serve::SayClose).await;
    let pool = Arc::new(Pool::new(4));
    request(&pool, addr).await;
    assert_eq!(pool.idle_count(), 0, "Connection: close is honoured");

    let (addr, accepted) = server(Serve::Big).await;
    let mut answer = started(addr, &pool).await;
    answer.next().await.unwrap().expect("a first piece");
    drop(answer);
    assert_eq!(pool.idle_count(), 0, "a body left unread is never reused");
    assert!(!request(&pool, addr).await);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_answer_left_after_its_response_is_finished_in_the_background_and_kept() {
    let (addr, accepted) = server(Serve::LateEnd).await;
    let pool: Arc<Pool<Box<dyn Stream>>> = Arc::new(Pool::new(4));
    let mut answer = started(addr, &pool).await;
    let first = answer.next().await.unwrap().expect("the response");
    assert_eq!(&first[..], b"ok");
    answer.finish(true);
    drop(answer);
    assert_eq!(pool.idle_count(), 0, "the end has not come yet");
    // The end comes 50 ms later; the background read gives the connection back then.
    for _ in 0..100 {
        if pool.idle_count() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(pool.idle_count(), 1);
    assert!(request(&pool, addr).await, "the next request reuses it");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_answer_let_go_before_its_response_is_kept_only_if_its_end_is_already_there() {
    // Its whole body has arrived, unread (an empty 202, a short answer): kept, no waiting.
    let (addr, _) = server(Serve::KeepOpen).await;
    let pool: Arc<Pool<Box<dyn Stream>>> = Arc::new(Pool::new(4));
    let mut answer = started(addr, &pool).await;
    answer.finish(false);
    drop(answer);
    assert_eq!(pool.idle_count(), 1);

    // Its end comes later: not waited for; the connection closes now.
    let (addr, _) = server(Serve::LateEnd).await;
    let pool: Arc<Pool<Box<dyn Stream>>> = Arc::new(Pool::new(4));
    let mut answer = started(addr, &pool).await;
    answer.next().await.unwrap().expect("a first piece");
    answer.finish(false);
    drop(answer);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(pool.idle_count(), 0, "nothing read it to its end");
}
