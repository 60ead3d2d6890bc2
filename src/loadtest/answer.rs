//! Answering `inputRequests`: the `inputResponses` object a retry leg carries, built from each
//! request's method (elicitation forms filled from their `requestedSchema` and the flow's answer
//! table, sampling and roots with fixed answers). Pure; no I/O.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::gen;
use crate::mcp::methods;

/// The answer table every flow starts from (property name → answer).
pub(crate) fn default_answers() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), json!("octocat"));
    m.insert("role".into(), json!("admin"));
    m
}

/// Why a set of `inputRequests` could not be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AnswerError {
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

/// How an elicitation is answered: `accept` with content (the default), or `decline` / `cancel`
/// (a share of flows, `--decline-share` / `--cancel-share`, to exercise the servers' other paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ElicitAction {
    #[default]
    Accept,
    Decline,
    Cancel,
}

impl ElicitAction {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ElicitAction::Accept => "accept",
            ElicitAction::Decline => "decline",
            ElicitAction::Cancel => "cancel",
        }
    }
}

/// The answer to one elicitation form: `accept` with content built from the requested schema
/// (the answer table first, an `enum` choice kept valid, else a value made from the property's
/// schema by [`gen`]).
fn elicitation_answer(params: Option<&Value>, answers: &Map<String, Value>) -> Value {
    let mut content = Map::new();
    let schema = params.and_then(|p| p.get("requestedSchema"));
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    for (prop, ps) in props.into_iter().flatten() {
        let choices = ps.get("enum").and_then(Value::as_array);
        let v = match (answers.get(prop), choices) {
            (Some(a), Some(c)) if !c.contains(a) => c.first().cloned().unwrap_or(Value::Null),
            (Some(a), _) => a.clone(),
            (None, _) => gen::sample_all(ps),
        };
        content.insert(prop.clone(), v);
    }
    json!({"action": ElicitAction::Accept.name(), "content": content})
}

#[cfg(test)]
/// Write the `inputResponses` object answering `input_requests` (the raw JSON of the previous
/// answer's `inputRequests`) into `out`: one entry per key, in the order received.
pub(crate) fn answer_input_requests(
    input_requests: &str,
    answers: &Map<String, Value>,
    out: &mut Vec<u8>,
) -> Result<(), AnswerError> {
    answer_input_requests_as(input_requests, answers, ElicitAction::Accept, out)
}

/// Like `answer_input_requests` (the accepting default), with elicitations answered by `action` (sampling and roots
/// requests are answered as usual).
pub(crate) fn answer_input_requests_as(
    input_requests: &str,
    answers: &Map<String, Value>,
    action: ElicitAction,
    out: &mut Vec<u8>,
) -> Result<(), AnswerError> {
    // serde_json's Map keeps keys sorted, which is a stable, valid order for an object.
    let reqs: BTreeMap<String, InputRequest> =
        serde_json::from_str(input_requests).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    let mut obj = Map::new();
    for (key, req) in reqs {
        let answer = match req.method.as_str() {
            methods::ELICITATION_CREATE if action != ElicitAction::Accept => {
                json!({"action": action.name()})
            }
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

    #[test]
    fn decline_and_cancel_answer_elicitations_only() {
        let reqs = json!({
            "e": {"method": "elicitation/create", "params": {"requestedSchema": {"properties": {"ok": {"type": "boolean"}}}}},
            "r": {"method": "roots/list"}
        });
        for action in [ElicitAction::Decline, ElicitAction::Cancel] {
            let mut out = Vec::new();
            answer_input_requests_as(&reqs.to_string(), &Map::new(), action, &mut out).unwrap();
            let v: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["e"], json!({"action": action.name()}));
            assert!(v["r"]["roots"].is_array());
        }
    }
}
