//! RFC 8785 JSON Canonicalization Scheme (JCS): the one byte string of a JSON value that an
//! implementation in any language produces, so backends written in other languages can share a
//! state key and compute the same parameter digest (`backend::state::request_digest`). The edge
//! cache keys requests on [`super::jcs_exact`] instead: this form, but numbers as written.
//!
//! - object members sorted by their names as UTF-16 code units (RFC 8785 §3.2.3);
//! - numbers as IEEE 754 doubles printed the way ECMAScript's `Number.prototype.toString` does
//!   (§3.2.2.3): `1` not `1.0`, `1e+21`, `1e-7`, `-0` as `0`;
//! - strings escaped as `JSON.stringify` does (§3.2.2.2): `\"`, `\\`, `\b \f \n \r \t`, other
//!   control characters as `\u00xx`, everything else literal;
//! - no whitespace.

use serde_json::Value;

/// Append the canonical form of `v` to `out`.
pub(crate) fn write(v: &Value, out: &mut Vec<u8>) {
    match v {
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
                write_string(k, out);
                out.push(b':');
                write(v, out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(x, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_string(s, out),
        Value::Number(n) => out.extend_from_slice(number(n.as_f64().unwrap_or(0.0)).as_bytes()),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

#[cfg(test)]
/// The canonical form of `v` as a string.
pub(crate) fn to_string(v: &Value) -> String {
    let mut out = Vec::new();
    write(v, &mut out);
    String::from_utf8(out).expect("canonical JSON is UTF-8")
}

/// Append a string as RFC 8785 writes it (§3.2.2.2), quotes included.
pub(super) fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// ECMAScript `Number.prototype.toString` of a finite double (shortest round-trip digits).
fn number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    // The shortest round-trip digits and exponent, from Rust's `{:e}` (e.g. "1.2345e-7").
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i32;
    // value = 0.digits × 10^n
    let n = exp.parse::<i32>().expect("exponent is an integer") + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let esign = if e < 0 { "-" } else { "+" };
        if k == 1 {
            format!("{digits}e{esign}{}", e.abs())
        } else {
            format!("{}.{}e{esign}{}", &digits[..1], &digits[1..], e.abs())
        }
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_ecmascript_does() {
        for (x, want) in [
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (123.0, "123"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (1.2345e-7, "1.2345e-7"),
            (333333333.3333333, "333333333.3333333"),
            (9007199254740993.0, "9007199254740992"),
            (4.5e300, "4.5e+300"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(number(x), want, "{x:e}");
        }
    }

    /// The example of RFC 8785 §3.2.3 (member order by UTF-16 code units) and §3.2.2 values.
    #[test]
    fn rfc_8785_examples() {
        let sorting: Value = serde_json::from_str(
            r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#,
        )
        .unwrap();
        let s = to_string(&sorting);
        let order: Vec<usize> = [
            "\\r",
            "1",
            "\u{80}",
            "\u{f6}",
            "\u{20ac}",
            "\u{1f600}",
            "\u{fb33}",
        ]
        .iter()
        .map(|k| {
            s.find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k} in {s}"))
        })
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{s}");
        // The input of RFC 8785 §3.2.2, as text.
        let values: Value = serde_json::from_str(
            r#"{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
                "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
                "literals": [null, true, false]}"#,
        )
        .unwrap();
        assert_eq!(
            to_string(&values),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }
}
