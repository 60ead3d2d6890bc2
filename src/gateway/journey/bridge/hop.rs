//! The bridge's hop into the gateway's own pipeline: a translated 2026 request meets every
//! stage a 2026 client's request meets (admission, routes, the federation catalog, auth,
//! limits, the header↔body check, the cache, balancing, credentials, metrics) with no stage
//! knowing about eras. A client's requests go inside the process, on the client's own session
//! ([`super::inline`]) or as subrequests of its request ([`super::inside`]); a standalone stream's `subscriptions/listen`, which may
//! last hours and then leaves the pipeline on both ends, is POSTed to this gateway's plain MCP
//! listener on loopback, on kept connections. Either way one request path, and a bridge that
//! cannot skip a stage; what each costs is measured in docs/benchmarks.md.
//!
//! Its [`post`] also carries a request one replica sends on to another ([`super::replica`]).

use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};

use crate::gateway::stages::bridge::hops::{Hop, Hops};
use crate::gateway::stages::bridge::messages::is_response;

use crate::gateway::transport::upstream_h1::{oneshot, Pool};
use crate::mcp::{header, media, sse};
use std::borrow::Cow;

/// The largest answer the bridge reads from its hop.
const MAX_ANSWER: usize = 32 * 1024 * 1024;

/// What came back from the hop.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    /// Headers a legacy client needs to see as they are (`WWW-Authenticate`, `Retry-After`).
    pub pass: Vec<(&'static str, String)>,
    pub content_type: Option<Cow<'static, str>>,
    pub body: Vec<u8>,
}

/// A `Content-Type` as an answer keeps it (JSON's, the common one, with no copy).
pub(crate) fn content_type_of(v: &http::HeaderValue) -> Option<Cow<'static, str>> {
    match v.as_bytes() == media::JSON.as_bytes() {
        true => Some(Cow::Borrowed(media::JSON)),
        false => v.to_str().ok().map(|t| Cow::Owned(t.to_owned())),
    }
}

impl Answer {
    /// The JSON-RPC messages of the answer, in order: the body, or each event of a stream.
    pub(crate) fn messages(&self) -> Vec<Value> {
        let is_stream = self
            .content_type
            .as_deref()
            .is_some_and(|c| sse::is_event_stream(c.as_bytes()));
        if !is_stream {
            return serde_json::from_slice(&self.body).into_iter().collect();
        }
        sse::events(&self.body)
            .into_iter()
            .filter_map(|e| serde_json::from_slice(&e.data).ok())
            .collect()
    }
}

/// A request on the hop.
pub(crate) struct Request<'a> {
    pub path: &'a str,
    pub method: &'a str,
    pub name: Option<&'a str>,
    /// Headers carried as they are (the caller's `Authorization`, the session on an answer).
    pub carry: Vec<(String, String)>,
    pub body: &'a [u8],
}

impl Request<'_> {
    /// The whole HTTP/1.1 request for `target` (keep-alive): a 2026 POST whose MCP headers come
    /// from the body's method and name.
    pub(crate) fn to_bytes(&self, target: SocketAddr) -> Vec<u8> {
        let host = target.to_string();
        let name = self.name.map(header::encode_value);
        let mut extra: Vec<(&str, &str)> = self
            .carry
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(n) = name.as_deref() {
            extra.push((header::NAME, n));
        }
        oneshot::mcp_post((self.path, &host), self.method, &extra, self.body, true)
    }
}

/// Whom a hop speaks for: the gateway's register of open hops and the client's address.
pub(crate) type SpeaksFor<'a> = (&'a Arc<Hops>, IpAddr);

/// Send a whole request (`Connection: close`) to `target` and read its whole answer; with
/// `speaks_for`, the pipeline sees the client's address, not the hop's, while it runs.
pub(crate) async fn post(
    target: SocketAddr,
    bytes: &[u8],
    speaks_for: Option<SpeaksFor<'_>>,
    timeouts: (Duration, Duration),
) -> Result<Answer, String> {
    Leg::open((target, None), bytes, speaks_for, timeouts)
        .await?
        .rest()
        .await
}

/// An answer being read as it arrives: an event stream's messages one by one
/// ([`Leg::next_message`]), so a leg's progress reaches the client while the leg runs, or the
/// rest read whole ([`Leg::rest`]). The whole read keeps to one deadline.
pub(crate) struct Leg {
    /// Declared first, so dropped first: the registration ends before `body` gives the
    /// connection back to the pool, where another hop may take it and register it anew (and
    /// when the rest of the answer is read in the background and the connection goes back
    /// sooner, the newer registration holds: `Hops` numbers them).
    _hop: Option<Hop>,
    /// Where the request went (`None`: inside this process).
    target: Option<SocketAddr>,
    /// The request went on a kept connection.
    pub kept: bool,
    body: Body,
    /// The event stream's parser and the events it completed but not yet handed out (`None`:
    /// the answer is no event stream).
    events: Option<(sse::Parser, std::collections::VecDeque<sse::Event>)>,
    read: usize,
    /// The body ended.
    ended: bool,
    /// A JSON-RPC response was handed out: what is left of the stream is its end.
    responded: bool,
    deadline: tokio::time::Instant,
}

/// Where a leg's answer comes from: a loopback connection, or the pipeline inside
/// ([`super::inside`]).
enum Body {
    Socket(oneshot::Streaming<TcpStream>),
    Inside(super::inside::Answer),
}

impl Body {
    fn head(&self) -> &pingora::http::ResponseHeader {
        match self {
            Body::Socket(s) => &s.head,
            Body::Inside(a) => &a.head,
        }
    }

    async fn next(&mut self) -> Result<Option<bytes::Bytes>, String> {
        match self {
            Body::Socket(s) => s.next().await,
            Body::Inside(a) => a.next().await,
        }
    }

    fn finish(&mut self, responded: bool) {
        match self {
            Body::Socket(s) => s.finish(responded),
            Body::Inside(a) => a.finish(responded),
        }
    }
}

/// Idle hop connections to reuse, and how long one may stay idle (`None`: a connection of its
/// own, closed with the answer).
pub(crate) type Kept<'a> = Option<(&'a Arc<Pool<TcpStream>>, Duration)>;

impl Leg {
    /// Send `bytes` (on a kept connection when `kept` holds one, else on a new one) and read
    /// the answer's head.
    pub(crate) async fn open(
        (target, kept): (SocketAddr, Kept<'_>),
        bytes: &[u8],
        speaks_for: Option<SpeaksFor<'_>>,
        (connect_timeout, read_timeout): (Duration, Duration),
    ) -> Result<Leg, String> {
        let deadline = tokio::time::Instant::now() + read_timeout;
        let late = || format!("no answer from {target} within {read_timeout:?}");
        let key = pool_key(target);
        while let Some((pool, idle)) = kept {
            let Some(stream) = pool.take(key) else {
                break;
            };
            let Some(hop) = register(&stream, speaks_for) else {
                continue;
            };
            let resumed =
                tokio::time::timeout_at(deadline, oneshot::Streaming::resume(stream, bytes));
            if let Some(body) = resumed.await.map_err(|_| late())?? {
                let body = Body::Socket(body.keep_in(pool, key, idle));
                return Ok(Leg::new((Some(target), true), body, hop, deadline));
            }
        }
        let (stream, hop) = tokio::time::timeout(connect_timeout, connect(target, speaks_for))
            .await
            .map_err(|_| format!("connecting to {target} timed out"))?
            .map_err(|e| format!("connecting to {target}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let mut body = tokio::time::timeout_at(deadline, oneshot::Streaming::start(stream, bytes))
            .await
            .map_err(|_| late())??;
        if let Some((pool, idle)) = kept {
            body = body.keep_in(pool, key, idle);
        }
        Ok(Leg::new(
            (Some(target), false),
            Body::Socket(body),
            hop,
            deadline,
        ))
    }

    /// The answer of a request started through the client's own pipeline, inside the process
    /// ([`super::inside`]): its head, read within `read_timeout`.
    pub(crate) async fn inside(
        started: super::inside::Started,
        read_timeout: Duration,
    ) -> Result<Leg, String> {
        let deadline = tokio::time::Instant::now() + read_timeout;
        let answer = started.answer(deadline).await?;
        let body = Body::Inside(answer);
        Ok(Leg::new((None, false), body, None, deadline))
    }

    fn new(
        (target, kept): (Option<SocketAddr>, bool),
        body: Body,
        hop: Option<Hop>,
        deadline: tokio::time::Instant,
    ) -> Leg {
        let stream = body
            .head()
            .headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|c| sse::is_event_stream(c.as_bytes()));
        Leg {
            _hop: hop,
            target,
            kept,
            body,
            events: stream.then(Default::default),
            read: 0,
            ended: false,
            responded: false,
            deadline,
        }
    }

    pub(crate) fn is_stream(&self) -> bool {
        self.events.is_some()
    }

    /// The next JSON-RPC message of an event stream (`None`: the stream ended; an event whose
    /// data is no JSON is skipped).
    pub(crate) async fn next_message(&mut self) -> Result<Option<Value>, String> {
        loop {
            let Some((_, ready)) = self.events.as_mut() else {
                return Ok(None);
            };
            if let Some(ev) = ready.pop_front() {
                if let Ok(v) = serde_json::from_slice::<Value>(&ev.data) {
                    self.responded |= is_response(&v);
                    return Ok(Some(v));
                }
                continue;
            }
            if self.ended {
                return Ok(None);
            }
            let piece = self.piece().await?;
            let (parser, ready) = self.events.as_mut().expect("an event stream");
            let mut done = Vec::new();
            match piece {
                Some(chunk) => parser.feed(&chunk, &mut done),
                None => {
                    std::mem::take(parser).finish(&mut done);
                    self.ended = true;
                }
            }
            ready.extend(done);
        }
    }

    /// The next piece of the body, within the deadline and the size bound.
    async fn piece(&mut self) -> Result<Option<bytes::Bytes>, String> {
        let target = self
            .target
            .map_or_else(|| "this gateway's pipeline".to_owned(), |t| t.to_string());
        let piece = tokio::time::timeout_at(self.deadline, self.body.next())
            .await
            .map_err(|_| format!("{target} did not finish its answer in time"))??;
        self.read += piece.as_ref().map_or(0, |p| p.len());
        if self.read > MAX_ANSWER {
            return Err(format!("the answer is larger than {MAX_ANSWER} bytes"));
        }
        Ok(piece)
    }

    /// The rest of the answer, read whole.
    pub(crate) async fn rest(mut self) -> Result<Answer, String> {
        let mut body = Vec::new();
        while let Some(p) = self.piece().await? {
            body.extend_from_slice(&p);
        }
        let head = self.body.head();
        let ct = head.headers.get(http::header::CONTENT_TYPE);
        Ok(Answer {
            status: head.status.as_u16(),
            pass: self.pass(),
            content_type: ct.and_then(content_type_of),
            body,
        })
    }

    pub(crate) fn status(&self) -> u16 {
        self.body.head().status.as_u16()
    }

    /// The headers a legacy client needs to see as they are.
    pub(crate) fn pass(&self) -> Vec<(&'static str, String)> {
        pass_of(self.body.head())
    }
}

/// The headers of an answer a legacy client needs to see as they are (`WWW-Authenticate`,
/// `Retry-After`).
/// The first of each is taken, in one pass over the head (no lookup by name).
pub(crate) fn pass_of(head: &pingora::http::ResponseHeader) -> Vec<(&'static str, String)> {
    use http::header::{RETRY_AFTER, WWW_AUTHENTICATE};
    let mut pass: Vec<(&'static str, String)> = Vec::new();
    for (name, v) in &head.headers {
        let k = match name {
            n if *n == WWW_AUTHENTICATE => "www-authenticate",
            n if *n == RETRY_AFTER => "retry-after",
            _ => continue,
        };
        if pass.iter().all(|(seen, _)| *seen != k) {
            if let Ok(v) = v.to_str() {
                pass.push((k, v.to_owned()));
            }
        }
    }
    pass
}

/// A leg dropped once its reader has the response, before the end of its event stream: the
/// rest is read so that its connection is kept (`Streaming::finish`). A leg dropped before its
/// response (the client left, the call was cancelled) is not waited for: unless its end is
/// already there, its connection closes at once, and the pipeline on the other end sees the
/// close and cancels the call upstream.
impl Drop for Leg {
    fn drop(&mut self) {
        if !self.ended {
            self.body.finish(self.responded);
        }
    }
}

/// The pool's key for the connections to `target`.
fn pool_key(target: SocketAddr) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    target.hash(&mut h);
    h.finish()
}

/// Register a kept connection for the client `speaks_for` names, as [`connect`] registers a
/// new one; `None` when its local address cannot be read (the connection is dropped). A hop
/// that speaks for nobody needs no registration.
fn register(stream: &TcpStream, speaks_for: Option<SpeaksFor<'_>>) -> Option<Option<Hop>> {
    let Some((hops, client)) = speaks_for else {
        return Some(None);
    };
    let local = stream.local_addr().ok()?;
    Some(Some(hops.open(local, client)))
}

/// Connect to `target`; with `speaks_for`, from a socket bound first and registered under its
/// local address (the registration lasts as long as the returned [`Hop`]).
async fn connect(
    target: SocketAddr,
    speaks_for: Option<SpeaksFor<'_>>,
) -> std::io::Result<(TcpStream, Option<Hop>)> {
    let Some((hops, client)) = speaks_for else {
        return Ok((TcpStream::connect(target).await?, None));
    };
    let socket = if target.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // The same address family and interface as the target: the peer address the pipeline
    // sees is then exactly this local address.
    socket.bind(SocketAddr::new(target.ip(), 0))?;
    let hop = hops.open(socket.local_addr()?, client);
    let stream = socket.connect(target).await?;
    Ok((stream, Some(hop)))
}
