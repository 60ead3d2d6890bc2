//! Inspect stage: read the request body (bounded) until it is complete, then parse the envelope
//! once and check it against the headers ([`super::validate`]).
//!
//! Chunks are held rather than forwarded so that a request that fails the check never reaches
//! an upstream complete; a body that arrived in one chunk is passed on without a copy.

use bytes::{Bytes, BytesMut};
use pingora::proxy::Session;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::mcp::envelope::{self, Envelope};
use crate::mcp::Rejection;

use super::answer::{body_incomplete, envelope_rejection, too_large, Refusal};
use super::observe::Metrics;
use super::validate;

/// The body is larger than the configured limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
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
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Add a chunk; refuse it if the body would exceed `limit` bytes.
    pub fn push(&mut self, chunk: Bytes, limit: usize) -> Result<(), TooLarge> {
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
    pub fn feed(
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
    pub fn take(&mut self) -> Bytes {
        self.len = 0;
        match (self.first.take(), self.rest.take()) {
            (_, Some(buf)) => buf.freeze(),
            (Some(first), None) => first,
            (None, None) => Bytes::new(),
        }
    }
}

/// Parse a complete body once and check it against the request headers, counting the result.
pub fn inspect_and_validate(
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
pub fn id_of(body: &[u8]) -> Option<Box<serde_json::value::RawValue>> {
    match envelope::parse(body) {
        Ok(env) => env.id,
        Err(e) => envelope_rejection(e).1,
    }
}

/// Bodies up to this size are read and checked before an upstream is chosen: pingora replays a
/// pre-read body only from its retry buffer, which holds 64 KiB. Larger (or chunked) bodies are
/// held chunk by chunk in `request_body_filter` instead, and cut off if they fail the check.
pub const PREREAD_MAX: usize = 64 * 1024;

/// Whether this request's body can be read before an upstream is chosen.
pub fn fits_preread(session: &mut Session, content_length: Option<usize>) -> bool {
    let chunked = session
        .req_header()
        .headers
        .contains_key(http::header::TRANSFER_ENCODING);
    !chunked && (content_length.is_some_and(|n| n <= PREREAD_MAX) || session.is_body_empty())
}

/// Read at most `max` bytes of body to find the request id; `None` when the body is longer
/// (then the rest is not read and the connection closes after the answer).
pub async fn id_from_prefix(
    session: &mut Session,
    max: usize,
) -> Option<Box<serde_json::value::RawValue>> {
    read_whole(session, max).await.ok().and_then(|b| id_of(&b))
}

/// Body bytes one request holds against its gateway's budget (`limits.max_held_bytes`, counted
/// in [`super::Gateway::held`], which a reload carries over); released when dropped.
#[derive(Debug, Default)]
pub struct Held {
    counter: Option<Arc<AtomicUsize>>,
    bytes: usize,
}

impl Held {
    /// Count `n` more bytes, unless all requests would then hold more than `budget`.
    pub fn reserve(
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

/// Read a whole (bounded) body inside `request_filter`, before any upstream is chosen, counting
/// it against the process-wide budget in `held` (`budget`).
pub async fn read_whole_held(
    session: &mut Session,
    limit: usize,
    held: &mut Held,
    (counter, budget): (&Arc<AtomicUsize>, usize),
) -> Result<Bytes, Rejection> {
    let mut hold = BodyHold::default();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                held.reserve(counter, chunk.len(), budget)?;
                hold.push(chunk, limit).map_err(|t| too_large(t.limit))?
            }
            Ok(None) => return Ok(hold.take()),
            Err(e) => return Err(body_incomplete(e)),
        }
    }
}

/// Read a whole (bounded) body inside `request_filter`, before any upstream is chosen.
pub async fn read_whole(session: &mut Session, limit: usize) -> Result<Bytes, Rejection> {
    let mut hold = BodyHold::default();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => hold.push(chunk, limit).map_err(|t| too_large(t.limit))?,
            Ok(None) => return Ok(hold.take()),
            Err(e) => return Err(body_incomplete(e)),
        }
    }
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
}
