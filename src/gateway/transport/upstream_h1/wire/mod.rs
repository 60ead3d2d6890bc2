//! HTTP/1.1 on the upstream wire, as plain functions over bytes: the request head the gateway
//! writes, the response head it parses (`httparse`, the parser pingora itself uses), and how the
//! response body is framed and decoded (RFC 9112 §6: no body, `Content-Length`, chunked, or
//! until the connection closes).

use bytes::{Buf, Bytes, BytesMut};
use pingora::http::RequestHeader;
use pingora::{Error, ErrorType, Result};

/// Most header lines a response head may carry.
pub(crate) const MAX_HEADERS: usize = 128;
/// Largest response head accepted.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// How a request body is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestFraming {
    /// `Content-Length` (or no body): bytes as they are.
    Raw,
    /// `Transfer-Encoding: chunked`: each write becomes one chunk.
    Chunked,
}

/// Make a request (possibly from an HTTP/2 client) an HTTP/1.1 one, as pingora's own HTTP/1.1
/// client does before it writes: a `Host` (from the HTTP/2 `:authority`, which wins over a
/// `Host` field, RFC 9113 §8.3.1), a framing for a body that has none (chunked), and the
/// authority checks pingora makes.
pub(crate) fn to_http11(req: &mut RequestHeader, has_body: bool) -> Result<()> {
    let authority = req.uri.authority().map(|a| a.as_str().to_owned());
    let host_missing = !req.headers.contains_key(http::header::HOST);
    if let Some(a) = authority.filter(|_| host_missing || req.version == http::Version::HTTP_2) {
        if a.contains('@') {
            return Error::e_explain(ErrorType::InvalidHTTPHeader, "userinfo in the authority");
        }
        req.insert_header(http::header::HOST, a)?;
    } else if host_missing {
        // HTTP/1.1 requires the field, empty when there is no authority (RFC 9112 §3.2).
        req.insert_header(http::header::HOST, "")?;
    }
    if has_body
        && !req.headers.contains_key(http::header::CONTENT_LENGTH)
        && !req.headers.contains_key(http::header::TRANSFER_ENCODING)
    {
        req.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
    }
    // The checks pingora's HTTP/1.1 client makes of the final request (one Host, no userinfo,
    // a target that agrees with it).
    pingora::protocols::http::authority::validate_request_authority(req)
}

/// Frame a request whose whole body (`len` bytes) is in hand by its length: `Content-Length`,
/// never chunked, whatever framing the client used (HTTP/2 DATA frames, chunked): the body's
/// bytes are the client's, their framing is the connection's (RFC 9112 §6).
pub(crate) fn frame_whole(req: &mut RequestHeader, len: usize) -> Result<()> {
    let framed = req.headers.contains_key(http::header::TRANSFER_ENCODING)
        || req.headers.contains_key(http::header::CONTENT_LENGTH);
    req.remove_header(&http::header::TRANSFER_ENCODING);
    if len > 0 || framed {
        req.insert_header(http::header::CONTENT_LENGTH, len)?;
    }
    Ok(())
}

/// The request head as it goes on the wire (always HTTP/1.1), and how its body is framed.
pub(crate) fn request_head(req: &RequestHeader) -> Result<(Vec<u8>, RequestFraming)> {
    let path = req.raw_path();
    if path.iter().any(|b| matches!(b, b' ' | b'\r' | b'\n')) {
        return Error::e_explain(
            ErrorType::InvalidHTTPHeader,
            "request target with a space or line break",
        );
    }
    let mut buf = Vec::with_capacity(256 + path.len());
    buf.extend_from_slice(req.method.as_str().as_bytes());
    buf.push(b' ');
    buf.extend_from_slice(path);
    buf.extend_from_slice(b" HTTP/1.1\r\n");
    req.header_to_h1_wire(&mut buf);
    buf.extend_from_slice(b"\r\n");
    let chunked = req
        .headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .any(|v| ends_with_chunked(v.as_bytes()));
    let framing = if chunked {
        RequestFraming::Chunked
    } else {
        RequestFraming::Raw
    };
    Ok((buf, framing))
}

fn ends_with_chunked(v: &[u8]) -> bool {
    v.rsplit(|b| *b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// The line that opens a chunk of `len` bytes in a chunked body (RFC 9112 §7.1); the chunk's
/// data and a CRLF follow it.
pub fn chunk_size_line(len: usize) -> String {
    format!("{len:x}\r\n")
}

/// The last chunk of a chunked body, with an empty trailer section.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// How a response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (1xx, 204, 304, a response to HEAD, `Content-Length: 0`).
    Empty,
    /// This many bytes are left.
    Length(u64),
    /// Chunked; where the decoder is.
    Chunked(Chunk),
    /// Until the upstream closes the connection (cannot be reused).
    UntilClose,
}

/// The chunked decoder's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data: bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one.
    Trailers,
}

mod head;
pub use head::{parse_head, Head};

trait OrInvalid<T> {
    fn or_err_invalid(self) -> Result<T>;
}

impl<T, E: std::fmt::Display> OrInvalid<T> for std::result::Result<T, E> {
    fn or_err_invalid(self) -> Result<T> {
        self.map_err(|e| {
            Error::explain(
                ErrorType::InvalidHTTPHeader,
                format!("upstream response header: {e}"),
            )
        })
    }
}

/// What the decoder made of the buffered bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Body bytes (never empty).
    Data(Bytes),
    /// More bytes are needed to go on.
    NeedMore,
    /// The body is complete.
    Done,
}

/// Take the next piece of body from `buf` under `framing` (advanced in place). `Length` and
/// `Chunked` never take bytes past the body's end.
pub fn decode(buf: &mut BytesMut, framing: &mut Framing) -> Result<Decoded> {
    loop {
        match framing {
            Framing::Empty => return Ok(Decoded::Done),
            Framing::Length(0) => {
                *framing = Framing::Empty;
                return Ok(Decoded::Done);
            }
            Framing::Length(left) => {
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                let n = (*left).min(buf.len() as u64) as usize;
                *left -= n as u64;
                return Ok(Decoded::Data(buf.split_to(n).freeze()));
            }
            Framing::UntilClose => {
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                return Ok(Decoded::Data(buf.split().freeze()));
            }
            Framing::Chunked(state) => {
                if let Some(d) = chunk_step(buf, state)? {
                    if d == Decoded::Done {
                        *framing = Framing::Empty;
                    }
                    return Ok(d);
                }
            }
        }
    }
}

/// One step through a chunked body: a piece of data, more bytes needed, or the body's end
/// (`Some`); `None` when `state` moved on (a size line, a chunk's CRLF, a trailer line read).
fn chunk_step(buf: &mut BytesMut, state: &mut Chunk) -> Result<Option<Decoded>> {
    match *state {
        Chunk::Size => match size_line(buf)? {
            Some(0) => *state = Chunk::Trailers,
            Some(size) => *state = Chunk::Data(size),
            None => return Ok(Some(Decoded::NeedMore)),
        },
        Chunk::Data(left) => {
            if buf.is_empty() {
                return Ok(Some(Decoded::NeedMore));
            }
            let n = left.min(buf.len() as u64) as usize;
            *state = if left == n as u64 {
                Chunk::DataEnd
            } else {
                Chunk::Data(left - n as u64)
            };
            return Ok(Some(Decoded::Data(buf.split_to(n).freeze())));
        }
        Chunk::DataEnd => {
            if buf.len() < 2 {
                return Ok(Some(Decoded::NeedMore));
            }
            if &buf[..2] != b"\r\n" {
                return Error::e_explain(
                    ErrorType::InvalidHTTPHeader,
                    "upstream chunk data not followed by CRLF",
                );
            }
            buf.advance(2);
            *state = Chunk::Size;
        }
        Chunk::Trailers => {
            // Trailer lines are dropped; the empty line ends the body.
            let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else {
                if buf.len() > MAX_HEAD {
                    return Error::e_explain(
                        ErrorType::InvalidHTTPHeader,
                        "upstream trailers larger than 64 KiB",
                    );
                }
                return Ok(Some(Decoded::NeedMore));
            };
            buf.advance(end + 2);
            if end == 0 {
                return Ok(Some(Decoded::Done));
            }
        }
    }
    Ok(None)
}

/// Read a chunk-size line (RFC 9112 §7.1: `chunk-size = 1*HEXDIG`, extensions ignored) from
/// the front of `buf`; `None` until the line is complete.
fn size_line(buf: &mut BytesMut) -> Result<Option<u64>> {
    let invalid = |why: &'static str| Error::e_explain(ErrorType::InvalidHTTPHeader, why);
    // httparse reads a line without digits ("\r\n", ";ext\r\n") as size 0, the last chunk.
    if buf.first().is_some_and(|b| !b.is_ascii_hexdigit()) {
        return invalid("upstream chunk-size line without a size");
    }
    match httparse::parse_chunk_size(buf) {
        Ok(httparse::Status::Complete((used, size))) => {
            buf.advance(used);
            Ok(Some(size))
        }
        Ok(httparse::Status::Partial) if buf.len() > 4096 => {
            invalid("upstream chunk-size line longer than 4 KiB")
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => invalid("upstream sent an invalid chunk size"),
    }
}

#[cfg(test)]
mod tests;
