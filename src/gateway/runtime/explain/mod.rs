//! Explain: what the gateway would do with one request, stage by stage, walking the same list
//! the proxy runs (`stages::pipeline::STAGES`), without forwarding it. The answer's `stages`
//! names the stages the request would go through, in list order, as the proxy records them in
//! `RequestCtx::ran` (a test holds the two to agree); `steps` says what each one found, `skip`
//! for one that does not apply. It assumes a body read whole (the default path); on pingora's
//! pipe a body held past 64 KiB skips the stages that answer themselves (federation, cache).
//!
//! Each stage is the proxy's own function, asked without its side effects: limits are peeked
//! ([`crate::gateway::rate_limits::stages::Limit::peek`]: no token spent, no key added), the cache is only read
//! ([`crate::gateway::cache::journey::would_hit`]), the header↔body check counts no metric, nothing reaches an
//! instance. Auth verifies the token for real (it may fetch the JWKS or introspect, as a request
//! would), and the balancer's pick is a sample: round robin moves on by one, least-loaded draws
//! at random. The answer names the caller by its verified subject, never by its token, and
//! repeats no header value.
//!
//! The document may name the client's address (`client_ip`) for limits keyed on it.
//!
//! A 2025-era request is the protocol bridge's ([`legacy`]): `initialize` and the requests it
//! answers itself say so; a request it carries into the pipeline is explained as the 2026
//! request it becomes, with its `era` and what the bridge did (`bridge`).
//!
//! Asked by `POST /-/explain` on the admin listener, the console's form, and
//! `mcp-edge explain --config gateway.yaml --request req.json` (offline: a gateway built from
//! the config, health unknown so every instance counts as up).

use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

mod legacy;
mod stages;

use crate::gateway::journey::request::RequestCtx;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::pipeline::{index_of, Ran, Run, Step, STAGES};
use crate::mcp::{Envelope, Rejection};
use stages::{
    admit, auth, balance, body_stage, cache, capacity, check, credentials, federation, limits,
    pins, route, seal,
};

/// A request to explain: `{"headers": {...}, "body": "<the body as a string>", "path": "/mcp"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: String,
    /// The request path (default: the gateway's `endpoint`).
    #[serde(default)]
    pub path: Option<String>,
    /// The client's address, for limits keyed on `client_ip` (default: none, its own bucket).
    #[serde(default)]
    pub client_ip: Option<std::net::IpAddr>,
}

/// The stages walked so far (each as the narrative step and in [`Ran`], the set the proxy keeps
/// too) and, once one decides, the verdict.
struct Walk {
    steps: Vec<Value>,
    ran: Ran,
}

impl Walk {
    fn pass(&mut self, i: usize, detail: Value) {
        self.ran.mark(i);
        let step = STAGES[i].name();
        self.steps
            .push(json!({"step": step, "outcome": "pass", "detail": detail}));
    }

    /// The stage does not apply to this request (the proxy skips it too).
    fn skip(&mut self, i: usize, detail: Value) {
        let step = STAGES[i].name();
        self.steps
            .push(json!({"step": step, "outcome": "skip", "detail": detail}));
    }

    /// The stage refuses: the answer the client would get.
    fn refuse(mut self, i: usize, rej: &Rejection, detail: Value) -> Value {
        self.ran.mark(i);
        let step = STAGES[i].name();
        self.steps
            .push(json!({"step": step, "outcome": "refuse", "detail": detail}));
        json!({
            "verdict": "refused",
            "decided_by": step,
            "answer": {"status": rej.status, "code": rej.code, "reason": rej.reason, "message": rej.message},
            "steps": self.steps,
            "stages": self.ran.names(),
        })
    }

    fn done(mut self, verdict: &str, i: usize, extra: Value) -> Value {
        self.ran.mark(i);
        let step = STAGES[i].name();
        let mut v = json!({"verdict": verdict, "decided_by": step, "steps": self.steps,
                           "stages": self.ran.names()});
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        v
    }
}

/// What one stage says of the request.
enum Said {
    Pass(Value),
    Skip(Value),
    Refuse(Rejection, Value),
    /// The gateway answers it itself (federation, the cache): the walk ends there.
    Answered(Value),
}

/// A request being explained: its head, body, and what the stages so far found.
struct Explaining<'a> {
    gw: &'a Arc<Gateway>,
    q: &'a Question,
    parts: http::request::Parts,
    ctx: RequestCtx,
    /// The body, parsed (by the check, or for the body stages on a sampled-out route).
    env: Option<Envelope>,
    /// The header↔body check runs (not sampled out).
    check: bool,
    /// The head alone doomed it, and the check on admission let it pass (a notification).
    doomed: bool,
}

/// The request head as the proxy would see it (`Err`: a header that no HTTP parser accepts).
fn head(gw: &Gateway, q: &Question) -> Result<http::request::Parts, String> {
    let path = q.path.as_deref().unwrap_or(gw.config.endpoint.as_str());
    let mut b = http::Request::builder()
        .method(http::Method::POST)
        .uri(path);
    for (k, v) in &q.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    // Every HTTP/1.1 client sends one; a question that leaves it out means the listener's.
    if !q.headers.keys().any(|k| k.eq_ignore_ascii_case("host")) {
        b = b.header(http::header::HOST, gw.config.listen.mcp.to_string());
    }
    let (parts, ()) = b
        .body(())
        .map_err(|e| format!("the request head does not parse: {e}"))?
        .into_parts();
    Ok(parts)
}

/// Walk `q` through the stages of `gw`, in the order of the pipeline's list.
pub async fn explain(gw: &Arc<Gateway>, q: &Question) -> Value {
    let mut walk = Walk {
        steps: Vec::new(),
        ran: Ran::default(),
    };
    let parts = match head(gw, q) {
        Ok(p) => p,
        Err(e) => return json!({"verdict": "invalid", "error": e, "steps": [], "stages": []}),
    };
    if let Some(bridged) = legacy::explain(gw, q, &parts).await {
        return bridged;
    }
    let mut x = Explaining {
        gw,
        q,
        parts,
        ctx: RequestCtx::new(gw.clone()),
        env: None,
        check: false,
        doomed: false,
    };
    for (i, stage) in STAGES.iter().enumerate() {
        let said = match stage.run {
            Run::Step(Step::Admit) => match admit(&mut x) {
                // The proxy reads the body at once, to answer with its id: the check says why; a
                // notification that passes goes on (the stages that answer have nothing to do).
                Ok(Some(detail)) => {
                    walk.pass(i, detail);
                    if let Said::Refuse(rej, d) = check(&mut x, true) {
                        return walk.refuse(index_of(Step::Check), &rej, d);
                    }
                    x.doomed = true;
                    continue;
                }
                Ok(None) => {
                    Said::Pass(json!({"claimed_method": x.ctx.method, "claimed_name": x.ctx.name}))
                }
                Err(rej) => Said::Refuse(rej, json!({})),
            },
            Run::Step(Step::Route) => route(&mut x),
            Run::Step(Step::Auth) => auth(&mut x).await,
            Run::Step(Step::Limits) => limits(&x),
            Run::Step(Step::Pins) => pins(&mut x),
            Run::Step(Step::Check) if x.doomed => Said::Pass(json!({
                "note": "checked on admission: a notification without MCP headers passes"
            })),
            Run::Step(Step::Check) => check(&mut x, false),
            Run::Body(b) => body_stage(&mut x, i, b),
            Run::Step(Step::Federation) => federation(&x),
            Run::Step(Step::Seal) => seal(&x),
            Run::Step(Step::Cache) => cache(&x),
            Run::Step(Step::Capacity) => capacity(&x),
            Run::Step(Step::Credentials) => credentials(&x),
            Run::Step(Step::Balance) => balance(&x),
        };
        match said {
            Said::Pass(d) => walk.pass(i, d),
            Said::Skip(d) => walk.skip(i, d),
            Said::Refuse(rej, d) => return walk.refuse(i, &rej, d),
            Said::Answered(d) => return walk.done("answered", i, d),
        }
    }
    walk.done("forwarded", index_of(Step::Balance), json!({}))
}
