//! Reading the client's answers (`inputResponses`) and building the input requests a tool
//! asks: elicitation, sampling and roots, with the in-band errors for malformed answers.

use serde_json::{json, Map, Value};

use super::{Call, Outcome};
use crate::mcp::codes;
use crate::mcp::methods::{ELICITATION_CREATE, ROOTS_LIST, SAMPLING_CREATE_MESSAGE};

pub(super) fn invalid(msg: String) -> Outcome {
    Outcome::Error(codes::INVALID_PARAMS, msg)
}

pub(super) fn text(s: impl Into<String>) -> Value {
    json!({"type": "text", "text": s.into()})
}

pub(super) fn complete_text(s: impl Into<String>) -> Outcome {
    Outcome::Complete(json!({ "content": [text(s)] }))
}

pub(super) fn error_text(s: impl Into<String>) -> Outcome {
    Outcome::Complete(json!({ "content": [text(s)], "isError": true }))
}

pub(super) fn arg_str<'a>(c: &Call<'a>, key: &str) -> Result<&'a str, Outcome> {
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

pub(super) fn ask(key: &str, request: Value, data: Value) -> Outcome {
    let mut requests = Map::new();
    requests.insert(key.to_owned(), request);
    Outcome::Ask { requests, data }
}

pub(super) fn elicit_req(
    message: impl Into<String>,
    properties: Value,
    required: &[&str],
) -> Value {
    json!({
        "method": ELICITATION_CREATE,
        "params": {
            "mode": "form",
            "message": message.into(),
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        }
    })
}

pub(super) fn sampling_req(prompt: impl Into<String>, max_tokens: u32) -> Value {
    json!({
        "method": SAMPLING_CREATE_MESSAGE,
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt.into()}}],
            "maxTokens": max_tokens,
        }
    })
}

pub(super) fn roots_req() -> Value {
    json!({ "method": ROOTS_LIST })
}

/// An elicitation answer.
pub(super) enum Elicit<'a> {
    Missing,
    Accept(&'a Map<String, Value>),
    /// `decline` or `cancel`, as a past participle for messages.
    Refused(&'static str),
}

pub(super) fn elicit<'a>(c: &Call<'a>, key: &str) -> Result<Elicit<'a>, Outcome> {
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

pub(super) fn content_str<'a>(
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

pub(super) fn content_bool(
    content: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<bool, Outcome> {
    content.get(field).and_then(Value::as_bool).ok_or_else(|| {
        invalid(format!(
            "inputResponses.{key}.content.{field} must be a boolean"
        ))
    })
}

/// The text of a sampling answer (`CreateMessageResult`), if the answer is there.
pub(super) fn sampled_text(c: &Call, key: &str) -> Result<Option<String>, Outcome> {
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
pub(super) fn root_uris(c: &Call, key: &str) -> Result<Option<Vec<String>>, Outcome> {
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
