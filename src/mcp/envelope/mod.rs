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
//! both is a duplicate). Two readers implement this: [`fast`], a scanner that accepts the
//! common documents (the envelope byte by byte, big containers in two passes: 64-byte blocks
//! classified at once into token masks, then the grammar token by token), and [`walk`], the
//! serde walk that reads everything the scan leaves to it and words every refusal. Only the
//! members below are kept.

use serde_json::value::RawValue;

use super::error::{codes, Rejection};
use super::meta;
pub(crate) use super::strict::MAX_DEPTH;

mod blocks;
mod bulk;
pub mod fast;
mod keep;
mod keys;
mod punt;
mod scanner;
pub mod walk;

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
///
/// The [fast scan](fast) answers the documents it accepts; everything else (every refusal
/// included, with its message) is read by the [serde walk](walk). The fast scan accepts only
/// documents the walk accepts, with the same envelope (tests/protocol/envelope_fast.rs).
pub fn parse(body: &[u8]) -> Result<Envelope, EnvelopeError> {
    if let Some(env) = fast::parse(body) {
        return Ok(env);
    }
    walk::parse(body)
}

/// [`parse`], also handing out `params` as an object (empty when absent), built during the one
/// walk: for a server that acts on the body (the reference backend).
pub(crate) fn parse_keeping_params(
    body: &[u8],
) -> Result<(Envelope, serde_json::Map<String, serde_json::Value>), EnvelopeError> {
    walk::parse_with(body, true)
}

/// Notification methods are the only ones sent without an id.
pub(crate) fn is_notification_method(method: &str) -> bool {
    method.starts_with("notifications/")
}
