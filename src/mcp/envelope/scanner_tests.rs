//! Unit tests of the byte scanner: what it accepts is JSON as serde_json reads it, and every
//! rule of the strict walk (duplicates, folded duplicates, depth) makes it punt.

use super::*;

/// Whether the scanner accepts `doc` as a whole (also used by the block tests).
pub(in crate::mcp::envelope) fn accepts(doc: &str) -> bool {
    let Ok(mut sc) = Scanner::new(doc.as_bytes()) else {
        return false;
    };
    sc.value(0).and_then(|()| sc.end()).is_ok()
}

pub(in crate::mcp::envelope) fn serde_reads(doc: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(doc).is_ok()
}

#[test]
fn accepts_json_as_serde_reads_it() {
    for doc in [
        r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        " \t\r\n{ \"a\" : [ 1 , -0 , 0.5 , 1e3 , 1E-3 , -12.5e+7 ] } \n",
        r#""plain""#,
        r#""esc \" \\ \/ \b \f \n \r \t \u0041 \u00e9 \ud83d\ude00""#,
        "\"caf\u{e9} \u{1F600} long string that spans several words of eight bytes\"",
        "[]",
        "{}",
        "123456789012345678901234567890",
        "1e308",
        "1e-400",
        "0e99999999999999999999",
    ] {
        assert!(accepts(doc), "{doc}");
        assert!(serde_reads(doc), "{doc}");
    }
}

#[test]
fn punts_on_what_serde_refuses() {
    for doc in [
        "01",
        "1.",
        ".5",
        "+1",
        "-",
        "1e",
        "1e+",
        "1e400",
        "-1e400",
        "1e99999999999999999999",
        "tru",
        "nul",
        r#"{"a":1,}"#,
        r#"[1,]"#,
        r#"{"a" 1}"#,
        r#"{a:1}"#,
        r#"{"a":1"#,
        r#""unterminated"#,
        "\"tab\tinside\"",
        "\"nul\u{0}inside\"",
        r#""bad \x escape""#,
        r#""bad \u12 escape""#,
        "[1] [2]",
        "\u{feff}{}",
    ] {
        assert!(!accepts(doc), "{doc}");
        assert!(!serde_reads(doc), "{doc}");
    }
    // Invalid UTF-8 anywhere.
    assert!(Scanner::new(b"\"\xff\"").is_err());
}

#[test]
fn punts_on_duplicates_and_folded_duplicates() {
    for doc in [
        r#"{"a":1,"a":2}"#,
        r#"{"name":1,"NAME":2}"#,
        r#"{"x":{"y":1,"Y":2}}"#,
        "{\"params\":1,\"param\u{17f}\":2}",
        "{\"kind\":1,\"\u{212a}ind\":2}",
        "{\"stra\u{df}e\":1,\"strasse\":2}",
        // Escaped keys are left to the walk (which decodes them).
        r#"{"\u0061":1}"#,
    ] {
        assert!(!accepts(doc), "{doc}");
    }
    assert!(accepts(r#"{"a":1,"b":{"a":2}}"#));
}

#[test]
fn wide_objects_find_duplicates_past_the_linear_part() {
    let wide = |dup: Option<&str>| {
        let mut d = String::from("{");
        for i in 0..5000 {
            d.push_str(&format!("\"key_{i}\":{i},"));
        }
        d.push_str(&format!("\"{}\":0}}", dup.unwrap_or("last")));
        d
    };
    assert!(accepts(&wide(None)));
    assert!(!accepts(&wide(Some("key_3"))));
    assert!(!accepts(&wide(Some("key_4321"))));
    assert!(!accepts(&wide(Some("KEY_4321"))));
    assert!(!accepts(&wide(Some("\u{212a}ey_17"))));
}

#[test]
fn nesting_is_bounded_like_the_walk() {
    let nest = |n: usize| "[".repeat(n) + &"]".repeat(n);
    assert!(accepts(&nest(MAX_DEPTH)));
    assert!(!accepts(&nest(MAX_DEPTH + 1)));
    let objs = |n: usize| "{\"a\":".repeat(n - 1) + "{}" + &"}".repeat(n - 1);
    assert!(accepts(&objs(MAX_DEPTH)));
    assert!(!accepts(&objs(MAX_DEPTH + 1)));
}

#[test]
fn lone_surrogates_are_left_to_the_walk() {
    for doc in [
        r#""\ud800""#,
        r#""\udc00""#,
        r#""\ud800\u0041""#,
        r#""\ud800x""#,
    ] {
        assert!(!accepts(doc), "{doc}");
    }
}

#[test]
fn the_special_byte_test_has_no_false_negatives() {
    for special_byte in [b'"', b'\\', 0u8, 0x1f] {
        for at in 0..8 {
            for fill in [b'a', 0x7f, 0x80, 0xff, b' '] {
                let mut w = [fill; 8];
                w[at] = special_byte;
                let m = special(u64::from_le_bytes(w));
                // The first special byte is located exactly.
                assert_eq!(m.trailing_zeros() / 8, at as u32, "{w:?}");
            }
        }
    }
    assert_eq!(special(u64::from_le_bytes(*b"abcdefgh")), 0);
    let plain = [0x80, 0xff, 0x7f, b' ', b'!', b'#', b'[', b']'];
    assert_eq!(special(u64::from_le_bytes(plain)), 0);
}

#[test]
fn folded_keys_collide_in_the_table_whatever_their_spelling() {
    // Past the linear part, the table must still join ASCII case variants and the non-ASCII
    // characters that fold into ASCII (long s, Kelvin sign), and `ß` with `ss`.
    let wide = |a: &str, b: &str| {
        let mut d = String::from("{");
        for i in 0..20 {
            d.push_str(&format!("\"filler_{i}\":0,"));
        }
        format!("{d}\"{a}\":1,\"{b}\":2}}")
    };
    for (a, b) in [
        ("Some_Long_Key_Name_X", "some_long_key_name_x"),
        ("params", "param\u{17f}"),
        ("kind_of_key", "\u{212a}IND_OF_KEY"),
        ("stra\u{df}e_long_name", "STRASSE_long_name"),
        ("\u{3a3}igma", "\u{3c2}IGMA"),
    ] {
        assert!(!accepts(&wide(a, b)), "{a} {b}");
        assert!(accepts(&wide(a, "different")), "{a}");
    }
}

#[test]
fn keys_of_every_length_are_told_apart_and_their_case_variants_refused_on_both_paths() {
    // Short documents take the byte scanner; the same ones padded past a block the bulk reading
    // (keys of up to sixteen bytes are read there as one or two words).
    let pad = |d: String| vec![d.clone(), format!("{d}{}", " ".repeat(80))];
    for len in 1..=24 {
        let key: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        let upper = key.to_ascii_uppercase();
        let mut other = key.clone().into_bytes();
        other[len / 2] = b'_';
        let other = String::from_utf8(other).unwrap();
        for doc in pad(format!("{{\"{key}\":1,\"{other}\":2}}")) {
            assert!(accepts(&doc), "{doc}");
        }
        for doc in pad(format!("{{\"{key}\":1,\"{upper}\":2}}")) {
            assert!(!accepts(&doc), "{doc}");
        }
        // Past the first eight members, in the table.
        let fillers: String = (0..10).map(|i| format!("\"f{i}\":0,")).collect();
        for doc in pad(format!("{{{fillers}\"{key}\":1,\"{upper}\":2}}")) {
            assert!(!accepts(&doc), "{doc}");
        }
        for doc in pad(format!("{{{fillers}\"{key}\":1,\"{other}\":2}}")) {
            assert!(accepts(&doc), "{doc}");
        }
        // One among the first eight (its hash computed again for the table), one past them.
        for doc in pad(format!("{{\"{key}\":1,{fillers}\"{upper}\":2}}")) {
            assert!(!accepts(&doc), "{doc}");
        }
    }
}
