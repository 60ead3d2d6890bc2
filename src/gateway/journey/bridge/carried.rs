//! The request a 2025-era client's call carries through the fleet ([`Call`]): its method, its id,
//! the `Mcp-Name` its 2026 requests carry, and its params, kept as the client sent them when the
//! raw path takes them ([`crate::mcp::legacy::raw`]) and read into a value only when a round's
//! answers or the marks need one. Each leg's 2026 body is written from it ([`Call::to_modern`]).

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::sync::OnceLock;

use super::session::LegacySession;
use crate::mcp::{codes, legacy, methods, Rejection};

/// The client's request being carried.
pub(super) struct Call {
    pub(super) method: String,
    params: Params,
    /// The `Mcp-Name` of its 2026 request (taken into the request's context when it is run).
    pub(super) name: Option<String>,
    pub(super) id: Box<RawValue>,
}

/// A call's params: as the client sent them, when the raw path takes them
/// ([`legacy::Params`]; read as a value only if a round or the marks need it), else as a value.
enum Params {
    /// The params' text (a slice of the client's body, no copy) and its members' places in it,
    /// read once, in the envelope's pass.
    Raw(Option<(Bytes, legacy::Spans)>, OnceLock<Option<Value>>),
    Value(Option<Value>),
}

impl Call {
    /// A call read as a value (`msg`: the whole message).
    pub(super) fn new(method: String, mut msg: Value, id: Box<RawValue>) -> Call {
        let params = msg.get_mut("params").map(Value::take);
        let name = legacy::name_of(&method, params.as_ref());
        let params = Params::Value(params);
        Call {
            method,
            params,
            name,
            id,
        }
    }

    /// The message `body` when it is a request the fleet answers (no `initialize`, nothing
    /// the bridge answers itself), read from its envelope without a value tree (its params'
    /// members in the same pass); `None`: anything else, which the bridge reads as a value.
    pub(super) fn carried(body: &Bytes) -> Option<Call> {
        let mut env = legacy::envelope(body)?;
        let (method, id) = (env.method.take()?, env.id?);
        let kept_here = method == methods::INITIALIZE
            || legacy::subscribes(&method).is_some()
            || legacy::answered_at_edge(&method).is_some();
        if kept_here {
            return None;
        }
        let id = RawValue::from_string(id.to_owned()).ok()?;
        let method = method.into_owned();
        let (params, name) = match env.raw_params() {
            Some(p) => {
                let name = legacy::name_of_raw(&method, &p);
                let kept = env.params.map(|t| (body.slice_ref(t), p.spans(t)));
                (Params::Raw(kept, OnceLock::new()), name)
            }
            None => {
                let value = env.params.map(serde_json::from_slice).transpose().ok()?;
                let name = legacy::name_of(&method, value.as_ref());
                (Params::Value(value), name)
            }
        };
        Some(Call {
            method,
            params,
            name,
            id,
        })
    }

    /// The params as a value.
    pub(super) fn params(&self) -> Option<&Value> {
        match &self.params {
            Params::Value(v) => v.as_ref(),
            Params::Raw(raw, value) => value
                .get_or_init(|| {
                    let text = raw.as_ref().map(|(text, _)| text)?;
                    serde_json::from_slice(text).ok()
                })
                .as_ref(),
        }
    }

    /// The body of leg `leg` as a 2026 request, with the previous round's answers (`extra`).
    /// `Err`: params sent as JSON a value tree cannot hold (a number past f64's range, a lone
    /// surrogate) cannot carry a round's answers; the first leg took them as they were.
    pub(super) fn to_modern(
        &self,
        s: &LegacySession,
        extra: &Map<String, Value>,
        leg: u64,
        level: Option<&str>,
    ) -> Result<Vec<u8>, Rejection> {
        if let (Params::Raw(raw, _), true) = (&self.params, extra.is_empty()) {
            let params = match raw {
                Some((text, spans)) => legacy::Params::at(text, spans),
                None => legacy::Params::read(None),
            };
            let written =
                params.and_then(|p| legacy::to_modern_raw(&self.method, &p, leg, s.meta(), level));
            if let Some(body) = written {
                return Ok(body);
            }
        }
        if matches!(&self.params, Params::Raw(Some(_), _)) && self.params().is_none() {
            let msg = "The call's params hold JSON the gateway cannot carry into a retry with the answers (a number out of range, a lone surrogate): send numbers a 64-bit float holds and strings without lone surrogates, then call again";
            return Err(Rejection::new(
                400,
                codes::INVALID_PARAMS,
                "params-unheld",
                msg,
            ));
        }
        let params = self.params_with(extra);
        let (caps, info) = (&s.capabilities, &s.client_info);
        Ok(legacy::to_modern(
            &self.method,
            params.as_ref(),
            leg,
            caps,
            info,
            level,
        ))
    }

    /// The params of the next leg: the original ones plus the previous round's answers.
    fn params_with(&self, extra: &Map<String, Value>) -> Option<Value> {
        if extra.is_empty() {
            return self.params().cloned();
        }
        let mut p = match self.params() {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        p.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        Some(Value::Object(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn session() -> LegacySession {
        LegacySession::open(
            "2025-11-25",
            json!({}),
            json!({"name": "c"}),
            String::new(),
            "/mcp",
            60_000,
        )
    }

    #[test]
    fn params_a_value_tree_cannot_hold_go_raw_but_cannot_carry_a_rounds_answers() {
        let body =
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","n":1e400}}"#;
        let call = Call::carried(&Bytes::from_static(body)).expect("a carried call");
        assert_eq!((call.name.as_deref(), call.id.get()), (Some("t"), "7"));
        let s = session();
        let first = call.to_modern(&s, &Map::new(), 1, None).unwrap();
        assert!(first.windows(5).any(|w| w == b"1e400"));
        let mut extra = Map::new();
        extra.insert("requestState".into(), json!("s"));
        let refused = call.to_modern(&s, &extra, 2, None).unwrap_err();
        assert_eq!(refused.reason, "params-unheld");
        // Params a value holds carry the answers.
        let ok = Call::carried(&Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}"#,
        ))
        .unwrap();
        let second: Value =
            serde_json::from_slice(&ok.to_modern(&s, &extra, 2, None).unwrap()).unwrap();
        assert_eq!(second["params"]["requestState"], "s");
        assert_eq!(second["params"]["name"], "t");
    }

    #[test]
    fn what_the_bridge_answers_itself_is_no_carried_call() {
        for m in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
        ] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{m}","params":{{}}}}"#);
            assert!(Call::carried(&Bytes::from(body)).is_none(), "{m}");
        }
        // A response, a notification: no call either.
        let carried = |b: &'static [u8]| Call::carried(&Bytes::from_static(b));
        assert!(carried(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).is_none());
        assert!(carried(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#).is_none());
    }
}
