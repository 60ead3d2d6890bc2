//! What the reference backend offers: the tool and prompt registry and the listings.
//!
//! A tool is a plain function of one [`Call`]: the request's arguments, the client's declared
//! capabilities, the (already shape-checked) `inputResponses` and the (already verified)
//! `requestState`. It returns an [`Outcome`]: a complete result, a new `input_required`
//! round, an in-band error, or a special behaviour the HTTP layer performs (SSE progress,
//! logging, list-changed triggers). Tools never see raw state or keep per-flow memory: what
//! they need in the next round travels in [`Outcome::Ask::data`], sealed.
//!
//! - [`seed`]: the MRTR stories (`create_repo`, `deploy`, `charge`, `onboard`, `summarize`,
//!   `list_workspace`, plus `echo` and `charge_count`), whose names, keys and texts are a
//!   contract with the load tester;
//! - [`fixtures`]: the conformance suite's tools (`test_*`); [`prompts`]: its prompts;
//! - [`tasked`]: tools that run as tasks (Tasks extension) and the suite's `greet`;
//! - [`resources`]: resources, templates and completion;
//! - [`answers`]: reading the client's answers and building input requests.

mod answers;
mod fixtures;
mod fixtures_2025;
mod prompts;
mod resources;
mod seed;
mod tasked;

pub(crate) use resources::{
    charges_result, complete_argument, read_resource, resources_json, templates_json, Read,
};
pub use seed::settle;

use serde_json::{json, Map, Value};
use std::sync::OnceLock;

use super::state::StatePayload;
use super::tasks::jobs::Job;

/// Cache hint of the lists and static resources.
pub(crate) const LIST_TTL_MS: u64 = 60_000;

/// One tools/call or prompts/get, as a tool sees it.
pub struct Call<'a> {
    pub name: &'a str,
    pub args: &'a Map<String, Value>,
    pub caps: &'a Map<String, Value>,
    /// `inputResponses`, each value an object. Empty on a first leg, and for tools whose
    /// answers only count with a verified state ([`Tool::sealed`]) when no state came back.
    pub answers: &'a Map<String, Value>,
    /// The verified `requestState`, if one came back.
    pub state: Option<&'a StatePayload>,
}

impl Call<'_> {
    /// How many `input_required` rounds this flow has had so far.
    pub fn round(&self) -> u32 {
        self.state.map_or(0, |s| s.round)
    }

    fn data(&self, key: &str) -> Option<&Value> {
        self.state.and_then(|s| s.data.get(key))
    }

    fn declares(&self, cap: &str) -> bool {
        self.caps.contains_key(cap)
    }
}

/// Something the HTTP layer does for a tool because it needs time, a stream or the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// `notifications/progress` 0, 50, 100 over SSE when the request has a progressToken.
    Progress,
    /// `notifications/message` over SSE, only when the request set a logLevel.
    Logging,
    /// Tell listen streams that the tool list changed.
    TriggerTools,
    /// Tell listen streams that the prompt list changed.
    TriggerPrompts,
}

/// What a tool or prompt decided.
#[derive(Debug)]
pub enum Outcome {
    /// The result object (`content`, `isError`, `messages`…), without resultType and `_meta`.
    Complete(Value),
    /// Ask the client (`inputRequests`), and carry `data` sealed to the next round.
    Ask {
        requests: Map<String, Value>,
        data: Value,
    },
    /// An in-band JSON-RPC error (HTTP 200).
    Error(i32, String),
    /// 400 / -32021 with this `requiredCapabilities` object.
    NeedCapabilities(Value),
    Special(Special),
    /// Run this job as a task (Tasks extension); see [`Tool::task`].
    Task(Job),
    /// A charge-ledger operation, carried out (async, maybe in Redis) by [`settle`].
    Ledger(LedgerOp),
}

/// What `charge` and `charge_count` ask of the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerOp {
    /// Charge once for the confirmed state with `nonce`.
    Charge {
        cart: String,
        amount: String,
        nonce: String,
        expires_at_ms: u64,
    },
    Count {
        cart: String,
    },
}

/// Whether a tool runs as a task (the suite's `taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never a task.
    Forbidden,
    /// A task when the client negotiated the extension; otherwise run inline.
    Optional,
    /// Only as a task: -32021 for a client without the extension.
    Required,
}

impl TaskSupport {
    pub(crate) fn wire(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

pub(super) type Step = Result<Outcome, Outcome>;
pub(super) type Run = fn(&Call) -> Step;

/// A tool: its listing and its behaviour.
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    /// The `inputSchema`, as JSON text.
    pub schema: &'static str,
    /// Client capabilities the tool cannot run without (-32021 when one is missing).
    pub needs: &'static [&'static str],
    /// Answers count only together with a verified `requestState` (the flow is bound to a
    /// principal and arguments); without one the call starts over.
    pub sealed: bool,
    /// Arguments that the sealed state pins: a retry that changes them is refused with a
    /// message naming the argument.
    pub pinned: &'static [&'static str],
    /// `(argument, header suffix)` pairs mirrored into `Mcp-Param-<suffix>`.
    pub param_headers: &'static [(&'static str, &'static str)],
    /// Whether it runs as a task.
    pub task: TaskSupport,
    pub run: Run,
}

/// A prompt: its listing and its behaviour.
pub(crate) struct Prompt {
    pub name: &'static str,
    pub description: &'static str,
    /// `(name, description, required)`
    pub arguments: &'static [(&'static str, &'static str, bool)],
    pub needs: &'static [&'static str],
    pub sealed: bool,
    pub run: Run,
}

pub(super) const NO_ARGS: &str = r#"{"type":"object","properties":{}}"#;
/// Every tool, in tools/list order: the seed tools, then the conformance fixtures.
pub(crate) fn all_tools() -> impl Iterator<Item = &'static Tool> {
    seed::TOOLS
        .iter()
        .chain(fixtures::TOOLS)
        .chain(fixtures_2025::TOOLS)
        .chain(tasked::TOOLS)
}

pub fn tool(name: &str) -> Option<&'static Tool> {
    all_tools().find(|t| t.name == name)
}

pub(crate) fn prompt(name: &str) -> Option<&'static Prompt> {
    prompts::PROMPTS.iter().find(|p| p.name == name)
}

/// The `tools` array of tools/list, built once.
pub(crate) fn tools_json() -> &'static Value {
    static J: OnceLock<Value> = OnceLock::new();
    J.get_or_init(|| {
        Value::Array(
            all_tools()
                .map(|t| {
                    let mut j = json!({
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": serde_json::from_str::<Value>(t.schema).expect("tool schema is JSON"),
                    });
                    if t.task != TaskSupport::Forbidden {
                        j["execution"] = json!({ "taskSupport": t.task.wire() });
                    }
                    j
                })
                .collect(),
        )
    })
}

/// The `prompts` array of prompts/list, built once.
pub(crate) fn prompts_json() -> &'static Value {
    static J: OnceLock<Value> = OnceLock::new();
    J.get_or_init(|| {
        Value::Array(
            prompts::PROMPTS
                .iter()
                .map(|p| {
                    let args: Vec<Value> = p
                        .arguments
                        .iter()
                        .map(|(n, d, r)| json!({"name": n, "description": d, "required": r}))
                        .collect();
                    json!({"name": p.name, "description": p.description, "arguments": args})
                })
                .collect(),
        )
    })
}

/// Which capabilities of `needs` the client did not declare, as a `requiredCapabilities` object.
pub(crate) fn missing_capabilities(needs: &[&str], caps: &Map<String, Value>) -> Option<Value> {
    let missing: Map<String, Value> = needs
        .iter()
        .filter(|c| !caps.contains_key(**c))
        .map(|c| (c.to_string(), json!({})))
        .collect();
    (!missing.is_empty()).then_some(Value::Object(missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_are_valid_json_and_names_unique() {
        let tools = tools_json().as_array().unwrap();
        assert_eq!(tools.len(), all_tools().count());
        let mut names: Vec<&str> = all_tools().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all_tools().count());
        for t in tools {
            assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        }
        assert_eq!(
            prompts_json().as_array().unwrap().len(),
            prompts::PROMPTS.len()
        );
        // Every x-mcp-header in a schema is declared as a param header, and vice versa.
        for t in all_tools() {
            let schema: Value = serde_json::from_str(t.schema).unwrap();
            let marked: Vec<(String, String)> = schema["properties"]
                .as_object()
                .unwrap()
                .iter()
                .filter_map(|(k, v)| {
                    v.get("x-mcp-header")
                        .and_then(Value::as_str)
                        .map(|h| (k.clone(), h.to_owned()))
                })
                .collect();
            let declared: Vec<(String, String)> = t
                .param_headers
                .iter()
                .map(|(a, h)| (a.to_string(), h.to_string()))
                .collect();
            assert_eq!(marked, declared, "{}", t.name);
        }
    }
}
