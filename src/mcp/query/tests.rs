//! One table per reader's rule: queries any reader reads as carrying `access_token` (refused)
//! beside near misses no reader reads so (let through).

use super::*;

const T: &str = "access_token";

/// Check a table of `(query, whether some reader reads an access_token key in it)`.
fn table(rule: &str, rows: &[(&str, bool)]) {
    for (query, refused) in rows {
        assert_eq!(
            has_key(Some(query), T),
            *refused,
            "{rule}: {query:?} should {}be refused",
            if *refused { "" } else { "not " }
        );
    }
}

#[test]
fn separators_ampersand_and_semicolon() {
    // WHATWG, Java, qs: `&`; Go < 1.17, Python < 3.9.2, Rack < 3, PHP `&;`: `;` too.
    table(
        "separators",
        &[
            ("access_token=x", true),
            ("a=1&access_token=x", true),
            ("a=1;access_token=x", true),
            ("a=1&&;access_token", true),
            ("access_token", true),
            ("a=1&amp;access_token=x", true),
            ("token=access_token", false),
            ("a=access_token;b=access%5Ftoken", false),
            ("a=1,access_token=x", false),
            ("", false),
        ],
    );
    assert!(!has_key(None, T));
    let got: Vec<_> = pairs("a=1;b&c=x=y&").collect();
    assert_eq!(got, [("a", "1"), ("b", ""), ("c", "x=y")]);
}

#[test]
fn form_decoding_plus_and_percent() {
    // Every reader: `+` a space, `%XX` a byte (either case); IIS/`unescape`: `%uXXXX`.
    table(
        "decoding",
        &[
            ("access%5Ftoken=x", true),
            ("access%5ftoken=x", true),
            ("%61ccess%5Ftoken=x", true),
            ("%41CCESS%5fTOKEN=x", true),
            ("access%u005Ftoken=x", true),
            ("access%U005ftoken=x", true),
            ("access%5Gtoken=x", false),
            ("access%zztoken=x", false),
            ("access%5=x", false),
            ("%=x", false),
        ],
    );
}

#[test]
fn malformed_escapes_kept_or_dropped() {
    // PHP, Python, Node keep a bad `%` as a literal; nginx drops it with one hex digit after.
    table(
        "malformed",
        &[
            ("access%_token=x", true),
            ("access%5_token=x", true),
            ("access%x_token=x", false),
        ],
    );
}

#[test]
fn decoded_again_by_a_chain_of_decoders() {
    // No reader decodes twice, a proxy and a framework can: read up to MAX_DECODES decodings.
    table(
        "double decoding",
        &[
            ("access%255Ftoken=x", true),
            ("access%25255Ftoken=x", true),
            ("access%2525255Ftoken=x", true),
            ("access%252Dtoken=x", false),
        ],
    );
    // "A" encoded four times: some chain of decoders could end anywhere.
    assert!(names("%25252541", T));
    assert!(!names("%252541", T), "three decodings end in \"A\"");
}

#[test]
fn leading_and_trailing_characters() {
    // PHP drops leading spaces, Java/.NET `trim()` blanks and controls, URLSearchParams and
    // qs's ignoreQueryPrefix a leading `?`, C readers stop at a NUL.
    table(
        "leading/trailing",
        &[
            ("+access_token+=x", true),
            ("%20access_token=x", true),
            ("%09access_token%0D%0A=x", true),
            ("%01access_token%7F=x", true),
            ("%EF%BB%BFaccess_token=x", true),
            ("%C2%A0access_token=x", true),
            ("?access_token=x", true),
            ("%3Faccess_token=x", true),
            ("access_token%00junk=x", true),
            ("xaccess_token=x", false),
            ("access_token_=x", false),
            ("-access_token=x", false),
        ],
    );
}

#[test]
fn brackets_rack_php_and_qs() {
    // `name[]`, `name[x]` (all three), `[name]` (Rack, qs), `name]` and `]name` (Rack).
    table(
        "brackets",
        &[
            ("access_token[]=x", true),
            ("access_token[0]=x", true),
            ("access_token[x][y]=x", true),
            ("access_token%5B%5D=x", true),
            ("[access_token]=x", true),
            ("[[access_token]]=x", true),
            ("]access_token=x", true),
            ("access_token]=x", true),
            ("%5Baccess_token%5D=x", true),
            ("x[access_token]=x", false),
            ("id_token[]=x", false),
            ("access[token]=x", false),
        ],
    );
}

#[test]
fn qs_dot_notation() {
    // qs with allowDots: `name.x` is `name[x]`, `.name` is `[name]`.
    table(
        "dots",
        &[
            ("access_token.x=1", true),
            (".access_token=1", true),
            ("access_token.x.y=1", true),
            ("x.access_token=1", false),
        ],
    );
}

#[test]
fn php_name_mangling() {
    // ` `, `.` and an unclosed `[` become `_` (bytes 0x80–0x9F too in older builds).
    table(
        "php",
        &[
            ("access.token=x", true),
            ("access%2Etoken=x", true),
            ("access+token=x", true),
            ("access%20token=x", true),
            ("access[token=x", true),
            ("access.token[]=x", true),
            ("access%80token=x", true),
            ("access%9Ftoken=x", true),
            ("access-token=x", false),
            ("access__token=x", false),
        ],
    );
}

#[test]
fn case_insensitive_readers() {
    // ASCII case, and Unicode characters that fold onto ASCII (ſ → s, Kelvin sign → k).
    table(
        "case",
        &[
            ("ACCESS_TOKEN=x", true),
            ("Access_Token=x", true),
            ("acce%C5%BFs_token=x", true),
            ("access_to%E2%84%AAen=x", true),
            ("ACCESS%2ETOKEN[]=x", true),
            ("acc%C3%A9ss_token=x", false),
        ],
    );
}

#[test]
fn names_is_the_key_level_reading() {
    for raw in ["access_token", "Access+Token%5B%5D", "access%255Ftoken"] {
        assert!(names(raw, T), "{raw}");
    }
    for raw in ["token", "access", "access_tokens", "access-token", ""] {
        assert!(!names(raw, T), "{raw}");
    }
}

#[test]
fn components_decode_strictly() {
    assert_eq!(
        decode_component("file%3A%2F%2F%2Fa+b").as_deref(),
        Some("file:///a b")
    );
    assert_eq!(decode_component("%e2%82%ac").as_deref(), Some("\u{20ac}"));
    assert_eq!(decode_component("%zz"), None);
    assert_eq!(decode_component("%5"), None);
    assert_eq!(decode_component("%ff"), None, "not UTF-8");
}
