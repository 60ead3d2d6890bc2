//! Reading a reply: the JSON-RPC payload of a response body (the body itself, or the last
//! response event of an SSE stream, read with [`crate::mcp::sse`]), what it says ([`Reply`]: complete,
//! input required, a task, error) and which instance served it. Pure; no I/O.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::mcp::{meta, result_type, sse};

/// The JSON-RPC payload of a response body: the body itself for `application/json`, the data of
/// the last response event for `text/event-stream` ([`sse::response_of`]; empty when no event is
/// a response).
pub(crate) fn json_payload<'a>(body: &'a [u8], content_type: Option<&[u8]>) -> Cow<'a, [u8]> {
    sse::response_of(content_type, body).unwrap_or(Cow::Borrowed(&[]))
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
    #[serde(rename = "taskId", borrow, default)]
    task_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireError {
    code: i64,
}

/// What one reply said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply<'a> {
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
    /// `resultType: task` (Tasks extension): the call created the task `task_id`.
    Task {
        task_id: Cow<'a, str>,
        meta: Option<&'a str>,
    },
    /// A JSON-RPC error.
    Error { code: i64 },
}

/// Why a reply could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplyProblem {
    NotJson,
    IdMismatch,
    /// Neither `result` nor `error`, or an unknown `resultType`, or `input_required` with neither
    /// `inputRequests` nor a string `requestState`.
    Invalid,
}

impl ReplyProblem {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ReplyProblem::NotJson => "reply_not_json",
            ReplyProblem::IdMismatch => "reply_id_mismatch",
            ReplyProblem::Invalid => "reply_invalid",
        }
    }
}

/// Read a JSON-RPC reply to the request with id `expected_id`.
pub(crate) fn parse_reply(json: &[u8], expected_id: u64) -> Result<Reply<'_>, ReplyProblem> {
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
        Some(result_type::TASK) => match res.task_id {
            Some(task_id) if !task_id.is_empty() => Ok(Reply::Task { task_id, meta }),
            _ => Err(ReplyProblem::Invalid),
        },
        Some(_) => Err(ReplyProblem::Invalid),
    }
}

/// The `error.message` of a JSON-RPC error reply.
pub(crate) fn error_message(json: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct E {
        error: M,
    }
    #[derive(Deserialize)]
    struct M {
        #[serde(default)]
        message: Option<String>,
    }
    serde_json::from_slice::<E>(json).ok()?.error.message
}

/// The `result` object of a reply, parsed (for content checks and tool error texts).
pub(crate) fn result_value(json: &[u8]) -> Option<serde_json::Value> {
    let mut v: serde_json::Value = serde_json::from_slice(json).ok()?;
    Some(v.get_mut("result")?.take())
}

/// The text of a tool result's `text` content items, joined (what a tool says when `isError`).
pub(crate) fn result_text(result: &serde_json::Value) -> Option<String> {
    let parts: Vec<&str> = result
        .get("content")?
        .as_array()?
        .iter()
        .filter_map(|c| c.get("text").and_then(serde_json::Value::as_str))
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The backend instance named in a result's raw `_meta`, if any.
pub(crate) fn instance_from_meta(meta_json: &str) -> Option<String> {
    let m: BTreeMap<Cow<str>, &RawValue> = serde_json::from_str(meta_json).ok()?;
    let v = m.get(meta::EDGE_INSTANCE)?;
    serde_json::from_str::<String>(v.get()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            parse_reply(
                br#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","taskId":"0123456789abcdef.x","status":"working"}}"#,
                3
            ),
            Ok(Reply::Task {
                task_id: "0123456789abcdef.x".into(),
                meta: None
            })
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
        let err = br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Tool create_repo not found"}}"#;
        assert_eq!(
            error_message(err).as_deref(),
            Some("Tool create_repo not found")
        );
        let res = result_value(br#"{"jsonrpc":"2.0","id":3,"result":{"isError":true,"content":[{"type":"text","text":"quota"},{"type":"image"},{"type":"text","text":"exceeded"}]}}"#).unwrap();
        assert_eq!(result_text(&res).as_deref(), Some("quota exceeded"));
    }

    #[test]
    fn sse_payload_is_the_last_response_event() {
        let body = b": keepalive\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":5,\"result\":{}}\r\n\r\n";
        let p = json_payload(body, Some(b"text/event-stream; charset=utf-8"));
        assert_eq!(&*p, b"{\"jsonrpc\":\"2.0\",\n\"id\":5,\"result\":{}}");
        assert!(parse_reply(&p, 5).is_ok());
        // A notification after the response is not the payload (it was, before).
        let late = b"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
        let p = json_payload(late, Some(b"text/event-stream"));
        assert!(parse_reply(&p, 5).is_ok());
        let plain = br#"{"a":1}"#;
        assert_eq!(&*json_payload(plain, Some(b"application/json")), plain);
    }
}
