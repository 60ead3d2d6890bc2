//! A raw HTTP/2 client that writes what the `h2` crate will not (pseudo-header fields in a
//! trailer section, connection-specific fields): frames by hand, header blocks as HPACK
//! literals without indexing or Huffman coding (RFC 7541 §6.2.2). It reads the server's
//! frames back until the stream ends and reports what happened to it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1).
fn int(out: &mut Vec<u8>, first: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128 + 128) as u8);
        v /= 128;
    }
    out.push(v as u8);
}

fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in fields {
        out.push(0);
        int(&mut out, 0, 7, k.len());
        out.extend_from_slice(k.as_bytes());
        int(&mut out, 0, 7, v.len());
        out.extend_from_slice(v.as_bytes());
    }
    out
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// What became of stream 1.
#[derive(Debug)]
pub enum Outcome {
    /// The server reset the stream (RST_STREAM) or the connection (GOAWAY).
    Reset,
    /// A response: its first header-block byte (0x88 is an indexed `:status 200`, 0x8c 400)
    /// and its body.
    Answered(u8, Vec<u8>),
    /// Nothing within the read timeout.
    Silent,
}

/// Send one request on stream 1: `fields` (pseudo-headers first), `body` in one DATA frame,
/// then `trailers` if any (they end the stream).
pub fn send(
    addr: SocketAddr,
    fields: &[(&str, &str)],
    body: &[u8],
    trailers: &[(&str, &str)],
) -> Outcome {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut wire = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    wire.extend(frame(4, 0, 0, &[]));
    wire.extend(frame(1, END_HEADERS, 1, &block(fields)));
    let data_flags = if trailers.is_empty() { END_STREAM } else { 0 };
    wire.extend(frame(0, data_flags, 1, body));
    if !trailers.is_empty() {
        wire.extend(frame(1, END_HEADERS | END_STREAM, 1, &block(trailers)));
    }
    s.write_all(&wire).unwrap();
    read_outcome(&mut s)
}

fn read_outcome(s: &mut TcpStream) -> Outcome {
    let mut status = None;
    let mut body = Vec::new();
    loop {
        let mut head = [0u8; 9];
        if s.read_exact(&mut head).is_err() {
            return status.map_or(Outcome::Silent, |st| Outcome::Answered(st, body));
        }
        let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).is_err() {
            return Outcome::Silent;
        }
        match (kind, stream) {
            (4, 0) if flags & 1 == 0 => s.write_all(&frame(4, 1, 0, &[])).unwrap(),
            (3, 1) | (7, _) => return Outcome::Reset,
            (1, 1) => {
                status.get_or_insert(payload.first().copied().unwrap_or(0));
                if flags & END_STREAM != 0 {
                    return Outcome::Answered(status.unwrap(), body);
                }
            }
            (0, 1) => {
                body.extend_from_slice(&payload);
                if flags & END_STREAM != 0 {
                    return Outcome::Answered(status.unwrap_or(0), body);
                }
            }
            _ => {}
        }
    }
}
