//! The envelope's members, read one by one during the walk: what `params` and
//! `params._meta` keep, and a member kept by neither (walked, or refused as a case variant of
//! a known one).

use serde::de::MapAccess;

use super::super::super::meta;
use super::super::super::strict::{case_variant, case_variant_of, Faults, MaybeString, Walk};
use super::super::{META_MEMBERS, PARAMS_MEMBERS};
use super::{Fields, Level, State};

/// The next value as a string if it is one (any other value is walked and gives `None`).
#[inline]
pub(super) fn next_string<'de, A: MapAccess<'de>>(
    map: &mut A,
    faults: &mut Faults,
    depth: usize,
) -> Result<Option<String>, A::Error> {
    map.next_value_seed(MaybeString { faults, depth })
}

/// Walk the next value without keeping it.
#[inline]
pub(super) fn skip_value<'de, A: MapAccess<'de>>(
    map: &mut A,
    faults: &mut Faults,
    depth: usize,
) -> Result<(), A::Error> {
    map.next_value_seed(Walk { faults, depth })
}

/// Read the value of `params` member `k` into the envelope if the envelope keeps it. Returns
/// whether it did (`false`: the value is still to be read).
#[inline]
pub(super) fn params_member<'de, A: MapAccess<'de>>(
    map: &mut A,
    st: &mut State,
    k: &str,
    depth: usize,
) -> Result<bool, A::Error> {
    match k {
        "name" => st.env.name = next_string(map, &mut st.faults, depth)?,
        "uri" => st.env.uri = next_string(map, &mut st.faults, depth)?,
        "taskId" => st.env.task_id = next_string(map, &mut st.faults, depth)?,
        "_meta" => {
            st.env.has_meta = map.next_value_seed(Fields {
                st: &mut *st,
                depth,
                level: Level::Meta,
            })?
        }
        "protocolVersion" => st.env.legacy_version = next_string(map, &mut st.faults, depth)?,
        "requestState" => {
            st.env.has_request_state = true;
            let state = next_string(map, &mut st.faults, depth)?;
            st.env.request_state_digest = state.as_deref().map(crate::mcp::digest::state_digest);
        }
        "inputResponses" => {
            st.env.has_input_responses = true;
            skip_value(map, &mut st.faults, depth)?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Read the value of `params._meta` member `k` into the envelope if the envelope keeps it.
/// Returns whether it did (`false`: the value is still to be read).
#[inline]
pub(super) fn meta_member<'de, A: MapAccess<'de>>(
    map: &mut A,
    st: &mut State,
    k: &str,
    depth: usize,
) -> Result<bool, A::Error> {
    match k {
        meta::PROTOCOL_VERSION => {
            st.env.protocol_version = next_string(map, &mut st.faults, depth)?
        }
        meta::TRACEPARENT => st.env.traceparent = next_string(map, &mut st.faults, depth)?,
        meta::TRACESTATE => st.env.tracestate = next_string(map, &mut st.faults, depth)?,
        meta::CLIENT_CAPABILITIES => {
            st.env.has_client_capabilities = map.next_value_seed(Fields {
                st: &mut *st,
                depth,
                level: Level::Opaque,
            })?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A member the envelope does not keep: refused if it is a case variant of a known member of its
/// object, else walked.
#[inline]
pub(super) fn other_member<'de, A: MapAccess<'de>>(
    map: &mut A,
    st: &mut State,
    level: Level,
    k: &str,
    depth: usize,
    at: &str,
) -> Result<(), A::Error> {
    let known = match level {
        Level::Params => PARAMS_MEMBERS,
        Level::Meta => META_MEMBERS,
        Level::Opaque => &[],
    };
    if let Some(m) = case_variant_of(k, known) {
        return Err(case_variant(&mut st.faults, k, m, at));
    }
    skip_value(map, &mut st.faults, depth)
}
