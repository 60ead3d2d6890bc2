//! The admin listener: `/healthz` (the process answers), `/readyz` (config loaded and every pool
//! has an instance), `/metrics` (Prometheus text format).

use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use std::sync::Arc;

use super::Gateway;

pub struct AdminApp {
    pub(crate) gateway: Arc<Gateway>,
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
        match session.req_header().uri.path() {
            "/healthz" => text(200, "text/plain", "ok\n".into()),
            "/readyz" => {
                let empty: Vec<&str> = self
                    .gateway
                    .pools
                    .iter()
                    .filter(|p| p.instances.is_empty())
                    .map(|p| p.name.as_str())
                    .collect();
                if empty.is_empty() {
                    text(200, "text/plain", "ready\n".into())
                } else {
                    text(
                        503,
                        "text/plain",
                        format!("not ready: pools without instances: {}\n", empty.join(", ")),
                    )
                }
            }
            "/metrics" => text(
                200,
                "text/plain; version=0.0.4",
                self.gateway.metrics.render(),
            ),
            other => text(
                404,
                "text/plain",
                format!("no admin endpoint at {other}; try /healthz, /readyz or /metrics\n"),
            ),
        }
    }
}
