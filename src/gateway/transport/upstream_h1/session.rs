//! One request on one upstream connection: pingora's custom client `Session` (and its request
//! `BodyWrite`) over a plain TCP connection ([`Conn`]).
//!
//! The connection is shared (`Arc`) by the session, which reads the response, and the body
//! writer pingora takes out of it ([`super::write`]), which writes the request: both use tokio's
//! `&TcpStream` readiness I/O, so neither waits on the other.

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::custom::client::Session;
use pingora::protocols::http::custom::{BodyWrite, CustomMessageWrite};
use pingora::protocols::l4::socket::SocketAddr as PSocketAddr;
use pingora::protocols::{Digest, UniqueIDType};
use pingora::{Error, ErrorType, Result, RetryType};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::conn::{read_now, Conn};
use super::wire::{self, Decoded, Framing};
use super::write::{io_error, within, BodyWriter};

/// Bytes read from the upstream at a time (the buffer grows only for a head that needs more).
const READ_CHUNK: usize = 4096;

/// One request's exchange on a [`Conn`].
pub(crate) struct H1Session {
    conn: Arc<Conn>,
    reused: bool,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    writer: Option<Box<dyn BodyWrite>>,
    head_request: bool,
    buf: BytesMut,
    response: Option<ResponseHeader>,
    /// A response head was read (it may since have been taken out by [`H1Session::take_response`]).
    got_head: bool,
    /// The last head read was a 1xx: a final response follows.
    informational: bool,
    framing: Framing,
    keep_alive: bool,
    /// Body bytes decoded ahead (to know whether the body ended with the bytes before them).
    ahead: Option<Bytes>,
    body_done: bool,
    seen_bytes: bool,
    broken: bool,
}

impl H1Session {
    pub(crate) fn new(conn: Arc<Conn>, reused: bool) -> H1Session {
        conn.request_done.store(false, Ordering::Release);
        conn.write_failed.store(false, Ordering::Release);
        H1Session {
            conn,
            reused,
            read_timeout: None,
            write_timeout: None,
            writer: None,
            head_request: false,
            buf: BytesMut::new(),
            response: None,
            got_head: false,
            informational: false,
            framing: Framing::Empty,
            keep_alive: false,
            ahead: None,
            body_done: false,
            seen_bytes: false,
            broken: false,
        }
    }

    /// The connection, if it may carry another request: the request was written whole, the
    /// response read to its end with nothing after it, and neither side asked to close.
    pub(crate) fn into_reusable(self) -> Option<Arc<Conn>> {
        let whole = self.conn.request_done.load(Ordering::Acquire)
            && !self.conn.write_failed.load(Ordering::Acquire);
        let ok = !self.broken
            && whole
            && self.got_head
            && !self.informational
            && self.finished()
            && self.keep_alive
            && self.buf.is_empty()
            && self.ahead.is_none();
        drop(self.writer);
        // The body writer pingora took is gone by now; if not, the connection is not ours alone.
        (ok && Arc::strong_count(&self.conn) == 1).then_some(self.conn)
    }

    /// Send a request made HTTP/1.1 by [`wire::to_http11`] and its whole body, head and body in
    /// one write (the direct leg: no body writer is boxed for pingora to take out).
    pub(crate) async fn send_request(&mut self, req: &RequestHeader, body: &Bytes) -> Result<()> {
        let mut writer = self.writer_for(req)?;
        if !body.is_empty() {
            writer.write_all_buf(&mut body.clone()).await?;
        }
        writer.finish().await
    }

    /// The writer of `req` (an HTTP/1.1 request): it holds the head until the first body bytes.
    fn writer_for(&mut self, req: &RequestHeader) -> Result<BodyWriter> {
        self.head_request = req.method == http::Method::HEAD;
        let (head, framing) = wire::request_head(req)?;
        Ok(BodyWriter {
            conn: self.conn.clone(),
            head: Some(head),
            framing,
            timeout: self.write_timeout,
            reused: self.reused,
            finished: false,
        })
    }

    /// The response head just read, moved out (the direct leg writes it to the client as it is;
    /// pingora's pipe reads it through `response_header` instead).
    pub(crate) fn take_response(&mut self) -> Option<ResponseHeader> {
        self.response.take()
    }

    /// Whether the last head read was a 1xx (a final response follows).
    pub(crate) fn informational(&self) -> bool {
        self.informational
    }

    /// Give the read buffer's memory back while nothing is buffered (a long stream between two
    /// events holds no buffer then; the next read takes a new one).
    pub(crate) fn shed_buffer(&mut self) {
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
    }

    fn finished(&self) -> bool {
        self.body_done || matches!(self.framing, Framing::Empty | Framing::Length(0))
    }

    /// Read more bytes into the buffer; 0 at the end of the stream.
    async fn read_more(&mut self) -> Result<usize> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        let stream = &self.conn.stream;
        let buf = &mut self.buf;
        // What the socket holds now, without a timer; only a read that has to wait is timed.
        let n = match read_now(stream, buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let read = async {
                    loop {
                        stream.readable().await?;
                        match read_now(stream, buf) {
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                            r => return r,
                        }
                    }
                };
                let retry = self.reused && !self.seen_bytes;
                within(self.read_timeout, read).await.map_err(|e| {
                    self.broken = true;
                    io_error(e, false, retry)
                })?
            }
            Err(e) => {
                self.broken = true;
                return Err(io_error(e, false, self.reused && !self.seen_bytes));
            }
        };
        if n > 0 {
            self.seen_bytes = true;
        }
        Ok(n)
    }

    /// Decode what is buffered ahead of the caller, so the end of a chunked body that arrived
    /// with its last bytes is known at once.
    fn look_ahead(&mut self) -> Result<()> {
        if self.ahead.is_none() && matches!(self.framing, Framing::Chunked(_)) {
            match wire::decode(&mut self.buf, &mut self.framing)? {
                Decoded::Data(b) => self.ahead = Some(b),
                Decoded::Done => self.body_done = true,
                Decoded::NeedMore => {}
            }
        }
        Ok(())
    }
}

fn closed(what: &str, retry: bool) -> Box<Error> {
    let mut e = Error::explain(ErrorType::ConnectionClosed, what.to_string());
    if retry {
        e.retry = RetryType::ReusedOnly;
    }
    e
}

#[async_trait]
impl Session for H1Session {
    async fn write_request_header(&mut self, mut req: Box<RequestHeader>, end: bool) -> Result<()> {
        wire::to_http11(&mut req, !end)?;
        let mut writer = self.writer_for(&req)?;
        if end {
            writer.finish().await?;
        }
        self.writer = Some(Box::new(writer));
        Ok(())
    }

    async fn write_request_body(&mut self, mut data: Bytes, end: bool) -> Result<()> {
        let Some(w) = self.writer.as_mut() else {
            return Error::e_explain(ErrorType::WriteError, "request body before its head");
        };
        w.write_all_buf(&mut data).await?;
        if end {
            w.finish().await?;
        }
        Ok(())
    }

    async fn finish_request_body(&mut self) -> Result<()> {
        match self.writer.as_mut() {
            Some(w) => w.finish().await,
            None => Ok(()),
        }
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.read_timeout = timeout;
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) {
        self.write_timeout = timeout;
    }

    async fn read_response_header(&mut self) -> Result<()> {
        loop {
            if let Some(head) = wire::parse_head(&mut self.buf, self.head_request)? {
                let code = head.header.status.as_u16();
                if code == 101 {
                    self.broken = true;
                    return Error::e_explain(
                        ErrorType::InvalidHTTPHeader,
                        "upstream switched protocols (101): not supported on this leg",
                    );
                }
                self.informational = (100..200).contains(&code);
                self.framing = head.framing;
                self.keep_alive = head.keep_alive;
                self.response = Some(head.header);
                self.got_head = true;
                if !self.informational {
                    self.look_ahead()?;
                }
                return Ok(());
            }
            if self.read_more().await? == 0 {
                self.broken = true;
                let retry = self.reused && !self.seen_bytes;
                return Err(closed(
                    "the upstream closed the connection before its response head",
                    retry,
                ));
            }
        }
    }

    async fn read_response_body(&mut self) -> Result<Option<Bytes>> {
        if let Some(b) = self.ahead.take() {
            self.look_ahead()?;
            return Ok(Some(b));
        }
        if self.informational || self.finished() {
            return Ok(None);
        }
        loop {
            match wire::decode(&mut self.buf, &mut self.framing)? {
                Decoded::Data(b) => {
                    self.look_ahead()?;
                    return Ok(Some(b));
                }
                Decoded::Done => {
                    self.body_done = true;
                    return Ok(None);
                }
                Decoded::NeedMore => {
                    if self.read_more().await? == 0 {
                        if self.framing == Framing::UntilClose {
                            self.body_done = true;
                            return Ok(None);
                        }
                        self.broken = true;
                        return Err(closed(
                            "the upstream closed the connection before its response body ended",
                            false,
                        ));
                    }
                }
            }
        }
    }

    fn response_finished(&self) -> bool {
        self.got_head && !self.informational && self.ahead.is_none() && self.finished()
    }

    async fn shutdown(&mut self, _code: u32, _ctx: &str) {
        self.broken = true;
    }

    fn response_header(&self) -> Option<&ResponseHeader> {
        self.response.as_ref()
    }

    fn was_upgraded(&self) -> bool {
        false
    }

    fn digest(&self) -> Option<&Digest> {
        None
    }

    fn digest_mut(&mut self) -> Option<&mut Digest> {
        None
    }

    fn server_addr(&self) -> Option<&PSocketAddr> {
        Some(&self.conn.peer)
    }

    fn client_addr(&self) -> Option<&PSocketAddr> {
        self.conn.local.as_ref()
    }

    async fn read_trailers(&mut self) -> Result<Option<http::HeaderMap>> {
        Ok(None)
    }

    fn fd(&self) -> UniqueIDType {
        self.conn.fd
    }

    async fn check_response_end_or_error(&mut self, _headers: bool) -> Result<bool> {
        Ok(self.response_finished())
    }

    fn take_request_body_writer(&mut self) -> Option<Box<dyn BodyWrite>> {
        self.writer.take()
    }

    async fn finish_custom(&mut self) -> Result<()> {
        Ok(())
    }

    fn take_custom_message_reader(
        &mut self,
    ) -> Option<Box<dyn futures::Stream<Item = Result<Bytes>> + Unpin + Send + Sync + 'static>>
    {
        // pingora's custom pipe wants a message stream; plain HTTP/1.1 has none.
        Some(Box::new(futures::stream::empty()))
    }

    async fn drain_custom_messages(&mut self) -> Result<()> {
        Ok(())
    }

    fn take_custom_message_writer(&mut self) -> Option<Box<dyn CustomMessageWrite>> {
        Some(Box::new(()))
    }
}
