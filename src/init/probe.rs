//! Asking one MCP server what it is, for `mcp-edge init`: `server/discover` and its lists in the
//! 2026-07-28 era, a legacy `initialize` (2025-11-25) to learn whether it also serves the older
//! era, and whether it wants a token (401 + `WWW-Authenticate`). Every request is bounded by the
//! caller's timeout; a list is read for at most [`MAX_PAGES`] pages. Uses the load tester's
//! HTTP/1.1 client ([`crate::loadtest::client`]); it never calls a tool.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::wire::{body, call, describe_failure, exchange, headers, Reply};
use crate::loadtest::client::Http;
use crate::mcp::methods;

/// The most pages read of one list.
pub(crate) const MAX_PAGES: usize = 20;

/// The protocol version of the legacy era asked for with `initialize`.
const LEGACY_VERSION: &str = crate::mcp::legacy::LATEST;

/// One list as the server answered it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listing {
    /// The names (or URIs) of every entry of every page read.
    pub names: Vec<String>,
    pub pages: usize,
    /// The hints of the pages, as seen (`ttlMs`, `cacheScope`), deduplicated.
    pub ttl_ms: Vec<u64>,
    pub scopes: Vec<String>,
    /// The list had more pages than [`MAX_PAGES`].
    pub truncated: bool,
    /// Why the list gave nothing (an error answer, a method the server lacks).
    pub error: Option<String>,
    /// The server's capabilities announce this list (not asked otherwise).
    pub offered: bool,
}

/// Which protocol eras the server answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Eras {
    /// `server/discover` and `initialize` both answered.
    Both,
    /// Only `server/discover` (2026-07-28).
    Modern,
    /// Only `initialize`: a 2025-era server.
    Legacy,
}

/// What one URL told us.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub url: String,
    /// `host:port` of the instance.
    pub authority: String,
    pub path: String,
    pub https: bool,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub versions: Vec<String>,
    pub eras: Eras,
    /// `ttlMs` / `cacheScope` of the discover answer.
    pub discover_hints: Option<(u64, String)>,
    pub tools: Listing,
    pub prompts: Listing,
    pub resources: Listing,
    /// The server answered 401: it wants a bearer token. The value is what it said
    /// (`WWW-Authenticate`, with its `resource_metadata` URL when given).
    pub auth: Option<AuthWanted>,
    /// Its 2025-era `initialize` answer carried a session id: it keeps 2025-era clients in
    /// sessions of its own (so it can ask them mid-call).
    pub legacy_sessions: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuthWanted {
    pub www_authenticate: Option<String>,
    pub resource_metadata: Option<String>,
}

/// Why a URL could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreachable {
    pub url: String,
    pub why: String,
}

/// Ask `url` everything `init` reports.
pub(crate) async fn probe(url: &str, timeout: Duration) -> Result<Probe, Unreachable> {
    let gone = |why: String| Unreachable {
        url: url.to_string(),
        why,
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e| gone(format!("not a URL ({e}); write http://host:port/path")))?;
    let https = uri.scheme_str() == Some("https");
    let authority = uri
        .authority()
        .map(|a| match a.port_u16() {
            Some(_) => a.as_str().to_string(),
            None => format!("{}:{}", a.host(), if https { 443 } else { 80 }),
        })
        .ok_or_else(|| gone("the URL has no host; write http://host:port/path".into()))?;
    let path = uri.path().to_string();
    let tls = crate::loadtest::tls::TlsOptions::default();
    let http = Http::connect(url, &tls)
        .await
        .map_err(|e| gone(describe_failure(&e)))?;
    let mut p = Probe {
        url: url.to_string(),
        authority,
        path,
        https,
        server_name: None,
        server_version: None,
        versions: Vec::new(),
        eras: Eras::Modern,
        discover_hints: None,
        tools: Listing::default(),
        prompts: Listing::default(),
        resources: Listing::default(),
        auth: None,
        legacy_sessions: false,
    };
    let discover = call(&http, timeout, methods::DISCOVER, None, None).await;
    let legacy = initialize(&http, timeout).await;
    p.legacy_sessions = legacy.as_ref().is_some_and(|(_, s)| s.is_some());
    match discover {
        Reply::Result(r, _) => {
            p.read_discover(&r);
            p.eras = if legacy.is_some() {
                Eras::Both
            } else {
                Eras::Modern
            };
            let caps = r.get("capabilities").cloned().unwrap_or_default();
            p.lists(&http, timeout, &caps, None).await;
            Ok(p)
        }
        Reply::Unauthorized(www) => {
            p.auth = Some(AuthWanted {
                resource_metadata: www.as_deref().and_then(resource_metadata),
                www_authenticate: www,
            });
            Ok(p)
        }
        other => match legacy {
            Some((result, session)) => {
                p.eras = Eras::Legacy;
                p.read_initialize(&result);
                let caps = result.get("capabilities").cloned().unwrap_or_default();
                p.lists(&http, timeout, &caps, Some(session.as_deref())).await;
                Ok(p)
            }
            None => Err(gone(match other {
                Reply::Failed(why) => why,
                Reply::NotMcp(status, body) => format!("not an MCP server: HTTP {status} {body}"),
                Reply::Error(status, code, msg) => format!(
                    "not a 2026-07-28 MCP server and no 2025-11-25 initialize either: server/discover answered HTTP {status} error {code}: {msg}"
                ),
                Reply::Result(..) | Reply::Unauthorized(_) => unreachable!("matched above"),
            })),
        },
    }
}

impl Probe {
    /// The tools, prompts and resources lists its capabilities announce.
    async fn lists(
        &mut self,
        http: &Http,
        timeout: Duration,
        caps: &Value,
        session: Option<Option<&str>>,
    ) {
        let kinds = [
            (methods::TOOLS_LIST, "tools", "name"),
            (methods::PROMPTS_LIST, "prompts", "name"),
            (methods::RESOURCES_LIST, "resources", "uri"),
        ];
        for (method, member, field) in kinds {
            let l = if caps.get(member).is_some() {
                list(http, timeout, method, member, field, session).await
            } else {
                Listing::default()
            };
            match member {
                "tools" => self.tools = l,
                "prompts" => self.prompts = l,
                _ => self.resources = l,
            }
        }
    }

    fn read_discover(&mut self, r: &Value) {
        let info = crate::mcp::discover::server_info(r).or_else(|| r.get("serverInfo"));
        self.read_info(info);
        self.versions = crate::mcp::discover::supported_versions(r);
        let ttl = r.get("ttlMs").and_then(Value::as_u64);
        let scope = r.get("cacheScope").and_then(Value::as_str);
        if let (Some(t), Some(s)) = (ttl, scope) {
            self.discover_hints = Some((t, s.to_string()));
        }
    }

    fn read_initialize(&mut self, r: &Value) {
        self.read_info(r.get("serverInfo"));
        if let Some(v) = r.get("protocolVersion").and_then(Value::as_str) {
            self.versions = vec![v.to_string()];
        }
    }

    fn read_info(&mut self, info: Option<&Value>) {
        let field = |k: &str| info.and_then(|i| i.get(k)).and_then(Value::as_str);
        self.server_name = field("name").map(str::to_owned);
        self.server_version = field("version").map(str::to_owned);
    }
}

/// The `resource_metadata="…"` parameter of a `WWW-Authenticate` value.
pub(crate) fn resource_metadata(www: &str) -> Option<String> {
    let i = www.find("resource_metadata=")? + "resource_metadata=".len();
    let rest = &www[i..];
    let value = match rest.strip_prefix('"') {
        Some(q) => &q[..q.find('"')?],
        None => rest.split([',', ' ']).next()?,
    };
    (!value.is_empty()).then(|| value.to_string())
}

/// A legacy `initialize`: its result and the session id the server gave, when it answered.
async fn initialize(http: &Http, timeout: Duration) -> Option<(Value, Option<String>)> {
    let params = json!({"protocolVersion": LEGACY_VERSION, "capabilities": {},
        "clientInfo": {"name": "mcp-edge-init", "version": env!("CARGO_PKG_VERSION")}});
    let params = params.as_object().cloned().unwrap_or_default();
    let b = body("init-0", "initialize", params, false);
    let Reply::Result(r, h) = exchange(http, timeout, headers("initialize", Some(None)), b).await
    else {
        return None;
    };
    r.get("protocolVersion")?;
    let session = h
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // The 2025 era wants this notice before any other request of the session.
    let note = body("", "notifications/initialized", Map::new(), false);
    let _ = exchange(
        http,
        timeout,
        headers("initialized", Some(session.as_deref())),
        note,
    )
    .await;
    Some((r, session))
}

/// Every page of one list (at most [`MAX_PAGES`]).
async fn list(
    http: &Http,
    timeout: Duration,
    method: &str,
    member: &str,
    field: &str,
    session: Option<Option<&str>>,
) -> Listing {
    let mut l = Listing {
        offered: true,
        ..Listing::default()
    };
    let mut cursor: Option<String> = None;
    loop {
        if l.pages == MAX_PAGES {
            l.truncated = true;
            break;
        }
        let r = match call(http, timeout, method, cursor.as_deref(), session).await {
            Reply::Result(r, _) => r,
            Reply::Error(status, code, msg) => {
                l.error = Some(format!("HTTP {status} error {code}: {msg}"));
                break;
            }
            Reply::Unauthorized(_) => {
                l.error = Some("HTTP 401".into());
                break;
            }
            Reply::NotMcp(status, b) => {
                l.error = Some(format!("HTTP {status} {b}"));
                break;
            }
            Reply::Failed(why) => {
                l.error = Some(why);
                break;
            }
        };
        l.pages += 1;
        let entries = r.get(member).and_then(Value::as_array);
        l.names.extend(
            entries
                .into_iter()
                .flatten()
                .filter_map(|e| e.get(field)?.as_str().map(str::to_owned)),
        );
        if let Some(t) = r.get("ttlMs").and_then(Value::as_u64) {
            if !l.ttl_ms.contains(&t) {
                l.ttl_ms.push(t);
            }
        }
        if let Some(s) = r.get("cacheScope").and_then(Value::as_str) {
            if !l.scopes.iter().any(|x| x == s) {
                l.scopes.push(s.to_string());
            }
        }
        cursor = r
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_is_read_quoted_or_bare() {
        assert_eq!(
            resource_metadata(r#"Bearer realm="mcp", resource_metadata="https://a.example/.well-known/oauth-protected-resource", scope="x""#).as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource")
        );
        assert_eq!(
            resource_metadata("Bearer resource_metadata=https://b/x, scope=y").as_deref(),
            Some("https://b/x")
        );
        assert_eq!(resource_metadata("Bearer realm=\"mcp\""), None);
    }
}
