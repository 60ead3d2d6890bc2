//! What a body stage is: a stage that decides on the parsed request body (a guardrail, the
//! argument policy), written as plain functions over plain data, and listed once in the
//! pipeline (`gateway::journey::pipeline::STAGES`), which gives it the body on every leg and
//! every body plan, sampled out or not. It never sees a socket or the request's context.
//!
//! A body stage is a [`BodyStage`]: its name, how it builds its state from the config (`None`:
//! off, and then it costs a request nothing), which requests it covers (decided without the
//! body: when it covers one, the body is read and parsed even on a sampled-out route), its
//! decision, and what `explain` says of a request (the decision's reasons, without side
//! effects). Adding one is this type, one file, and one line in the pipeline's list.

use serde_json::Value;
use std::any::Any;
use std::sync::{Arc, OnceLock};

use crate::auth::Identity;
use crate::config::Config;
use crate::mcp::{Envelope, Rejection};

/// A body stage's own state, built once per gateway (per reload) from the config.
pub(crate) type State = Arc<dyn Any + Send + Sync>;

/// Where a request is going, as known before its body: what a stage may cover. Claims are left
/// out on purpose: on a sampled-out route nothing has checked them against the body.
pub(crate) struct Scope<'a> {
    /// The request's path (the endpoint, or a federated one).
    pub path: &'a str,
}

/// What a body stage is given: the parsed request, and who is calling.
pub(crate) struct Input<'a> {
    pub scope: Scope<'a>,
    /// The strict parser's reading of the body. On a sampled-out route the headers were not
    /// checked against it: decide on what the body says.
    pub envelope: &'a Envelope,
    /// The body as it will go upstream.
    pub body: &'a [u8],
    /// The verified caller (`None`: auth is off, or no token where none is required).
    pub identity: Option<&'a Identity>,
    arguments: OnceLock<Result<Option<Value>, String>>,
}

impl<'a> Input<'a> {
    pub(crate) fn new(
        scope: Scope<'a>,
        envelope: &'a Envelope,
        body: &'a [u8],
        identity: Option<&'a Identity>,
    ) -> Self {
        Input {
            scope,
            envelope,
            body,
            identity,
            arguments: OnceLock::new(),
        }
    }

    /// The body's method, as the body says it.
    pub(crate) fn method(&self) -> Option<&str> {
        self.envelope.method.as_deref()
    }

    /// `params.name` as the body says it.
    pub(crate) fn name(&self) -> Option<&str> {
        self.envelope.name.as_deref()
    }

    /// `params.arguments` as a JSON value (`None` when absent), parsed once for all the stages
    /// that ask (the rest of `params`, `_meta` included, is skipped, not built); `Err` when it
    /// holds what a JSON value cannot (a number out of range, nesting past serde_json's 128
    /// levels): a stage that needs it refuses the request.
    pub(crate) fn arguments(&self) -> Result<Option<&Value>, &str> {
        let parsed = self.arguments.get_or_init(|| arguments_of(self.body));
        parsed.as_ref().map(Option::as_ref).map_err(String::as_str)
    }
}

fn arguments_of(body: &[u8]) -> Result<Option<Value>, String> {
    #[derive(serde::Deserialize)]
    struct Request {
        #[serde(default)]
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(default)]
        arguments: Option<Value>,
    }
    serde_json::from_slice::<Request>(body)
        .map(|r| r.params.and_then(|p| p.arguments))
        .map_err(|e| format!("the request's arguments cannot be read as JSON values: {e}"))
}

/// A stage over the parsed body.
pub(crate) struct BodyStage {
    /// Names the stage in `explain`, the console and the docs.
    pub name: &'static str,
    /// The stage's state for a config; `None`: the stage is off.
    pub build: fn(&Config) -> Option<State>,
    /// Whether the stage may act on requests in this scope (then the body is read and parsed,
    /// sampled out or not).
    pub covers: fn(&State, &Scope) -> bool,
    /// The decision: on, or refuse with this answer.
    pub run: fn(&State, &Input) -> Result<(), Rejection>,
    /// What `explain` shows of this request: the stage's reasons, without side effects.
    pub explain: fn(&State, &Input) -> Value,
}
