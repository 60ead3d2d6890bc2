//! The serde walk of a request body: the reference reading of [`super::parse`], with the exact
//! refusal messages. [`super::fast`] answers most accepted documents without it; every document
//! the fast scan does not accept is read here, so every refusal (and its message) comes from this
//! walk. The whole document is visited once by the strict walker of [`super::super::strict`];
//! only the envelope's members are kept.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

use super::super::strict::{
    case_variant, case_variant_of, check_new_key, scalars, Key, SeenKeys, Walk,
};
use super::{is_notification_method, keep, Envelope, EnvelopeError, TOP_MEMBERS};

mod members;
pub(super) mod state;
use members::{meta_member, next_string, other_member, params_member, skip_value};
use state::State;

/// [`super::parse`] without the fast scan: the reference reading.
pub fn parse(body: &[u8]) -> Result<Envelope, EnvelopeError> {
    parse_with(body, false).map(|(env, _)| env)
}

pub(super) fn parse_with(
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
    let env = required_members(st.env, st.jsonrpc, st.has_result_or_error)?;
    Ok((env, st.params))
}

/// The members every request must carry, once the walk accepted the document: `"jsonrpc":
/// "2.0"`, a string `method` (a response object is refused as such), and an `id` unless the
/// method is a notification.
fn required_members(
    env: Envelope,
    jsonrpc: Option<String>,
    has_result_or_error: bool,
) -> Result<Envelope, EnvelopeError> {
    if jsonrpc.as_deref() != Some("2.0") {
        let message = match jsonrpc {
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
        let (reason, message) = if has_result_or_error {
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
    Ok(env)
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
            let kept = match self.level {
                Level::Params => params_member(&mut map, st, &k, depth)?,
                Level::Meta => meta_member(&mut map, st, &k, depth)?,
                Level::Opaque => false,
            };
            if !kept {
                other_member(&mut map, st, self.level, &k, depth, at)?;
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
                    st.jsonrpc = Some(next_string(&mut map, &mut st.faults, 1)?.unwrap_or_default())
                }
                "method" => st.env.method = next_string(&mut map, &mut st.faults, 1)?,
                "id" => top_id(&mut map, st)?,
                "params" if st.keep_params => kept_params(&mut map, st)?,
                "params" => {
                    if !map.next_value_seed(Fields {
                        st: &mut *st,
                        depth: 1,
                        level: Level::Params,
                    })? {
                        return Err(not_object_params(st));
                    }
                }
                "result" | "error" => {
                    st.has_result_or_error = true;
                    skip_value(&mut map, &mut st.faults, 1)?;
                }
                other => {
                    if let Some(m) = case_variant_of(other, TOP_MEMBERS) {
                        let at = "the request object";
                        return Err(case_variant(&mut st.faults, other, m, at));
                    }
                    skip_value(&mut map, &mut st.faults, 1)?
                }
            }
        }
        Ok(())
    }
}

/// The request's `id`, kept raw; refused unless it is a string or a number.
#[inline]
fn top_id<'de, A: MapAccess<'de>>(map: &mut A, st: &mut State) -> Result<(), A::Error> {
    let raw: Box<RawValue> = map.next_value()?;
    let first = raw.get().as_bytes().first().copied().unwrap_or(b' ');
    if !(first == b'"' || first == b'-' || first.is_ascii_digit()) {
        return Err(st
            .faults
            .fail("bad-id", "\"id\" must be a string or an integer".into()));
    }
    st.env.id = Some(raw);
    Ok(())
}

/// `params` built into [`State::params`] (and the envelope filled from it); refused unless it is
/// an object.
#[inline]
fn kept_params<'de, A: MapAccess<'de>>(map: &mut A, st: &mut State) -> Result<(), A::Error> {
    match map.next_value_seed(keep::Build::params(&mut *st))? {
        serde_json::Value::Object(m) => {
            keep::fill(&mut st.env, &m);
            st.params = m;
            Ok(())
        }
        _ => Err(not_object_params(st)),
    }
}

/// The refusal of a `params` that is not an object.
fn not_object_params<E: de::Error>(st: &mut State) -> E {
    st.faults
        .fail("bad-params", "\"params\" must be an object".into())
}
