//! Unit tests of the first pass: the wide classifications agree with the byte-by-byte one, and
//! strings, escapes and tokens are told apart wherever a block boundary falls.

use super::*;
use crate::mcp::envelope::scanner::tests::{accepts, serde_reads};

/// Bytes drawn mostly from those the classification tells apart, and any byte now and then.
fn blocks() -> impl Iterator<Item = [u8; 64]> {
    const OFTEN: &[u8] = b"{}[]:,\"\\ \t\n\r\x00\x1f\x20\x7f\x80\xffazAZ09[{]}\x5b\x7b";
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..20_000).map(move |_| {
        let mut b = [0u8; 64];
        for c in &mut b {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *c = if x.is_multiple_of(4) {
                (x >> 8) as u8
            } else {
                OFTEN[(x >> 8) as usize % OFTEN.len()]
            };
        }
        b
    })
}

#[test]
fn the_wide_classifications_agree_with_the_byte_reference() {
    for block in blocks() {
        let want = classify_bytes(&block);
        assert_eq!(classify(&block), want, "{block:?}");
        assert_eq!(classify_best(&block, false), want, "{block:?}");
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            assert_eq!(classify_best(&block, true), want, "{block:?}");
        }
    }
    // Every byte value, at every position of the sixteen- and thirty-two-byte lanes.
    for c in 0..=255u8 {
        for at in 0..64 {
            let mut block = [b'a'; 64];
            block[at] = c;
            assert_eq!(
                classify_best(&block, true),
                classify_bytes(&block),
                "{c} at {at}"
            );
        }
    }
}

/// Each document, shifted by 0 to 130 bytes inside an array, so that every byte of it meets
/// every place in a block: read as serde_json reads it.
#[test]
fn strings_and_escapes_are_read_wherever_a_block_boundary_falls() {
    let valid = [
        r#""a \\ b \" c \\\\ d \\\" e""#,
        r#""\ud83d\ude00 and \u00e9 and \/ \b \f \n \r \t""#,
        r#"{"k":"\"","l":["\\",{"m":"\\\""}],"n":"x"}"#,
        "\"caf\u{e9} \u{1F600} \u{e9}t\u{e9}\"",
        r#"[1,-2.5e+3,0,true,false,null,{"a":[{}]}]"#,
    ];
    let invalid = [
        r#""a \x b""#,
        r#""\u12G4""#,
        r#""\ud83d alone""#,
        r#""\ude00""#,
        r#""\\\""#,
        "\"raw\ttab\"",
        r#"["a" "b"]"#,
        r#"{"k" 1}"#,
        r#"[tru]"#,
        r#"[1.5.2]"#,
        r#"[1\]"#,
        r#"[\"a"]"#,
        r#"{"a":1,}"#,
        "[\u{1}]",
    ];
    let backslashes = format!("\"{}\"", "\\".repeat(80));
    let valid = valid.iter().copied().chain([backslashes.as_str()]);
    for pad in 0..130 {
        let ws = " ".repeat(pad);
        for doc in valid.clone() {
            let d = format!("[{ws}{doc}]");
            assert!(serde_reads(&d), "{d}");
            assert!(accepts(&d), "pad {pad}: {d}");
        }
        for doc in invalid {
            let d = format!("[{ws}{doc}]");
            assert_eq!(
                accepts(&d),
                serde_reads(&d) && !doc.contains(r"\u"),
                "pad {pad}: {d}"
            );
            assert!(!accepts(&d), "pad {pad}: {d}");
        }
    }
}

/// The tokens of a document: both quotes of each string, the structural characters outside
/// strings, and the first byte of each number or literal, nothing inside strings.
#[test]
fn tokens_are_the_structure_outside_strings() {
    let doc = br#"{"a{,":[1, true ,"x\"]"],"b":-0.5}"#;
    let mut t = Tokens::new(doc, 0);
    let mut got = Vec::new();
    while let Ok(at) = t.next() {
        got.push(doc[at] as char);
    }
    let want: Vec<char> = r#"{"":[1,t,""],"":-}"#.chars().collect();
    assert_eq!(got, want);
}
