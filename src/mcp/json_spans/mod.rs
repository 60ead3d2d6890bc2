//! A JSON object's members as spans of its bytes: the bridge reads a 2025-era request and a
//! 2026 result this way and copies members as they were written, with no value tree. The
//! object is checked as it is read (strings, escapes, numbers, literals, nesting: RFC 8259's
//! grammar), so what is taken is JSON, and nothing follows it but whitespace.
//!
//! What two parsers could read differently is refused (`None`), so the caller takes its value
//! path: a key written with an escape (`"n\u0061me"` is `name` to a JSON parser, not to a
//! comparison of bytes), nesting deeper than [`MAX_DEPTH`] and, with [`unique`], a key named
//! twice (a value tree keeps the last, a copy of the members would keep both).

mod string_scan;
use string_scan::{scan_string, string_end};

/// One member: its key's bytes (as written between the quotes: no escape in it) and its
/// value's bytes.
pub type Member<'a> = (&'a [u8], &'a [u8]);

/// The deepest nesting read (deeper: refused; serde_json's own limit is 128).
pub const MAX_DEPTH: usize = 100;

/// The members of the object `text` is (whitespace around it allowed, nothing else), in order,
/// when its keys carry no escape.
pub fn members(text: &[u8]) -> Option<Vec<Member<'_>>> {
    Some(members_and(text, b"")?.0)
}

/// [`members`], and in the same pass the members of the object that member `inner` holds, if
/// it holds one (read once, where it stands).
pub fn members_and<'a>(
    text: &'a [u8],
    inner: &[u8],
) -> Option<(Vec<Member<'a>>, Option<Vec<Member<'a>>>)> {
    let mut out = Vec::with_capacity(4);
    let mut nested = None;
    let end = object(text, skip_ws(text, 0), 0, true, &mut |k: &'a [u8], from| {
        let to = match (k == inner && !inner.is_empty(), text.get(from)) {
            (true, Some(b'{')) => {
                let mut m = Vec::with_capacity(4);
                let to = object(text, from, 1, true, &mut |k: &'a [u8], from| {
                    let to = value_end(text, from, 2)?;
                    m.push((k, &text[from..to]));
                    Some(to)
                })?;
                nested = Some(m);
                to
            }
            _ => value_end(text, from, 1)?,
        };
        out.push((k, &text[from..to]));
        Some(to)
    })?;
    (skip_ws(text, end) == text.len()).then_some((out, nested))
}

/// Whether no key is named twice (asked of at most 32 members; more are refused).
pub fn unique(members: &[Member]) -> bool {
    let m = members;
    m.len() <= 32 && (1..m.len()).all(|i| m[..i].iter().all(|(k, _)| *k != m[i].0))
}

/// The value of member `key`, if any.
pub fn get<'a>(members: &[Member<'a>], key: &str) -> Option<&'a [u8]> {
    let key = key.as_bytes();
    members.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// The string a JSON string value says (`None`: no string), unescaped only when it must be.
pub fn string(value: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    let inner = value.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if inner.contains(&b'\\') {
        return serde_json::from_slice::<String>(value).ok().map(Into::into);
    }
    std::str::from_utf8(inner).ok().map(Into::into)
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = s.get(i) {
        i += 1;
    }
    i
}

/// The object at `i`, each member's key (its bytes between the quotes) and where its value
/// starts handed to `each`, which reads the value and says where it ends; where the object ends
/// (`None`: no object, or with `plain_keys` a key written with an escape).
fn object<'a, F: FnMut(&'a [u8], usize) -> Option<usize>>(
    s: &'a [u8],
    i: usize,
    depth: usize,
    plain_keys: bool,
    each: &mut F,
) -> Option<usize> {
    if s.get(i) != Some(&b'{') || depth >= MAX_DEPTH {
        return None;
    }
    let mut i = skip_ws(s, i + 1);
    if s.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        let (key_end, escaped) = scan_string(s, i)?;
        if escaped && plain_keys {
            return None;
        }
        let key = &s[i + 1..key_end - 1];
        i = skip_ws(s, key_end);
        if s.get(i) != Some(&b':') {
            return None;
        }
        let to = each(key, skip_ws(s, i + 1))?;
        i = skip_ws(s, to);
        match s.get(i)? {
            b',' => i = skip_ws(s, i + 1),
            b'}' => return Some(i + 1),
            _ => return None,
        }
    }
}

/// Where the value at `i` ends (one past its last byte), when it is one.
fn value_end(s: &[u8], i: usize, depth: usize) -> Option<usize> {
    match *s.get(i)? {
        b'"' => string_end(s, i),
        b'{' => object(s, i, depth, false, &mut |_, from| {
            value_end(s, from, depth + 1)
        }),
        b'[' => array_end(s, i, depth),
        b't' => literal_end(s, i, b"true"),
        b'f' => literal_end(s, i, b"false"),
        b'n' => literal_end(s, i, b"null"),
        _ => number_end(s, i),
    }
}

fn array_end(s: &[u8], i: usize, depth: usize) -> Option<usize> {
    if depth >= MAX_DEPTH {
        return None;
    }
    let mut i = skip_ws(s, i + 1);
    if s.get(i) == Some(&b']') {
        return Some(i + 1);
    }
    loop {
        i = skip_ws(s, value_end(s, i, depth + 1)?);
        match s.get(i)? {
            b',' => i = skip_ws(s, i + 1),
            b']' => return Some(i + 1),
            _ => return None,
        }
    }
}

fn literal_end(s: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    s.get(i..)?.starts_with(word).then_some(i + word.len())
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
fn number_end(s: &[u8], mut i: usize) -> Option<usize> {
    let digits = |i: usize| {
        let rest = s.get(i..).unwrap_or_default();
        rest.iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(rest.len())
    };
    if s.get(i) == Some(&b'-') {
        i += 1;
    }
    match (s.get(i)?, digits(i)) {
        (_, 0) => return None,
        (b'0', n) if n > 1 => return None,
        (_, n) => i += n,
    }
    if s.get(i) == Some(&b'.') {
        let n = digits(i + 1);
        if n == 0 {
            return None;
        }
        i += 1 + n;
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let n = digits(i);
        if n == 0 {
            return None;
        }
        i += n;
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};

    /// The members as a value tree reads them.
    fn by_value(text: &str) -> Vec<(String, Value)> {
        let m: Map<String, Value> = serde_json::from_str(text).unwrap();
        m.into_iter().collect()
    }

    #[test]
    fn members_are_the_members_a_json_parser_reads() {
        let cases = [
            r#"{}"#,
            r#" { } "#,
            r#"{"a":1}"#,
            r#"{ "a" : -1.5e3 , "b":[1,{"c":"]}\"{"}],"d":{"e":[[]]},"f":true,"g":null,"h":"x\\\"y"}"#,
            "{\"s\":\"\u{e9}\\u00e9\\n\",\n\"t\":\t[ ]\r}",
        ];
        for c in cases {
            let got: Vec<(String, Value)> = members(c.as_bytes())
                .unwrap()
                .into_iter()
                .map(|(k, v)| {
                    (
                        String::from_utf8(k.to_vec()).unwrap(),
                        serde_json::from_slice(v).unwrap(),
                    )
                })
                .collect();
            let mut want = by_value(c);
            let mut got_sorted = got.clone();
            want.sort_by(|a, b| a.0.cmp(&b.0));
            got_sorted.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(got_sorted, want, "{c}");
        }
    }

    #[test]
    fn what_a_byte_comparison_would_misread_is_refused() {
        // A key with an escape; an array; a string; a key named twice (unique).
        for c in [r#"{"n\u0061me":1}"#, r#"[1]"#, r#""a""#] {
            assert!(members(c.as_bytes()).is_none(), "{c}");
        }
        let twice = members(br#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert!(!unique(&twice));
        assert!(unique(&members(br#"{"a":1,"b":2}"#).unwrap()));
        // Not JSON: each is refused, as a JSON parser refuses it.
        for c in [
            r#"{"a":1} {"#,
            r#"{"a":01}"#,
            r#"{"a":tru}"#,
            r#"{"a":[1,}"#,
            r#"{"a":[1}"#,
            r#"{"a":"\q"}"#,
            r#"{"a":"\u12"}"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":1e}"#,
            r#"{a:1}"#,
            r#"{"a":1"#,
        ] {
            assert!(serde_json::from_str::<Value>(c).is_err(), "{c}");
            assert!(members(c.as_bytes()).is_none(), "{c}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(members(deep.as_bytes()).is_none());
    }

    #[test]
    fn a_named_object_is_read_in_the_same_pass_as_it_reads_alone() {
        let text = br#"{"id":1,"result":{"a":[1,{"b":2}],"c":"d"},"x":{"y":1}}"#;
        let (top, inner) = members_and(text, b"result").unwrap();
        assert_eq!(top, members(text).unwrap());
        assert_eq!(
            inner.unwrap(),
            members(get(&top, "result").unwrap()).unwrap()
        );
        // Not an object there, or not there: no inner members.
        assert!(members_and(br#"{"result":[1]}"#, b"result")
            .unwrap()
            .1
            .is_none());
        assert!(members_and(br#"{"id":1}"#, b"result").unwrap().1.is_none());
        // An escaped key inside is refused, as at the top.
        assert!(members_and(br#"{"result":{"k\u0065y":1}}"#, b"result").is_none());
    }

    #[test]
    fn a_string_value_is_read_unescaped() {
        assert_eq!(string(br#""plain""#).as_deref(), Some("plain"));
        assert_eq!(string(br#""t\"q\u00e9""#).as_deref(), Some("t\"q\u{e9}"));
        assert_eq!(string(b"7"), None);
        let m = members(br#"{"name":"echo","n":7}"#).unwrap();
        assert_eq!(get(&m, "name"), Some(&br#""echo""#[..]));
        assert_eq!(get(&m, "x"), None);
    }
}
