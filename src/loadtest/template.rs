//! A flow compiled for sending ([`FlowTemplate`]): pre-serialized body parts and pre-built
//! headers, so that each leg's body is one allocation with the id and the MRTR parts
//! ([`RetryParts`]: `inputResponses`, the raw `requestState`) spliced in. Pure; no I/O.

use std::io::Write as _;

use anyhow::Context as _;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use super::answer::default_answers;
use super::scenario::{FlowSpec, ARG_REF_PREFIX};
use crate::mcp::{self, header, meta, methods, tasks};

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
    /// The flow declares the Tasks extension and follows the tasks its call creates.
    pub tasks: bool,
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

/// [`client_capabilities`] plus the Tasks extension (for flows that follow tasks).
pub(crate) fn client_capabilities_with_tasks() -> Value {
    let mut c = client_capabilities();
    c["extensions"] = json!({ tasks::EXTENSION: {} });
    c
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
        let caps = if spec.tasks {
            client_capabilities_with_tasks()
        } else {
            client_capabilities()
        };
        meta_obj.insert(meta::CLIENT_CAPABILITIES.into(), caps);
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
            // A null argument means the header is omitted (the spec's `x-mcp-header` rules).
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
            tasks: spec.tasks,
        })
    }

    /// Whether this flow is a `tools/call` (which may take several legs).
    pub(crate) fn is_call(&self) -> bool {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::loadtest::answer::answer_input_requests;
    use crate::loadtest::reply::{parse_reply, Reply};
    use crate::loadtest::scenario::Scenario;

    pub(crate) fn tpl(name: &str) -> FlowTemplate {
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
}
