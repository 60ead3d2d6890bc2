//! `pins:` and `pools.<name>.pins`: pinned tool and prompt definitions (docs/pins.md), and the
//! pins file's format.
//!
//! A pool that pins (`pools.<name>.pins: hold | flag`) has each tool's and prompt's definition
//! ([`crate::mcp::definition`]) compared with the one an operator approved. The approved ones
//! live in one JSON file (`pins.file`) the operator keeps in git: read on start and reload,
//! re-read when its modification time changes (so replicas that share it follow each other's
//! approvals), and written atomically (a temporary file renamed over it) when a definition is
//! pinned on first sight or approved through the admin API. Without `pins.file`, pins live in
//! the process only (they survive reloads, not restarts, and are not shared).
//!
//! The file: `{"version": 1, "pools": {POOL: {"tools": {NAME: PIN}, "prompts": {NAME: PIN}}}}`
//! where a PIN is `{"digest": "sha256:…", "definition": {…}, "approved": "RFC 3339 time",
//! "by": "first-sight" | "admin"}`. Keys are sorted, so a change is a small diff in review.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{ConfigError, Positions};

/// `pins:` (top level).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PinsConfig {
    /// The pins file (JSON, kept in git). Absent: pins are kept in the process only.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// What a pinning pool does with a tool or prompt it has no pin for: `pin` (the default:
    /// trust on first use, the definition seen first is pinned and served) or `hold` (held
    /// like a changed one until an operator approves it).
    #[serde(default)]
    pub first_sight: FirstSight,
}

/// What happens to a definition seen for the first time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FirstSight {
    /// Pinned as seen (trust on first use).
    #[default]
    Pin,
    /// Not pinned: treated as changed until approved.
    Hold,
}

/// `pools.<name>.pins`: what a changed definition gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PinPolicy {
    /// Definitions are not pinned (the default).
    #[default]
    Off,
    /// A changed tool or prompt is not listed and its calls are refused (-31017) until approved.
    Hold,
    /// A changed tool or prompt is listed and callable, and flagged (metric, log line, admin
    /// API, console) until approved.
    Flag,
}

impl PinPolicy {
    pub(crate) fn label(self) -> &'static str {
        match self {
            PinPolicy::Off => "off",
            PinPolicy::Hold => "hold",
            PinPolicy::Flag => "flag",
        }
    }
}

/// The pins file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinsFile {
    pub version: u32,
    #[serde(default)]
    pub pools: BTreeMap<String, PoolPins>,
}

/// One pool's pins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolPins {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, Pin>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, Pin>,
}

/// One approved definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    pub digest: String,
    pub definition: serde_json::Value,
    /// When it was pinned (RFC 3339).
    #[serde(default)]
    pub approved: String,
    /// `first-sight` or `admin`.
    #[serde(default)]
    pub by: String,
}

/// The pins file's one version.
pub const PINS_FILE_VERSION: u32 = 1;

impl PinsFile {
    /// Read the pins file; a file that does not exist is empty (it is written on the first
    /// pin). The error names the file, the line and what to do.
    pub fn read(path: &Path) -> Result<PinsFile, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(PinsFile {
                    version: PINS_FILE_VERSION,
                    ..Default::default()
                })
            }
            Err(e) => return Err(format!("pins.file: cannot read {}: {e}", path.display())),
        };
        let file: PinsFile = serde_json::from_str(&text).map_err(|e| {
            format!(
                "pins.file: {} line {} column {}: {e} (fix the file, or move it away to start over: every definition is then pinned again as first seen)",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        if file.version != PINS_FILE_VERSION {
            return Err(format!(
                "pins.file: {}: version {} is not one this gateway reads (it reads {PINS_FILE_VERSION})",
                path.display(),
                file.version
            ));
        }
        Ok(file)
    }
}

/// `pins.file`, when set, must be readable as a pins file.
pub(crate) fn validate(c: &PinsConfig, pos: &Positions, file: &str) -> Result<(), ConfigError> {
    if let Some(path) = &c.file {
        PinsFile::read(path).map_err(|m| ConfigError::at(file, pos.near("pins.file"), m))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn a_broken_pins_file_fails_the_config_at_its_key_naming_the_file_and_line() {
        let dir = std::env::temp_dir().join(format!("mcp-edge-pins-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pins.json");
        std::fs::write(
            &path,
            "{\"version\": 1,\n \"pools\": {\"ts\": {\"tools\": 3}}}",
        )
        .unwrap();
        let yaml = format!(
            "pools:\n  ts:\n    instances: [127.0.0.1:7001]\n    pins: hold\ndefault_route: {{pool: ts}}\npins:\n  file: {}\n",
            path.display()
        );
        let err = Config::parse(&yaml, "gateway.yaml").unwrap_err();
        assert_eq!(err.line, Some(7), "{err}");
        assert!(
            err.message.contains("pins.file") && err.message.contains("pins.json line 2"),
            "{err}"
        );
        std::fs::write(&path, "{\"version\": 2}").unwrap();
        let err = Config::parse(&yaml, "gateway.yaml").unwrap_err();
        assert!(err.message.contains("version 2"), "{err}");
        // A file that does not exist yet is fine: it is written on the first pin.
        std::fs::remove_file(&path).unwrap();
        let cfg = Config::parse(&yaml, "gateway.yaml").unwrap();
        assert_eq!(cfg.pools["ts"].pins, super::PinPolicy::Hold);
        let bad = yaml.replace("pins: hold", "pins: block");
        let err = Config::parse(&bad, "gateway.yaml").unwrap_err();
        assert!(
            err.message.contains("hold") && err.message.contains("flag"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
