//! `listen:` and `origins:`: where the gateway accepts connections (the MCP and admin
//! listeners; their TLS/h2c options live in [`super::tls`]) and which browser origins may call it.

use serde::Deserialize;
use std::net::SocketAddr;

use super::tls;
use crate::config::Pattern;

#[derive(Debug, Clone, Deserialize)]
#[serde(from = "tls::ListenFile")]
pub struct Listen {
    /// The MCP listener.
    pub mcp: SocketAddr,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`); `null` turns it off.
    pub admin: Option<SocketAddr>,
    /// TLS, h2c and further MCP listeners ([`tls`]).
    pub tls: tls::Listeners,
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            mcp: default_mcp_addr(),
            admin: default_admin_addr(),
            tls: tls::Listeners::default(),
        }
    }
}

impl From<tls::ListenFile> for Listen {
    fn from(f: tls::ListenFile) -> Self {
        Listen {
            mcp: f.mcp.address,
            admin: f.admin.as_ref().map(|a| a.address),
            tls: tls::Listeners {
                mcp: f.mcp.options,
                extra: f.extra,
                admin: f.admin.map(|a| a.options).unwrap_or_default(),
            },
        }
    }
}

fn default_mcp_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn default_admin_addr() -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 1], 9090)))
}

/// A request that carries `Origin` must name an allowed one, or it gets 403. Requests without
/// `Origin` (every non-browser client) are not affected.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OriginsConfig {
    /// Allowed origins: exact (`https://app.example.com`) or a glob (`http://localhost:*`).
    /// Default: local origins only. `["*"]` allows any.
    #[serde(default = "default_origins")]
    pub allow: Vec<Pattern>,
}

impl Default for OriginsConfig {
    fn default() -> Self {
        OriginsConfig {
            allow: default_origins(),
        }
    }
}

impl OriginsConfig {
    /// The local origins (the default) and `extra` (the reference backend's `--allow-origin`).
    pub(crate) fn local_and(extra: &[String]) -> Self {
        let mut allow = default_origins();
        allow.extend(extra.iter().map(|o| Pattern::parse(o)));
        OriginsConfig { allow }
    }

    /// The one `Origin` rule, of the gateway (`origins.allow`) and of the reference backend
    /// (the local origins and `--allow-origin`): a request that carries `Origin` must match one
    /// of the patterns, scheme and host in any case (RFC 6454 §4: they are case-insensitive;
    /// browsers send them lower-case). A value that is not text matches only `*`.
    pub(crate) fn allows(&self, origin: &[u8]) -> bool {
        let origin = std::str::from_utf8(origin).ok().filter(|o| o.is_ascii());
        let origin = origin.unwrap_or("");
        self.allow
            .iter()
            .any(|p| p.matches_ignore_ascii_case(origin))
    }
}

fn default_origins() -> Vec<Pattern> {
    [
        "http://localhost",
        "http://localhost:*",
        "http://127.0.0.1",
        "http://127.0.0.1:*",
        "http://[::1]",
        "http://[::1]:*",
    ]
    .iter()
    .flat_map(|o| [o.to_string(), o.replacen("http://", "https://", 1)])
    .map(|o| Pattern::parse(&o))
    .collect()
}

#[cfg(test)]
mod origin_tests {
    use super::OriginsConfig;

    #[test]
    fn local_origins_in_any_case_others_only_when_listed() {
        let local = OriginsConfig::default();
        for yes in [
            "http://localhost",
            "http://localhost:6274",
            "https://127.0.0.1:8443",
            "http://[::1]:3000",
            "HTTP://LocalHost:6274",
        ] {
            assert!(local.allows(yes.as_bytes()), "{yes}");
        }
        for no in [
            "https://evil.example",
            "http://localhost.evil.example",
            "null",
            "",
            "http://l\u{f6}calhost",
        ] {
            assert!(!local.allows(no.as_bytes()), "{no}");
        }
        assert!(!local.allows(b"http://localhost\xff"));
        let backend = OriginsConfig::local_and(&["https://App.example.com".into()]);
        assert!(backend.allows(b"https://app.example.com"));
        assert!(backend.allows(b"http://localhost:1"));
        assert!(!backend.allows(b"https://other.example.com"));
        assert!(OriginsConfig::local_and(&["*".into()]).allows(b"https://any.example"));
    }
}
