//! Query strings as the frameworks behind the gateway read them: the one reader of query keys.
//!
//! The gateway decides on a query key (today: a bearer token sent as `access_token`, which MCP
//! forbids) before an upstream framework reads the same query its own way. So a key is taken to
//! *name* a parameter when any reading a framework applies gives the parameter's name:
//!
//! - pairs split on `&` and on `;` (Go before 1.17, Python's `cgi` before 3.9.2, servlet
//!   containers); the key is what precedes the first `=` (the whole pair without one);
//! - `+` is a space and `%XX` any byte (`application/x-www-form-urlencoded`), `%uXXXX` a code
//!   point (IIS, JavaScript's `unescape`); a malformed `%` is read both ways readers read it:
//!   kept as a literal (PHP, Python, Node) and dropped with the hex digit after it, the next
//!   character kept (nginx); readers that refuse it (Go, Java, Rack) drop the pair;
//! - decoded again while that changes it (a proxy and a framework each decoding: `%255F` →
//!   `%5F` → `_`), up to [`MAX_DECODES`] times; a key that still decodes after that is taken
//!   to name anything (no client encodes a key that deep);
//! - surrounding whitespace trimmed, and a NUL ending the name (C-string readers);
//! - PHP's names: a `[…]` suffix makes an array of the name before it (`access_token[]`), and
//!   ` `, `.` and `[` inside a name become `_` (`access.token`);
//! - names compared ignoring case, with the strict JSON reader's fold
//!   ([`super::strict::fold_eq`]: ASCII case, and Unicode characters such as `ſ` that fold onto
//!   ASCII letters).
//!
//! This refuses a little more than any one framework would read as the name; that is the point.
//! [`decode_component`] is the plain, strict decoding for the gateway's own endpoints, where the
//! gateway is the only reader. No I/O.

use super::strict::fold_eq;

/// How many decodings of a key are read (a client, a proxy and a framework can each decode).
pub(crate) const MAX_DECODES: usize = 3;

/// The raw `(key, value)` pairs of a query string, split on `&` and `;`, not decoded.
pub(crate) fn pairs(query: &str) -> impl Iterator<Item = (&str, &str)> {
    query
        .split(['&', ';'])
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
}

/// Whether some key of `query` may name the parameter `name` for a framework behind.
pub(crate) fn has_key(query: Option<&str>, name: &str) -> bool {
    query.is_some_and(|q| pairs(q).any(|(k, _)| names(k, name)))
}

/// Whether a framework could read the raw key `raw` (as it appears in the query) as `name`.
pub(crate) fn names(raw: &str, name: &str) -> bool {
    let mut readings = vec![raw.as_bytes().to_vec()];
    for round in 0..=MAX_DECODES {
        if readings.iter().any(|k| reads_as(k, name)) {
            return true;
        }
        let mut next: Vec<Vec<u8>> = Vec::new();
        for k in &readings {
            for d in decodings(k).into_iter().flatten() {
                if !next.contains(&d) {
                    next.push(d);
                }
            }
        }
        if next.is_empty() {
            return false;
        }
        if round == MAX_DECODES {
            // Still decoding: what it finally becomes is anyone's guess.
            return true;
        }
        readings = next;
    }
    false
}

/// Whether one decoded key is `name` for some framework.
fn reads_as(key: &[u8], name: &str) -> bool {
    let key = key.split(|b| *b == 0).next().unwrap_or_default();
    let key = String::from_utf8_lossy(key);
    let key = key.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\u{b}');
    let php = |k: &str| k.replace([' ', '.', '['], "_");
    let array_base = key
        .find('[')
        .filter(|i| key[*i..].contains(']'))
        .map(|i| &key[..i]);
    fold_eq(key, name)
        || fold_eq(&php(key), name)
        || array_base.is_some_and(|b| fold_eq(b, name) || fold_eq(&php(b), name))
}

/// The next decodings of a key: the readings that keep its malformed escapes as literals and
/// that drop them (the same when it has none); `None` where decoding changes nothing.
fn decodings(s: &[u8]) -> [Option<Vec<u8>>; 2] {
    if !s.iter().any(|b| *b == b'%' || *b == b'+') {
        return [None, None];
    }
    let (mut keep, mut drop) = (Vec::with_capacity(s.len()), Vec::with_capacity(s.len()));
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            if let Some((bytes, used)) = escape(&s[i + 1..]) {
                keep.extend_from_slice(&bytes);
                drop.extend_from_slice(&bytes);
                i += 1 + used;
            } else {
                // Malformed: kept as is, or (nginx) the `%` and a hex digit after it dropped.
                let skip = usize::from(s.get(i + 1).is_some_and(u8::is_ascii_hexdigit));
                keep.extend_from_slice(&s[i..=i + skip]);
                i += 1 + skip;
            }
            continue;
        }
        let b = if s[i] == b'+' { b' ' } else { s[i] };
        keep.push(b);
        drop.push(b);
        i += 1;
    }
    let changed = |v: Vec<u8>| (v != s).then_some(v);
    [changed(keep), changed(drop)]
}

/// A well-formed escape after a `%`: `XX` (one byte) or `uXXXX` (a code point, as UTF-8), and
/// how many bytes it used.
fn escape(rest: &[u8]) -> Option<(Vec<u8>, usize)> {
    if let Some(b) = hex(rest.get(..2)?) {
        return Some((vec![b as u8], 2));
    }
    let code = rest
        .strip_prefix(b"u")
        .or_else(|| rest.strip_prefix(b"U"))?;
    let c = char::from_u32(hex(code.get(..4)?)?)?;
    Some((c.to_string().into_bytes(), 5))
}

/// The value of a run of hex digits.
fn hex(digits: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(digits).ok()?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// One query component decoded once, strictly, as `application/x-www-form-urlencoded`: `+` a
/// space, `%XX` a byte. `None` when an escape is malformed or the bytes are not UTF-8.
pub(crate) fn decode_component(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                out.push(hex(b.get(i + 1..i + 3)?)? as u8);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "access_token";

    #[test]
    fn every_spelling_a_framework_decodes_to_the_name_names_it() {
        for raw in [
            "access_token",
            "ACCESS_TOKEN",
            "Access_Token",
            "access%5Ftoken",
            "access%5ftoken",
            "%61ccess%5Ftoken",
            "%41CCESS%5fTOKEN",
            "access%u005Ftoken",
            "access%U005ftoken",
            "access+token",
            "access%20token",
            "access.token",
            "access%2Etoken",
            "access[token",
            "access_token[]",
            "access_token[0]",
            "access%5Ftoken%5B%5D",
            "access_token%00junk",
            "+access_token+",
            "%20access_token",
            "access%255Ftoken",
            "access%25255Ftoken",
            "acce%C5%BFs_token",
            "access%_token",
            "access%5_token",
        ] {
            assert!(names(raw, T), "{raw} names {T}");
        }
    }

    #[test]
    fn other_keys_do_not_name_it() {
        for raw in [
            "token",
            "access",
            "access_tokens",
            "access-token",
            "xaccess_token",
            "access_token_",
            "access%5Gtoken",
            "access%zztoken",
            "access%5",
            "id_token[]",
            "%",
            "",
        ] {
            assert!(!names(raw, T), "{raw} does not name {T}");
        }
    }

    #[test]
    fn a_key_still_decoding_after_the_last_round_is_taken_to_name_it() {
        // "A" encoded four times: some chain of decoders could end anywhere.
        assert!(names("%25252541", T));
        assert!(!names("%252541", T), "three decodings end in \"A\"");
    }

    #[test]
    fn queries_split_on_ampersands_and_semicolons() {
        assert!(has_key(Some("a=1&access_token=x"), T));
        assert!(has_key(Some("a=1;access%5Ftoken=x"), T));
        assert!(has_key(Some("access_token"), T), "a key without a value");
        assert!(has_key(Some("x=1&&ACCESS%5fTOKEN[]=x"), T));
        assert!(
            !has_key(Some("token=access_token"), T),
            "a value is not a key"
        );
        assert!(!has_key(Some("a=access_token;b=access%5Ftoken"), T));
        assert!(!has_key(None, T));
        assert!(!has_key(Some(""), T));
        let got: Vec<_> = pairs("a=1;b&c=x=y&").collect();
        assert_eq!(got, [("a", "1"), ("b", ""), ("c", "x=y")]);
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
}
