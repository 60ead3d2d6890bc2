//! Inspect stage: hold the request body (bounded) until it is complete, then parse the envelope
//! once.
//!
//! Chunks are held rather than forwarded so that a request that fails the check never reaches
//! an upstream complete; a body that arrived in one chunk is passed on without a copy.

use bytes::{Bytes, BytesMut};

use crate::mcp::envelope::{self, Envelope, EnvelopeError};

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

/// Parse the envelope of a complete body.
pub fn inspect(body: &[u8]) -> Result<Envelope, EnvelopeError> {
    envelope::parse(body)
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
