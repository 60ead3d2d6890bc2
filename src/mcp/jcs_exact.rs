//! The canonical form of a JSON text that keeps every number exactly as written: RFC 8785
//! ([`super::jcs`]) for objects (members sorted by UTF-16 code units), strings and whitespace,
//! but a number's literal text in place of its double. The edge cache keys requests on it.
//!
//! Why not the double: readers behind the gateway do not all read numbers as doubles. Python
//! reads `1` as an int and `1.0` as a float, and integers of any size exactly
//! (`18446744073709551616` and `…617` differ); Go's `json.Number`, Java's `BigDecimal` and
//! Python's `Decimal` keep the text (`1.0` and `1.00`, `1e2` and `100`). Two texts whose
//! numbers differ in any way may get different results, so they must never share an entry;
//! texts that differ only in member order, whitespace or string escapes (`"\u0041"`, `"A"`)
//! read the same everywhere, and share one.
//!
//! [`parse`] reads a whole JSON text (RFC 8259 grammar, depth bounded by
//! [`super::strict::MAX_DEPTH`]); [`Value::write`] writes the canonical form. The backend's
//! parameter digest keeps plain RFC 8785 ([`super::jcs`]), which other languages reproduce.

use super::jcs;

/// A JSON value whose numbers are the text they were written as.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    /// The number's literal text, e.g. `1.0`, `-0`, `1E400`.
    Number(&'a str),
    String(String),
    Array(Vec<Value<'a>>),
    /// Members in document order.
    Object(Vec<(String, Value<'a>)>),
}

/// The text is not one JSON value (or nests deeper than the strict reader allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotJson;

/// Read one JSON text.
pub(crate) fn parse(text: &[u8]) -> Result<Value<'_>, NotJson> {
    let mut r = Reader { b: text, i: 0 };
    let v = r.value(0)?;
    r.ws();
    if r.i == text.len() {
        Ok(v)
    } else {
        Err(NotJson)
    }
}

impl<'a> Value<'a> {
    /// The member `key` of an object.
    pub(crate) fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The member `key` of an object, to change it.
    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut Value<'a>> {
        match self {
            Value::Object(m) => m.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Append the canonical form to `out`.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Number(n) => out.extend_from_slice(n.as_bytes()),
            Value::String(s) => jcs::write_string(s, out),
            Value::Array(a) => {
                out.push(b'[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    x.write(out);
                }
                out.push(b']');
            }
            Value::Object(m) => {
                let mut members: Vec<(Vec<u16>, &String, &Value)> = m
                    .iter()
                    .map(|(k, v)| (k.encode_utf16().collect(), k, v))
                    .collect();
                members.sort_by(|a, b| a.0.cmp(&b.0));
                out.push(b'{');
                for (i, (_, k, v)) in members.into_iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    jcs::write_string(k, out);
                    out.push(b':');
                    v.write(out);
                }
                out.push(b'}');
            }
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        let hit = self.b.get(self.i) == Some(&c);
        self.i += usize::from(hit);
        hit
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, NotJson> {
        if depth > super::strict::MAX_DEPTH {
            return Err(NotJson);
        }
        self.ws();
        match *self.b.get(self.i).ok_or(NotJson)? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => self.string().map(Value::String),
            b't' => self.literal(b"true", Value::Bool(true)),
            b'f' => self.literal(b"false", Value::Bool(false)),
            b'n' => self.literal(b"null", Value::Null),
            _ => self.number().map(Value::Number),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value<'a>, NotJson> {
        self.i += 1;
        let mut members = Vec::new();
        if self.eat(b'}') {
            return Ok(Value::Object(members));
        }
        loop {
            self.ws();
            let k = self.string()?;
            if !self.eat(b':') {
                return Err(NotJson);
            }
            members.push((k, self.value(depth + 1)?));
            if self.eat(b'}') {
                return Ok(Value::Object(members));
            }
            if !self.eat(b',') {
                return Err(NotJson);
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value<'a>, NotJson> {
        self.i += 1;
        let mut items = Vec::new();
        if self.eat(b']') {
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            if self.eat(b']') {
                return Ok(Value::Array(items));
            }
            if !self.eat(b',') {
                return Err(NotJson);
            }
        }
    }

    /// A string at the cursor, decoded by serde_json (escapes, surrogate pairs, UTF-8).
    fn string(&mut self) -> Result<String, NotJson> {
        let start = self.i;
        if self.b.get(start) != Some(&b'"') {
            return Err(NotJson);
        }
        let mut j = start + 1;
        loop {
            match *self.b.get(j).ok_or(NotJson)? {
                b'"' => break,
                b'\\' => j += 2,
                _ => j += 1,
            }
        }
        self.i = j + 1;
        serde_json::from_slice(&self.b[start..self.i]).map_err(|_| NotJson)
    }

    fn literal(&mut self, word: &[u8], v: Value<'a>) -> Result<Value<'a>, NotJson> {
        if !self.b[self.i..].starts_with(word) {
            return Err(NotJson);
        }
        self.i += word.len();
        Ok(v)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, as written.
    fn number(&mut self) -> Result<&'a str, NotJson> {
        let start = self.i;
        self.i += usize::from(self.b.get(self.i) == Some(&b'-'));
        match self.b.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(NotJson),
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            self.some_digits()?;
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            self.i += usize::from(matches!(self.b.get(self.i), Some(b'+' | b'-')));
            self.some_digits()?;
        }
        // Only ASCII was consumed.
        std::str::from_utf8(&self.b[start..self.i]).map_err(|_| NotJson)
    }

    fn digits(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Result<(), NotJson> {
        let from = self.i;
        self.digits();
        if self.i == from {
            Err(NotJson)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        let mut out = Vec::new();
        parse(text.as_bytes()).unwrap().write(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn numbers_keep_their_text() {
        for n in [
            "18446744073709551616",
            "18446744073709551617",
            "9007199254740993",
            "1",
            "1.0",
            "1.00",
            "1e0",
            "1E0",
            "1e+0",
            "-0",
            "0",
            "1e400",
            "-1e-400",
            "0.1",
            "0.10000000000000001",
        ] {
            assert_eq!(
                canon(&format!("{{\"page\": {n} }}")),
                format!("{{\"page\":{n}}}")
            );
        }
        // So no two different numbers share a form.
        assert_ne!(canon("[1]"), canon("[1.0]"));
        assert_ne!(
            canon("[18446744073709551616]"),
            canon("[18446744073709551617]")
        );
    }

    #[test]
    fn order_whitespace_and_escapes_are_canonical_as_in_rfc_8785() {
        assert_eq!(
            canon(" { \"b\" : [ true , null ] ,\n\"a\":\"\\u0041\\/\\u00e9\" } "),
            r#"{"a":"A/é","b":[true,null]}"#
        );
        // The RFC 8785 §3.2.3 order (UTF-16 code units), and string escapes as JCS writes them.
        let sorting =
            r#"{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}"#;
        let v: serde_json::Value = serde_json::from_str(sorting).unwrap();
        assert_eq!(canon(sorting), jcs::to_string(&v));
        assert_eq!(canon(r#""a\u000fb\n""#), r#""a\u000fb\n""#);
    }

    #[test]
    fn what_is_not_one_json_value_is_refused() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "{\"a\":1,}",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "+1",
            "tru",
            "nul",
            "\"abc",
            "\"\\ud800\"",
            "1 2",
            "{}x",
            "[\"\u{1}\"]",
            "NaN",
        ] {
            assert_eq!(parse(bad.as_bytes()), Err(NotJson), "{bad:?}");
        }
        let deep = "[".repeat(super::super::strict::MAX_DEPTH + 2);
        assert_eq!(parse(deep.as_bytes()), Err(NotJson));
    }
}
