//! Scenarios and the MRTR leg builder: which flows a load test runs and with what weights, how
//! each leg's request is built (from pre-serialized templates, the id and `requestState` spliced
//! in), how `inputRequests` are answered, and how a reply is read. Pure functions over bytes and
//! JSON; no I/O.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;

use anyhow::{bail, Context as _};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::mcp::{self, header, meta, methods, result_type};

/// How many legs a flow may take before it is abandoned, unless the scenario says otherwise.
pub const DEFAULT_MAX_ROUNDS: u32 = 8;

/// Prefix of an answer-table string that refers to an argument of the flow: `"$args.service"`.
pub const ARG_REF_PREFIX: &str = "$args.";

/// One flow of a scenario: a `tools/call` (possibly several MRTR legs) or a plain request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Display name; defaults to the tool or method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A `tools/call` of this tool...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// ...or a plain request with this method (`server/discover`, `tools/list`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Tool arguments, sent unchanged on every leg.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub arguments: Map<String, Value>,
    /// Relative weight in the scenario's mix.
    #[serde(default = "one")]
    pub weight: u32,
    /// Answers to elicitation properties, by property name (merged over the defaults
    /// `name: octocat`, `role: admin`). A string `"$args.X"` is the argument `X`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub answers: Map<String, Value>,
    /// `Mcp-Param-{Header}` headers mirrored from arguments: header suffix → argument name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub param_headers: BTreeMap<String, String>,
}

fn one() -> u32 {
    1
}

impl FlowSpec {
    fn call(tool: &str, arguments: Value, weight: u32) -> Self {
        FlowSpec {
            name: None,
            tool: Some(tool.into()),
            method: None,
            arguments: match arguments {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            weight,
            answers: Map::new(),
            param_headers: BTreeMap::new(),
        }
    }

    fn plain(method: &str, weight: u32) -> Self {
        FlowSpec {
            tool: None,
            method: Some(method.into()),
            ..FlowSpec::call("", json!({}), weight)
        }
    }

    fn answer(mut self, property: &str, value: Value) -> Self {
        self.answers.insert(property.into(), value);
        self
    }

    fn param_header(mut self, header_suffix: &str, argument: &str) -> Self {
        self.param_headers
            .insert(header_suffix.into(), argument.into());
        self
    }

    /// The label used in reports: `tools/call create_repo` or the plain method.
    pub fn label(&self) -> String {
        match (&self.name, &self.tool, &self.method) {
            (Some(n), _, _) => n.clone(),
            (None, Some(t), _) => format!("{} {t}", methods::TOOLS_CALL),
            (None, None, Some(m)) => m.clone(),
            (None, None, None) => "?".into(),
        }
    }
}

/// A weighted mix of flows, from a built-in name or a YAML/JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// Legs after which an unfinished flow is abandoned.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
    pub flows: Vec<FlowSpec>,
}

fn default_max_rounds() -> u32 {
    DEFAULT_MAX_ROUNDS
}

/// Built-in scenario names with a one-line description (shown by `--help`).
pub const BUILTIN_SCENARIOS: &[(&str, &str)] = &[
    (
        "mixed",
        "create_repo 3, deploy 2, charge 2, onboard 2, echo 1, tools/list 1, server/discover 1",
    ),
    (
        "mrtr",
        "create_repo, deploy, charge, onboard, equal weights",
    ),
    ("multi-round", "onboard only (two input_required rounds)"),
    ("plain", "tools/list and server/discover"),
    ("create_repo", "create_repo only"),
    ("deploy", "deploy only"),
    ("charge", "charge only"),
    ("onboard", "onboard only"),
    ("echo", "echo only (one leg, no MRTR)"),
];

fn builtin_flows() -> [FlowSpec; 7] {
    [
        FlowSpec::call("create_repo", json!({"repo": "loadtest"}), 3),
        FlowSpec::call(
            "deploy",
            json!({"service": "payments", "environment": "staging"}),
            2,
        )
        .answer("confirmation", json!(format!("{ARG_REF_PREFIX}service")))
        .param_header("Environment", "environment"),
        FlowSpec::call("charge", json!({"cart_id": "c18", "amount": 48}), 2),
        FlowSpec::call("onboard", json!({"team": "platform"}), 2).answer("role", json!("admin")),
        FlowSpec::call("echo", json!({"text": "hello"}), 1),
        FlowSpec::plain(methods::TOOLS_LIST, 1),
        FlowSpec::plain(methods::DISCOVER, 1),
    ]
}

impl Scenario {
    /// A built-in scenario by name.
    pub fn builtin(name: &str) -> Option<Scenario> {
        let [create_repo, deploy, charge, onboard, echo, list, discover] = builtin_flows();
        let equal = |f: FlowSpec| FlowSpec { weight: 1, ..f };
        let flows = match name {
            "mixed" => vec![create_repo, deploy, charge, onboard, echo, list, discover],
            "mrtr" => vec![
                equal(create_repo),
                equal(deploy),
                equal(charge),
                equal(onboard),
            ],
            "multi-round" | "onboard" => vec![equal(onboard)],
            "plain" => vec![list, discover],
            "create_repo" => vec![equal(create_repo)],
            "deploy" => vec![equal(deploy)],
            "charge" => vec![equal(charge)],
            "echo" => vec![equal(echo)],
            _ => return None,
        };
        Some(Scenario {
            name: name.into(),
            max_rounds: DEFAULT_MAX_ROUNDS,
            flows,
        })
    }

    /// Parse a scenario document (YAML, of which JSON is a subset).
    pub fn parse(text: &str) -> anyhow::Result<Scenario> {
        let s: Scenario = serde_yaml::from_str(text).context("invalid scenario document")?;
        s.validate()?;
        Ok(s)
    }

    /// A built-in name, or else a path to a YAML/JSON file.
    pub fn load(name_or_file: &str) -> anyhow::Result<Scenario> {
        if let Some(s) = Scenario::builtin(name_or_file) {
            return Ok(s);
        }
        let path = Path::new(name_or_file);
        if !path.exists() {
            let names: Vec<&str> = BUILTIN_SCENARIOS.iter().map(|(n, _)| *n).collect();
            bail!(
                "unknown scenario {name_or_file:?}: not a built-in ({}) and no such file",
                names.join(", ")
            );
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Scenario::parse(&text).with_context(|| format!("scenario file {}", path.display()))
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.flows.is_empty() {
            bail!("scenario {:?} has no flows", self.name);
        }
        if self.max_rounds == 0 {
            bail!("max_rounds must be at least 1");
        }
        if self.flows.iter().all(|f| f.weight == 0) {
            bail!("scenario {:?}: every weight is 0", self.name);
        }
        for f in &self.flows {
            match (&f.tool, &f.method) {
                (Some(_), None) => {}
                (None, Some(m)) if methods::name_field(m).is_none() => {}
                (None, Some(m)) => bail!(
                    "flow {:?}: method {m} needs a name; use `tool:` for tools/call",
                    f.label()
                ),
                _ => bail!(
                    "flow {:?}: give exactly one of `tool` or `method`",
                    f.label()
                ),
            }
            for (h, arg) in &f.param_headers {
                if !f.arguments.contains_key(arg) {
                    bail!(
                        "flow {:?}: param header {h} mirrors a missing argument {arg:?}",
                        f.label()
                    );
                }
            }
        }
        Ok(())
    }
}

/// The answer table every flow starts from (property name → answer).
pub fn default_answers() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), json!("octocat"));
    m.insert("role".into(), json!("admin"));
    m
}

/// A flow compiled for sending: pre-serialized body parts and pre-built headers.
#[derive(Debug, Clone)]
pub struct FlowTemplate {
    pub label: String,
    pub method: String,
    pub tool: Option<String>,
    pub weight: u32,
    /// `{"jsonrpc":"2.0","id":`
    head: &'static [u8],
    /// `,"method":...,"params":{"name":..,"arguments":{..},`
    mid: Vec<u8>,
    /// `"_meta":{...}}}`
    tail: Vec<u8>,
    /// Every MCP header the request needs, except `Authorization`.
    pub headers: HeaderMap,
    /// The same with a deliberately mismatched `Mcp-Name` (or `Mcp-Method` for plain methods).
    pub bad_headers: HeaderMap,
    /// The answer table with `$args.X` references resolved.
    pub answers: Map<String, Value>,
}

/// The MRTR part of a retry leg.
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryParts<'a> {
    /// A serialized JSON object for `inputResponses` (absent when `None`).
    pub input_responses: Option<&'a [u8]>,
    /// The raw JSON of the previous answer's `requestState` (a JSON string), copied byte for byte.
    pub request_state: Option<&'a str>,
}

const BODY_HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;

/// The client capabilities the load tester declares: everything MRTR can ask for.
pub fn client_capabilities() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

fn hv(s: &str) -> anyhow::Result<HeaderValue> {
    HeaderValue::from_str(s).with_context(|| format!("invalid header value {s:?}"))
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl FlowTemplate {
    pub fn new(spec: &FlowSpec) -> anyhow::Result<Self> {
        let method = spec.tool.as_ref().map_or_else(
            || spec.method.clone().unwrap_or_default(),
            |_| methods::TOOLS_CALL.into(),
        );
        let mut mid = Vec::with_capacity(128);
        mid.extend_from_slice(br#","method":"#);
        serde_json::to_writer(&mut mid, &method)?;
        mid.extend_from_slice(br#","params":{"#);
        if let Some(tool) = &spec.tool {
            mid.extend_from_slice(br#""name":"#);
            serde_json::to_writer(&mut mid, tool)?;
            mid.extend_from_slice(br#","arguments":"#);
            serde_json::to_writer(&mut mid, &spec.arguments)?;
            mid.push(b',');
        }
        let mut meta_obj = Map::new();
        meta_obj.insert(meta::PROTOCOL_VERSION.into(), json!(mcp::PROTOCOL_VERSION));
        meta_obj.insert(meta::CLIENT_CAPABILITIES.into(), client_capabilities());
        let mut tail = Vec::with_capacity(160);
        tail.extend_from_slice(br#""_meta":"#);
        serde_json::to_writer(&mut tail, &meta_obj)?;
        tail.extend_from_slice(b"}}");

        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            HeaderName::from_static(header::PROTOCOL_VERSION),
            HeaderValue::from_static(mcp::PROTOCOL_VERSION),
        );
        headers.insert(HeaderName::from_static(header::METHOD), hv(&method)?);
        if let Some(tool) = &spec.tool {
            headers.insert(
                HeaderName::from_static(header::NAME),
                hv(&header::encode_value(tool))?,
            );
        }
        for (suffix, arg) in &spec.param_headers {
            let name = HeaderName::from_bytes(
                format!("{}{}", header::PARAM_PREFIX, suffix.to_ascii_lowercase()).as_bytes(),
            )
            .with_context(|| format!("invalid param header name {suffix:?}"))?;
            // A null argument means the header is omitted (spec §2.5).
            if let Some(text) = spec.arguments.get(arg).and_then(scalar_text) {
                headers.insert(name, hv(&header::encode_value(&text))?);
            }
        }
        let mut bad_headers = headers.clone();
        match &spec.tool {
            Some(tool) => {
                let wrong = format!("{tool}-mismatched");
                bad_headers.insert(
                    HeaderName::from_static(header::NAME),
                    hv(&header::encode_value(&wrong))?,
                );
            }
            None => {
                bad_headers.insert(
                    HeaderName::from_static(header::METHOD),
                    hv(&method.to_ascii_uppercase())?,
                );
            }
        }

        let mut answers = default_answers();
        for (k, v) in &spec.answers {
            let resolved = match v.as_str().and_then(|s| s.strip_prefix(ARG_REF_PREFIX)) {
                Some(arg) => spec.arguments.get(arg).cloned().with_context(|| {
                    format!("answer {k:?} refers to a missing argument {arg:?}")
                })?,
                None => v.clone(),
            };
            answers.insert(k.clone(), resolved);
        }
        Ok(FlowTemplate {
            label: spec.label(),
            method,
            tool: spec.tool.clone(),
            weight: spec.weight,
            head: BODY_HEAD,
            mid,
            tail,
            headers,
            bad_headers,
            answers,
        })
    }

    /// Whether this flow is a `tools/call` (which may take several legs).
    pub fn is_call(&self) -> bool {
        self.tool.is_some()
    }

    /// The body of one leg: one allocation of the exact size, the id and MRTR parts spliced in.
    pub fn body(&self, id: u64, retry: RetryParts<'_>) -> Vec<u8> {
        const IR: &[u8] = br#""inputResponses":"#;
        const RS: &[u8] = br#""requestState":"#;
        let mut n = self.head.len() + 20 + self.mid.len() + self.tail.len();
        if let Some(ir) = retry.input_responses {
            n += IR.len() + ir.len() + 1;
        }
        if let Some(rs) = retry.request_state {
            n += RS.len() + rs.len() + 1;
        }
        let mut out = Vec::with_capacity(n);
        out.extend_from_slice(self.head);
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{id}");
        out.extend_from_slice(&self.mid);
        if let Some(ir) = retry.input_responses {
            out.extend_from_slice(IR);
            out.extend_from_slice(ir);
            out.push(b',');
        }
        if let Some(rs) = retry.request_state {
            out.extend_from_slice(RS);
            out.extend_from_slice(rs.as_bytes());
            out.push(b',');
        }
        out.extend_from_slice(&self.tail);
        out
    }
}

/// Why a set of `inputRequests` could not be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerError {
    /// `inputRequests` is not an object of `{method, params}` objects.
    Malformed(String),
    /// A method outside the three MRTR methods.
    UnknownMethod(String),
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnswerError::Malformed(m) => write!(f, "malformed inputRequests: {m}"),
            AnswerError::UnknownMethod(m) => write!(f, "cannot answer input request method {m:?}"),
        }
    }
}

#[derive(Deserialize)]
struct InputRequest {
    method: String,
    #[serde(default)]
    params: Option<Value>,
}

/// The answer to one elicitation form: `accept` with content built from the requested schema.
fn elicitation_answer(params: Option<&Value>, answers: &Map<String, Value>) -> Value {
    let mut content = Map::new();
    let props = params
        .and_then(|p| p.get("requestedSchema"))
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    for (prop, schema) in props.into_iter().flatten() {
        let ty = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        let choices = schema.get("enum").and_then(Value::as_array);
        let v = match (answers.get(prop), choices) {
            (Some(a), Some(c)) if !c.contains(a) => c.first().cloned().unwrap_or(Value::Null),
            (Some(a), _) => a.clone(),
            (None, Some(c)) if !c.is_empty() => c[0].clone(),
            (None, _) => match ty {
                "boolean" => json!(true),
                "number" | "integer" => json!(1),
                _ => json!("loadtest"),
            },
        };
        content.insert(prop.clone(), v);
    }
    json!({"action": "accept", "content": content})
}

/// Write the `inputResponses` object answering `input_requests` (the raw JSON of the previous
/// answer's `inputRequests`) into `out`: one entry per key, in the order received.
pub fn answer_input_requests(
    input_requests: &str,
    answers: &Map<String, Value>,
    out: &mut Vec<u8>,
) -> Result<(), AnswerError> {
    // Order-preserving: a Vec of pairs via an IndexMap-free visitor is overkill; serde_json's
    // Map keeps keys sorted, which is a stable, valid order for an object.
    let reqs: BTreeMap<String, InputRequest> =
        serde_json::from_str(input_requests).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    let mut obj = Map::new();
    for (key, req) in reqs {
        let answer = match req.method.as_str() {
            methods::ELICITATION_CREATE => elicitation_answer(req.params.as_ref(), answers),
            methods::SAMPLING_CREATE_MESSAGE => json!({
                "role": "assistant",
                "content": {"type": "text", "text": "loadtest sample answer"},
                "model": "loadtest",
                "stopReason": "endTurn"
            }),
            methods::ROOTS_LIST => {
                json!({"roots": [{"uri": "file:///workspace", "name": "workspace"}]})
            }
            other => return Err(AnswerError::UnknownMethod(other.into())),
        };
        obj.insert(key, answer);
    }
    serde_json::to_writer(out, &obj).map_err(|e| AnswerError::Malformed(e.to_string()))
}

/// The JSON-RPC payload of a response body: the body itself for `application/json`, the data of
/// the last `data:` event for `text/event-stream`.
pub fn json_payload<'a>(body: &'a [u8], content_type: Option<&[u8]>) -> Cow<'a, [u8]> {
    let is_sse = content_type.is_some_and(|ct| {
        let ct = ct.trim_ascii_start();
        ct.len() >= 17 && ct[..17].eq_ignore_ascii_case(b"text/event-stream")
    });
    if !is_sse {
        return Cow::Borrowed(body);
    }
    // Events are separated by a blank line; an event's data lines are joined with '\n'.
    let mut last: Option<Vec<&[u8]>> = None;
    let mut cur: Vec<&[u8]> = Vec::new();
    for line in body.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if !cur.is_empty() {
                last = Some(std::mem::take(&mut cur));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix(b"data:") {
            cur.push(rest.strip_prefix(b" ").unwrap_or(rest));
        }
    }
    if !cur.is_empty() {
        last = Some(cur);
    }
    match last {
        None => Cow::Borrowed(&[]),
        Some(parts) if parts.len() == 1 => Cow::Borrowed(parts[0]),
        Some(parts) => Cow::Owned(parts.join(&b'\n')),
    }
}

#[derive(Deserialize)]
struct WireResponse<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<WireResult<'a>>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct WireResult<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<Cow<'a, str>>,
    #[serde(rename = "inputRequests", borrow, default)]
    input_requests: Option<&'a RawValue>,
    #[serde(rename = "requestState", borrow, default)]
    request_state: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct WireError {
    code: i64,
}

/// What one reply said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `resultType: complete` (or absent, from an old server).
    Complete {
        is_error: bool,
        meta: Option<&'a str>,
    },
    /// `resultType: input_required` with its raw `inputRequests` and `requestState`.
    InputRequired {
        input_requests: Option<&'a str>,
        request_state: Option<&'a str>,
        meta: Option<&'a str>,
    },
    /// A JSON-RPC error.
    Error { code: i64 },
}

/// Why a reply could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyProblem {
    NotJson,
    IdMismatch,
    /// Neither `result` nor `error`, or an unknown `resultType`, or `input_required` with neither
    /// `inputRequests` nor a string `requestState`.
    Invalid,
}

impl ReplyProblem {
    pub fn kind(&self) -> &'static str {
        match self {
            ReplyProblem::NotJson => "reply_not_json",
            ReplyProblem::IdMismatch => "reply_id_mismatch",
            ReplyProblem::Invalid => "reply_invalid",
        }
    }
}

/// Read a JSON-RPC reply to the request with id `expected_id`.
pub fn parse_reply(json: &[u8], expected_id: u64) -> Result<Reply<'_>, ReplyProblem> {
    let r: WireResponse = serde_json::from_slice(json).map_err(|_| ReplyProblem::NotJson)?;
    if let Some(e) = r.error {
        // An error without a readable id is still an error answer.
        return Ok(Reply::Error { code: e.code });
    }
    match r.id.map(|id| serde_json::from_str::<u64>(id.get())) {
        Some(Ok(id)) if id == expected_id => {}
        _ => return Err(ReplyProblem::IdMismatch),
    }
    let res = r.result.ok_or(ReplyProblem::Invalid)?;
    let meta = res.meta.map(RawValue::get);
    match res.result_type.as_deref() {
        None | Some(result_type::COMPLETE) => Ok(Reply::Complete {
            is_error: res.is_error.unwrap_or(false),
            meta,
        }),
        Some(result_type::INPUT_REQUIRED) => {
            let input_requests = res
                .input_requests
                .map(RawValue::get)
                .filter(|s| s.starts_with('{'));
            let request_state = res
                .request_state
                .map(RawValue::get)
                .filter(|s| s.starts_with('"'));
            if input_requests.is_none() && request_state.is_none() {
                return Err(ReplyProblem::Invalid);
            }
            Ok(Reply::InputRequired {
                input_requests,
                request_state,
                meta,
            })
        }
        Some(_) => Err(ReplyProblem::Invalid),
    }
}

/// The backend instance named in a result's raw `_meta`, if any.
pub fn instance_from_meta(meta_json: &str) -> Option<String> {
    let m: BTreeMap<Cow<str>, &RawValue> = serde_json::from_str(meta_json).ok()?;
    let v = m.get(meta::EDGE_INSTANCE)?;
    serde_json::from_str::<String>(v.get()).ok()
}

/// Pick a flow by weight from a uniform draw `r` in `[0, total_weight)`.
pub fn pick_weighted(cumulative: &[u64], r: u64) -> usize {
    cumulative
        .partition_point(|c| *c <= r)
        .min(cumulative.len().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpl(name: &str) -> FlowTemplate {
        let s = Scenario::builtin("mixed").unwrap();
        let f = s
            .flows
            .iter()
            .find(|f| f.tool.as_deref() == Some(name) || f.method.as_deref() == Some(name))
            .unwrap();
        FlowTemplate::new(f).unwrap()
    }

    fn body_json(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn first_leg_is_a_valid_request_that_the_shared_check_accepts() {
        let t = tpl("deploy");
        let b = t.body(7, RetryParts::default());
        let v = body_json(&b);
        assert_eq!(v["id"], 7);
        assert_eq!(v["method"], "tools/call");
        assert_eq!(v["params"]["name"], "deploy");
        assert_eq!(
            v["params"]["arguments"],
            json!({"service": "payments", "environment": "staging"})
        );
        assert_eq!(
            v["params"]["_meta"][meta::PROTOCOL_VERSION],
            mcp::PROTOCOL_VERSION
        );
        assert!(v["params"]["_meta"][meta::CLIENT_CAPABILITIES]["elicitation"].is_object());
        assert!(v["params"].get("requestState").is_none());
        assert_eq!(
            t.headers[format!("{}environment", header::PARAM_PREFIX).as_str()],
            "staging"
        );
        let env = mcp::envelope::parse(&b).unwrap();
        let claims = mcp::Claims::read(&t.headers);
        mcp::check_request(
            &claims,
            &env,
            mcp::VersionPolicy::Exactly(&[mcp::PROTOCOL_VERSION]),
        )
        .unwrap();
        // The bad variant is refused by the same check with -32020.
        let bad = mcp::Claims::read(&t.bad_headers);
        let rej = mcp::check_request(
            &bad,
            &env,
            mcp::VersionPolicy::Exactly(&[mcp::PROTOCOL_VERSION]),
        )
        .unwrap_err();
        assert_eq!((rej.status, rej.code), (400, mcp::codes::HEADER_MISMATCH));
    }

    #[test]
    fn plain_requests_carry_no_name() {
        let t = tpl(methods::TOOLS_LIST);
        assert!(t.headers.get(header::NAME).is_none());
        assert_eq!(t.headers[header::METHOD], methods::TOOLS_LIST);
        let v = body_json(&t.body(1, RetryParts::default()));
        assert_eq!(v["method"], methods::TOOLS_LIST);
        assert!(v["params"].get("name").is_none());
        let env = mcp::envelope::parse(&t.body(1, RetryParts::default())).unwrap();
        let bad = mcp::Claims::read(&t.bad_headers);
        assert!(mcp::check_request(
            &bad,
            &env,
            mcp::VersionPolicy::Exactly(&[mcp::PROTOCOL_VERSION])
        )
        .is_err());
    }

    #[test]
    fn retry_leg_echoes_state_byte_for_byte_with_new_id_and_same_arguments() {
        let t = tpl("create_repo");
        let first = body_json(&t.body(1, RetryParts::default()));
        // A state with escapes: the raw JSON must be copied, not re-encoded.
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"github_login":{"method":"elicitation/create","params":{"message":"login?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}},"requestState":"st\u002fA+b==\"x"}}"#;
        let Reply::InputRequired {
            input_requests,
            request_state,
            ..
        } = parse_reply(answer, 1).unwrap()
        else {
            panic!("not input_required")
        };
        assert_eq!(request_state, Some(r#""st\u002fA+b==\"x""#));
        let mut ir = Vec::new();
        answer_input_requests(input_requests.unwrap(), &t.answers, &mut ir).unwrap();
        let b = t.body(
            2,
            RetryParts {
                input_responses: Some(&ir),
                request_state,
            },
        );
        let text = std::str::from_utf8(&b).unwrap();
        assert!(
            text.contains(r#""requestState":"st\u002fA+b==\"x""#),
            "{text}"
        );
        let v = body_json(&b);
        assert_eq!(v["id"], 2);
        assert_ne!(v["id"], first["id"]);
        assert_eq!(v["params"]["name"], first["params"]["name"]);
        assert_eq!(v["params"]["arguments"], first["params"]["arguments"]);
        assert_eq!(v["params"]["_meta"], first["params"]["_meta"]);
        assert_eq!(v["params"]["requestState"], "st/A+b==\"x");
        assert_eq!(
            v["params"]["inputResponses"],
            json!({"github_login": {"action": "accept", "content": {"name": "octocat"}}})
        );
        // The shared envelope parser sees a retry leg.
        assert!(mcp::envelope::parse(&b).unwrap().is_retry_leg());
    }

    #[test]
    fn answers_follow_the_schema_and_the_answer_table() {
        let t = tpl("deploy");
        let reqs = json!({
            "confirm": {"method": "elicitation/create", "params": {"message": "type it", "requestedSchema":
                {"type": "object", "properties": {"confirmation": {"type": "string"}}}}},
            "ok": {"method": "elicitation/create", "params": {"requestedSchema":
                {"properties": {"grant": {"type": "boolean"}, "n": {"type": "integer"}, "lvl": {"type": "string", "enum": ["lo", "hi"]}, "other": {"type": "string"}}}}},
            "s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}},
            "r": {"method": "roots/list"}
        });
        let mut out = Vec::new();
        answer_input_requests(&reqs.to_string(), &t.answers, &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["confirm"],
            json!({"action": "accept", "content": {"confirmation": "payments"}})
        );
        assert_eq!(
            v["ok"]["content"],
            json!({"grant": true, "n": 1, "lvl": "lo", "other": "loadtest"})
        );
        assert_eq!(v["s"]["role"], "assistant");
        assert_eq!(v["s"]["stopReason"], "endTurn");
        assert_eq!(v["s"]["content"]["type"], "text");
        assert_eq!(v["r"]["roots"][0]["uri"], "file:///workspace");
        let onboard = tpl("onboard");
        let mut out = Vec::new();
        let role = json!({"role": {"method": "elicitation/create", "params": {"requestedSchema": {"properties": {"role": {"type": "string"}}}}}});
        answer_input_requests(&role.to_string(), &onboard.answers, &mut out).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap()["role"]["content"]["role"],
            "admin"
        );
        let bad = json!({"x": {"method": "tasks/get"}});
        assert_eq!(
            answer_input_requests(&bad.to_string(), &t.answers, &mut Vec::new()),
            Err(AnswerError::UnknownMethod("tasks/get".into()))
        );
        assert!(matches!(
            answer_input_requests("[1]", &t.answers, &mut Vec::new()),
            Err(AnswerError::Malformed(_))
        ));
    }

    #[test]
    fn mcp_name_is_encoded() {
        let spec = FlowSpec::call("météo", json!({"region": " eu-west "}), 1)
            .param_header("Region", "region");
        let t = FlowTemplate::new(&spec).unwrap();
        assert_eq!(t.headers[header::NAME], "=?base64?bcOpdMOpbw==?=");
        assert_eq!(
            t.headers[format!("{}region", header::PARAM_PREFIX).as_str()],
            "=?base64?IGV1LXdlc3Qg?="
        );
        let env = mcp::envelope::parse(&t.body(3, RetryParts::default())).unwrap();
        mcp::check_request(
            &mcp::Claims::read(&t.headers),
            &env,
            mcp::VersionPolicy::Exactly(&[mcp::PROTOCOL_VERSION]),
        )
        .unwrap();
    }

    #[test]
    fn state_only_retry_has_no_input_responses() {
        let t = tpl("charge");
        let b = t.body(
            9,
            RetryParts {
                input_responses: None,
                request_state: Some(r#""abc""#),
            },
        );
        let v = body_json(&b);
        assert!(v["params"].get("inputResponses").is_none());
        assert_eq!(v["params"]["requestState"], "abc");
    }

    #[test]
    fn replies() {
        assert_eq!(
            parse_reply(
                br#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[]}}"#,
                3
            ),
            Ok(Reply::Complete {
                is_error: false,
                meta: None
            })
        );
        assert_eq!(
            parse_reply(
                br#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":true}}"#,
                3
            ),
            Ok(Reply::Complete {
                is_error: true,
                meta: None
            })
        );
        assert_eq!(
            parse_reply(br#"{"jsonrpc":"2.0","id":4,"result":{}}"#, 3),
            Err(ReplyProblem::IdMismatch)
        );
        assert_eq!(
            parse_reply(
                br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad state"}}"#,
                3
            ),
            Ok(Reply::Error { code: -32602 })
        );
        assert_eq!(
            parse_reply(
                br#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required"}}"#,
                3
            ),
            Err(ReplyProblem::Invalid)
        );
        assert_eq!(
            parse_reply(
                br#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"task"}}"#,
                3
            ),
            Err(ReplyProblem::Invalid)
        );
        assert_eq!(parse_reply(b"<html>", 3), Err(ReplyProblem::NotJson));
        let with_meta = format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"resultType":"complete","_meta":{{"{}":"be-2"}}}}}}"#,
            meta::EDGE_INSTANCE
        );
        let Ok(Reply::Complete { meta: Some(m), .. }) = parse_reply(with_meta.as_bytes(), 3) else {
            panic!()
        };
        assert_eq!(instance_from_meta(m).as_deref(), Some("be-2"));
    }

    #[test]
    fn sse_payload_is_the_last_data_event() {
        let body = b": keepalive\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":5,\"result\":{}}\r\n\r\n";
        let p = json_payload(body, Some(b"text/event-stream; charset=utf-8"));
        assert_eq!(&*p, b"{\"jsonrpc\":\"2.0\",\n\"id\":5,\"result\":{}}");
        assert!(parse_reply(&p, 5).is_ok());
        let plain = br#"{"a":1}"#;
        assert_eq!(&*json_payload(plain, Some(b"application/json")), plain);
    }

    #[test]
    fn scenarios_parse_and_validate() {
        for (name, _) in BUILTIN_SCENARIOS {
            let s = Scenario::builtin(name).unwrap();
            s.validate().unwrap();
            for f in &s.flows {
                FlowTemplate::new(f).unwrap();
            }
        }
        let yaml = "name: custom\nflows:\n  - tool: deploy\n    weight: 5\n    arguments: {service: api, environment: prod}\n    answers: {confirmation: $args.service}\n    param_headers: {Environment: environment}\n  - method: tools/list\n";
        let s = Scenario::parse(yaml).unwrap();
        assert_eq!(s.max_rounds, DEFAULT_MAX_ROUNDS);
        assert_eq!(s.flows[0].weight, 5);
        assert_eq!(s.flows[1].weight, 1);
        assert_eq!(
            FlowTemplate::new(&s.flows[0]).unwrap().answers["confirmation"],
            "api"
        );
        let json_doc =
            r#"{"name":"j","max_rounds":3,"flows":[{"tool":"echo","arguments":{"text":"x"}}]}"#;
        assert_eq!(Scenario::parse(json_doc).unwrap().max_rounds, 3);
        assert!(Scenario::parse("name: x\nflows: []\n").is_err());
        assert!(Scenario::parse("name: x\nflows:\n  - method: tools/call\n").is_err());
        assert!(Scenario::parse("name: x\nflows:\n  - tool: a\n    typo: 1\n").is_err());
        assert!(Scenario::load("no-such-scenario").is_err());
    }

    #[test]
    fn weighted_pick() {
        let cum = [3, 5, 6];
        let picks: Vec<usize> = (0..6).map(|r| pick_weighted(&cum, r)).collect();
        assert_eq!(picks, [0, 0, 0, 1, 1, 2]);
    }
}
