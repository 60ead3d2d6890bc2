//! Value parsers shared by every config section, whichever component owns it, and the command
//! line: humane durations (`500ms`, `2s`, `10m`). A leaf: it imports nothing of the crate.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// Parse a humane duration for the command line: `500ms`, `2s`, `10m`, `1h 30m`, or plain
/// seconds (`2`).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write e.g. 500ms, 2s, 10m"))
}

/// Durations as humane strings: `500ms`, `2s`, `10m`, `1h 30m`. Fields say
/// `#[serde(with = "humantime_serde_compat")]`; it is a type (not a module) so that the same
/// attribute also gives the field its JSON Schema (see `config::schema`).
#[allow(non_camel_case_types)]
pub(crate) struct humantime_serde_compat;

impl humantime_serde_compat {
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s).map_err(serde::de::Error::custom)
    }

    /// The humane spelling (`2s`, `1m 30s`): how the schema shows a default.
    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }
}
