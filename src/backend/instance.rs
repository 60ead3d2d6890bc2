//! One backend instance and what the instances of a pool share ([`Shared`]: the state codec,
//! the ledger, allowed origins and hosts, list changes, tasks, delays); the `_meta` every
//! result carries and how a result is finished ([`Instance::finish`], [`Instance::ok`]). Below
//! the ladder ([`super::http`]) and every handler, which all name an instance.

use http::{HeaderMap, Response, StatusCode};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

use super::ledger::Ledger;
use super::respond::{json_response, Body};
use super::state::StateCodec;
use super::tasks::TaskStore;
use crate::mcp::{meta, result_body, result_type};

/// A change fanned out to the listen streams of every instance of a pool: a list changed, or
/// the resource with this URI did (a cart charged: `charges://<cart>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Tools,
    Prompts,
    Resource(Arc<str>),
}

/// What the instances of one pool share.
pub(crate) struct Shared {
    pub codec: StateCodec,
    pub ledger: Ledger,
    /// Allowed `Origin` values: the local ones and `--allow-origin` (`*` = any), matched by the
    /// gateway's rule ([`crate::config::OriginsConfig::allows`]).
    pub origins: crate::config::OriginsConfig,
    /// Allowed `Host` names (without port); `None` = not checked.
    pub hosts: Option<Vec<String>>,
    pub changes: broadcast::Sender<Change>,
    /// Tasks (Tasks extension) created by the instances of this pool.
    pub tasks: TaskStore,
    /// Where the caller's identity comes from: this header (set by a gateway that verified
    /// the caller), or, when `None`, the bearer token.
    pub principal_header: Option<http::HeaderName>,
    pub shutdown: watch::Receiver<bool>,
    pub body_limit: usize,
    /// Added to every answer ([`super::PoolOptions::delay`]).
    pub delay: Duration,
    /// Added to `tools/call` answers of these tools.
    pub tool_delays: Vec<(String, Duration)>,
    /// Most requests each instance works on at once (`--max-concurrent`; 0: no bound).
    pub max_concurrent: usize,
}

impl Shared {
    /// How long to hold the answer to a request of `method` on `name` (`--delay`,
    /// `--tool-delay`).
    pub(crate) fn delay_for(&self, method: &str, name: Option<&str>) -> Duration {
        let tool = (method == crate::mcp::methods::TOOLS_CALL)
            .then(|| {
                self.tool_delays
                    .iter()
                    .find(|(t, _)| Some(t.as_str()) == name)
            })
            .flatten()
            .map_or(Duration::ZERO, |(_, d)| *d);
        self.delay + tool
    }

    /// The principal of a request: SHA-256 of the bearer token, or, with a principal header
    /// configured, of that header's one value (`anonymous` when it is absent or repeated).
    pub(crate) fn principal(&self, headers: &HeaderMap) -> String {
        let Some(name) = &self.principal_header else {
            return super::state::principal_of(crate::mcp::header::bearer_token(headers));
        };
        let mut values = headers.get_all(name).iter();
        match (values.next().and_then(|v| v.to_str().ok()), values.next()) {
            (Some(v), None) if !v.trim().is_empty() => {
                super::state::principal_of(Some(&format!("subject:{}", v.trim())))
            }
            _ => "anonymous".into(),
        }
    }
}

/// One instance: its id and the `_meta` every result carries.
pub(crate) struct Instance {
    pub id: String,
    pub shared: Arc<Shared>,
    meta: Value,
    /// The owner hint in the ids of the tasks this instance creates
    /// ([`crate::mcp::tasks::owner_hint`] of its advertised address).
    pub task_hint: String,
    /// Turns to work on a request (`--max-concurrent`): more wait, so latency rises with load.
    pub(super) work: Option<Arc<tokio::sync::Semaphore>>,
}

impl Instance {
    /// An instance reachable at `advertise` (`host:port`, as a gateway's pool lists it).
    pub(crate) fn new(id: String, shared: Arc<Shared>, advertise: &str) -> Self {
        let meta = json!({
            meta::SERVER_INFO: {"name": "mcp-edge-backend", "version": env!("CARGO_PKG_VERSION")},
            meta::EDGE_INSTANCE: id,
        });
        Instance {
            id,
            meta,
            task_hint: crate::mcp::tasks::owner_hint(advertise),
            work: (shared.max_concurrent > 0)
                .then(|| Arc::new(tokio::sync::Semaphore::new(shared.max_concurrent))),
            shared,
        }
    }
}

impl Instance {
    /// Add `resultType` and the instance `_meta` to a result object.
    pub(super) fn finish(&self, kind: &str, mut result: Value) -> Value {
        if let Value::Object(m) = &mut result {
            m.insert(
                crate::mcp::mrtr::RESULT_TYPE.into(),
                Value::String(kind.into()),
            );
            m.insert("_meta".into(), self.meta.clone());
        }
        result
    }

    pub(super) fn ok(&self, id: &RawValue, result: Value) -> Response<Body> {
        json_response(
            StatusCode::OK,
            result_body(id, &self.finish(result_type::COMPLETE, result)),
        )
    }
}
