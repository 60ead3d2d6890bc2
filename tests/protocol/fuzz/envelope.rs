//! `mcp::envelope::parse` on bytes no generator of `differential` makes: arbitrary
//! bytes, and envelopes with bytes flipped, cut or inserted.

use mcp_edge::mcp::envelope::{fast, parse, walk};
use proptest::prelude::*;

use super::{check, tokens};

#[rustfmt::skip]
const JSON_TOKENS: &[&[u8]] = &[
    b"{", b"}", b"[", b"]", b",", b":", b"\"", b"\"jsonrpc\"", b"\"2.0\"", b"\"method\"",
    b"\"tools/call\"", b"\"params\"", b"\"name\"", b"\"id\"", b"\"_meta\"", b"\\u0000", b"\\ud800",
    b"\\", b"1e999", b"-0", b"null", b"true", b" ", b"\xef\xbb\xbf", b"\xc3\x28",
];

const ENVELOPE: &[u8] = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_weather","arguments":{"city":"Oslo"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;

#[test]
fn the_envelope_parser_never_panics_and_its_two_readers_agree() {
    let edit = (any::<usize>(), any::<u8>(), 0u8..5);
    let input = (
        tokens(JSON_TOKENS, 60),
        proptest::collection::vec(edit, 1..4),
    );
    check("envelope", 3_000, input, |(bytes, edits)| {
        let mut mutant = ENVELOPE.to_vec();
        for (at, b, kind) in edits {
            let i = at % mutant.len();
            match kind {
                0 => mutant[i] ^= b.max(1),
                1 => mutant.truncate(i),
                2 => mutant.insert(i, b),
                3 => mutant[i] ^= 0x20, // a letter's case: `"Method"`, `"NAME"`
                _ => mutant.push(b),
            }
            if mutant.is_empty() {
                break;
            }
        }
        for doc in [&bytes, &mutant] {
            let _ = parse(doc);
            if let Some(env) = fast::parse(doc) {
                prop_assert!(matches!(walk::parse(doc), Ok(w) if w == env), "{:?}", doc);
            }
        }
        Ok(())
    });
}
