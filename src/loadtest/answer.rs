//! Answering `inputRequests`: the `inputResponses` object a retry leg carries, built from each
//! request's method (elicitation forms filled from their `requestedSchema` and the flow's answer
//! table, sampling and roots with fixed answers). Pure; no I/O.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::mcp::methods;

/// The answer table every flow starts from (property name → answer).
pub fn default_answers() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), json!("octocat"));
    m.insert("role".into(), json!("admin"));
    m
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadtest::template::tests::tpl;

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
}
