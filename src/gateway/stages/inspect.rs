//! Inspect stage: read the request body (bounded) until it is complete, then parse the envelope
//! once and check it against the headers ([`crate::gateway::stages::validate`]).
//!
//! Chunks are held rather than forwarded so that a request that fails the check never reaches
//! an upstream complete; a body that arrived in one chunk is passed on without a copy.

use bytes::{Bytes, BytesMut};
use pingora::proxy::Session;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::mcp::envelope::{self, Envelope};
use crate::mcp::Rejection;

use crate::gateway::stages::answer::{body_incomplete, envelope_rejection, too_large, Refusal};
use crate::gateway::stages::validate;
use crate::gateway::telemetry::metrics::Metrics;

/// The body is larger than the configured limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge {
    pub limit: usize,
}

/// Chunks of a request body seen so far.
#[derive(Debug, Default)]
pub struct BodyHold {
    first: Option<Bytes>,
    rest: Option<BytesMut>,
    len: usize,
}

impl BodyHold {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Add a chunk; refuse it if the body would exceed `limit` bytes.
    pub(crate) fn push(&mut self, chunk: Bytes, limit: usize) -> Result<(), TooLarge> {
        if self.len + chunk.len() > limit {
            return Err(TooLarge { limit });
        }
        self.len += chunk.len();
        match (&mut self.first, &mut self.rest) {
            (None, _) => self.first = Some(chunk),
            (Some(first), None) => {
                let mut buf = BytesMut::with_capacity((first.len() + chunk.len()).max(4096));
                buf.extend_from_slice(first);
                buf.extend_from_slice(&chunk);
                self.rest = Some(buf);
            }
            (Some(_), Some(buf)) => buf.extend_from_slice(&chunk),
        }
        Ok(())
    }

    /// Hold one chunk of a streamed body; at the end of the stream, the whole body.
    pub(crate) fn feed(
        &mut self,
        chunk: Option<Bytes>,
        end_of_stream: bool,
        limit: usize,
    ) -> Result<Option<Bytes>, TooLarge> {
        if let Some(chunk) = chunk {
            self.push(chunk, limit)?;
        }
        Ok(end_of_stream.then(|| self.take()))
    }

    /// The whole body, without a copy when it came in one chunk.
    pub(crate) fn take(&mut self) -> Bytes {
        self.len = 0;
        match (self.first.take(), self.rest.take()) {
            (_, Some(buf)) => buf.freeze(),
            (Some(first), None) => first,
            (None, None) => Bytes::new(),
        }
    }
}

/// Parse a complete body once and check it against the request headers, counting the result.
pub(crate) fn inspect_and_validate(
    metrics: &Metrics,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Envelope, Refusal> {
    let checked = envelope::parse(body)
        .map_err(envelope_rejection)
        .and_then(|env| match validate::validate(headers, &env) {
            Ok(()) => Ok(env),
            Err(rej) => Err((rej, env.id)),
        });
    match &checked {
        Ok(_) => metrics.check_passed(),
        Err((rej, _)) => metrics
            .header_checks
            .with_label_values(&["rejected", rej.reason])
            .inc(),
    }
    checked
}

/// The id of a body, if it is a JSON-RPC request whose id can be read.
pub(crate) fn id_of(body: &[u8]) -> Option<Box<serde_json::value::RawValue>> {
    match envelope::parse(body) {
        Ok(env) => env.id,
        Err(e) => envelope_rejection(e).1,
    }
}

/// Bodies up to this size can be replayed by pingora's proxy pipe after being read before an
/// upstream is chosen (its retry buffer holds 64 KiB). The direct leg has no such bound: it sends
/// the body it holds.
pub(crate) const PREREAD_MAX: usize = 64 * 1024;

/// How a request's body is read, decided once from its framing and the leg that will carry it.
///
/// | leg, check             | declared length ≤ 64 KiB, or empty | declared > 64 KiB | no declared length (h2, chunked) |
/// |------------------------|------------------------------------|-------------------|----------------------------------|
/// | direct, checked        | `Whole`                            | `Whole`           | `Whole`                          |
/// | direct, sampled out    | `Whole`                            | `Stream`          | `Whole`                          |
/// | pingora pipe, checked  | `Whole`                            | `Hold`            | `Prefix`                         |
/// | pingora pipe, sampled  | `Stream`                           | `Stream`          | `Stream`                         |
///
/// `Whole` reads the body to its end before any instance is chosen (bounded by
/// `limits.max_body_bytes`, `limits.max_held_bytes` and `timeouts.request_body`), so nothing of
/// a refused request (not even its head) reaches an upstream. pingora's pipe replays at most
/// 64 KiB, so there a body of unknown length is read up to that (`Prefix`): one that ends
/// within it is a `Whole`; a longer one is held and checked chunk by chunk as a `Hold` is,
/// after the head went upstream. A sampled-out body of a declared length over 64 KiB streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    Whole,
    Prefix,
    Hold,
    Stream,
}

/// The plan for a body: `checked` (not sampled out), on the `direct` leg, with this framing
/// (`declared`: its `Content-Length` when not chunked; `empty`: no body at all).
pub(crate) fn plan(checked: bool, direct: bool, declared: Option<usize>, empty: bool) -> Plan {
    let small = empty || declared.is_some_and(|n| n <= PREREAD_MAX);
    match (direct, checked) {
        (true, true) => Plan::Whole,
        (true, false) if small || declared.is_none() => Plan::Whole,
        (false, true) if small => Plan::Whole,
        (false, true) if declared.is_none() => Plan::Prefix,
        (false, true) => Plan::Hold,
        _ => Plan::Stream,
    }
}

/// The declared length of a request's body: its `Content-Length`, unless it is chunked (a
/// chunked body's length is known only at its end).
pub(crate) fn declared_length(session: &Session, content_length: Option<usize>) -> Option<usize> {
    let chunked = session
        .req_header()
        .headers
        .contains_key(http::header::TRANSFER_ENCODING);
    content_length.filter(|_| !chunked)
}

/// Body bytes one request holds against its gateway's budget (`limits.max_held_bytes`, counted
/// in [`crate::gateway::journey::state::Gateway::held`], which a reload carries over); released when dropped.
#[derive(Debug, Default)]
pub struct Held {
    counter: Option<Arc<AtomicUsize>>,
    bytes: usize,
}

impl Held {
    /// Count `n` more bytes, unless all requests would then hold more than `budget`.
    pub(crate) fn reserve(
        &mut self,
        counter: &Arc<AtomicUsize>,
        n: usize,
        budget: usize,
    ) -> Result<(), Rejection> {
        let before = counter.fetch_add(n, Ordering::Relaxed);
        if before + n > budget {
            counter.fetch_sub(n, Ordering::Relaxed);
            return Err(over_budget(budget));
        }
        self.counter.get_or_insert_with(|| counter.clone());
        self.bytes += n;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(c) = &self.counter {
            c.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

fn over_budget(budget: usize) -> Rejection {
    Rejection::new(
        503,
        crate::mcp::codes::GATEWAY_OVERLOADED,
        "body-budget",
        format!("The gateway holds {budget} bytes of request bodies already (limits.max_held_bytes); retry shortly"),
    )
}

/// What a bounded read before any upstream is chosen found.
pub(crate) enum Read {
    /// The whole body.
    Whole(Bytes),
    /// More than the read's `stop_after` bytes, and the body goes on: what was read so far.
    Prefix(BodyHold),
    /// More than `stop_after` bytes, and the body ended with them.
    Over,
}

/// Read a (bounded) body inside `request_filter`, before any upstream is chosen, counting it
/// against the process-wide budget in `held` (`budget`): to its end, or (`stop_after`) until
/// more than that many bytes were read.
pub(crate) async fn read_whole_held(
    session: &mut Session,
    limit: usize,
    held: &mut Held,
    (counter, budget): (&Arc<AtomicUsize>, usize),
    stop_after: Option<usize>,
) -> Result<Read, Rejection> {
    let mut hold = BodyHold::default();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                held.reserve(counter, chunk.len(), budget)?;
                hold.push(chunk, limit).map_err(|t| too_large(t.limit))?;
                if stop_after.is_some_and(|n| hold.len() > n) {
                    return Ok(match session.is_body_done() {
                        true => Read::Over,
                        false => Read::Prefix(hold),
                    });
                }
            }
            Ok(None) => {
                trailers_refused(session)?;
                return Ok(Read::Whole(hold.take()));
            }
            Err(e) => return Err(body_incomplete(e)),
        }
    }
}

/// Read a whole (bounded) body inside `request_filter`, before any upstream is chosen.
pub(crate) async fn read_whole(session: &mut Session, limit: usize) -> Result<Bytes, Rejection> {
    let mut hold = BodyHold::default();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => hold.push(chunk, limit).map_err(|t| too_large(t.limit))?,
            Ok(None) => {
                trailers_refused(session)?;
                return Ok(hold.take());
            }
            Err(e) => return Err(body_incomplete(e)),
        }
    }
}

/// A body whose data has ended (pingora read `None`) while its stream has not: an HTTP/2
/// request with a trailer section, which is refused ([`crate::gateway::stages::answer::trailers`]). Over HTTP/1.1 the
/// data's end is the body's end (pingora's parser reads a chunked body's trailer lines and
/// forwards none of them).
pub(crate) fn trailers_refused(session: &mut Session) -> Result<(), Rejection> {
    match trailers_pending(session) {
        false => Ok(()),
        true => Err(crate::gateway::stages::answer::trailers()),
    }
}

/// Whether an h2 request's data has ended (pingora read `None`, or said end of stream) while its
/// stream has not: a trailer section follows.
pub(crate) fn trailers_pending(session: &mut Session) -> bool {
    session.as_downstream().is_http2() && !session.is_body_done()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_chunk_is_not_copied() {
        let mut h = BodyHold::default();
        let b = Bytes::from_static(b"hello");
        h.push(b.clone(), 10).unwrap();
        let out = h.take();
        assert_eq!(out.as_ptr(), b.as_ptr());
    }

    #[test]
    fn chunks_join_in_order_and_the_limit_holds() {
        let mut h = BodyHold::default();
        for part in ["ab", "cd", "ef"] {
            h.push(Bytes::from(part), 6).unwrap();
        }
        assert_eq!(h.push(Bytes::from("g"), 6), Err(TooLarge { limit: 6 }));
        assert_eq!(h.len(), 6);
        assert_eq!(&h.take()[..], b"abcdef");
        assert!(h.is_empty());
    }

    #[test]
    fn every_body_the_direct_leg_checks_is_read_whole_first() {
        use Plan::*;
        let big = Some(PREREAD_MAX + 1);
        let small = Some(PREREAD_MAX);
        // (checked, direct, declared, empty) -> plan
        let cases = [
            ((true, true, small, false), Whole),
            ((true, true, big, false), Whole),
            ((true, true, None, false), Whole),
            ((false, true, small, false), Whole),
            ((false, true, None, false), Whole),
            ((false, true, big, false), Stream),
            ((true, false, small, false), Whole),
            ((true, false, None, true), Whole),
            ((true, false, None, false), Prefix),
            ((true, false, big, false), Hold),
            ((false, false, small, false), Stream),
            ((false, false, None, false), Stream),
        ];
        for ((checked, direct, declared, empty), want) in cases {
            assert_eq!(
                plan(checked, direct, declared, empty),
                want,
                "{checked} {direct} {declared:?} {empty}"
            );
        }
    }
}
