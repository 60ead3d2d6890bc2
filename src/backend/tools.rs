//! The tools, prompts and resources the reference backend serves, and the charge ledger.
//!
//! A tool is a plain function of one [`Call`]: the request's arguments, the client's declared
//! capabilities, the (already shape-checked) `inputResponses` and the (already verified)
//! `requestState`. It returns an [`Outcome`]: a complete result, a new `input_required`
//! round, an in-band error, or a special behaviour the HTTP layer performs (SSE progress,
//! logging, list-changed triggers). Tools never see raw state or keep per-flow memory: what
//! they need in the next round travels in [`Outcome::Ask::data`], sealed.
//!
//! Two families live here: the MRTR stories (`create_repo`, `deploy`, `charge`, `onboard`,
//! `summarize`, `list_workspace`, plus `echo` and `charge_count`), whose names, keys and texts
//! are a contract with the load tester, and the conformance suite's fixtures (`test_*`).

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::state::{now_ms, StatePayload};
use crate::mcp::codes;
use crate::mcp::methods::{ELICITATION_CREATE, ROOTS_LIST, SAMPLING_CREATE_MESSAGE};

/// Cache hint of the lists and static resources.
pub const LIST_TTL_MS: u64 = 60_000;

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
    pub ledger: &'a Ledger,
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
}

type Step = Result<Outcome, Outcome>;
type Run = fn(&Call) -> Step;

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
    pub run: Run,
}

/// A prompt: its listing and its behaviour.
pub struct Prompt {
    pub name: &'static str,
    pub description: &'static str,
    /// `(name, description, required)`
    pub arguments: &'static [(&'static str, &'static str, bool)],
    pub needs: &'static [&'static str],
    pub sealed: bool,
    pub run: Run,
}

const NO_ARGS: &str = r#"{"type":"object","properties":{}}"#;

pub static TOOLS: &[Tool] = &[
    Tool {
        name: "echo",
        description: "Returns its text argument unchanged (the load tester's plain call); no text, no text.",
        schema: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
        needs: &[],
        sealed: false,
        pinned: &[],
        param_headers: &[],
        run: echo,
    },
    Tool {
        name: "create_repo",
        description: "Creates a GitHub repository; asks for your GitHub username first (elicitation).",
        schema: r#"{"type":"object","properties":{"repo":{"type":"string","description":"Repository name"}},"required":["repo"]}"#,
        needs: &["elicitation"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        run: create_repo,
    },
    Tool {
        name: "deploy",
        description: "Deploys a service to an environment after you type the service name to confirm.",
        schema: r#"{"type":"object","properties":{"service":{"type":"string"},"environment":{"type":"string","x-mcp-header":"Environment"}},"required":["service","environment"]}"#,
        needs: &["elicitation"],
        sealed: true,
        pinned: &["environment"],
        param_headers: &[("environment", "Environment")],
        run: deploy,
    },
    Tool {
        name: "charge",
        description: "Charges an amount to a cart after confirmation; a re-sent confirmation never charges twice.",
        schema: r#"{"type":"object","properties":{"cart_id":{"type":"string"},"amount":{"type":["number","string"]}},"required":["cart_id","amount"]}"#,
        needs: &["elicitation"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        run: charge,
    },
    Tool {
        name: "charge_count",
        description: "Read-only: how many times a cart was charged on this backend pool.",
        schema: r#"{"type":"object","properties":{"cart_id":{"type":"string"}},"required":["cart_id"]}"#,
        needs: &[],
        sealed: false,
        pinned: &[],
        param_headers: &[],
        run: charge_count,
    },
    Tool {
        name: "onboard",
        description: "Onboards a team member in two rounds: their role, then whether to grant access.",
        schema: r#"{"type":"object","properties":{"team":{"type":"string"}},"required":["team"]}"#,
        needs: &["elicitation"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        run: onboard,
    },
    Tool {
        name: "summarize",
        description: "Summarizes a text with the client's model (sampling).",
        schema: r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
        needs: &["sampling"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        run: summarize,
    },
    Tool {
        name: "list_workspace",
        description: "Lists the client's workspace roots (roots/list).",
        schema: NO_ARGS,
        needs: &["roots"],
        sealed: true,
        pinned: &[],
        param_headers: &[],
        run: list_workspace,
    },
    // --- conformance fixtures ---
    fixture("test_simple_text", "Returns a simple text.", &[], simple_text),
    fixture("test_image_content", "Returns an image.", &[], image_content),
    fixture("test_audio_content", "Returns audio.", &[], audio_content),
    fixture("test_embedded_resource", "Returns an embedded resource.", &[], embedded_resource),
    fixture("test_multiple_content_types", "Returns text, image and resource content.", &[], multiple_content),
    fixture("test_error_handling", "Always fails (isError).", &[], error_handling),
    fixture("test_tool_with_progress", "Reports progress 0, 50, 100.", &[], |_| Ok(Outcome::Special(Special::Progress))),
    fixture("test_logging_tool", "Logs, if the request set a log level.", &[], |_| Ok(Outcome::Special(Special::Logging))),
    fixture("test_trigger_tool_change", "Announces a tool list change.", &[], |_| Ok(Outcome::Special(Special::TriggerTools))),
    fixture("test_trigger_prompt_change", "Announces a prompt list change.", &[], |_| {
        Ok(Outcome::Special(Special::TriggerPrompts))
    }),
    fixture("test_missing_capability", "Needs sampling.", &["sampling"], missing_capability),
    fixture("test_streaming_elicitation", "Asks a question (elicitation).", &["elicitation"], streaming_elicitation),
    fixture("test_input_required_result_elicitation", "MRTR: elicitation.", &["elicitation"], irr_elicitation),
    fixture("test_input_required_result_sampling", "MRTR: sampling.", &["sampling"], irr_sampling),
    fixture("test_input_required_result_list_roots", "MRTR: roots.", &["roots"], irr_roots),
    Tool { sealed: true, ..fixture("test_input_required_result_request_state", "MRTR: requestState.", &["elicitation"], irr_request_state) },
    fixture(
        "test_input_required_result_multiple_inputs",
        "MRTR: three requests at once.",
        &["elicitation", "sampling", "roots"],
        irr_multiple,
    ),
    Tool { sealed: true, ..fixture("test_input_required_result_multi_round", "MRTR: two rounds.", &["elicitation"], irr_multi_round) },
    Tool { sealed: true, ..fixture("test_input_required_result_tampered_state", "MRTR: sealed state.", &["elicitation"], irr_tampered) },
    fixture("test_input_required_result_capabilities", "MRTR: asks only what the client declared.", &[], irr_capabilities),
    Tool {
        schema: r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##,
        ..fixture("json_schema_2020_12_tool", "A JSON Schema 2020-12 input schema, listed verbatim.", &[], json_schema_tool)
    },
];

const fn fixture(
    name: &'static str,
    description: &'static str,
    needs: &'static [&'static str],
    run: Run,
) -> Tool {
    Tool {
        name,
        description,
        schema: NO_ARGS,
        needs,
        sealed: false,
        pinned: &[],
        param_headers: &[],
        run,
    }
}

pub static PROMPTS: &[Prompt] = &[
    Prompt {
        name: "test_simple_prompt",
        description: "A simple prompt.",
        arguments: &[],
        needs: &[],
        sealed: false,
        run: simple_prompt,
    },
    Prompt {
        name: "test_prompt_with_arguments",
        description: "A prompt with two arguments.",
        arguments: &[
            ("arg1", "First argument", true),
            ("arg2", "Second argument", true),
        ],
        needs: &[],
        sealed: false,
        run: prompt_with_arguments,
    },
    Prompt {
        name: "test_prompt_with_embedded_resource",
        description: "A prompt that embeds a resource.",
        arguments: &[("resourceUri", "URI of the resource to embed", true)],
        needs: &[],
        sealed: false,
        run: prompt_with_resource,
    },
    Prompt {
        name: "test_prompt_with_image",
        description: "A prompt with an image.",
        arguments: &[],
        needs: &[],
        sealed: false,
        run: prompt_with_image,
    },
    Prompt {
        name: "test_input_required_result_prompt",
        description: "A prompt that asks for context first (MRTR).",
        arguments: &[],
        needs: &["elicitation"],
        sealed: false,
        run: prompt_input_required,
    },
];

pub fn tool(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

pub fn prompt(name: &str) -> Option<&'static Prompt> {
    PROMPTS.iter().find(|p| p.name == name)
}

/// The `tools` array of tools/list, built once.
pub fn tools_json() -> &'static Value {
    static J: OnceLock<Value> = OnceLock::new();
    J.get_or_init(|| {
        Value::Array(
            TOOLS
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": serde_json::from_str::<Value>(t.schema).expect("tool schema is JSON"),
                    })
                })
                .collect(),
        )
    })
}

/// The `prompts` array of prompts/list, built once.
pub fn prompts_json() -> &'static Value {
    static J: OnceLock<Value> = OnceLock::new();
    J.get_or_init(|| {
        Value::Array(
            PROMPTS
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
pub fn missing_capabilities(needs: &[&str], caps: &Map<String, Value>) -> Option<Value> {
    let missing: Map<String, Value> = needs
        .iter()
        .filter(|c| !caps.contains_key(**c))
        .map(|c| (c.to_string(), json!({})))
        .collect();
    (!missing.is_empty()).then_some(Value::Object(missing))
}

// ---------------------------------------------------------------------------------------------
// Ledger

/// Charges per cart, with the states already redeemed, shared by the instances of a pool.
///
/// This stands in for the payment system's own idempotency store: a fleet of separate
/// processes would share it (a database). Redeemed nonces are remembered until their state
/// expires; after that the state itself is refused, so the record can go.
#[derive(Default)]
pub struct Ledger {
    carts: Mutex<HashMap<String, Cart>>,
}

#[derive(Default)]
struct Cart {
    charges: u64,
    redeemed: HashMap<String, u64>,
}

impl Ledger {
    /// Charge `cart` once for the state with `nonce`. Returns (charged now, total charges).
    pub fn charge(&self, cart: &str, nonce: &str, expires_at_ms: u64) -> (bool, u64) {
        let mut carts = self.carts.lock().unwrap_or_else(|e| e.into_inner());
        let c = carts.entry(cart.to_owned()).or_default();
        if c.redeemed.contains_key(nonce) {
            return (false, c.charges);
        }
        if c.redeemed.len() >= 4096 {
            let now = now_ms();
            c.redeemed.retain(|_, exp| *exp > now);
        }
        c.redeemed.insert(nonce.to_owned(), expires_at_ms);
        c.charges += 1;
        (true, c.charges)
    }

    pub fn count(&self, cart: &str) -> u64 {
        self.carts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(cart)
            .map_or(0, |c| c.charges)
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn invalid(msg: String) -> Outcome {
    Outcome::Error(codes::INVALID_PARAMS, msg)
}

fn text(s: impl Into<String>) -> Value {
    json!({"type": "text", "text": s.into()})
}

fn complete_text(s: impl Into<String>) -> Outcome {
    Outcome::Complete(json!({ "content": [text(s)] }))
}

fn error_text(s: impl Into<String>) -> Outcome {
    Outcome::Complete(json!({ "content": [text(s)], "isError": true }))
}

fn arg_str<'a>(c: &Call<'a>, key: &str) -> Result<&'a str, Outcome> {
    match c.args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(invalid(format!(
            "arguments.{key} of {} must be a string",
            c.name
        ))),
        None => Err(invalid(format!(
            "arguments.{key} is required by {} (a string)",
            c.name
        ))),
    }
}

fn ask(key: &str, request: Value, data: Value) -> Outcome {
    let mut requests = Map::new();
    requests.insert(key.to_owned(), request);
    Outcome::Ask { requests, data }
}

fn elicit_req(message: impl Into<String>, properties: Value, required: &[&str]) -> Value {
    json!({
        "method": ELICITATION_CREATE,
        "params": {
            "mode": "form",
            "message": message.into(),
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        }
    })
}

fn sampling_req(prompt: impl Into<String>, max_tokens: u32) -> Value {
    json!({
        "method": SAMPLING_CREATE_MESSAGE,
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt.into()}}],
            "maxTokens": max_tokens,
        }
    })
}

fn roots_req() -> Value {
    json!({ "method": ROOTS_LIST })
}

/// An elicitation answer.
enum Elicit<'a> {
    Missing,
    Accept(&'a Map<String, Value>),
    /// `decline` or `cancel`, as a past participle for messages.
    Refused(&'static str),
}

fn elicit<'a>(c: &Call<'a>, key: &str) -> Result<Elicit<'a>, Outcome> {
    let Some(a) = c.answers.get(key) else {
        return Ok(Elicit::Missing);
    };
    match a.get("action").and_then(Value::as_str) {
        Some("accept") => match a.get("content") {
            Some(Value::Object(m)) => Ok(Elicit::Accept(m)),
            _ => Err(invalid(format!(
                "inputResponses.{key} accepts but has no \"content\" object; send {{\"action\":\"accept\",\"content\":{{...}}}}"
            ))),
        },
        Some("decline") => Ok(Elicit::Refused("declined")),
        Some("cancel") => Ok(Elicit::Refused("cancelled")),
        _ => Err(invalid(format!(
            "inputResponses.{key} must be an elicitation result with \"action\" \"accept\", \"decline\" or \"cancel\""
        ))),
    }
}

fn content_str<'a>(
    content: &'a Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<&'a str, Outcome> {
    match content.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        _ => Err(invalid(format!(
            "inputResponses.{key}.content.{field} must be a non-empty string"
        ))),
    }
}

fn content_bool(content: &Map<String, Value>, key: &str, field: &str) -> Result<bool, Outcome> {
    content.get(field).and_then(Value::as_bool).ok_or_else(|| {
        invalid(format!(
            "inputResponses.{key}.content.{field} must be a boolean"
        ))
    })
}

/// The text of a sampling answer (`CreateMessageResult`), if the answer is there.
fn sampled_text(c: &Call, key: &str) -> Result<Option<String>, Outcome> {
    let Some(a) = c.answers.get(key) else {
        return Ok(None);
    };
    let blocks: Vec<&Value> = match a.get("content") {
        Some(Value::Array(v)) => v.iter().collect(),
        Some(v @ Value::Object(_)) => vec![v],
        _ => vec![],
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        return Err(invalid(format!(
            "inputResponses.{key} must be a sampling result (CreateMessageResult) with text content"
        )));
    }
    Ok(Some(texts.join("\n")))
}

/// The root URIs of a roots answer (`ListRootsResult`), if the answer is there.
fn root_uris(c: &Call, key: &str) -> Result<Option<Vec<String>>, Outcome> {
    let Some(a) = c.answers.get(key) else {
        return Ok(None);
    };
    let bad = || {
        invalid(format!("inputResponses.{key} must be a roots result: {{\"roots\":[{{\"uri\":\"file:///...\"}}]}}"))
    };
    let roots = a.get("roots").and_then(Value::as_array).ok_or_else(bad)?;
    roots
        .iter()
        .map(|r| {
            r.get("uri")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(bad)
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

// ---------------------------------------------------------------------------------------------
// The MRTR stories

fn echo(c: &Call) -> Step {
    if !c.args.contains_key("text") {
        return Ok(complete_text(""));
    }
    Ok(complete_text(arg_str(c, "text")?))
}

fn create_repo(c: &Call) -> Step {
    let repo = arg_str(c, "repo")?;
    Ok(match elicit(c, "github_login")? {
        Elicit::Missing => ask(
            "github_login",
            elicit_req("Please provide your GitHub username", json!({"name": {"type": "string"}}), &["name"]),
            Value::Null,
        ),
        Elicit::Accept(content) => {
            let login = content_str(content, "github_login", "name")?;
            complete_text(format!("Created github.com/{login}/{repo}"))
        }
        Elicit::Refused(how) => error_text(format!(
            "Repository {repo} was not created: the GitHub username request was {how}. Call create_repo again to retry."
        )),
    })
}

fn deploy_ask(service: &str, env: &str, prefix: &str) -> Outcome {
    ask(
        "confirm",
        elicit_req(
            format!("{prefix}Type the service name to confirm deploying {service} to {env}"),
            json!({"confirmation": {"type": "string"}}),
            &["confirmation"],
        ),
        json!({ "environment": env }),
    )
}

fn deploy(c: &Call) -> Step {
    let service = arg_str(c, "service")?;
    let env = arg_str(c, "environment")?;
    Ok(match elicit(c, "confirm")? {
        Elicit::Missing => deploy_ask(service, env, ""),
        Elicit::Accept(content) => {
            let typed = content_str(content, "confirm", "confirmation")?;
            if typed == service {
                complete_text(format!("Deployed {service} to {env}"))
            } else {
                deploy_ask(
                    service,
                    env,
                    &format!("The confirmation {typed:?} did not match {service:?}. "),
                )
            }
        }
        Elicit::Refused(how) => error_text(format!(
            "Nothing was deployed: the confirmation to deploy {service} to {env} was {how}."
        )),
    })
}

/// Render an amount argument as given: a string as is, a number in JSON notation.
fn amount(c: &Call) -> Result<String, Outcome> {
    match c.args.get("amount") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        _ => Err(invalid(
            "arguments.amount is required by charge (a number or a string)".into(),
        )),
    }
}

fn charge(c: &Call) -> Step {
    let cart = arg_str(c, "cart_id")?;
    let amount = amount(c)?;
    let asking = || {
        ask(
            "confirm_charge",
            elicit_req(
                format!("Charge {amount} to cart {cart}?"),
                json!({"confirm": {"type": "boolean"}}),
                &["confirm"],
            ),
            Value::Null,
        )
    };
    Ok(match elicit(c, "confirm_charge")? {
        Elicit::Missing => asking(),
        Elicit::Accept(content) => {
            if !content_bool(content, "confirm_charge", "confirm")? {
                return Ok(error_text(format!(
                    "Not charged: the charge of {amount} to cart {cart} was not confirmed."
                )));
            }
            // Sealed tool: answers only arrive with a verified state.
            let Some(st) = c.state else {
                return Ok(asking());
            };
            let (now, charges) = c.ledger.charge(cart, &st.nonce, st.expires_at_ms);
            Outcome::Complete(json!({
                "content": [text(format!("Charged {amount} to cart {cart}"))],
                "structuredContent": {"cart_id": cart, "amount": amount, "charges": charges, "alreadyCharged": !now},
            }))
        }
        Elicit::Refused(how) => error_text(format!(
            "Not charged: the charge of {amount} to cart {cart} was {how}."
        )),
    })
}

fn charge_count(c: &Call) -> Step {
    let cart = arg_str(c, "cart_id")?;
    let n = c.ledger.count(cart);
    Ok(Outcome::Complete(json!({
        "content": [text(format!("Cart {cart} has been charged {n} time(s)"))],
        "structuredContent": {"cart_id": cart, "charges": n},
    })))
}

fn onboard_access(team: &str, role: &str) -> Outcome {
    ask(
        "access",
        elicit_req(
            format!("Grant {role} access to {team}?"),
            json!({"grant": {"type": "boolean"}}),
            &["grant"],
        ),
        json!({ "role": role }),
    )
}

fn onboard(c: &Call) -> Step {
    let team = arg_str(c, "team")?;
    let refused = |how| {
        error_text(format!(
            "Onboarding to {team} stopped: the question was {how}."
        ))
    };
    Ok(match c.data("role").and_then(Value::as_str) {
        None => match elicit(c, "role")? {
            Elicit::Missing => ask(
                "role",
                elicit_req(
                    format!("Which role will the new member of {team} have?"),
                    json!({"role": {"type": "string"}}),
                    &["role"],
                ),
                Value::Null,
            ),
            Elicit::Accept(content) => onboard_access(team, content_str(content, "role", "role")?),
            Elicit::Refused(how) => refused(how),
        },
        Some(role) => match elicit(c, "access")? {
            Elicit::Missing => onboard_access(team, role),
            Elicit::Accept(content) => {
                if content_bool(content, "access", "grant")? {
                    complete_text(format!("Onboarded {team} as {role}"))
                } else {
                    complete_text(format!("Onboarded {team} as {role} without access"))
                }
            }
            Elicit::Refused(how) => refused(how),
        },
    })
}

fn summarize(c: &Call) -> Step {
    let input = arg_str(c, "text")?;
    Ok(match sampled_text(c, "summary")? {
        None => ask(
            "summary",
            sampling_req(format!("Summarize in one sentence:\n\n{input}"), 200),
            Value::Null,
        ),
        Some(s) => complete_text(s),
    })
}

fn list_workspace(c: &Call) -> Step {
    Ok(match root_uris(c, "roots")? {
        None => ask("roots", roots_req(), Value::Null),
        Some(uris) if uris.is_empty() => complete_text("The client shared no workspace roots."),
        Some(uris) => complete_text(format!(
            "Workspace roots:\n{}",
            uris.iter()
                .map(|u| format!("- {u}"))
                .collect::<Vec<_>>()
                .join("\n")
        )),
    })
}

// ---------------------------------------------------------------------------------------------
// Conformance fixtures

/// A 1×1 red PNG.
const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A silent 8 kHz mono WAV with 4 samples.
const WAV_TINY: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQQAAACAgICA";

fn simple_text(_: &Call) -> Step {
    Ok(complete_text("This is a simple text response for testing."))
}

fn image_content(_: &Call) -> Step {
    Ok(Outcome::Complete(
        json!({"content": [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]}),
    ))
}

fn audio_content(_: &Call) -> Step {
    Ok(Outcome::Complete(
        json!({"content": [{"type": "audio", "data": WAV_TINY, "mimeType": "audio/wav"}]}),
    ))
}

fn embedded_resource(_: &Call) -> Step {
    Ok(Outcome::Complete(
        json!({"content": [{"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]}),
    ))
}

fn multiple_content(_: &Call) -> Step {
    Ok(Outcome::Complete(json!({"content": [
        text("Multiple content types test:"),
        {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json",
            "text": "{\"test\":\"data\",\"value\":123}"}},
    ]})))
}

fn error_handling(_: &Call) -> Step {
    Ok(error_text(
        "This tool intentionally returns an error for testing",
    ))
}

fn missing_capability(c: &Call) -> Step {
    Ok(match sampled_text(c, "probe")? {
        None => ask("probe", sampling_req("Say hello.", 50), Value::Null),
        Some(s) => complete_text(format!("Sampling works: {s}")),
    })
}

fn name_question(c: &Call, key: &str, message: &str) -> Step {
    Ok(match elicit(c, key)? {
        Elicit::Missing => ask(
            key,
            elicit_req(message, json!({"name": {"type": "string"}}), &["name"]),
            Value::Null,
        ),
        Elicit::Accept(content) => {
            complete_text(format!("Hello, {}!", content_str(content, key, "name")?))
        }
        Elicit::Refused(how) => error_text(format!("The question was {how}.")),
    })
}

fn streaming_elicitation(c: &Call) -> Step {
    name_question(c, "user_name", "What is your name?")
}

fn irr_elicitation(c: &Call) -> Step {
    name_question(c, "user_name", "What is your name?")
}

fn irr_sampling(c: &Call) -> Step {
    Ok(match sampled_text(c, "capital_question")? {
        None => ask(
            "capital_question",
            sampling_req("What is the capital of France?", 100),
            Value::Null,
        ),
        Some(s) => complete_text(format!("The model answered: {s}")),
    })
}

fn irr_roots(c: &Call) -> Step {
    Ok(match root_uris(c, "client_roots")? {
        None => ask("client_roots", roots_req(), Value::Null),
        Some(uris) => complete_text(format!("Client roots: {}", uris.join(", "))),
    })
}

fn ok_question(c: &Call, key: &str, done: impl FnOnce(&StatePayload) -> String) -> Step {
    Ok(match (elicit(c, key)?, c.state) {
        (Elicit::Accept(_), Some(st)) => complete_text(done(st)),
        (Elicit::Refused(how), _) => error_text(format!("The confirmation was {how}.")),
        _ => ask(
            key,
            elicit_req(
                "Confirm to continue.",
                json!({"ok": {"type": "boolean"}}),
                &["ok"],
            ),
            Value::Null,
        ),
    })
}

fn irr_request_state(c: &Call) -> Step {
    ok_question(c, "confirm", |st| {
        format!(
            "state-ok: requestState verified (round {}, issued by {})",
            st.round, st.issuer
        )
    })
}

fn irr_tampered(c: &Call) -> Step {
    ok_question(c, "confirm", |_| "state-ok: requestState verified".into())
}

/// Ask every missing answer among `wanted` at once; complete when all are there.
fn gather(c: &Call, wanted: Vec<(&'static str, Value)>) -> Step {
    let mut requests = Map::new();
    let mut parts = Vec::new();
    for (key, req) in wanted {
        let method = req["method"].as_str().unwrap_or_default();
        let got = match method {
            ELICITATION_CREATE => match elicit(c, key)? {
                Elicit::Missing => None,
                Elicit::Accept(m) => Some(Value::Object(m.clone()).to_string()),
                Elicit::Refused(how) => Some(how.to_owned()),
            },
            SAMPLING_CREATE_MESSAGE => sampled_text(c, key)?,
            _ => root_uris(c, key)?.map(|u| u.join(", ")),
        };
        match got {
            Some(v) => parts.push(format!("{key}: {v}")),
            None => {
                requests.insert(key.to_owned(), req);
            }
        }
    }
    Ok(if requests.is_empty() {
        complete_text(format!("Received all answers. {}", parts.join("; ")))
    } else {
        Outcome::Ask {
            requests,
            data: Value::Null,
        }
    })
}

fn user_name_req() -> Value {
    elicit_req(
        "What is your name?",
        json!({"name": {"type": "string"}}),
        &["name"],
    )
}

fn irr_multiple(c: &Call) -> Step {
    gather(
        c,
        vec![
            ("user_name", user_name_req()),
            ("greeting", sampling_req("Write a one-line greeting.", 50)),
            ("client_roots", roots_req()),
        ],
    )
}

fn irr_capabilities(c: &Call) -> Step {
    let mut wanted = Vec::new();
    if c.declares("elicitation") {
        wanted.push(("user_name", user_name_req()));
    }
    if c.declares("sampling") {
        wanted.push(("greeting", sampling_req("Write a one-line greeting.", 50)));
    }
    if c.declares("roots") {
        wanted.push(("client_roots", roots_req()));
    }
    if wanted.is_empty() {
        return Ok(Outcome::NeedCapabilities(json!({"sampling": {}})));
    }
    gather(c, wanted)
}

fn irr_multi_round(c: &Call) -> Step {
    let color_q = |name: &str| {
        ask(
            "step2",
            elicit_req(
                format!("Thanks {name}. What is your favorite color?"),
                json!({"color": {"type": "string"}}),
                &["color"],
            ),
            json!({ "name": name }),
        )
    };
    Ok(match c.data("name").and_then(Value::as_str) {
        None => match elicit(c, "step1")? {
            Elicit::Missing => ask("step1", user_name_req(), Value::Null),
            Elicit::Accept(content) => color_q(content_str(content, "step1", "name")?),
            Elicit::Refused(how) => error_text(format!("Stopped: step 1 was {how}.")),
        },
        Some(name) => match elicit(c, "step2")? {
            Elicit::Missing => color_q(name),
            Elicit::Accept(content) => complete_text(format!(
                "{name}'s favorite color is {}",
                content_str(content, "step2", "color")?
            )),
            Elicit::Refused(how) => error_text(format!("Stopped: step 2 was {how}.")),
        },
    })
}

fn json_schema_tool(c: &Call) -> Step {
    Ok(complete_text(format!(
        "Received: {}",
        Value::Object(c.args.clone())
    )))
}

// --- prompts ---

fn prompt_result(description: &str, messages: Vec<Value>) -> Outcome {
    Outcome::Complete(json!({ "description": description, "messages": messages }))
}

fn user_text(s: impl Into<String>) -> Value {
    json!({"role": "user", "content": text(s)})
}

fn simple_prompt(_: &Call) -> Step {
    Ok(prompt_result(
        "A simple prompt",
        vec![user_text("This is a simple prompt for testing.")],
    ))
}

fn prompt_with_arguments(c: &Call) -> Step {
    let a1 = arg_str(c, "arg1")?;
    let a2 = arg_str(c, "arg2")?;
    Ok(prompt_result(
        "A prompt with arguments",
        vec![user_text(format!(
            "Prompt with arguments: arg1='{a1}', arg2='{a2}'"
        ))],
    ))
}

fn prompt_with_resource(c: &Call) -> Step {
    let uri = arg_str(c, "resourceUri")?;
    Ok(prompt_result(
        "A prompt with an embedded resource",
        vec![
            json!({"role": "user", "content": {"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}}}),
            user_text("Please process the embedded resource above."),
        ],
    ))
}

fn prompt_with_image(_: &Call) -> Step {
    Ok(prompt_result(
        "A prompt with an image",
        vec![
            json!({"role": "user", "content": {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}}),
            user_text("Please analyze the image above."),
        ],
    ))
}

fn prompt_input_required(c: &Call) -> Step {
    Ok(match elicit(c, "user_context")? {
        Elicit::Missing => ask(
            "user_context",
            elicit_req(
                "What context should the prompt use?",
                json!({"context": {"type": "string"}}),
                &["context"],
            ),
            Value::Null,
        ),
        Elicit::Accept(content) => {
            let ctx = content_str(content, "user_context", "context")?;
            prompt_result(
                "A prompt built from your context",
                vec![user_text(format!("Use this context: {ctx}"))],
            )
        }
        Elicit::Refused(how) => Outcome::Error(
            codes::INVALID_PARAMS,
            format!("The prompt needs a context, and the question was {how}."),
        ),
    })
}

// --- resources ---

/// A readable resource: its contents and cache hints.
pub struct ReadResult {
    pub contents: Value,
    pub ttl_ms: u64,
    pub scope: &'static str,
}

/// The `resources` array of resources/list.
pub fn resources_json() -> Value {
    json!([
        {"uri": "test://static-text", "name": "static-text", "description": "A static text resource", "mimeType": "text/plain"},
        {"uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource (PNG)", "mimeType": "image/png"},
    ])
}

/// The `resourceTemplates` array of resources/templates/list.
pub fn templates_json() -> Value {
    json!([
        {"uriTemplate": "test://template/{id}/data", "name": "template-data", "description": "Data for an id", "mimeType": "application/json"},
        {"uriTemplate": "charges://{cart_id}", "name": "charges", "description": "How many times a cart was charged", "mimeType": "application/json"},
    ])
}

pub fn read_resource(uri: &str, ledger: &Ledger) -> Option<ReadResult> {
    let public = |contents| {
        Some(ReadResult {
            contents,
            ttl_ms: LIST_TTL_MS,
            scope: "public",
        })
    };
    match uri {
        "test://static-text" => public(
            json!([{"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}]),
        ),
        "test://static-binary" => {
            public(json!([{"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}]))
        }
        _ => {
            if let Some(id) = uri
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'))
            {
                let body =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                        .to_string();
                return public(json!([{"uri": uri, "mimeType": "application/json", "text": body}]));
            }
            let cart = uri.strip_prefix("charges://").filter(|c| !c.is_empty())?;
            let body = json!({"cart_id": cart, "charges": ledger.count(cart)}).to_string();
            Some(ReadResult {
                contents: json!([{"uri": uri, "mimeType": "application/json", "text": body}]),
                ttl_ms: 0,
                scope: "private",
            })
        }
    }
}

/// completion/complete: suggestions for prompt arguments and template variables.
pub fn complete_argument(value: &str) -> Value {
    let candidates = ["paris", "park", "party", "test", "testValue1", "testValue2"];
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|c| c.starts_with(value))
        .collect();
    json!({"values": values, "total": values.len(), "hasMore": false})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_are_valid_json_and_names_unique() {
        let tools = tools_json().as_array().unwrap();
        assert_eq!(tools.len(), TOOLS.len());
        let mut names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len());
        for t in tools {
            assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        }
        assert_eq!(prompts_json().as_array().unwrap().len(), PROMPTS.len());
        // Every x-mcp-header in a schema is declared as a param header, and vice versa.
        for t in TOOLS {
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

    #[test]
    fn ledger_charges_once_per_nonce() {
        let l = Ledger::default();
        assert_eq!(l.charge("c1", "n1", u64::MAX), (true, 1));
        assert_eq!(l.charge("c1", "n1", u64::MAX), (false, 1));
        assert_eq!(l.charge("c1", "n2", u64::MAX), (true, 2));
        assert_eq!(l.count("c1"), 2);
        assert_eq!(l.count("other"), 0);
    }

    #[test]
    fn resources() {
        let l = Ledger::default();
        assert!(read_resource("test://nonexistent-resource-for-conformance-testing", &l).is_none());
        let t = read_resource("test://template/123/data", &l).unwrap();
        assert!(t.contents[0]["text"].as_str().unwrap().contains("123"));
        assert!(read_resource("test://template//data", &l).is_none());
        assert_eq!(read_resource("charges://c9", &l).unwrap().scope, "private");
    }
}
