//! The leg's pool alone, over real loopback connections (the session is tested end to end in
//! tests/gateway/upstream_leg.rs).

use super::*;

/// A connected pair: the pool's side as a [`Conn`], the upstream's side as a std stream.
async fn pair() -> (Arc<Conn>, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let ours = TcpStream::connect(addr).await.unwrap();
    let (theirs, _) = l.accept().unwrap();
    (Arc::new(Conn::new(ours, addr).unwrap()), theirs)
}

#[tokio::test]
async fn the_pool_gives_back_the_newest_open_connection() {
    let pool = Pool::new(8);
    let (a, _a_peer) = pair().await;
    let (b, _b_peer) = pair().await;
    let b_fd = b.fd();
    pool.put(1, a, None);
    pool.put(1, b, None);
    assert_eq!(pool.take(1).map(|c| c.fd()), Some(b_fd));
    assert!(
        pool.take(2).is_none(),
        "another peer's connections are not handed out"
    );
    assert_eq!(pool.idle_count(), 1);
}

#[tokio::test]
async fn a_connection_the_upstream_closed_is_not_handed_out() {
    let pool = Pool::new(8);
    let (a, a_peer) = pair().await;
    pool.put(1, a, None);
    drop(a_peer);
    // The close reaches our side; the pool finds it when asked.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(pool.take(1).is_none());
    assert_eq!(pool.idle_count(), 0);
}

#[tokio::test]
async fn idle_timeouts_and_the_size_cap_drop_the_oldest() {
    let pool = Pool::new(2);
    let mut peers = Vec::new();
    let mut fds = Vec::new();
    for _ in 0..3 {
        let (c, p) = pair().await;
        fds.push(c.fd());
        peers.push(p);
        pool.put(1, c, None);
    }
    assert_eq!(pool.idle_count(), 2, "capped at 2 per peer");
    assert_eq!(pool.take(1).map(|c| c.fd()), Some(fds[2]));
    assert_eq!(pool.take(1).map(|c| c.fd()), Some(fds[1]));
    let (c, _p) = pair().await;
    pool.put(1, c, Some(Duration::from_millis(10)));
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(pool.take(1).is_none(), "idle past its timeout");
}

#[tokio::test]
async fn connections_to_a_peer_no_longer_asked_for_are_swept() {
    let pool = Pool::new(8);
    let (old, _old_peer) = pair().await;
    pool.put(1, old, Some(Duration::from_millis(10)));
    tokio::time::sleep(SWEEP_EVERY + Duration::from_millis(50)).await;
    // Traffic to another peer sweeps the first peer's expired connection away.
    let (new, _new_peer) = pair().await;
    pool.put(2, new, Some(Duration::from_secs(60)));
    assert_eq!(pool.idle_count(), 1);
}

/// A response read to its end leaves the socket drained (a short read tells tokio so, without
/// the `EAGAIN` a second read would cost): a close or stray bytes that come later must still be
/// seen when the connection is taken.
#[tokio::test]
async fn after_a_drained_response_a_later_close_or_stray_byte_is_still_seen() {
    use pingora::protocols::http::custom::client::Session as _;
    use std::io::Write;
    for stray in [false, true] {
        let (conn, mut peer) = pair().await;
        peer.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .unwrap();
        let mut s = H1Session::new(conn.clone(), false);
        s.read_response_header().await.unwrap();
        let mut body = Vec::new();
        while let Some(b) = s.read_response_body().await.unwrap() {
            body.extend_from_slice(&b);
        }
        assert_eq!(body, b"ok");
        drop(s);
        assert!(conn.still_open(), "nothing happened since the response");
        if stray {
            peer.write_all(b"X").unwrap();
        } else {
            drop(peer);
        }
        // The event reaches the runtime while it waits.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!conn.still_open(), "stray byte: {stray}");
    }
}
