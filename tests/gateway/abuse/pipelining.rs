//! Pipelined requests and bytes after a request.

use super::*;

#[test]
fn i13_2_pipelined_requests_are_answered_in_order() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "");
    let (a, b) = (call(1, "get_weather"), call(2, "get_weather"));
    let mut both = head_for(a.len(), &[]);
    both.extend_from_slice(a.as_bytes());
    both.extend_from_slice(&head_for(b.len(), &[]));
    both.extend_from_slice(b.as_bytes());
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&both).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s);
    let first = support::http::read_reply(&mut r).unwrap();
    let second = support::http::read_reply(&mut r).unwrap();
    assert_eq!((first.status, first.json()["id"].clone()), (200, 1.into()));
    assert_eq!(
        (second.status, second.json()["id"].clone()),
        (200, 2.into())
    );
}

#[test]
fn i13_2_bytes_after_a_request_never_blame_an_instance() {
    let up = Upstreams::start(1);
    // The trailing bytes read as the start of a head that never ends: 408 at the head deadline.
    let gw = simple_gateway(&up, "timeouts: { request_head: 1s }\n");
    let a = call(1, "get_weather");
    let mut req = head_for(a.len(), &[]);
    req.extend_from_slice(a.as_bytes());
    req.extend_from_slice(&vec![b'x'; 4096]);
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&req).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s);
    let first = support::http::read_reply(&mut r).unwrap();
    assert_eq!(first.status, 200, "{}", first.text());
    // Whatever follows answers the garbage as the client's (or closes); never a 502.
    if let Ok(next) = support::http::read_reply(&mut r) {
        assert!(
            matches!(next.status, 400 | 408 | 431),
            "{} {}",
            next.status,
            next.text()
        );
    }
}
