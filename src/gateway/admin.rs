//! The admin listener: `/healthz` (the process answers), `/readyz` (every pool has a usable
//! instance), `/metrics` (Prometheus text format), `/catalog` (what each federated pool serves), `POST /-/reload` (re-read the config file), `POST /-/cache/purge[?method=M&name=N]`
//! (drop edge-cache entries).

use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use std::sync::Arc;

use super::Live;

pub struct AdminApp {
    pub(crate) live: Arc<Live>,
}

fn text(status: u16, content_type: &str, body: String) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::CONTENT_LENGTH, body.len())
        .body(body.into_bytes())
        .expect("static response parts are valid")
}

#[async_trait]
impl ServeHttp for AdminApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let gw = self.live.load();
        let post = session.req_header().method == http::Method::POST;
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
                super::federation::refresh::publish(&gw);
                gw.metrics.balance.publish(&gw.pools);
                text(200, "text/plain; version=0.0.4", gw.metrics.render())
            }
            "/catalog" => text(200, "application/json", super::federation::report::catalog_json(&gw)),
            "/-/cache/purge" if post => {
                let (status, msg) = super::cache::purge_endpoint(&gw, session.req_header().uri.query());
                text(status, "text/plain", msg)
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
                format!("no admin endpoint at {other}; try /healthz, /readyz, /metrics, /catalog, POST /-/reload or POST /-/cache/purge\n"),
            ),
        }
    }
}
