//! JSON-RPC result bodies and SSE framing, the success-side counterpart of [`super::error`].

use serde_json::value::RawValue;
use serde_json::Value;

/// Serialize a JSON-RPC success response: `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
/// `id` is the raw JSON of the request id, echoed byte for byte.
pub(crate) fn result_body(id: &RawValue, result: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + id.get().len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(br#","result":"#);
    // Writing a Value into a Vec cannot fail.
    serde_json::to_writer(&mut out, result).expect("value serializes");
    out.push(b'}');
    out
}

/// Frame one JSON-RPC message as a server-sent event: `event: message`, one `data:` line (the
/// JSON has no raw newlines), and the blank line that ends the event.
pub(crate) fn sse_event(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(message);
    out.extend_from_slice(b"\n\n");
    out
}

/// An SSE comment line that keeps an idle stream alive; clients ignore it.
pub(crate) const SSE_KEEPALIVE: &[u8] = b": keep-alive\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_body_echoes_the_raw_id() {
        let id = RawValue::from_string("\"c-17\"".into()).unwrap();
        let body = result_body(&id, &serde_json::json!({"resultType":"complete","x":[1]}));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["id"], "c-17");
        assert_eq!(v["result"]["x"][0], 1);
        let id = RawValue::from_string("42".into()).unwrap();
        assert!(std::str::from_utf8(&result_body(&id, &Value::Null))
            .unwrap()
            .contains(r#""id":42,"#));
    }

    #[test]
    fn sse_event_is_one_data_line() {
        let ev = sse_event(br#"{"a":"x\ny"}"#);
        assert_eq!(ev, b"event: message\ndata: {\"a\":\"x\\ny\"}\n\n");
        assert_eq!(ev.iter().filter(|b| **b == b'\n').count(), 3);
    }
}
