//! The JSON Schema of `gateway.yaml`, generated from the same types that load it (schemars),
//! printed by `mcp-edge schema` and committed as `schema/gateway.schema.json` for editors
//! (`# yaml-language-server: $schema=...`).
//!
//! Most of it is derived. This file holds the schemas of the values that have their own parsers
//! (durations, rates, match patterns, key parts, listener addresses, JWS algorithms), written to
//! accept what those parsers accept.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use std::borrow::Cow;

use super::auth_keys::AlgName;
use super::tls::{ListenFile, ListenerMap, ListenerSpec};
use super::{humantime_serde_compat, Config, HashKey, KeyPart, Listen, Pattern, Rate};

/// A number followed by a unit (ns, us, ms, s, m, h, d, ...), repeated (`1h 30m`), or whole
/// seconds alone.
const DURATION: &str = r"^\s*([0-9]+\s*|([0-9]+\s*[a-zA-Z]+\s*)+)$";

/// The schema as pretty JSON with a trailing newline, as `mcp-edge schema` prints it.
pub fn schema_json() -> String {
    let schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<Config>();
    let mut out = serde_json::to_string_pretty(&schema).expect("a schema is plain JSON");
    out.push('\n');
    out
}

macro_rules! string_schema {
    ($ty:ty, $name:literal, $schema:tt) => {
        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                $name.into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

string_schema!(humantime_serde_compat, "Duration", {
    "type": "string",
    "pattern": DURATION,
    "description": "A duration: 500ms, 2s, 10m, 1h 30m (or whole seconds, e.g. \"30\").",
});

string_schema!(Pattern, "Pattern", {
    "type": "string",
    "minLength": 1,
    "description": "Exact (tools/call), a prefix (tools/*), a glob with * and ? (deploy_*_prod), or * for anything.",
});

string_schema!(Rate, "Rate", {
    "type": "string",
    "pattern": r"^\s*[0-9]+\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$",
    "description": "A sustained rate: N/s, N/m or N/h, N at least 1 (e.g. 100/s).",
});

string_schema!(KeyPart, "KeyPart", {
    "type": "string",
    "pattern": "^(route|method|name|principal|client_ip|header:.+|claim:.+)$",
    "description": "route, method, name, principal, client_ip, header:<name> or claim:<name> (needs auth).",
});

string_schema!(HashKey, "HashKey", {
    "type": "string",
    "pattern": "^(mcp-name|principal|header:.+|claim:.+|param:.+)$",
    "description": "mcp-name, principal, header:<name>, claim:<name> (needs auth) or param:<Name> (an Mcp-Param header).",
});

string_schema!(AlgName, "Algorithm", {
    "type": "string",
    "enum": ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"],
    "description": "An asymmetric JWS algorithm (HS* and none are never accepted).",
});

impl JsonSchema for ListenerSpec {
    fn schema_name() -> Cow<'static, str> {
        "Listener".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let map = g.subschema_for::<ListenerMap>();
        json_schema!({
            "description": "A listener: an IP:port such as 127.0.0.1:8080, or { address, tls, h2c, allow_plain }.",
            "anyOf": [
                { "type": "string", "description": "IP:port, e.g. 0.0.0.0:8443" },
                map,
            ],
        })
    }
}

/// `listen:` is read as [`ListenFile`] and then reshaped.
impl JsonSchema for Listen {
    fn schema_name() -> Cow<'static, str> {
        ListenFile::schema_name()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        ListenFile::json_schema(g)
    }
}

/// `upstream_header`: a header name, or `false` (off) / `true` (the default name).
pub(super) struct UpstreamHeader;

string_schema!(UpstreamHeader, "UpstreamHeader", {
    "description": "The response header naming the instance that served a request, or false to turn it off.",
    "anyOf": [{ "type": "string" }, { "type": "boolean" }],
});

#[cfg(test)]
mod tests {
    #[test]
    fn the_duration_pattern_accepts_what_the_parser_accepts() {
        let re = regex::Regex::new(super::DURATION).unwrap();
        for ok in ["30s", "500ms", "1h 30m", "1m30s", "45", "0s"] {
            assert!(re.is_match(ok), "{ok}");
            assert!(super::super::parse_duration(ok).is_ok(), "{ok}");
        }
        for bad in ["", "m", "s10", "-1s"] {
            assert!(!re.is_match(bad), "{bad}");
        }
    }
}
