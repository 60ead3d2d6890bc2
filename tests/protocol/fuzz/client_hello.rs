//! `client_hello`: the TLS ClientHello reader a `tls.min_version: "1.3"` listener decides on
//! (it reads only the offered versions; SNI and ALPN extensions are in the built hellos so
//! that the versions must be found among them).

use mcp_edge::gateway::transport::client_hello::{offer, wanted, Offer};
use proptest::prelude::*;

use super::{check, tokens};

const SUPPORTED_VERSIONS: u16 = 0x002b;

/// A ClientHello's parts: session id, cipher suites, extensions (type, data) in order.
#[derive(Debug, Clone)]
struct Hello {
    session_id: Vec<u8>,
    suites: Vec<u16>,
    extensions: Vec<(u16, Vec<u8>)>,
}

fn u16_len(v: &[u8]) -> [u8; 2] {
    (v.len() as u16).to_be_bytes()
}

/// A vector of `len`-prefixed items: the encoding of SNI's and ALPN's lists.
fn list16(items: &[Vec<u8>], item_len_u16: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for i in items {
        if item_len_u16 {
            out.extend(u16_len(i));
        } else {
            out.push(i.len() as u8);
        }
        out.extend(i);
    }
    [&u16_len(&out)[..], &out].concat()
}

impl Hello {
    /// The handshake message (type, 24-bit length, body).
    fn message(&self) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend([0x5a; 32]);
        body.push(self.session_id.len() as u8);
        body.extend(&self.session_id);
        let suites: Vec<u8> = self.suites.iter().flat_map(|s| s.to_be_bytes()).collect();
        body.extend(u16_len(&suites));
        body.extend(suites);
        body.extend([1, 0]);
        let mut exts = Vec::new();
        for (kind, data) in &self.extensions {
            exts.extend(kind.to_be_bytes());
            exts.extend(u16_len(data));
            exts.extend(data);
        }
        body.extend(u16_len(&exts));
        body.extend(exts);
        let n = body.len() as u32;
        [&[1u8][..], &n.to_be_bytes()[1..], &body].concat()
    }

    /// The message in records whose fragments end at `cuts` (one record when empty).
    fn records(&self, cuts: &[usize]) -> Vec<u8> {
        let msg = self.message();
        let mut ends: Vec<usize> = cuts.iter().map(|c| 1 + c % msg.len()).collect();
        ends.push(msg.len());
        ends.sort_unstable();
        ends.dedup();
        let (mut out, mut at) = (Vec::new(), 0);
        for end in ends {
            let fragment = &msg[at..end];
            out.extend([0x16, 0x03, 0x01]);
            out.extend(u16_len(fragment));
            out.extend(fragment);
            at = end;
        }
        out
    }

    /// What the listener must read from it.
    fn expected(&self) -> Offer {
        let versions = self
            .extensions
            .iter()
            .find(|(k, _)| *k == SUPPORTED_VERSIONS);
        match versions {
            Some((_, d)) if d[1..].chunks_exact(2).any(|v| v == [3, 4]) => Offer::Tls13,
            _ => Offer::Below13,
        }
    }
}

fn hello() -> impl Strategy<Value = Hello> {
    let name = "[a-z0-9.-]{1,40}".prop_map(String::into_bytes);
    let sni = proptest::collection::vec(name, 1..3).prop_map(|names| {
        let entries: Vec<Vec<u8>> = names
            .iter()
            .map(|n| [&[0u8][..], &u16_len(n), n].concat())
            .collect();
        (
            0x0000u16,
            [u16_len(&entries.concat()).to_vec(), entries.concat()].concat(),
        )
    });
    let protocols = prop_oneof![
        Just(b"h2".to_vec()),
        Just(b"http/1.1".to_vec()),
        "[a-z/0-9.]{1,12}".prop_map(String::into_bytes)
    ];
    let alpn =
        proptest::collection::vec(protocols, 1..4).prop_map(|p| (0x0010u16, list16(&p, false)));
    let version = prop_oneof![Just(0x0304u16), Just(0x0303), Just(0x0302), any::<u16>()];
    let versions = proptest::collection::vec(version, 1..6).prop_map(|v| {
        let list: Vec<u8> = v.iter().flat_map(|x| x.to_be_bytes()).collect();
        (
            SUPPORTED_VERSIONS,
            [&[list.len() as u8][..], &list].concat(),
        )
    });
    let other = (
        any::<u16>().prop_filter("not versions", |k| *k != SUPPORTED_VERSIONS),
        proptest::collection::vec(any::<u8>(), 0..40),
    );
    let extension = prop_oneof![sni, alpn, versions, other];
    (
        proptest::collection::vec(any::<u8>(), 0..33),
        proptest::collection::vec(any::<u16>(), 1..20),
        proptest::collection::vec(extension, 0..6),
    )
        .prop_map(|(session_id, suites, extensions)| Hello {
            session_id,
            suites,
            extensions,
        })
}

/// How many bytes of `wire` the listener peeks before it reads the offer (as it does: ask,
/// peek that many, ask again); past the end of `wire` when it would wait for more.
fn asked(wire: &[u8]) -> usize {
    let mut seen = 0;
    while let Some(n) = wanted(&wire[..seen]) {
        assert!(n > seen, "asked for {n} bytes with {seen} in hand");
        if n > wire.len() {
            return n;
        }
        seen = n;
    }
    seen
}

#[test]
fn a_built_client_hello_yields_its_offer_whatever_its_records() {
    let input = (hello(), proptest::collection::vec(any::<usize>(), 0..4));
    check("hello built", 2_000, input, |(h, cuts)| {
        let one = h.records(&[]);
        prop_assert_eq!(wanted(&one[..5]), Some(one.len()));
        prop_assert_eq!(offer(&one), h.expected(), "one record");
        let split = h.records(&cuts);
        prop_assert_eq!(
            asked(&split),
            split.len(),
            "the reader asks for every record"
        );
        prop_assert_eq!(
            offer(&split),
            h.expected(),
            "fragments ending at {:?}",
            cuts
        );
        Ok(())
    });
}

#[test]
fn a_client_hello_cut_short_is_never_read_as_an_offer() {
    let input = (hello(), proptest::collection::vec(any::<usize>(), 0..3));
    check("hello cut", 300, input, |(h, cuts)| {
        let whole = h.records(&cuts);
        for cut in 0..whole.len() {
            prop_assert_eq!(
                offer(&whole[..cut]),
                Offer::Unknown,
                "cut at {} of {}",
                cut,
                whole.len()
            );
        }
        Ok(())
    });
}

#[rustfmt::skip]
const HELLO_TOKENS: &[&[u8]] = &[
    b"\x16\x03\x01", b"\x16\x03\x03", b"\x01\x00", b"\x00", b"\x00\x2b", b"\x03\x04", b"\x03\x03",
    b"\x02", b"\x04", b"\xff\xff", b"\x00\x00", b"\x00\x10", b"\x20",
];

#[test]
fn the_client_hello_reader_never_panics_on_arbitrary_bytes() {
    let input = (tokens(HELLO_TOKENS, 60), hello(), any::<(usize, u8)>());
    check("hello arbitrary", 2_000, input, |(bytes, h, (at, flip))| {
        asked(&bytes); // each ask for more is for more than the listener has
        let _ = offer(&bytes);
        let mut mutant = h.records(&[]);
        let i = at % mutant.len();
        mutant[i] ^= flip;
        let _ = offer(&mutant);
        Ok(())
    });
}
