//! The admin listener: `/healthz` (the process answers), `/readyz` (every pool has a usable
//! instance), `/metrics` (Prometheus text format), `/catalog` (what each federated pool serves),
//! the console (`/ui`, the `/-/console.json` and `/-/history` it polls, [`crate::gateway::runtime::console`]), `POST /-/explain`
//! (what the gateway would do with a request, [`crate::gateway::runtime::explain`]), `POST /-/reload` (re-read the
//! config file), `POST /-/cache/purge[?method=M&name=N]` (drop edge-cache entries), `/-/pins` and
//! `POST /-/pins/approve` (pinned definitions, [`crate::gateway::runtime::pins`]).

use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use std::sync::Arc;

use crate::gateway::journey::live::Live;

pub(crate) struct AdminApp {
    pub(crate) live: Arc<Live>,
    /// The per-second and per-minute history the console draws (`GET /-/history`).
    pub(crate) history: crate::gateway::runtime::console::history::Shared,
}

/// The largest `POST /-/explain` document read (the request body it carries included).
const EXPLAIN_MAX: usize = 2 << 20;

fn text(status: u16, content_type: &str, body: String) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::CONTENT_LENGTH, body.len())
        .body(body.into_bytes())
        .expect("static response parts are valid")
}

/// A console file, with the headers that keep it to itself (see [`crate::gateway::runtime::console::assets`]).
fn asset(content_type: &str, body: &str) -> Response<Vec<u8>> {
    Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::CONTENT_LENGTH, body.len())
        .header(
            http::header::CONTENT_SECURITY_POLICY,
            crate::gateway::runtime::console::assets::CSP,
        )
        .header(http::header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(http::header::X_FRAME_OPTIONS, "DENY")
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(body.as_bytes().to_vec())
        .expect("static response parts are valid")
}

/// `POST /-/explain`: the body is a [`crate::gateway::runtime::explain::Question`]; the answer is the walk.
async fn explain(app: &AdminApp, session: &mut ServerSession) -> Response<Vec<u8>> {
    let mut doc = Vec::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) if doc.len() + chunk.len() <= EXPLAIN_MAX => {
                doc.extend_from_slice(&chunk)
            }
            Ok(Some(_)) => {
                return text(
                    413,
                    "text/plain",
                    format!("an explain document is at most {EXPLAIN_MAX} bytes\n"),
                )
            }
            Ok(None) => break,
            Err(e) => {
                return text(
                    400,
                    "text/plain",
                    format!("the explain document could not be read: {e}\n"),
                )
            }
        }
    }
    match serde_json::from_slice::<crate::gateway::runtime::explain::Question>(&doc) {
        Ok(q) => {
            let answer = crate::gateway::runtime::explain::explain(&app.live.load(), &q).await;
            text(200, "application/json", answer.to_string())
        }
        Err(e) => text(
            400,
            "text/plain",
            format!("not an explain document ({e}); send {{\"headers\": {{\"Mcp-Method\": \"tools/call\", ...}}, \"body\": \"<the request body>\"}}\n"),
        ),
    }
}

/// With an admin token configured, whether the request carries it (`Authorization: Bearer`);
/// without one, every request may.
fn may_change_state(
    gw: &crate::gateway::journey::state::Gateway,
    headers: &http::HeaderMap,
) -> bool {
    use sha2::Digest;
    let Some(want) = &gw.admin_token else {
        return true;
    };
    let given = crate::mcp::header::bearer_token(headers).unwrap_or("");
    let got: [u8; 32] = sha2::Sha256::digest(given.as_bytes()).into();
    // Digests compared in full: no early exit that times the token.
    got.iter().zip(want).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

fn unauthorized() -> Response<Vec<u8>> {
    let body = "this action needs the admin token: send Authorization: Bearer <the token in admin_token_file>\n";
    Response::builder()
        .status(401)
        .header(http::header::CONTENT_TYPE, "text/plain")
        .header(http::header::CONTENT_LENGTH, body.len())
        .header(
            http::header::WWW_AUTHENTICATE,
            "Bearer realm=\"mcp-edge admin\"",
        )
        .body(body.as_bytes().to_vec())
        .expect("static response parts are valid")
}

#[async_trait]
impl ServeHttp for AdminApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let gw = self.live.load();
        let post = session.req_header().method == http::Method::POST;
        if let Some((content_type, body)) =
            crate::gateway::runtime::console::assets::file(session.req_header().uri.path())
        {
            return asset(content_type, body);
        }
        match session.req_header().uri.path() {
            "/healthz" => text(200, "text/plain", "ok\n".into()),
            "/readyz" => {
                let down: Vec<&str> = gw
                    .pools
                    .iter()
                    .filter(|p| !p.health.any_usable())
                    .map(|p| p.name.as_str())
                    .collect();
                if down.is_empty() {
                    text(200, "text/plain", "ready\n".into())
                } else {
                    let msg = format!("not ready: no usable instance in pool(s) {}\n", down.join(", "));
                    text(503, "text/plain", msg)
                }
            }
            "/metrics" => {
                gw.sweep_flows();
                crate::gateway::federation::journey::refresh::publish(&gw);
                gw.publish_pools();
                text(200, "text/plain; version=0.0.4", gw.metrics.render())
            }
            "/catalog" => text(200, "application/json", crate::gateway::federation::journey::report::catalog_json(&gw)),
            "/" => Response::builder()
                .status(302)
                .header(http::header::LOCATION, "/ui")
                .header(http::header::CONTENT_LENGTH, 0)
                .body(Vec::new())
                .expect("static response parts are valid"),
            // Browsers ask for it on every page: nothing to show, and no 404 in their console.
            "/favicon.ico" => text(204, "image/x-icon", String::new()),
            "/-/console.json" => text(200, "application/json", crate::gateway::runtime::console::snapshot(&self.live)),
            "/-/history" => text(200, "application/json", crate::gateway::runtime::console::history::json(&self.history)),
            "/-/explain" if post => explain(self, session).await,
            "/-/pins" => text(200, "application/json", crate::gateway::runtime::pins::list(&gw, session.req_header().uri.query())),
            "/-/cache/purge" | "/-/reload" | "/-/pins/approve" if post && !may_change_state(&gw, &session.req_header().headers) => unauthorized(),
            "/-/cache/purge" if post => {
                let (status, msg) = crate::gateway::cache::stages::purge_endpoint(&gw.cache, session.req_header().uri.query());
                text(status, "text/plain", msg)
            }
            "/-/pins/approve" if post => {
                let (status, body) = crate::gateway::runtime::pins::approve(&gw, session).await;
                let ct = if status == 200 { "application/json" } else { "text/plain" };
                text(status, ct, body)
            }
            "/-/reload" if post => match self.live.reload_in_background().await {
                Ok(()) => text(200, "text/plain", "reloaded\n".into()),
                Err(e) => {
                    let msg = format!("reload refused, the previous config keeps serving: {e}\n");
                    text(400, "text/plain", msg)
                }
            },
            other => text(
                404,
                "text/plain",
                format!("no admin endpoint at {other}; try /ui (the console), /healthz, /readyz, /metrics, /catalog, /-/history, /-/pins, POST /-/explain, POST /-/pins/approve, POST /-/reload or POST /-/cache/purge\n"),
            ),
        }
    }
}
