//! The preflight: before any load, ask the target what it is (`server/discover`) and which
//! tools it offers (`tools/list`, every page), print it, and refuse a scenario that calls a tool
//! the target does not offer ([`PreflightError`], exit status 2). What it learns also feeds
//! `--scenario auto`, the `Mcp-Param-*` headers of tools that declare `x-mcp-header`, and the
//! `outputSchema` checks.

use std::fmt;
use std::time::Duration;

use http::HeaderMap;
use serde_json::{json, Map, Value};

use super::client::Http;
use super::reply::json_payload;
use super::scenario::Scenario;
use super::template::client_capabilities;
use crate::mcp::{self, meta, methods};

/// At most this many `tools/list` pages are read.
pub(crate) const MAX_PAGES: usize = 100;

/// A refusal before any load was sent (the CLI exits with status 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightError(pub String);

impl fmt::Display for PreflightError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "preflight: {}", self.0)
    }
}

impl std::error::Error for PreflightError {}

/// What the target said about itself.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub versions: Vec<String>,
    /// Every tool object of every `tools/list` page.
    pub tools: Vec<Value>,
    pub pages: usize,
    /// Why `server/discover` gave nothing, when it did not.
    pub discover_error: Option<String>,
    /// Why `tools/list` gave nothing, when it did not.
    pub list_error: Option<String>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

/// The `x-mcp-header` properties of a tool: (argument, header suffix).
pub(crate) fn header_params(tool: &Value) -> Vec<(String, String)> {
    let props = tool
        .get("inputSchema")
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    props
        .into_iter()
        .flatten()
        .filter_map(|(k, p)| Some((k.clone(), p.get("x-mcp-header")?.as_str()?.to_string())))
        .collect()
}

impl Discovery {
    pub(crate) fn tool(&self, name: &str) -> Option<&Value> {
        self.tools.iter().find(|t| t["name"] == name)
    }

    pub(crate) fn tool_names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect()
    }

    /// Read a `server/discover` result.
    pub(crate) fn read_discover(&mut self, result: &Value) {
        let info = crate::mcp::discover::server_info(result).or_else(|| result.get("serverInfo"));
        if let Some(i) = info {
            self.server_name = str_at(i, &["name"]).map(str::to_owned);
            self.server_version = str_at(i, &["version"]).map(str::to_owned);
        }
        self.versions = crate::mcp::discover::supported_versions(result);
    }

    /// Refuse a scenario that calls a tool the target does not list. Nothing is checked when
    /// `tools/list` gave no answer (the run then shows what the target does).
    pub(crate) fn check_scenario(&self, s: &Scenario) -> Result<(), PreflightError> {
        if self.list_error.is_some() {
            return Ok(());
        }
        let missing: Vec<&str> = s
            .tools()
            .into_iter()
            .filter(|t| self.tool(t).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let offered = self.tool_names();
        Err(PreflightError(format!(
            "the scenario {:?} calls {} that the target does not offer: {}. The target offers {}: {}. \
             Use --scenario auto, --tool NAME, or a scenario file with these tools",
            s.name,
            if missing.len() == 1 { "a tool" } else { "tools" },
            missing.join(", "),
            offered.len(),
            if offered.is_empty() { "(none)".to_string() } else { offered.join(", ") },
        )))
    }

    /// The lines printed before the run.
    pub(crate) fn summary(&self) -> String {
        let mut out = String::from("preflight: ");
        match (&self.server_name, &self.discover_error) {
            (Some(n), _) => out.push_str(&format!(
                "server {n} {}",
                self.server_version.as_deref().unwrap_or("(no version)")
            )),
            (None, Some(e)) => out.push_str(&format!("server/discover failed: {e}")),
            (None, None) => out.push_str("server (no serverInfo)"),
        }
        if !self.versions.is_empty() {
            out.push_str(&format!(" · protocol {}", self.versions.join(", ")));
        }
        match &self.list_error {
            Some(e) => out.push_str(&format!("\npreflight: tools/list failed: {e}")),
            None => {
                out.push_str(&format!(
                    "\npreflight: {} tools in {} page(s): {}",
                    self.tools.len(),
                    self.pages,
                    self.tool_names().join(", ")
                ));
                let with_headers: Vec<String> = self
                    .tools
                    .iter()
                    .filter_map(|t| {
                        let h = header_params(t);
                        (!h.is_empty()).then(|| {
                            let hs: Vec<String> = h
                                .iter()
                                .map(|(a, s)| format!("{a}→Mcp-Param-{s}"))
                                .collect();
                            format!("{} ({})", t["name"].as_str().unwrap_or("?"), hs.join(", "))
                        })
                    })
                    .collect();
                if !with_headers.is_empty() {
                    out.push_str(&format!(
                        "\npreflight: x-mcp-header params: {}",
                        with_headers.join("; ")
                    ));
                }
            }
        }
        out
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "server_name": self.server_name, "server_version": self.server_version,
            "protocol_versions": self.versions, "tool_count": self.tools.len(), "pages": self.pages,
            "tools": self.tool_names(),
            "x_mcp_header_tools": self.tools.iter().filter(|t| !header_params(t).is_empty())
                .filter_map(|t| t["name"].as_str()).collect::<Vec<_>>(),
            "discover_error": self.discover_error, "list_error": self.list_error,
        })
    }
}

/// The body of a preflight request (ids `preflight-N`, apart from the load's numeric ids).
pub(crate) fn request_body(n: usize, method: &str, cursor: Option<&str>) -> Vec<u8> {
    let mut params = Map::new();
    if let Some(c) = cursor {
        params.insert("cursor".into(), json!(c));
    }
    params.insert(
        "_meta".into(),
        json!({meta::PROTOCOL_VERSION: mcp::PROTOCOL_VERSION, meta::CLIENT_CAPABILITIES: client_capabilities()}),
    );
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": format!("preflight-{n}"), "method": method, "params": params}))
        .expect("value serializes")
}

/// Send one preflight request; the `result` object or why there is none.
async fn call(
    http: &Http,
    headers: &HeaderMap,
    timeout: Duration,
    n: usize,
    method: &str,
    cursor: Option<&str>,
) -> Result<Value, String> {
    let mut h = headers.clone();
    h.insert(
        http::HeaderName::from_static(mcp::header::METHOD),
        http::HeaderValue::from_str(method).map_err(|e| e.to_string())?,
    );
    let req = http.request(h, request_body(n, method, cursor));
    let ans = match tokio::time::timeout(timeout, http.send(req)).await {
        Err(_) => return Err(format!("no answer within {timeout:?}")),
        Ok(Err(e)) => return Err(format!("{e:#}")),
        Ok(Ok(a)) => a,
    };
    let ct = ans
        .headers
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.as_bytes());
    let payload = json_payload(&ans.body, ct);
    let v: Value = serde_json::from_slice(&payload).map_err(|_| {
        format!(
            "HTTP {}: {}",
            ans.status.as_u16(),
            super::tally::clip(&String::from_utf8_lossy(&ans.body))
        )
    })?;
    if let Some(e) = v.get("error") {
        return Err(format!(
            "HTTP {} error {}: {}",
            ans.status.as_u16(),
            e["code"],
            e["message"].as_str().unwrap_or("(no message)")
        ));
    }
    v.get("result")
        .cloned()
        .ok_or_else(|| format!("HTTP {}: no result", ans.status.as_u16()))
}

/// Ask the target `server/discover` and every page of `tools/list`. `headers` are those of
/// every request (content type, accept, protocol version, the user's headers, authorization).
pub(crate) async fn discover(http: &Http, headers: &HeaderMap, timeout: Duration) -> Discovery {
    let mut d = Discovery::default();
    match call(http, headers, timeout, 0, methods::DISCOVER, None).await {
        Ok(r) => d.read_discover(&r),
        Err(e) => d.discover_error = Some(e),
    }
    let mut cursor: Option<String> = None;
    loop {
        match call(
            http,
            headers,
            timeout,
            d.pages + 1,
            methods::TOOLS_LIST,
            cursor.as_deref(),
        )
        .await
        {
            Ok(r) => {
                let Some(ts) = r.get("tools").and_then(Value::as_array) else {
                    // Not a tools/list answer (a trivial benchmark target, say): nothing to check.
                    d.list_error = Some("the tools/list result has no tools array".into());
                    break;
                };
                d.pages += 1;
                d.tools.extend(ts.iter().cloned());
                cursor = r
                    .get("nextCursor")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if cursor.is_none() || d.pages >= MAX_PAGES {
                    break;
                }
            }
            Err(e) => {
                d.list_error = Some(e);
                break;
            }
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_refused_naming_what_the_target_offers() {
        let mut d = Discovery::default();
        d.read_discover(&json!({"supportedVersions": ["2026-07-28"],
            "_meta": {meta::SERVER_INFO: {"name": "weather", "version": "1.2.0"}}}));
        d.tools = vec![
            json!({"name": "forecast", "inputSchema": {"properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}),
            json!({"name": "alerts"}),
        ];
        d.pages = 2;
        let s = Scenario::builtin("create_repo").unwrap();
        let e = d.check_scenario(&s).unwrap_err().to_string();
        assert!(
            e.contains("create_repo") && e.contains("forecast, alerts"),
            "{e}"
        );
        assert!(d
            .check_scenario(&Scenario::one_tool("alerts", None, &[]).unwrap())
            .is_ok());
        let text = d.summary();
        assert!(
            text.contains("weather 1.2.0") && text.contains("2 tools in 2 page(s)"),
            "{text}"
        );
        assert!(
            text.contains("forecast (region→Mcp-Param-Region)"),
            "{text}"
        );
        d.list_error = Some("HTTP 404".into());
        assert!(d.check_scenario(&s).is_ok());
        let body: Value =
            serde_json::from_slice(&request_body(3, "tools/list", Some("c2"))).unwrap();
        assert_eq!(body["id"], "preflight-3");
        assert_eq!(body["params"]["cursor"], "c2");
    }
}
