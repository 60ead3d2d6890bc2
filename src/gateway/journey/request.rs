//! One request's state, carried through the phases: what it claims, where its body is, which
//! instance it went to, and the gateway's own answer if it made one.
//!
//! Where the body is, is one value, [`Progress`], instead of flags kept consistent by hand:
//!
//! ```text
//! Claimed ──► Holding ──► Checked ──► (forwarded)
//!    │           └──────► Abandoned   (refused mid-body: too large, failed the check)
//!    ├──────► Streaming               (sampled out: forwarded unchecked)
//!    ├──────► Unchecked               (sampled out, small: read whole, forwarded unchecked)
//!    ├──────► Checked                 (doomed-looking notification that passed)
//!    └──────► Drained | Abandoned     (answered by the gateway before any upstream)
//! ```

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::mcp::result_scan::ResultScanner;
use crate::mcp::Envelope;

use crate::gateway::balance::stages::Tried;
use crate::gateway::journey::state::Gateway;
use crate::gateway::stages::answer::Refusal;
use crate::gateway::stages::inspect::BodyHold;
use crate::gateway::stages::route::RouteRef;

/// The address a request comes from: the peer's, or, on one of the bridge's hops into the
/// pipeline, the 2025-era client's it speaks for (`stages::bridge::hops`).
pub(crate) fn client_ip(gw: &Gateway, session: &pingora::proxy::Session) -> Option<IpAddr> {
    let peer = *session.client_addr()?.as_inet()?;
    Some(gw.bridge.hops.client_of(peer).unwrap_or(peer.ip()))
}

/// Where a request's body is.
#[derive(Debug, Default)]
pub enum Progress {
    /// Admitted and routed on its claims; the body has not been looked at.
    #[default]
    Claimed,
    /// The checked path: chunks are held until the body is complete.
    Holding(BodyHold),
    /// Sampled out: the body streams to the instance unchecked.
    Streaming,
    /// Sampled out, and small: the whole body was read, unchecked, to go to the instance in one
    /// piece on the direct leg (`gateway::journey::direct`), as a checked one does.
    Unchecked,
    /// The whole body was read and passed the check.
    Checked(Envelope),
    /// The whole body was read for the gateway's own answer; no instance sees it.
    Drained,
    /// The gateway answered before the body was read to its end (the connection then closes).
    Abandoned,
}

impl Progress {
    /// The body was read to its end (the client connection may be reused).
    pub(crate) fn body_read(&self) -> bool {
        matches!(
            self,
            Progress::Checked(_) | Progress::Unchecked | Progress::Drained
        )
    }

    pub(crate) fn envelope(&self) -> Option<&Envelope> {
        match self {
            Progress::Checked(env) => Some(env),
            _ => None,
        }
    }

    /// The request id of a checked body, taken for the answer (`None`: not checked, or a
    /// notification).
    pub(crate) fn take_id(&mut self) -> Option<Box<serde_json::value::RawValue>> {
        match self {
            Progress::Checked(env) => env.id.take(),
            _ => None,
        }
    }
}

/// Requests of this process in progress (from their head to the end of their response), so that
/// a draining process can stop as soon as the last one finished.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// How many requests this process is serving right now.
pub(crate) fn in_flight() -> usize {
    IN_FLIGHT.load(Ordering::Relaxed)
}

/// Per-request state, its fields in the order the journey fills them: each group is written by
/// the stage named above it and read by those after it.
pub struct RequestCtx {
    /// The gateway (config, routes, pools, limits) this request started on; a reload swaps in
    /// a new one for new requests while this one finishes on its own.
    pub gw: Arc<Gateway>,
    pub started: Instant,
    /// The request's trace ids, when tracing is on.
    pub trace: Option<crate::gateway::telemetry::trace::TraceLeg>,

    // Admission: what the head claims.
    /// Claimed `Mcp-Method` (trimmed).
    pub method: Option<String>,
    /// Claimed, decoded `Mcp-Name`, for the methods that carry one.
    pub name: Option<String>,
    /// The client waits for `100 Continue` that has not been sent yet.
    pub expects_continue: bool,
    /// The declared `Content-Length`, when there is one.
    pub content_length: Option<usize>,
    /// The stages of the pipeline this request went through ([`crate::gateway::stages::pipeline`]).
    pub ran: crate::gateway::stages::pipeline::Ran,
    /// The proxy's phases this request went through, in order (tests only: `proxy::seen`).
    #[cfg(test)]
    pub(crate) phases: Vec<&'static str>,

    // Route: where it goes (a federated endpoint may route again after the body check).
    pub route: Option<RouteRef>,
    pub pool: usize,
    /// On a federated endpoint: which one, and what federation does with the request.
    pub federated: Option<Box<crate::gateway::federation::stages::Federated>>,

    // Authenticate and limit.
    /// The caller verified by `auth` (`None`: auth off, or no token where none is required).
    pub identity: Option<Arc<crate::auth::Identity>>,
    /// When this request's list result is filtered for the caller (auth rules): its state.
    pub list_filter: Option<crate::auth::filter::ListFilter>,
    /// When this request's list result is read for pinned definitions (`journey::pins`).
    pub pin_list: Option<crate::gateway::stages::pins::PinList>,
    /// The slots of the concurrency limits this request holds (released when it is dropped).
    pub slots: Option<crate::gateway::concurrency::stages::Held>,

    // Inspect and validate: where the body is.
    /// The header↔body check runs for this request (not sampled out).
    pub check: bool,
    pub progress: Progress,
    /// Bytes of request body seen.
    pub body_len: usize,
    /// The whole body, read before an upstream was chosen, for the direct leg to send as it is.
    pub in_hand: bytes::Bytes,
    /// Body bytes this request holds against `limits.max_held_bytes`.
    pub held: crate::gateway::stages::inspect::Held,

    // Cache and credentials, after the check.
    /// The edge cache's state of this request.
    pub cache: crate::gateway::cache::stages::Flow,
    /// On a pool that seals `requestState`: who calls with which arguments, and the response's
    /// rewriting ([`crate::gateway::stages::seal`]).
    pub seal: Option<Box<crate::gateway::stages::seal::Leg>>,
    /// The header the pool's credentials put on the upstream request (`pools.<name>.credentials`),
    /// obtained once per request before an instance is chosen.
    pub upstream_credential: Option<crate::credentials::Credential>,

    // Balance and forward: the instance it is on.
    pub instance: Option<usize>,
    /// Instances this request was sent to (connect failures are retried elsewhere).
    pub tried: Tried,
    /// When the current instance was chosen, while a request is in flight to it.
    pub upstream_since: Option<Instant>,
    /// A retry leg steered by `mrtr.retry_landing: elsewhere`: where it landed.
    pub landing: Option<crate::gateway::balance::stages::Landing>,
    /// The request counts in its instance's load ([`crate::gateway::balance::stages::InstanceLoad`]).
    pub loading: bool,
    /// The request went on outside the pipeline ([`crate::gateway::journey::detached`]): this context is the
    /// empty one left in its place, and the pipeline's `logging` records nothing for it.
    pub detached: bool,

    // Response: what comes back.
    /// Reads what a JSON or SSE response says about its MRTR flow as it streams past.
    pub scanner: Option<ResultScanner>,

    // Answer: the gateway's own, when it made one.
    /// A 2025-era client's message passed through to a pool that serves both eras, and the
    /// session it is pinned to ([`crate::gateway::journey::bridge::pass`]).
    pub(crate) pass: Option<Box<crate::gateway::stages::bridge::pass::Pass>>,
    /// A refusal, or the error an upstream failure got.
    pub answer: Option<Refusal>,
    /// Extra response headers for the gateway's own answer (e.g. `Retry-After`).
    pub extra_headers: Vec<(&'static str, String)>,
}

impl RequestCtx {
    pub fn new(gw: Arc<Gateway>) -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        RequestCtx {
            gw,
            started: Instant::now(),
            method: None,
            name: None,
            route: None,
            pool: 0,
            progress: Progress::Claimed,
            expects_continue: false,
            content_length: None,
            ran: Default::default(),
            #[cfg(test)]
            phases: Vec::new(),
            check: false,
            body_len: 0,
            in_hand: bytes::Bytes::new(),
            held: Default::default(),
            instance: None,
            tried: Tried::default(),
            landing: None,
            upstream_since: None,
            loading: false,
            answer: None,
            extra_headers: Vec::new(),
            scanner: None,
            identity: None,
            upstream_credential: None,
            list_filter: None,
            pin_list: None,
            cache: Default::default(),
            seal: None,
            federated: None,
            slots: None,
            trace: None,
            detached: false,
            pass: None,
        }
    }

    /// The name of the instance this request went to, or of its pool.
    pub(crate) fn destination(&self) -> String {
        let pool = &self.gw.pools[self.pool];
        match self.instance {
            Some(i) => pool.instances[i].name.clone(),
            None => format!("pool {}", pool.name),
        }
    }

    /// Count the request as sent to its instance (a request cut off by the check is not).
    pub(crate) fn count_delivery(&self) {
        if let Some(idx) = self.instance {
            self.gw.upstream_metrics(self.pool, idx).requests.inc();
        }
    }

    /// The request no longer occupies its instance (finished, or moving to another one).
    pub(crate) fn release_instance(&mut self) {
        self.release_load();
        if let (Some(idx), Some(_)) = (self.instance, self.upstream_since.take()) {
            self.gw.upstream_metrics(self.pool, idx).in_flight.dec();
        }
    }

    /// The request no longer costs its instance in the balancer's eyes (finished, moving, or
    /// a stream that idles the instance: [`crate::mcp::methods::holds_open`]).
    pub(crate) fn release_load(&mut self) {
        if let (Some(idx), true) = (self.instance, std::mem::take(&mut self.loading)) {
            self.gw.pools[self.pool].loads[idx].end();
        }
    }
}

impl Drop for RequestCtx {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
    }
}
