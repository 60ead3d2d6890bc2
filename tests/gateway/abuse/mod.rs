//! Hostile or broken clients. Each test is named after the behaviour it guards:
//! slow and partial requests, the body budget, idle keep-alive, pipelining and trailing bytes,
//! label floods, refusals cheaper than successes, reload and shutdown under abuse, DNS changes,
//! legacy clients. Loopback only; every wait is bounded.

mod floods;
mod operations;
mod pipelining;
mod slow_clients;

use crate::support;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use mcp_edge::config::Config;
use mcp_edge::gateway::runtime::dns;
use mcp_edge::gateway::{Gateway, Live};

pub fn head_for(body_len: usize, extra: &[(&str, String)]) -> Vec<u8> {
    let mut req =
        format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {body_len}\r\n");
    for (k, v) in call_headers("get_weather").iter().chain(extra) {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.into_bytes()
}

pub fn read_one(s: &TcpStream) -> support::http::Reply {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    support::http::read_reply(&mut BufReader::new(s)).expect("a response")
}
