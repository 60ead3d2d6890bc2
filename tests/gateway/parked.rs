//! Parked idle connections (`connections.park_idle`, `gateway::transport::parked`): a plain HTTP/1.1
//! keep-alive connection that waits between requests holding only its socket must behave as
//! pingora's own loop does: requests after idle gaps are answered on the same connection, the
//! idle timeout closes it (also as changed by a reload), and the buffers of `connections:` are
//! applied. Loopback only; every wait is bounded.

use crate::support;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::*;

fn request(id: u64) -> Vec<u8> {
    let body = call(id, "get_weather");
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in call_headers("get_weather") {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    req.into_bytes()
}

/// Five requests on one connection with idle gaps between them: every one answered, in order.
fn five_with_gaps(extra: &str) {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, extra);
    let mut s = TcpStream::connect(gw.mcp_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    for id in 1..=5 {
        s.write_all(&request(id)).unwrap();
        let reply = support::http::read_reply(&mut r).expect("an answer on the kept connection");
        let body = String::from_utf8_lossy(&reply.body);
        assert_eq!(reply.status, 200, "request {id}: {body}");
        assert!(body.contains(&format!("\"id\":{id}")), "{body}");
        std::thread::sleep(Duration::from_millis(150));
    }
    assert_eq!(up.count(), 5);
}

#[test]
fn a_parked_connection_serves_requests_after_idle_gaps() {
    five_with_gaps("");
}

#[test]
fn without_parking_and_with_other_buffers_the_same_holds() {
    five_with_gaps("connections: { park_idle: false }\n");
    five_with_gaps("connections: { read_buffer: 65536, write_buffer: 0 }\n");
    five_with_gaps("connections: { read_buffer: 16 }\n");
}

#[test]
fn a_parked_connection_is_closed_after_the_client_idle_a_reload_set() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "timeouts: { client_idle: 60s }\n");
    let mut s = TcpStream::connect(gw.mcp_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    s.write_all(&request(1)).unwrap();
    assert_eq!(support::http::read_reply(&mut r).unwrap().status, 200);
    // The connection is parked now (read at each wait): the next wait uses the reloaded value.
    let mut cfg = config(
        &[("default", &up.addrs, "balance: round_robin")],
        "default_route: {pool: default}\ntimeouts: { client_idle: 1s }\n",
    );
    cfg.listen = gw.current().config.listen.clone();
    gw.reload(cfg).unwrap();
    s.write_all(&request(2)).unwrap();
    assert_eq!(support::http::read_reply(&mut r).unwrap().status, 200);
    support::http::assert_closed_when_idle(
        &mut r,
        Duration::from_millis(800),
        Duration::from_secs(5),
    );
}
