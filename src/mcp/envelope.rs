//! The one parse of a request body: a strict JSON-RPC envelope reader.
//!
//! The gateway routes and checks on what this reader sees, and an upstream acts on what *its*
//! JSON reader sees. The two must never differ, so this reader refuses every document that JSON
//! parsers are known to read differently:
//!
//! - **duplicate keys** at any depth (one parser keeps the first, another the last) → -32600;
//! - nesting deeper than [`MAX_DEPTH`] → -32600;
//! - invalid UTF-8, lone surrogate escapes, trailing bytes, any syntax error → -32700.
//!
//! Escaped keys such as `"\u006dethod"` are decoded before comparison, exactly as every
//! conforming parser does, so they name the same member as `"method"` (and a document that has
//! both is a duplicate). The whole document is walked once; only the members below are kept.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use super::error::{codes, Rejection};
use super::meta;

mod keep;

/// How deep objects and arrays may nest (the envelope itself uses 4 levels).
pub const MAX_DEPTH: usize = 64;

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
    match (res, st.invalid) {
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
    Ok((env, st.params))
}

#[derive(Default)]
struct State {
    env: Envelope,
    jsonrpc: Option<String>,
    has_result_or_error: bool,
    /// Set when the document is JSON but not acceptable; the serde error is then a carrier only.
    invalid: Option<(&'static str, String)>,
    /// Build `params` into [`State::params`] (see [`parse_keeping_params`]).
    keep_params: bool,
    params: serde_json::Map<String, serde_json::Value>,
}

impl State {
    fn fail<E: de::Error>(&mut self, reason: &'static str, message: String) -> E {
        if self.invalid.is_none() {
            self.invalid = Some((reason, message));
        }
        E::custom("rejected")
    }
}

/// A key, borrowed from the input when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// How many keys of one object are remembered without a heap allocation.
const INLINE_KEYS: usize = 8;

/// Remembers the keys of one object to refuse duplicates. The first [`INLINE_KEYS`] keys live on
/// the stack (an envelope's objects have a handful of members each); the rest go to a hash set,
/// so an object with tens of thousands of members costs linear, not quadratic, time.
struct SeenKeys<'de> {
    inline: [Cow<'de, str>; INLINE_KEYS],
    len: usize,
    /// Created for the ninth key (so small objects skip even the hasher's setup).
    more: Option<HashSet<Cow<'de, str>>>,
}

impl Default for SeenKeys<'_> {
    fn default() -> Self {
        SeenKeys {
            inline: [const { Cow::Borrowed("") }; INLINE_KEYS],
            len: 0,
            more: None,
        }
    }
}

impl<'de> SeenKeys<'de> {
    /// Returns false when `k` was seen before. (Takes the `Cow` to keep it: cloning a borrowed
    /// key is a pointer copy.)
    #[allow(clippy::ptr_arg)]
    fn insert(&mut self, k: &Cow<'de, str>) -> bool {
        let inline = &self.inline[..self.len.min(INLINE_KEYS)];
        if inline.iter().any(|s| s == k) {
            return false;
        }
        if self.len < INLINE_KEYS {
            self.inline[self.len] = k.clone();
        } else if !self.more.get_or_insert_with(HashSet::new).insert(k.clone()) {
            return false;
        }
        self.len += 1;
        true
    }
}

#[allow(clippy::ptr_arg)]
fn check_new_key<'de, E: de::Error>(
    st: &mut State,
    seen: &mut SeenKeys<'de>,
    k: &Cow<'de, str>,
    at: &str,
) -> Result<(), E> {
    if seen.insert(k) {
        Ok(())
    } else {
        Err(st.fail(
            "duplicate-key",
            format!("duplicate key {k:?} in {at}; each member may appear once"),
        ))
    }
}

/// The scalar `visit_*` methods of a visitor that answers every non-string scalar alike.
macro_rules! scalars {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// Walks any value, refusing duplicate keys and excessive depth, keeping nothing.
struct Walk<'s> {
    st: &'s mut State,
    depth: usize,
}

impl<'de, 's> DeserializeSeed<'de> for Walk<'s> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 's> Visitor<'de> for Walk<'s> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    scalars!(());
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(self.st.fail(
                "too-deep",
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        while seq
            .next_element_seed(Walk {
                st: &mut *self.st,
                depth,
            })?
            .is_some()
        {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(self.st.fail(
                "too-deep",
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        let mut seen = SeenKeys::default();
        while let Some(Key(k)) = map.next_key()? {
            check_new_key(self.st, &mut seen, &k, "an object")?;
            map.next_value_seed(Walk {
                st: &mut *self.st,
                depth,
            })?;
        }
        Ok(())
    }
}

/// Reads a value that should be a string: `Some` when it is one; anything else is walked.
struct MaybeString<'s> {
    st: &'s mut State,
    depth: usize,
}

impl<'de, 's> DeserializeSeed<'de> for MaybeString<'s> {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 's> Visitor<'de> for MaybeString<'s> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Option<String>, E> {
        Ok(Some(v.to_owned()))
    }
    scalars!(None);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<String>, A::Error> {
        Walk {
            st: self.st,
            depth: self.depth,
        }
        .visit_seq(seq)
        .map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<String>, A::Error> {
        Walk {
            st: self.st,
            depth: self.depth,
        }
        .visit_map(map)
        .map(|()| None)
    }
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
            st: self.st,
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
            check_new_key(st, &mut seen, &k, at)?;
            match (self.level, k.as_ref()) {
                (Level::Params, "name") => {
                    st.env.name = map.next_value_seed(MaybeString {
                        st: &mut *st,
                        depth,
                    })?
                }
                (Level::Params, "uri") => {
                    st.env.uri = map.next_value_seed(MaybeString {
                        st: &mut *st,
                        depth,
                    })?
                }
                (Level::Params, "taskId") => {
                    st.env.task_id = map.next_value_seed(MaybeString {
                        st: &mut *st,
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
                (Level::Params, "requestState") => {
                    st.env.has_request_state = true;
                    map.next_value_seed(Walk {
                        st: &mut *st,
                        depth,
                    })?;
                }
                (Level::Params, "inputResponses") => {
                    st.env.has_input_responses = true;
                    map.next_value_seed(Walk {
                        st: &mut *st,
                        depth,
                    })?;
                }
                (Level::Meta, meta::PROTOCOL_VERSION) => {
                    st.env.protocol_version = map.next_value_seed(MaybeString {
                        st: &mut *st,
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
                _ => map.next_value_seed(Walk {
                    st: &mut *st,
                    depth,
                })?,
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
        Err(self.st.fail(
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
        Err(self.st.fail(
            "batch",
            "the body is a JSON array: batches are not allowed in this protocol revision".into(),
        ))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let st = self.st;
        let mut seen = SeenKeys::default();
        while let Some(Key(k)) = map.next_key()? {
            check_new_key(st, &mut seen, &k, "the request object")?;
            match k.as_ref() {
                "jsonrpc" => {
                    st.jsonrpc = Some(
                        map.next_value_seed(MaybeString {
                            st: &mut *st,
                            depth: 1,
                        })?
                        .unwrap_or_default(),
                    )
                }
                "method" => {
                    st.env.method = map.next_value_seed(MaybeString {
                        st: &mut *st,
                        depth: 1,
                    })?
                }
                "id" => {
                    let raw: Box<RawValue> = map.next_value()?;
                    let first = raw.get().as_bytes().first().copied().unwrap_or(b' ');
                    if !(first == b'"' || first == b'-' || first.is_ascii_digit()) {
                        return Err(
                            st.fail("bad-id", "\"id\" must be a string or an integer".into())
                        );
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
                            return Err(st.fail("bad-params", "\"params\" must be an object".into()))
                        }
                    }
                }
                "params" => {
                    if !map.next_value_seed(Fields {
                        st: &mut *st,
                        depth: 1,
                        level: Level::Params,
                    })? {
                        return Err(st.fail("bad-params", "\"params\" must be an object".into()));
                    }
                }
                "result" | "error" => {
                    st.has_result_or_error = true;
                    map.next_value_seed(Walk {
                        st: &mut *st,
                        depth: 1,
                    })?;
                }
                _ => map.next_value_seed(Walk {
                    st: &mut *st,
                    depth: 1,
                })?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"jsonrpc":"2.0","id":"c-17","method":"tools/call","params":{"name":"lookup_invoice","arguments":{"tenant":"acme","number":4411},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}"#;

    #[test]
    fn reads_the_members_it_needs() {
        let e = parse(GOOD.as_bytes()).unwrap();
        assert_eq!(e.id.as_ref().unwrap().get(), "\"c-17\"");
        assert_eq!(e.method.as_deref(), Some("tools/call"));
        assert_eq!(e.name.as_deref(), Some("lookup_invoice"));
        assert_eq!(e.mcp_name(), Some("lookup_invoice"));
        assert_eq!(e.protocol_version.as_deref(), Some("2026-07-28"));
        assert!(e.has_meta && e.has_client_capabilities);
        assert!(!e.is_retry_leg() && !e.is_notification());
    }

    #[test]
    fn client_capabilities_must_be_an_object_and_are_walked_strictly() {
        let with = |caps: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"io.modelcontextprotocol/clientCapabilities":{caps}}}}}}}"#
            )
        };
        assert!(
            parse(with("{}").as_bytes())
                .unwrap()
                .has_client_capabilities
        );
        assert!(!parse(with("5").as_bytes()).unwrap().has_client_capabilities);
        assert!(
            !parse(with("[{}]").as_bytes())
                .unwrap()
                .has_client_capabilities
        );
        assert!(matches!(
            parse(with(r#"{"sampling":{},"sampling":{}}"#).as_bytes()),
            Err(EnvelopeError::Invalid {
                reason: "duplicate-key",
                ..
            })
        ));
    }

    #[test]
    fn escaped_keys_and_values_are_decoded() {
        let body = r#"{"jsonrpc":"2.0","id":1,"\u006dethod":"tools\/call","params":{"name":"m\u00e9t\u00e9o","_meta":{}}}"#;
        let e = parse(body.as_bytes()).unwrap();
        assert_eq!(e.method.as_deref(), Some("tools/call"));
        assert_eq!(e.name.as_deref(), Some("météo"));
    }

    fn invalid_reason(body: &str) -> &'static str {
        match parse(body.as_bytes()) {
            Err(EnvelopeError::Invalid { reason, .. }) => reason,
            other => panic!("expected Invalid for {body}, got {other:?}"),
        }
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert_eq!(
            invalid_reason(r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#),
            "duplicate-key"
        );
        assert_eq!(
            invalid_reason(r#"{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}"#),
            "duplicate-key"
        );
        assert_eq!(
            invalid_reason(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#
            ),
            "duplicate-key"
        );
        assert_eq!(
            invalid_reason(
                r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"arguments":{"a":{"b":1,"b":2}}}}"#
            ),
            "duplicate-key"
        );
        // The id read before the duplicate is still echoed.
        let err = parse(br#"{"jsonrpc":"2.0","id":9,"method":"a","method":"b"}"#).unwrap_err();
        assert_eq!(err.id().unwrap().get(), "9");
    }

    #[test]
    fn duplicate_keys_are_refused_past_the_inline_keys() {
        // Objects wider than the keys remembered on the stack: duplicates of an early (inline)
        // key and of a late key, and a wide object without duplicates.
        let wide = |extra: &str| {
            let keys: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect();
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"arguments":{{{}{extra}}}}}}}"#,
                keys.join(",")
            )
        };
        assert_eq!(invalid_reason(&wide(r#","k3":0"#)), "duplicate-key");
        assert_eq!(invalid_reason(&wide(r#","k30":0"#)), "duplicate-key");
        assert_eq!(invalid_reason(&wide(r#","\u006b39":0"#)), "duplicate-key");
        assert!(parse(wide(r#","k40":0"#).as_bytes()).is_ok());
    }

    #[test]
    fn shapes_that_are_not_one_request() {
        assert_eq!(
            invalid_reason(r#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#),
            "batch"
        );
        assert_eq!(
            invalid_reason(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            "response-object"
        );
        assert_eq!(invalid_reason(r#"{"jsonrpc":"2.0","id":1}"#), "no-method");
        assert_eq!(invalid_reason(r#"{"id":1,"method":"a"}"#), "not-jsonrpc");
        assert_eq!(
            invalid_reason(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"a"}"#),
            "bad-id"
        );
        assert_eq!(
            invalid_reason(r#"{"jsonrpc":"2.0","id":1,"method":"a","params":[1]}"#),
            "bad-params"
        );
        assert_eq!(invalid_reason("42"), "not-object");
    }

    #[test]
    fn deep_nesting_is_refused_without_recursing_forever() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"a","params":{{"x":{}1{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(invalid_reason(&deep), "too-deep");
        let ok = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"a","params":{{"x":{}1{}}}}}"#,
            "[".repeat(50),
            "]".repeat(50)
        );
        assert!(parse(ok.as_bytes()).is_ok());
    }

    #[test]
    fn syntax_and_encoding_errors_are_parse_errors() {
        for body in [
            &b"{"[..],
            b"not json",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"} trailing",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
            br#"{"jsonrpc":"2.0","id":1,"method":"\ud800"}"#,
            b"",
        ] {
            assert!(
                matches!(parse(body), Err(EnvelopeError::Parse(_))),
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn notifications_and_retry_legs() {
        let n =
            parse(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#).unwrap();
        assert!(n.is_notification());
        let r = parse(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","requestState":"s","inputResponses":{"k":{"action":"accept"}}}}"#).unwrap();
        assert!(r.has_request_state && r.has_input_responses && r.is_retry_leg());
    }
}
