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
