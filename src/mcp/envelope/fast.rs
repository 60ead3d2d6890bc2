//! The fast reading of a request body: the envelope's members picked out by the byte
//! [scanner](super::scanner) in one pass, with no visitor call per token and no allocation for
//! objects of up to eight members.
//!
//! It answers only documents the [serde walk](super::walk) accepts, with the same [`Envelope`]:
//! whenever anything would make the walk refuse (or is unusual enough that the scan leaves it to
//! the walk: an escaped key, an unpaired surrogate escape, an `id` that is not a plain string or
//! number), [`parse`] returns `None` and the caller reads the body with the walk. The refusals and
//! their messages therefore all come from the walk.

use serde_json::value::RawValue;

use super::super::digest::state_digest;
use super::super::meta;
use super::super::strict::case_variant_of;
use super::scanner::{Punt, Scan, Scanner};
use super::{is_notification_method, Envelope, META_MEMBERS, PARAMS_MEMBERS, TOP_MEMBERS};

/// The envelope of `body` when the scan accepts it; `None`: read it with the walk.
pub fn parse(body: &[u8]) -> Option<Envelope> {
    scan(body).ok()
}

fn scan(body: &[u8]) -> Scan<Envelope> {
    let mut sc = Scanner::new(body)?;
    let mut env = Envelope::default();
    let mut jsonrpc = None;
    if sc.peek()? != b'{' {
        return Err(Punt);
    }
    sc.object(1, |sc, key, level| {
        match key {
            "jsonrpc" => jsonrpc = maybe_string(sc, level)?,
            "method" => env.method = maybe_string(sc, level)?,
            "id" => env.id = Some(id(sc)?),
            "params" => {
                if sc.peek()? != b'{' {
                    return Err(Punt);
                }
                sc.object(level + 1, |sc, key, level| {
                    params_member(sc, key, level, &mut env)
                })?;
            }
            other => {
                if case_variant_of(other, TOP_MEMBERS).is_some() {
                    return Err(Punt);
                }
                // `result` and `error` included: a request without a method is refused below.
                sc.value(level)?;
            }
        }
        Ok(())
    })?;
    sc.end()?;
    let method = env.method.as_deref().ok_or(Punt)?;
    if jsonrpc.as_deref() != Some("2.0") || (env.id.is_none() && !is_notification_method(method)) {
        return Err(Punt);
    }
    Ok(env)
}

fn params_member(sc: &mut Scanner, key: &str, level: usize, env: &mut Envelope) -> Scan<()> {
    match key {
        "name" => env.name = maybe_string(sc, level)?,
        "uri" => env.uri = maybe_string(sc, level)?,
        "taskId" => env.task_id = maybe_string(sc, level)?,
        "protocolVersion" => env.legacy_version = maybe_string(sc, level)?,
        "requestState" => {
            env.has_request_state = true;
            let state = maybe_string(sc, level)?;
            env.request_state_digest = state.as_deref().map(state_digest);
        }
        "inputResponses" => {
            env.has_input_responses = true;
            sc.value(level)?;
        }
        "_meta" => {
            env.has_meta = sc.peek()? == b'{';
            if env.has_meta {
                sc.object(level + 1, |sc, key, level| meta_member(sc, key, level, env))?;
            } else {
                sc.value(level)?;
            }
        }
        other => {
            if case_variant_of(other, PARAMS_MEMBERS).is_some() {
                return Err(Punt);
            }
            sc.value(level)?;
        }
    }
    Ok(())
}

fn meta_member(sc: &mut Scanner, key: &str, level: usize, env: &mut Envelope) -> Scan<()> {
    match key {
        meta::PROTOCOL_VERSION => env.protocol_version = maybe_string(sc, level)?,
        meta::TRACEPARENT => env.traceparent = maybe_string(sc, level)?,
        meta::TRACESTATE => env.tracestate = maybe_string(sc, level)?,
        meta::CLIENT_CAPABILITIES => {
            env.has_client_capabilities = sc.peek()? == b'{';
            sc.value(level)?;
        }
        other => {
            if case_variant_of(other, META_MEMBERS).is_some() {
                return Err(Punt);
            }
            sc.value(level)?;
        }
    }
    Ok(())
}

/// A value that should be a string: `Some` (decoded) when it is one; anything else is scanned.
fn maybe_string(sc: &mut Scanner, level: usize) -> Scan<Option<String>> {
    if sc.peek()? != b'"' {
        sc.value(level)?;
        return Ok(None);
    }
    let start = sc.i;
    let s = sc.string()?;
    if !s.escaped {
        return Ok(Some(s.raw.to_owned()));
    }
    // Escapes are decoded by serde_json itself, as the walk decodes them.
    serde_json::from_str(sc.since(start))
        .map(Some)
        .map_err(|_| Punt)
}

/// `id`: a string or a number, kept as its raw JSON.
fn id(sc: &mut Scanner) -> Scan<Box<RawValue>> {
    let first = sc.peek()?;
    let start = sc.i;
    match first {
        b'"' => drop(sc.string()?),
        b'-' | b'0'..=b'9' => sc.number()?,
        _ => return Err(Punt),
    }
    RawValue::from_string(sc.since(start).to_owned()).map_err(|_| Punt)
}
