//! Values made up from a JSON Schema: what `--scenario auto` sends as a tool's arguments (from
//! its `inputSchema`) and what the load tester answers to an elicitation form (from its
//! `requestedSchema`). One typical, schema-valid value per schema, deterministic: `const`,
//! `default`, `enum` and `examples` first, then by `type` with `format`, `minLength`/`maxLength`,
//! `minimum`/`maximum` (exclusive too), `minItems`/`maxItems` and `required`. `pattern` is not
//! honoured (a literal answer can be given instead). Pure.

use serde_json::{json, Map, Value};

/// Nesting deeper than this gives `null` (a self-referencing schema cannot loop).
const MAX_DEPTH: usize = 8;

/// A typical value for `schema`. Objects get their `required` properties (and those with a
/// `default`).
pub(crate) fn sample(schema: &Value) -> Value {
    value(schema, 0, false)
}

/// Like [`sample`], but an object gets every declared property (an elicitation form answers all
/// its fields).
pub(crate) fn sample_all(schema: &Value) -> Value {
    value(schema, 0, true)
}

/// The value of one property of an object schema, when declared.
pub(crate) fn property(schema: &Value, name: &str) -> Option<Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(name))
        .map(|s| value(s, 1, false))
}

fn value(s: &Value, depth: usize, all: bool) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    let Some(o) = s.as_object() else {
        // `true` or a non-schema: anything goes.
        return json!("loadtest");
    };
    for key in ["const", "default"] {
        if let Some(v) = o.get(key) {
            return v.clone();
        }
    }
    for key in ["enum", "examples"] {
        if let Some(v) = o.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return v.clone();
        }
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(first) = o.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return value(first, depth + 1, all);
        }
    }
    if let Some(first) = o
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        return value(first, depth + 1, all);
    }
    let ty = match o.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if o.contains_key("properties") => "object",
        _ if o.contains_key("items") => "array",
        _ => "string",
    };
    match ty {
        "string" => string(o),
        "integer" => number(o, true),
        "number" => number(o, false),
        "boolean" => json!(true),
        "null" => Value::Null,
        "array" => {
            let min = o.get("minItems").and_then(Value::as_u64).unwrap_or(1);
            let max = o
                .get("maxItems")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let n = min.max(1).min(max).min(16);
            let item = o
                .get("items")
                .map_or(json!("loadtest"), |i| value(i, depth + 1, all));
            Value::Array((0..n).map(|_| item.clone()).collect())
        }
        _ => object(o, depth, all),
    }
}

fn object(o: &Map<String, Value>, depth: usize, all: bool) -> Value {
    let mut out = Map::new();
    let props = o.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = o
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, ps) in props.into_iter().flatten() {
        let wanted = all || required.contains(&name.as_str()) || ps.get("default").is_some();
        if wanted {
            out.insert(name.clone(), value(ps, depth + 1, all));
        }
    }
    // Required names without a declared schema still get a value.
    for name in required {
        out.entry(name.to_string()).or_insert(json!("loadtest"));
    }
    Value::Object(out)
}

fn string(o: &Map<String, Value>) -> Value {
    let base = match o.get("format").and_then(Value::as_str) {
        Some("email" | "idn-email") => "loadtest@example.com",
        Some("uri" | "url" | "iri" | "uri-reference") => "https://example.com/loadtest",
        Some("date") => "2026-01-01",
        Some("date-time") => "2026-01-01T00:00:00Z",
        Some("time") => "00:00:00Z",
        Some("uuid") => "00000000-0000-4000-8000-000000000000",
        Some("hostname" | "idn-hostname") => "example.com",
        Some("ipv4") => "127.0.0.1",
        Some("ipv6") => "::1",
        _ => "loadtest",
    };
    let min = o.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    let max = o
        .get("maxLength")
        .and_then(Value::as_u64)
        .map_or(usize::MAX, |m| m as usize);
    let mut s: String = base.to_string();
    while s.chars().count() < min {
        s.push('x');
    }
    if s.chars().count() > max {
        s = s.chars().take(max).collect();
    }
    Value::String(s)
}

fn number(o: &Map<String, Value>, integer: bool) -> Value {
    let f = |k: &str| o.get(k).and_then(Value::as_f64);
    // Draft 4 booleans `exclusiveMinimum: true` qualify `minimum`.
    let excl_bool = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    let step = if integer { 1.0 } else { 0.5 };
    let lo = match (f("minimum"), f("exclusiveMinimum")) {
        (_, Some(x)) => Some(x + step),
        (Some(m), None) if excl_bool("exclusiveMinimum") => Some(m + step),
        (Some(m), None) => Some(m),
        (None, None) => None,
    };
    let hi = match (f("maximum"), f("exclusiveMaximum")) {
        (_, Some(x)) => Some(x - step),
        (Some(m), None) if excl_bool("exclusiveMaximum") => Some(m - step),
        (Some(m), None) => Some(m),
        (None, None) => None,
    };
    let mut v = 1.0f64;
    if let Some(lo) = lo {
        v = v.max(if integer { lo.ceil() } else { lo });
    }
    if let Some(hi) = hi {
        v = v.min(if integer { hi.floor() } else { hi });
    }
    if integer || v.fract() == 0.0 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_formats_and_bounds() {
        let s = json!({"type": "object", "required": ["a", "n", "e", "m", "d", "t", "arr", "o"],
        "properties": {
            "a": {"type": "string", "minLength": 12, "maxLength": 14},
            "n": {"type": "integer", "minimum": 5, "maximum": 9},
            "x": {"type": "integer", "exclusiveMaximum": 0},
            "e": {"type": "string", "enum": ["eu", "us"]},
            "m": {"type": "string", "format": "email"},
            "d": {"type": "string", "format": "date-time"},
            "t": {"type": ["null", "boolean"]},
            "arr": {"type": "array", "items": {"type": "number", "exclusiveMinimum": 2.5}, "minItems": 2},
            "o": {"type": "object", "properties": {"k": {"const": 7}}, "required": ["k"]},
            "opt": {"type": "string"},
            "def": {"type": "string", "default": "dflt"}
        }});
        let v = sample(&s);
        assert_eq!(
            v,
            json!({"a": "loadtestxxxx", "n": 5, "e": "eu", "m": "loadtest@example.com",
                "d": "2026-01-01T00:00:00Z", "t": true, "arr": [3, 3], "o": {"k": 7}, "def": "dflt"})
        );
        assert_eq!(property(&s, "x"), Some(json!(-1)));
        assert_eq!(
            sample(&json!({"type": "number", "maximum": 0.25})),
            json!(0.25)
        );
        let all = sample_all(&json!({"properties": {"grant": {"type": "boolean"}, "lvl":
            {"oneOf": [{"const": "lo", "title": "Low"}, {"const": "hi"}]}}}));
        assert_eq!(all, json!({"grant": true, "lvl": "lo"}));
    }
}
