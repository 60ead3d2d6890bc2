//! Value parsers shared by every section: humane durations (`500ms`, `2s`, `10m`), for the
//! config file and the command line alike.

use std::time::Duration;

/// Parse a humane duration for the command line: `500ms`, `2s`, `10m`, `1h 30m`, or plain
/// seconds (`2`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write e.g. 500ms, 2s, 10m"))
}

/// Durations as humane strings: `500ms`, `2s`, `10m`, `1h 30m`.
pub(crate) mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}
