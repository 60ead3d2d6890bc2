//! A call's leg run on the client's own session: the translated 2026 request goes through the
//! proxy's own phases (`request_filter`, and `fail_to_proxy` and `logging` as pingora runs them)
//! on the pingora `Session` of the 2025-era client's request, its downstream lent for the leg to
//! a [`super::stand_in::StandIn`] that holds the leg's head and body and takes its answer. No
//! second session, no task and no channel: the leg runs on the client's task, and every stage
//! of the one list runs, in order, for it as for any request (with a context of its own, so it is
//! counted, limited and logged as the 2026 request it is).
//!
//! It takes a leg whose whole journey stays inside `request_filter`: every pool is a plain
//! HTTP/1.1 pool on the direct leg, and the body is small enough to be read whole whatever the
//! sampling ([`takes`]). Any other leg (a TLS or h2 pool, `upstream_leg: pingora`, a body past
//! [`PREREAD_MAX`]) needs pingora's pipe after `request_filter`, which only a session of its own
//! has: it goes as a subrequest ([`super::inside`]).

use bytes::Bytes;
use pingora::http::RequestHeader;
use pingora::prelude::*;
use pingora::proxy::Session;

use super::hop::Answer;
use super::legs::hop_failed;
use super::stand_in::{self, End, Written};
use crate::config::UpstreamLeg;
use crate::gateway::journey::phases::Phases;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::inspect::PREREAD_MAX;
use crate::mcp::{media, sse, Rejection};
use std::borrow::Cow;

/// Whether a leg of `body_len` bytes may run on the client's session: its journey cannot leave
/// `request_filter` (every pool plain HTTP/1.1 on the direct leg, a body read whole).
pub(super) fn takes(gw: &Gateway, body_len: usize) -> bool {
    gw.config.connections.upstream_leg == UpstreamLeg::Direct
        && body_len <= PREREAD_MAX
        && gw.peers.iter().all(|p| p.is_plain_h1())
}

/// Run the leg (`head`, `body`) on `session`, the client's. With `streaming` (whether the
/// client's event stream is open; it is on return if the leg's notifications opened it), the
/// leg's notifications are relayed as they arrive; without, the answer is kept whole. `Err`:
/// the client went away; `Ok(Err)`: the leg could not be carried.
pub(super) async fn run(
    phases: &dyn Phases,
    session: &mut Session,
    (head, body): (RequestHeader, Bytes),
    streaming: Option<&mut bool>,
    deadline: tokio::time::Instant,
) -> Result<Result<Answer, Rejection>> {
    let relay = streaming.as_deref().copied();
    let back = stand_in::lend(session, (head, body), relay, deadline);
    drive(phases, session).await;
    let (written, open) = stand_in::take_back(session, back);
    if let Some(s) = streaming {
        *s = open;
    }
    match written.end {
        End::ClientLeft => {
            let e = Error::explain(ErrorType::ConnectionClosed, "the client went away");
            Err(e.into_down())
        }
        _ => Ok(answer(written)),
    }
}

/// The leg's journey, as pingora runs a request's: its first phase, `request_filter` (the
/// stages, the direct leg), then `fail_to_proxy` on an error, and `logging`.
async fn drive(phases: &dyn Phases, session: &mut Session) {
    let mut ctx = phases.new_ctx();
    let mut failed = phases.early_request_filter(session, &mut ctx).await.err();
    if failed.is_none() {
        failed = match phases.request_filter(session, &mut ctx).await {
            Ok(true) => None,
            // Not with `takes`: the leg would have needed pingora's pipe.
            Ok(false) => Some(Error::explain(
                ErrorType::InternalError,
                "a bridged leg left request_filter unanswered",
            )),
            Err(e) => Some(e),
        };
    }
    if let Some(e) = &failed {
        phases.fail_to_proxy(session, e, &mut ctx).await;
        if !phases.suppress_error_log(session, &ctx, e) {
            tracing::error!(
                "a bridged leg failed: {e}, {}",
                phases.request_summary(session, &ctx)
            );
        }
    }
    phases.logging(session, failed.as_deref(), &mut ctx).await;
}

/// The leg's answer as the bridge reads it, or why there is none.
fn answer(w: Written) -> Result<Answer, Rejection> {
    let why = match w.end {
        End::Late => Some("no answer from this gateway's pipeline in time".to_owned()),
        End::TooLarge => Some(format!(
            "the answer is larger than {} bytes",
            stand_in::MAX_ANSWER
        )),
        End::Abandoned => Some("the pipeline failed mid-answer".to_owned()),
        End::Normal | End::ClientLeft => None,
    };
    if let Some(why) = why {
        return Err(hop_failed(why));
    }
    let Some(head) = w.head else {
        return Err(hop_failed("the pipeline ended without an answer".into()));
    };
    let pass = super::hop::pass_of(&head);
    let content_type = match (w.stream, w.responded) {
        (true, true) => Some(Cow::Borrowed(media::JSON)),
        (true, false) => Some(Cow::Borrowed(sse::CONTENT_TYPE)),
        (false, _) => w.content_type,
    };
    Ok(Answer {
        status: head.status.as_u16(),
        pass,
        content_type,
        body: w.body,
    })
}
