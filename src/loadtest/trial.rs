//! `--scenario auto`'s trial calls: before any load, each tool the auto scenario would call is
//! called once (all at once, within `--timeout`), and a tool whose first leg answers an error
//! (`isError: true`, or a JSON-RPC error) is left out of the load with the reason, as a
//! destructive tool is. Such a tool fails by design (a conformance fixture that always fails),
//! or cannot be called with arguments made from its schema; counting it would fail the run
//! against a healthy fleet. A trial that gets no answer (timeout, transport, an HTTP error
//! without a JSON-RPC body) leaves the tool in: that is the fleet's failure, and the load will
//! show it. Only `--scenario auto` runs trials; a scenario the user wrote is run as written.

use http::HeaderValue;

use super::client::Http;
use super::reply::{json_payload, parse_reply, Reply};
use super::template::{FlowTemplate, RetryParts};

/// Why a trial call left its tool out.
pub(crate) const TOOL_ERROR: &str = "fails by design: isError true on its trial call";
pub(crate) const JSONRPC_ERROR: &str =
    "fails by design or with made-up arguments: a JSON-RPC error on its trial call";

/// Ids of trial calls, apart from the load's (which count up from 0), and within JSON's safe
/// integers: JavaScript servers read ids as doubles, and the TypeScript SDK refuses an id past
/// 2^53 (-32600), which would leave a healthy tool out.
const TRIAL_ID_BASE: u64 = 1 << 52;
const _: () = assert!(
    TRIAL_ID_BASE + (1 << 32) < 1 << 53,
    "trial ids stay safe integers"
);

/// Call each template's first leg once, all at once: for each, why its tool is left out
/// (`None`: it stays). `authorization` is added to templates that carry none.
pub(crate) async fn run(
    http: &Http,
    templates: &[&FlowTemplate],
    authorization: Option<&HeaderValue>,
    timeout: std::time::Duration,
) -> Vec<Option<&'static str>> {
    let calls = templates.iter().enumerate().map(|(i, tpl)| async move {
        let id = TRIAL_ID_BASE + i as u64;
        let mut headers = tpl.headers.clone();
        if let (false, Some(a)) = (
            headers.contains_key(http::header::AUTHORIZATION),
            authorization,
        ) {
            headers.insert(http::header::AUTHORIZATION, a.clone());
        }
        let req = http.request(headers, tpl.body(id, RetryParts::default()));
        let ans = match tokio::time::timeout(timeout, http.send(req)).await {
            Ok(Ok(a)) => a,
            _ => return None,
        };
        let ct = ans.headers.get(http::header::CONTENT_TYPE);
        verdict(&json_payload(&ans.body, ct.map(|v| v.as_bytes())), id)
    });
    futures::future::join_all(calls).await
}

/// What a trial's answer says about its tool.
fn verdict(payload: &[u8], id: u64) -> Option<&'static str> {
    match parse_reply(payload, id) {
        Ok(Reply::Complete { is_error: true, .. }) => Some(TOOL_ERROR),
        Ok(Reply::Error { .. }) => Some(JSONRPC_ERROR),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_error_answer_leaves_a_tool_out() {
        let id = TRIAL_ID_BASE + 3;
        let body = |result: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},{result}}}"#);
        let failing = body(r#""result":{"content":[],"isError":true}"#);
        assert_eq!(verdict(failing.as_bytes(), id), Some(TOOL_ERROR));
        let error = body(r#""error":{"code":-32603,"message":"always"}"#);
        assert_eq!(verdict(error.as_bytes(), id), Some(JSONRPC_ERROR));
        let ok = body(r#""result":{"content":[{"type":"text","text":"hi"}]}"#);
        assert_eq!(verdict(ok.as_bytes(), id), None);
        let asks = body(
            r#""result":{"resultType":"input_required","inputRequests":{"a":{}},"requestState":"s"}"#,
        );
        assert_eq!(verdict(asks.as_bytes(), id), None);
        // Not an answer the trial can read: the tool stays, and the load shows what it does.
        assert_eq!(verdict(b"<html>502</html>", id), None);
    }
}
