//! Idle client connections kept small. pingora runs each connection as one task whose state is
//! the whole request pipeline (`HttpServerApp::process_new_http` of the proxy: every phase's
//! locals, the session, the upstream leg), and that state is allocated for as long as the
//! connection lives, also while a keep-alive connection waits for its next request. Here a plain
//! HTTP/1.1 connection waits for its next request "parked": holding only its socket, until the
//! first byte arrives; only then is the pipeline allocated (boxed), for that one request. The
//! parked connection runs in a task of its own, so pingora's connection task (which carries the
//! accept and TLS-handshake state) ends after the handshake.
//!
//! What stays as pingora does it: the HTTP/1.1 session and its keep-alive settings between
//! requests (`HttpPersistentSettings`), the first request's 60 s wait and the shutdown rule
//! (a session started during shutdown is not kept alive), `keepalive_request_limit`. TLS and h2c
//! connections are handed to pingora's own loop unchanged (a TLS layer may hold decrypted bytes
//! a peek cannot see; an h2c listener peeks for the HTTP/2 preface itself).
//!
//! A response that streams for long (an SSE stream, [`crate::gateway::journey::detached`]) may leave the
//! pipeline too: the request hands its stream over ([`detach`]) and answers the pipeline as
//! done; the pipeline's state is freed, and the parked loop runs the handed-over stream, then
//! carries on with the connection it gives back.

use async_trait::async_trait;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ReusedHttpStream, ServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::Stream;
use pingora::server::ShutdownWatch;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::gateway::transport::listeners::HasServerOptions;

/// How long a new connection may stay silent before its first request (pingora's own figure;
/// under the gateway, the request-head deadline of [`crate::gateway::transport::head_deadline`] cuts it shorter).
pub(crate) const FIRST_REQUEST_WAIT: Duration = Duration::from_secs(60);

/// The idle wait between two requests on one connection (the gateway's `timeouts.client_idle`,
/// read at each wait so that a reload applies to connections already open).
pub(crate) type IdleWait = Arc<dyn Fn() -> Duration + Send + Sync>;

/// A pingora HTTP app whose plain HTTP/1.1 connections wait for requests parked.
pub(crate) struct Parked<A> {
    inner: Arc<A>,
    idle: IdleWait,
    enabled: bool,
}

impl<A> Parked<A> {
    /// `enabled: false` hands every connection to pingora's loop (`connections.park_idle`).
    pub(crate) fn new(inner: A, idle: IdleWait, enabled: bool) -> Self {
        Parked {
            inner: Arc::new(inner),
            idle,
            enabled,
        }
    }
}

impl<A: HasServerOptions> HasServerOptions for Parked<A> {
    fn set_server_options(&mut self, o: pingora::apps::HttpServerOptions) {
        Arc::get_mut(&mut self.inner)
            .expect("server options are set before the service starts")
            .set_server_options(o);
    }
}

/// What a parked connection saw.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// At least one byte of a request is there (and left unread for the session).
    Bytes,
    /// The client closed, the read failed, or the wait ran out: close quietly, as pingora does
    /// for a keep-alive connection that sends nothing.
    Gone,
}

/// Wait until the client sends something, for at most `wait`. The byte peeked is put back
/// (pingora's `Stream::rewind`), so the session reads the request whole.
pub(crate) async fn arrival(stream: &mut Stream, wait: Duration) -> Arrival {
    let mut one = [0u8; 1];
    match tokio::time::timeout(wait, stream.try_peek(&mut one)).await {
        Ok(Ok(true)) => Arrival::Bytes,
        // No peek on this kind of stream (not the case for the TCP streams parked here): let
        // the session read it as pingora's loop would, rather than close it unread.
        Ok(Ok(false)) => Arrival::Bytes,
        Ok(Err(_)) | Err(_) => Arrival::Gone,
    }
}

/// Whether the settings carry bytes of the next request, read past the last one's end (HTTP/1.1
/// pipelining). pingora 0.9.1 has no getter for them; its `Debug` output names the field, and
/// `tests::pipelined_prefix_is_seen` fails if that ever changes. The output goes through
/// [`Needle`], which keeps only a small window and stops the formatting at the field, so the
/// check allocates nothing (a `format!` of the whole struct was ~1% of the CPU per request).
pub(crate) fn has_pipelined_prefix(s: &HttpPersistentSettings) -> bool {
    use std::fmt::Write;
    let mut sink = Needle::default();
    // An `Err` is the sink stopping at the field; formatting has no other way to fail here.
    let _ = write!(sink, "{s:?}");
    sink.found == Some(true)
}

/// A formatting sink that looks for `pipelined_prefix: ` and keeps the four bytes after it.
#[derive(Default)]
struct Needle {
    /// The last bytes written (at most `WINDOW`): always the field name and its value's first
    /// word, however the formatter splits its writes.
    window: [u8; WINDOW],
    len: usize,
    found: Option<bool>,
}

const FIELD: &[u8] = b"pipelined_prefix: ";
const WINDOW: usize = 32;

impl std::fmt::Write for Needle {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for &b in s.as_bytes() {
            if self.len == WINDOW {
                // Keep what a match ending at the next byte can still need.
                let keep = FIELD.len() + 3;
                self.window.copy_within(WINDOW - keep.., 0);
                self.len = keep;
            }
            self.window[self.len] = b;
            self.len += 1;
            let seen = &self.window[..self.len];
            if seen.len() >= FIELD.len() + 4
                && seen[seen.len() - 4 - FIELD.len()..].starts_with(FIELD)
            {
                self.found = Some(seen.ends_with(b"Some"));
                return Err(std::fmt::Error);
            }
        }
        Ok(())
    }
}

/// The rest of a response, handed over by the request that started it: it gives the connection
/// back when it ends, if the connection may serve another request.
pub(crate) type Detached = Pin<Box<dyn Future<Output = Option<ReusedHttpStream>> + Send>>;

tokio::task_local! {
    /// The parked connection's slot for a handed-over response (see [`detach`]).
    static HANDED_OVER: RefCell<Option<Detached>>;
}

/// Whether this request runs on a parked connection, which can take a handed-over response.
pub(crate) fn can_detach() -> bool {
    HANDED_OVER.try_with(|_| ()).is_ok()
}

/// Hand the rest of the response over to the parked loop, which runs it once the pipeline
/// returned (the request must then answer the pipeline as done and give it nothing to reuse).
/// `false` (and nothing done) off a parked connection: see [`can_detach`].
pub(crate) fn detach(rest: Detached) -> bool {
    HANDED_OVER
        .try_with(|slot| *slot.borrow_mut() = Some(rest))
        .is_ok()
}

/// Whether a connection is parked: plain HTTP/1.1 on a listener without h2c.
fn parks<A: HttpServerApp>(app: &A, stream: &Stream) -> bool {
    let opts = app.server_options();
    let h2c = opts.is_some_and(|o| o.h2c);
    let custom = opts.is_some_and(|o| o.force_custom);
    stream.get_ssl_digest().is_none() && !h2c && !custom
}

impl<A> Parked<A>
where
    A: HttpServerApp + Send + Sync + 'static,
{
    /// The parked loop: wait for a request's first byte, run the pipeline for it (boxed, so
    /// that its state exists only while the request does), keep the connection if the session
    /// allows it, and wait again.
    async fn serve(self: Arc<Self>, mut stream: Stream, shutdown: ShutdownWatch) {
        let mut reused: Option<Option<HttpPersistentSettings>> = None;
        loop {
            let wait = match &reused {
                None => Some(FIRST_REQUEST_WAIT),
                // The next request was read with the last one (pipelining): no wait.
                Some(Some(s)) if has_pipelined_prefix(s) => None,
                Some(_) => Some((self.idle)()),
            };
            if let Some(wait) = wait {
                if arrival(&mut stream, wait).await == Arrival::Gone {
                    return;
                }
            }
            let mut session = ServerSession::new_http1(stream);
            match reused {
                // A new connection, set up as pingora's own loop does.
                None => {
                    session.set_keepalive(if *shutdown.borrow() { None } else { Some(60) });
                    session.set_keepalive_reuses_remaining(
                        self.inner
                            .server_options()
                            .and_then(|o| o.keepalive_request_limit),
                    );
                }
                Some(Some(settings)) => settings.apply_to_session(&mut session),
                Some(None) => {}
            }
            let mut done = Box::pin(self.inner.process_new_http(session, &shutdown)).await;
            if done.is_none() {
                // The pipeline's state is gone by now; a handed-over response goes on alone.
                let handed = HANDED_OVER.try_with(|slot| slot.borrow_mut().take());
                if let Some(rest) = handed.ok().flatten() {
                    done = rest.await;
                }
            }
            let Some(done) = done else { return };
            let (next, settings) = done.consume();
            stream = next;
            reused = Some(settings);
        }
    }
}

#[async_trait]
impl<A> ServerApp for Parked<A>
where
    A: HttpServerApp + Send + Sync + 'static,
{
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        if !self.enabled || !parks(&*self.inner, &stream) {
            return Box::pin(ServerApp::process_new(&self.inner, stream, shutdown)).await;
        }
        // pingora's task for this connection also carries its accept and TLS-handshake state
        // (8.6 KiB measured) for as long as it runs; the connection moves to a task of its own
        // that carries only the parked loop, and pingora's task ends here.
        let serve = self.clone().serve(stream, shutdown.clone());
        tokio::spawn(HANDED_OVER.scope(RefCell::new(None), serve));
        None
    }

    async fn cleanup(&self) {
        self.inner.http_cleanup().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use tokio::io::AsyncWriteExt;

    async fn pair() -> (Stream, tokio::net::TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(l.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, l.accept());
        let server: Stream = Box::new(pingora::protocols::l4::stream::Stream::from(
            accepted.unwrap().0,
        ));
        (server, client.unwrap())
    }

    #[tokio::test]
    async fn pipelined_prefix_is_seen() {
        let (server, _client) = pair().await;
        let session = ServerSession::new_http1(server);
        let mut s = HttpPersistentSettings::for_session(&session);
        assert!(!has_pipelined_prefix(&s));
        s.set_pipelined_prefix(BytesMut::from(&b"POST /mcp HTTP/1.1\r\n"[..]));
        assert!(has_pipelined_prefix(&s));
        // The sink sees the field however the text is split, and past a full window.
        use std::fmt::Write;
        for text in [
            "x pipelined_prefix: Some(b\"\")",
            "pipelined_prefix: None, a: 1",
        ] {
            for split in 0..text.len() {
                let mut sink = Needle::default();
                let pad = "p".repeat(split * 3);
                let _ = sink.write_str(&pad);
                let _ = sink.write_str(&text[..split]);
                let _ = sink.write_str(&text[split..]);
                assert_eq!(sink.found, Some(text.contains("Some")), "{text} at {split}");
            }
        }
    }

    #[tokio::test]
    async fn arrival_leaves_the_bytes_for_the_session() {
        let (mut server, mut client) = pair().await;
        // Nothing sent: the wait runs out.
        assert_eq!(
            arrival(&mut server, Duration::from_millis(50)).await,
            Arrival::Gone
        );
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(
            arrival(&mut server, Duration::from_secs(30)).await,
            Arrival::Bytes
        );
        let mut session = ServerSession::new_http1(server);
        assert!(session.read_request().await.unwrap());
        assert_eq!(session.req_header().uri.path(), "/");
        assert_eq!(session.get_header("host").unwrap(), "a");
        drop(client);
        // A client that closes without sending: a parked connection sees it at once.
        let (mut server, client) = pair().await;
        drop(client);
        assert_eq!(
            arrival(&mut server, Duration::from_secs(30)).await,
            Arrival::Gone
        );
    }
}
