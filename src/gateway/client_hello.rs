//! Reading a TLS ClientHello's offered versions from the raw bytes, before the handshake, so a
//! listener with `tls.min_version: "1.3"` can refuse TLS 1.2 clients at the handshake.
//!
//! pingora builds rustls with TLS 1.2 and 1.3 enabled and offers no per-listener version hook;
//! the cipher suites a client lists do not tell (a TLS 1.2-only rustls client still lists the
//! TLS 1.3 suites), only the `supported_versions` extension (RFC 8446 §4.2.1) does.

/// What the first bytes of a connection say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// A ClientHello whose `supported_versions` lists TLS 1.3.
    Tls13,
    /// A complete ClientHello without TLS 1.3 (no `supported_versions`, or without 0x0304).
    Below13,
    /// Not a ClientHello, or cut short: leave it to rustls.
    Unknown,
}

/// The length of the first TLS record (header included), if `head` starts one.
pub fn record_len(head: &[u8; 5]) -> Option<usize> {
    (head[0] == 0x16).then(|| 5 + usize::from(u16::from_be_bytes([head[3], head[4]])))
}

/// Read the offer from the first record (header included).
pub fn offer(record: &[u8]) -> Offer {
    parse(record).unwrap_or(Offer::Unknown)
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

fn parse(record: &[u8]) -> Option<Offer> {
    let mut r = Reader(record);
    let head = r.take(5)?;
    if head[0] != 0x16 {
        return None;
    }
    // Handshake header: type 1 = ClientHello, 24-bit length.
    let hs = r.take(4)?;
    if hs[0] != 1 {
        return None;
    }
    r.take(2 + 32)?; // legacy_version, random
    let sid = r.u8()?;
    r.take(sid)?;
    let suites = r.u16()?;
    r.take(suites)?;
    let comp = r.u8()?;
    r.take(comp)?;
    let Some(ext_len) = r.u16() else {
        return Some(Offer::Below13); // no extensions at all: TLS 1.2 or older
    };
    let mut exts = Reader(r.take(ext_len)?);
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
pub const PROTOCOL_VERSION_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46];

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
        assert_eq!(record_len(r13[..5].try_into().unwrap()), Some(r13.len()));
        assert_eq!(offer(&r13), Offer::Tls13);
        assert_eq!(offer(&hello(&[(0x002b, vec![2, 3, 3])])), Offer::Below13);
        assert_eq!(
            offer(&hello(&[(0x000a, vec![0, 2, 0, 0x1d])])),
            Offer::Below13
        );
        assert_eq!(offer(&r13[..r13.len() - 3]), Offer::Unknown, "cut short");
        assert_eq!(offer(b"GET / HTTP/1.1\r\n"), Offer::Unknown);
    }
}
