//! Reading a TLS ClientHello's offered versions from the raw bytes, before the handshake, so a
//! listener with `tls.min_version: "1.3"` can refuse TLS 1.2 clients at the handshake.
//!
//! pingora builds rustls with TLS 1.2 and 1.3 enabled and offers no per-listener version hook;
//! the cipher suites a client lists do not tell (a TLS 1.2-only rustls client still lists the
//! TLS 1.3 suites), only the `supported_versions` extension (RFC 8446 §4.2.1) does.
//!
//! The ClientHello is read as rustls will read it: the handshake message is put together from
//! as many handshake records as carry it (a client may fragment it, RFC 8446 §5.1), and only
//! the bytes its own length covers are read. What cannot be read that way is never taken for
//! an offer: the listener lets a handshake through only on a TLS 1.3 offer it has read whole.

/// What the first bytes of a connection say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// A ClientHello whose `supported_versions` lists TLS 1.3.
    Tls13,
    /// A complete ClientHello without TLS 1.3 (no `supported_versions`, or without 0x0304).
    Below13,
    /// Not a ClientHello, malformed, cut short, or past the bounds below.
    Unknown,
}

/// Largest handshake message body read (rustls's own bound on a handshake message).
const MAX_MESSAGE: usize = 0xffff;
/// Most records a ClientHello may be fragmented into: 64 KiB needs five of 16 KiB; clients that
/// fragment on purpose (against middleboxes reading the SNI) use two or three.
const MAX_RECORDS: usize = 16;

/// How many bytes from the connection's start the reader needs to see the whole first
/// handshake message, given the `peeked` ones: `None` once it has enough, or when the bytes
/// cannot be a ClientHello (then [`offer`] answers `Unknown`).
pub fn wanted(peeked: &[u8]) -> Option<usize> {
    match assemble(peeked) {
        Assembly::Need(n) => Some(n),
        Assembly::Message(_) | Assembly::Invalid => None,
    }
}

/// Read the offer from the connection's first bytes (one or more records, headers included).
pub fn offer(bytes: &[u8]) -> Offer {
    match assemble(bytes) {
        Assembly::Message(msg) => parse(&msg).unwrap_or(Offer::Unknown),
        Assembly::Need(_) | Assembly::Invalid => Offer::Unknown,
    }
}

enum Assembly {
    /// The first handshake message, exactly its own bytes (type, length, body).
    Message(Vec<u8>),
    /// The bytes from the start needed to go on.
    Need(usize),
    /// Not handshake records, or past the bounds.
    Invalid,
}

/// Join the fragments of the first handshake message from the leading handshake records.
fn assemble(bytes: &[u8]) -> Assembly {
    let mut msg = Vec::new();
    let mut at = 0;
    for _ in 0..MAX_RECORDS {
        let header = match bytes.get(at..at + 5) {
            Some(h) => h,
            None => return Assembly::Need(at + 5),
        };
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        // Zero-length handshake fragments are forbidden, longer than 2^14 too (RFC 8446 §5.1).
        if header[0] != 0x16 || len == 0 || len > 1 << 14 {
            return Assembly::Invalid;
        }
        let Some(fragment) = bytes.get(at + 5..at + 5 + len) else {
            return Assembly::Need(at + 5 + len);
        };
        msg.extend_from_slice(fragment);
        at += 5 + len;
        if let Some(h) = msg.first_chunk::<4>() {
            let body = usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3]);
            if body > MAX_MESSAGE {
                return Assembly::Invalid;
            }
            if msg.len() >= 4 + body {
                msg.truncate(4 + body);
                return Assembly::Message(msg);
            }
        }
    }
    Assembly::Invalid
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }
}

/// The offer of one whole handshake message; `None` when it is no well-formed ClientHello.
fn parse(msg: &[u8]) -> Option<Offer> {
    let mut r = Reader(msg);
    let hs = r.take(4)?;
    if hs[0] != 1 {
        return None; // not a ClientHello
    }
    r.take(2 + 32)?; // legacy_version, random
    let sid = r.u8()?;
    r.take(sid)?;
    let suites = r.u16()?;
    r.take(suites)?;
    let comp = r.u8()?;
    r.take(comp)?;
    if r.0.is_empty() {
        return Some(Offer::Below13); // no extensions at all: TLS 1.2 or older
    }
    let ext_len = r.u16()?;
    let mut exts = Reader(r.take(ext_len)?);
    if !r.0.is_empty() {
        return None; // bytes after the extensions
    }
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let len = exts.u16()?;
        let data = exts.take(len)?;
        if kind == 0x002b {
            let mut v = Reader(data);
            let n = v.u8()?;
            let list = v.take(n)?;
            let has13 = list.chunks_exact(2).any(|c| c == [0x03, 0x04]);
            return Some(if has13 { Offer::Tls13 } else { Offer::Below13 });
        }
    }
    Some(Offer::Below13)
}

/// A fatal `protocol_version` alert (sent before closing a refused connection).
pub(crate) const PROTOCOL_VERSION_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46];

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello with these extensions (type, data).
    fn hello(exts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend([7u8; 32]);
        body.push(0); // session id
        body.extend([0, 4, 0x13, 0x01, 0xc0, 0x2f]); // two suites
        body.extend([1, 0]); // null compression
        let mut e = Vec::new();
        for (k, d) in exts {
            e.extend(k.to_be_bytes());
            e.extend((d.len() as u16).to_be_bytes());
            e.extend(d);
        }
        body.extend((e.len() as u16).to_be_bytes());
        body.extend(e);
        let mut hs = vec![1, 0, (body.len() >> 8) as u8, body.len() as u8];
        hs.extend(body);
        let mut rec = vec![0x16, 0x03, 0x01, (hs.len() >> 8) as u8, hs.len() as u8];
        rec.extend(hs);
        rec
    }

    #[test]
    fn versions_are_read_from_supported_versions() {
        let r13 = hello(&[(0x000a, vec![0, 2, 0, 0x1d]), (0x002b, vec![4, 3, 4, 3, 3])]);
        assert_eq!(wanted(&r13[..5]), Some(r13.len()));
        assert_eq!(wanted(&r13), None);
        assert_eq!(offer(&r13), Offer::Tls13);
        assert_eq!(offer(&hello(&[(0x002b, vec![2, 3, 3])])), Offer::Below13);
        assert_eq!(
            offer(&hello(&[(0x000a, vec![0, 2, 0, 0x1d])])),
            Offer::Below13
        );
        assert_eq!(offer(&r13[..r13.len() - 3]), Offer::Unknown, "cut short");
        assert_eq!(offer(b"GET / HTTP/1.1\r\n"), Offer::Unknown);
    }

    /// The same handshake message in records whose fragments end at `ends`.
    fn fragmented(record: &[u8], ends: &[usize]) -> Vec<u8> {
        let msg = &record[5..];
        let mut out = Vec::new();
        let mut at = 0;
        for &end in ends.iter().chain([&msg.len()]) {
            out.extend([0x16, 0x03, 0x01, 0, (end - at) as u8]);
            out.extend(&msg[at..end]);
            at = end;
        }
        out
    }

    #[test]
    fn a_fragmented_hello_is_read_across_its_records() {
        let r13 = hello(&[(0x000a, vec![0, 2, 0, 0x1d]), (0x002b, vec![2, 3, 4])]);
        let r12 = hello(&[(0x000a, vec![0, 2, 0, 0x1d])]);
        // Cut where the extensions start (4 + 2 + 32 + 1 + 6 + 2): a TLS 1.3 client was refused
        // as one without extensions, and a TLS 1.2 client cut elsewhere was let through.
        for (rec, expected) in [(&r13, Offer::Tls13), (&r12, Offer::Below13)] {
            for ends in [&[47][..], &[3], &[10, 47, 50]] {
                let wire = fragmented(rec, ends);
                assert_eq!(offer(&wire), expected, "fragments ending at {ends:?}");
                let mut seen = Vec::new();
                while let Some(n) = wanted(&seen) {
                    seen = wire[..n].to_vec();
                }
                assert_eq!(seen, wire, "the reader asks for every record, no more");
                assert_eq!(offer(&wire[..wire.len() - 1]), Offer::Unknown, "cut short");
                assert_eq!(offer(&wire[..5 + 47]), Offer::Unknown, "first record only");
            }
        }
    }

    #[test]
    fn only_the_bytes_the_message_length_covers_are_read() {
        // A supported_versions listing TLS 1.3 in the record but past the handshake message's
        // own length is not the client's offer: rustls reads the message by its length.
        let mut rec = hello(&[(0x000a, vec![0, 2, 0, 0x1d])]);
        rec.extend([0, 0x2b, 0, 3, 2, 3, 4]);
        let record = (rec.len() - 5) as u16;
        rec[3..5].copy_from_slice(&record.to_be_bytes());
        let exts = u16::from_be_bytes([rec[52], rec[53]]) + 7; // after 4 + 2 + 32 + 1 + 6 + 2
        rec[52..54].copy_from_slice(&exts.to_be_bytes());
        assert_eq!(offer(&rec), Offer::Unknown);
        assert_eq!(
            offer(&[0x16, 3, 1, 0, 0, 0x16, 3, 1, 0, 1, 1]),
            Offer::Unknown,
            "empty record"
        );
    }
}
