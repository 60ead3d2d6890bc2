//! The one parse of a request body: a strict JSON-RPC envelope reader.
//!
//! The gateway routes and checks on what this reader sees, and an upstream acts on what *its*
//! JSON reader sees. The two must never differ, so this reader refuses every document that JSON
//! parsers are known to read differently:
//!
//! - **duplicate keys** at any depth (one parser keeps the first, another the last) → -32600;
//! - keys equal **after case folding** at any depth (`"name"` and `"NAME"`), and a member the
//!   envelope reads spelled in another case (`"Method"`, `"ID"`, `"paramſ"`): readers that match
//!   names without case (Go's `encoding/json`) would read them as the member → -32600;
//! - a request method without an `id` (only `notifications/*` may omit it: an id-less
//!   `tools/call` would skip the `Mcp-Name` check while a server may still run it) → -32600;
//! - nesting deeper than [`MAX_DEPTH`] → -32600;
//! - invalid UTF-8, lone surrogate escapes, trailing bytes, any syntax error → -32700.
//!
//! Escaped keys such as `"\u006dethod"` are decoded before comparison, exactly as every
//! conforming parser does, so they name the same member as `"method"` (and a document that has
//! both is a duplicate). The whole document is walked once by the strict walker of
//! [`super::strict`]; only the members below are kept.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

use super::error::{codes, Rejection};
use super::meta;
pub use super::strict::MAX_DEPTH;
use super::strict::{
    case_variant, case_variant_of, check_new_key, scalars, Faults, Key, MaybeString, SeenKeys, Walk,
};

mod keep;

/// The members of the request object, of `params` and of `params._meta` that the envelope reads
/// or that a server acts on: a key spelled like one of them in another case is refused.
const TOP_MEMBERS: &[&str] = &["jsonrpc", "id", "method", "params", "result", "error"];
const PARAMS_MEMBERS: &[&str] = &[
    "name",
    "uri",
    "arguments",
    "_meta",
    "requestState",
    "inputResponses",
    "cursor",
    "taskId",
    "protocolVersion",
];
const META_MEMBERS: &[&str] = &[
    meta::PROTOCOL_VERSION,
    meta::CLIENT_CAPABILITIES,
    meta::CLIENT_INFO,
    meta::LOG_LEVEL,
    meta::PROGRESS_TOKEN,
    meta::TRACEPARENT,
    meta::TRACESTATE,
];

/// What the gateway and the backend need to know about a request body.
#[derive(Debug, Default, Clone)]
pub struct Envelope {
    /// The raw JSON of `id` when present (a string or a number).
    pub id: Option<Box<RawValue>>,
    pub method: Option<String>,
    /// `params.name` when it is a string.
    pub name: Option<String>,
    /// `params.uri` when it is a string.
    pub uri: Option<String>,
    /// `params.taskId` when it is a string (tasks/* of the Tasks extension).
    pub task_id: Option<String>,
    /// `params._meta` is present and an object.
    pub has_meta: bool,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]` when it is a string.
    pub protocol_version: Option<String>,
    /// `params._meta["io.modelcontextprotocol/clientCapabilities"]` is present and an object.
    pub has_client_capabilities: bool,
    /// `params.requestState` is present (an MRTR retry leg).
    pub has_request_state: bool,
    /// `params.inputResponses` is present.
    pub has_input_responses: bool,
    /// `params.protocolVersion` when it is a string: what a 2025-era `initialize` asks for.
    pub legacy_version: Option<String>,
    /// The [digest](super::digest) of `params.requestState` when it is a string.
    pub request_state_digest: Option<u64>,
    /// `params._meta.traceparent` / `tracestate` when strings (W3C trace context).
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

impl Envelope {
    /// A request has an id; a notification has none.
    pub fn is_notification(&self) -> bool {
        self.id.is_none()
    }

    /// The body value that `Mcp-Name` must mirror for this method, if the method needs it.
    pub fn mcp_name(&self) -> Option<&str> {
        use super::methods::{name_field, NameField};
        match name_field(self.method.as_deref()?)? {
            NameField::Name => self.name.as_deref(),
            NameField::Uri => self.uri.as_deref(),
            NameField::TaskId => self.task_id.as_deref(),
        }
    }

    /// A retry leg carries `requestState` or `inputResponses`.
    pub fn is_retry_leg(&self) -> bool {
        self.has_request_state || self.has_input_responses
    }
}

/// Why a body is not a usable JSON-RPC request.
#[derive(Debug, Clone)]
pub enum EnvelopeError {
    /// Not JSON (syntax, UTF-8, trailing bytes): -32700.
    Parse(String),
    /// JSON, but not one JSON-RPC request object: -32600. `id` is echoed when it was read.
    Invalid {
        message: String,
        reason: &'static str,
        id: Option<Box<RawValue>>,
    },
}

impl EnvelopeError {
    pub fn rejection(&self) -> Rejection {
        match self {
            EnvelopeError::Parse(m) => Rejection::new(
                400,
                codes::PARSE_ERROR,
                "parse-error",
                format!("Parse error: {m}"),
            ),
            EnvelopeError::Invalid {
                message, reason, ..
            } => Rejection::new(
                400,
                codes::INVALID_REQUEST,
                reason,
                format!("Invalid request: {message}"),
            ),
        }
    }

    pub fn id(&self) -> Option<&RawValue> {
        match self {
            EnvelopeError::Parse(_) => None,
            EnvelopeError::Invalid { id, .. } => id.as_deref(),
        }
    }
}

impl PartialEq for Envelope {
    fn eq(&self, o: &Self) -> bool {
        self.id.as_ref().map(|r| r.get()) == o.id.as_ref().map(|r| r.get())
            && self.method == o.method
            && self.name == o.name
            && self.uri == o.uri
            && self.task_id == o.task_id
            && self.has_meta == o.has_meta
            && self.protocol_version == o.protocol_version
            && self.has_client_capabilities == o.has_client_capabilities
            && self.has_request_state == o.has_request_state
            && self.has_input_responses == o.has_input_responses
            && self.legacy_version == o.legacy_version
            && self.request_state_digest == o.request_state_digest
            && self.traceparent == o.traceparent
            && self.tracestate == o.tracestate
    }
}

/// Parse a request body. See the module docs for what is refused.
pub fn parse(body: &[u8]) -> Result<Envelope, EnvelopeError> {
    parse_with(body, false).map(|(env, _)| env)
}

/// [`parse`], also handing out `params` as an object (empty when absent), built during the one
/// walk: for a server that acts on the body (the reference backend).
pub fn parse_keeping_params(
    body: &[u8],
) -> Result<(Envelope, serde_json::Map<String, serde_json::Value>), EnvelopeError> {
    parse_with(body, true)
}

fn parse_with(
    body: &[u8],
    keep_params: bool,
) -> Result<(Envelope, serde_json::Map<String, serde_json::Value>), EnvelopeError> {
    let mut st = State {
        keep_params,
        ..State::default()
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let res = Top { st: &mut st }
        .deserialize(&mut de)
        .and_then(|()| de.end());
    match (res, st.faults.invalid) {
        (Ok(()), None) => {}
        (_, Some((reason, message))) => {
            return Err(EnvelopeError::Invalid {
                message,
                reason,
                id: st.env.id.take(),
            });
        }
        (Err(e), None) => return Err(EnvelopeError::Parse(e.to_string())),
    }
    let env = st.env;
    if st.jsonrpc.as_deref() != Some("2.0") {
        let message = match st.jsonrpc {
            None => "the \"jsonrpc\" member is missing (must be \"2.0\")".to_string(),
            Some(_) => "\"jsonrpc\" must be \"2.0\"".to_string(),
        };
        return Err(EnvelopeError::Invalid {
            message,
            reason: "not-jsonrpc",
            id: env.id,
        });
    }
    if env.method.is_none() {
        let (reason, message) = if st.has_result_or_error {
            (
                "response-object",
                "a JSON-RPC response object cannot be sent to a server",
            )
        } else {
            (
                "no-method",
                "the \"method\" member is missing or not a string",
            )
        };
        return Err(EnvelopeError::Invalid {
            message: message.into(),
            reason,
            id: env.id,
        });
    }
    if env.id.is_none() && !env.method.as_deref().is_some_and(is_notification_method) {
        let message = format!(
            "{:?} is a request and needs an \"id\"; only notifications/* methods may omit it",
            env.method.as_deref().unwrap_or_default()
        );
        return Err(EnvelopeError::Invalid {
            message,
            reason: "missing-id",
            id: None,
        });
    }
    Ok((env, st.params))
}

/// Notification methods are the only ones sent without an id.
pub fn is_notification_method(method: &str) -> bool {
    method.starts_with("notifications/")
}

#[derive(Default)]
struct State {
    env: Envelope,
    jsonrpc: Option<String>,
    has_result_or_error: bool,
    faults: Faults,
    /// Build `params` into [`State::params`] (see [`parse_keeping_params`]).
    keep_params: bool,
    params: serde_json::Map<String, serde_json::Value>,
}

/// Which object a [`Fields`] visitor is reading.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    Params,
    Meta,
    /// An object whose members are walked but not kept (e.g. `clientCapabilities`).
    Opaque,
}

/// Reads `params` or `params._meta`, keeping the members the envelope needs. Returns whether the
/// value was an object.
struct Fields<'s> {
    st: &'s mut State,
    depth: usize,
    level: Level,
}

impl<'de, 's> DeserializeSeed<'de> for Fields<'s> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 's> Visitor<'de> for Fields<'s> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    scalars!(false);
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        Walk {
            faults: &mut self.st.faults,
            depth: self.depth,
        }
        .visit_seq(seq)
        .map(|()| false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let depth = self.depth + 1;
        let st = self.st;
        let mut seen = SeenKeys::default();
        let at = match self.level {
            Level::Params => "params",
            Level::Meta => "params._meta",
            Level::Opaque => "an object",
        };
        while let Some(Key(k)) = map.next_key()? {
            check_new_key(&mut st.faults, &mut seen, &k, at)?;
            match (self.level, k.as_ref()) {
                (Level::Params, "name") => {
                    st.env.name = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth,
                    })?
                }
                (Level::Params, "uri") => {
                    st.env.uri = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth,
                    })?
                }
                (Level::Params, "taskId") => {
                    st.env.task_id = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth,
                    })?
                }
                (Level::Params, "_meta") => {
                    st.env.has_meta = map.next_value_seed(Fields {
                        st: &mut *st,
                        depth,
                        level: Level::Meta,
                    })?
                }
                (Level::Params, "protocolVersion") => {
                    st.env.legacy_version = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth,
                    })?
                }
                (Level::Params, "requestState") => {
                    st.env.has_request_state = true;
                    let state = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth,
                    })?;
                    st.env.request_state_digest = state.as_deref().map(super::digest::state_digest);
                }
                (Level::Params, "inputResponses") => {
                    st.env.has_input_responses = true;
                    map.next_value_seed(Walk {
                        faults: &mut st.faults,
                        depth,
                    })?;
                }
                (Level::Meta, meta::PROTOCOL_VERSION) => {
                    st.env.protocol_version = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth,
                    })?
                }
                (Level::Meta, meta::TRACEPARENT) => {
                    st.env.traceparent = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth,
                    })?
                }
                (Level::Meta, meta::TRACESTATE) => {
                    st.env.tracestate = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth,
                    })?
                }
                (Level::Meta, meta::CLIENT_CAPABILITIES) => {
                    st.env.has_client_capabilities = map.next_value_seed(Fields {
                        st: &mut *st,
                        depth,
                        level: Level::Opaque,
                    })?;
                }
                (level, other) => {
                    let known = match level {
                        Level::Params => PARAMS_MEMBERS,
                        Level::Meta => META_MEMBERS,
                        Level::Opaque => &[],
                    };
                    if let Some(m) = case_variant_of(other, known) {
                        return Err(case_variant(&mut st.faults, other, m, at));
                    }
                    map.next_value_seed(Walk {
                        faults: &mut st.faults,
                        depth,
                    })?
                }
            }
        }
        Ok(true)
    }
}

/// The top level: one object (a batch array or a scalar is refused).
struct Top<'s> {
    st: &'s mut State,
}

impl<'de, 's> DeserializeSeed<'de> for Top<'s> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'s> Top<'s> {
    fn not_object<E: de::Error>(self, what: &str) -> Result<(), E> {
        Err(self.st.faults.fail(
            "not-object",
            format!("the body is {what}, not one JSON-RPC request object"),
        ))
    }
}

impl<'de, 's> Visitor<'de> for Top<'s> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC request object")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.not_object("a boolean")
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.not_object("a number")
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.not_object("a number")
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.not_object("a number")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.not_object("a string")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.not_object("null")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(self.st.faults.fail(
            "batch",
            "the body is a JSON array: batches are not allowed in this protocol revision".into(),
        ))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let st = self.st;
        let mut seen = SeenKeys::default();
        while let Some(Key(k)) = map.next_key()? {
            check_new_key(&mut st.faults, &mut seen, &k, "the request object")?;
            match k.as_ref() {
                "jsonrpc" => {
                    st.jsonrpc = Some(
                        map.next_value_seed(MaybeString {
                            faults: &mut st.faults,
                            depth: 1,
                        })?
                        .unwrap_or_default(),
                    )
                }
                "method" => {
                    st.env.method = map.next_value_seed(MaybeString {
                        faults: &mut st.faults,
                        depth: 1,
                    })?
                }
                "id" => {
                    let raw: Box<RawValue> = map.next_value()?;
                    let first = raw.get().as_bytes().first().copied().unwrap_or(b' ');
                    if !(first == b'"' || first == b'-' || first.is_ascii_digit()) {
                        return Err(st
                            .faults
                            .fail("bad-id", "\"id\" must be a string or an integer".into()));
                    }
                    st.env.id = Some(raw);
                }
                "params" if st.keep_params => {
                    match map.next_value_seed(keep::Build::params(&mut *st))? {
                        serde_json::Value::Object(m) => {
                            keep::fill(&mut st.env, &m);
                            st.params = m;
                        }
                        _ => {
                            return Err(st
                                .faults
                                .fail("bad-params", "\"params\" must be an object".into()))
                        }
                    }
                }
                "params" => {
                    if !map.next_value_seed(Fields {
                        st: &mut *st,
                        depth: 1,
                        level: Level::Params,
                    })? {
                        return Err(st
                            .faults
                            .fail("bad-params", "\"params\" must be an object".into()));
                    }
                }
                "result" | "error" => {
                    st.has_result_or_error = true;
                    map.next_value_seed(Walk {
                        faults: &mut st.faults,
                        depth: 1,
                    })?;
                }
                other => {
                    if let Some(m) = case_variant_of(other, TOP_MEMBERS) {
                        let at = "the request object";
                        return Err(case_variant(&mut st.faults, other, m, at));
                    }
                    map.next_value_seed(Walk {
                        faults: &mut st.faults,
                        depth: 1,
                    })?
                }
            }
        }
        Ok(())
    }
}
