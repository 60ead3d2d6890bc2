//! The request's way to the upstream: pingora's custom `BodyWrite`, which holds the request
//! head until the first body bytes and sends both in one `writev`, over the connection's
//! `&TcpStream` (the session reads the response on the same connection meanwhile).

use async_trait::async_trait;
use bytes::Bytes;
use pingora::protocols::http::custom::BodyWrite;
use pingora::{Error, ErrorType, Result, RetryType};
use std::io::{self, IoSlice};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

use super::conn::Conn;
use super::wire::{self, RequestFraming};

/// Write what the socket takes of `parts` now (in order, as few `writev` calls as it allows),
/// consuming what was written; `true` when all of it went.
fn write_now(stream: &TcpStream, parts: &mut [&[u8]]) -> io::Result<bool> {
    let mut first = 0;
    while first < parts.len() {
        if parts[first].is_empty() {
            first += 1;
            continue;
        }
        let mut slices = [IoSlice::new(&[]); 4];
        let live = &parts[first..];
        for (s, p) in slices.iter_mut().zip(live) {
            *s = IoSlice::new(p);
        }
        match stream.try_write_vectored(&slices[..live.len().min(4)]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(mut n) => {
                while n > 0 {
                    let k = n.min(parts[first].len());
                    parts[first] = &parts[first][k..];
                    n -= k;
                    if parts[first].is_empty() {
                        first += 1;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Write all of `parts`, waiting for the socket to take them.
pub(super) async fn write_parts(stream: &TcpStream, parts: &mut [&[u8]]) -> io::Result<()> {
    while !write_now(stream, parts)? {
        stream.writable().await?;
    }
    Ok(())
}

/// `fut` under an optional deadline; running out is `TimedOut`.
pub(super) async fn within<T>(
    limit: Option<Duration>,
    fut: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match limit {
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())),
        None => fut.await,
    }
}

pub(super) fn io_error(e: io::Error, writing: bool, retry_if_reused: bool) -> Box<Error> {
    let timed_out = e.kind() == io::ErrorKind::TimedOut;
    let (kind, what) = match (writing, timed_out) {
        (true, true) => (
            ErrorType::WriteTimedout,
            "writing the request upstream (timeout)",
        ),
        (true, false) => (ErrorType::WriteError, "writing the request upstream"),
        (false, true) => (
            ErrorType::ReadTimedout,
            "reading the upstream response (timeout)",
        ),
        (false, false) => (ErrorType::ReadError, "reading the upstream response"),
    };
    let mut err = Error::because(kind, what, e);
    if retry_if_reused && !timed_out {
        err.retry = RetryType::ReusedOnly;
    }
    err
}

/// The request body's way to the upstream (taken out of the session by pingora).
pub(super) struct BodyWriter {
    pub conn: Arc<Conn>,
    /// The request head, until it leaves with the first body bytes.
    pub head: Option<Vec<u8>>,
    pub framing: RequestFraming,
    pub timeout: Option<Duration>,
    pub reused: bool,
    pub finished: bool,
}

impl BodyWriter {
    async fn send(&mut self, parts: &mut [&[u8]]) -> Result<()> {
        // Most requests fit the socket's buffer at once: only a write that has to wait is timed.
        let r = match write_now(&self.conn.stream, parts) {
            Ok(true) => Ok(()),
            Ok(false) => within(self.timeout, write_parts(&self.conn.stream, parts)).await,
            Err(e) => Err(e),
        };
        r.map_err(|e| {
            self.conn.write_failed.store(true, Ordering::Release);
            io_error(e, true, self.reused)
        })
    }
}

#[async_trait]
impl BodyWrite for BodyWriter {
    async fn write_all_buf(&mut self, data: &mut Bytes) -> Result<()> {
        if data.is_empty() || self.finished {
            return Ok(());
        }
        let head = self.head.take().unwrap_or_default();
        match self.framing {
            RequestFraming::Raw => self.send(&mut [&head, data]).await?,
            RequestFraming::Chunked => {
                let size = wire::chunk_size_line(data.len());
                self.send(&mut [&head, size.as_bytes(), data, b"\r\n"])
                    .await?
            }
        }
        data.clear();
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        let head = self.head.take().unwrap_or_default();
        let end: &[u8] = match self.framing {
            RequestFraming::Raw => b"",
            RequestFraming::Chunked => wire::LAST_CHUNK,
        };
        self.send(&mut [&head, end]).await?;
        self.conn.request_done.store(true, Ordering::Release);
        Ok(())
    }

    async fn cleanup(&mut self) -> Result<()> {
        Ok(())
    }

    fn upgrade_body_writer(&mut self) {}
}
