//! Protocol facts of MCP revision 2026-07-28 over Streamable HTTP, shared by the gateway, the
//! reference backend and the load tester.
//!
//! Everything that names a header, an error code, a `_meta` key or the shape of a JSON-RPC
//! error body lives here, once. This module does no I/O: it turns bytes and header maps into
//! plain data and back.
//!
//! - [`header`]: header names, the `=?base64?…?=` value encoding, and the one reading of a
//!   header used as a key (rate limits, hash balancing).
//! - [`jcs`], [`jcs_exact`]: RFC 8785 canonical JSON (the backend's parameter digest), and the
//!   same with numbers kept as written (the edge cache's keys).
//! - [`query`]: query keys read as the frameworks behind read them (the `access_token` check).
//! - [`envelope`]: the one strict parse of a request body (method, id, name/uri, `_meta`,
//!   MRTR fields), which rejects anything two JSON readers could read differently.
//! - [`strict`]: the strict JSON walker under the envelope (duplicate and case-folded keys,
//!   depth), also usable on its own.
//! - [`check`]: headers against the envelope, in the spec's order of precedence.
//! - [`error`]: error codes and JSON-RPC error bodies.
//! - [`sse`]: reading a `text/event-stream` answer (an incremental parser).
//! - [`caching`]: `ttlMs`/`cacheScope`, the cacheable methods, invalidating notifications,
//!   `x-mcp-header` value comparison.
//! - [`legacy`]: the 2025 era the gateway bridges (versions, the session header, which era a
//!   head is, the pure translations between the two wire shapes).
//! - [`seal`]: sealed tokens (AEAD, key ring with rotation) for everything a client carries
//!   back unread: session ids, answer ids, wrapped states.
//! - [`state_seal`]: the `requestState` envelope a sealing pool's clients get (what it binds,
//!   the checks on the retry), and where a state sits in response and request bytes.
//! - [`definition`]: what a tool's or prompt's definition is, and its digest (pinning).
//! - [`digest`], [`result_scan`]: `requestState` digests, and what a response says about its
//!   MRTR flow (result type, state digest), read as it streams past.

pub(crate) mod caching;
pub(crate) mod check;
pub(crate) mod definition;
pub mod digest;
pub(crate) mod discover;
pub mod envelope;
pub mod error;
pub mod header;
pub mod hex;
pub(crate) mod jcs;
pub(crate) mod jcs_exact;
mod json_scan;
pub(crate) mod json_spans;
pub mod legacy;
pub(crate) mod lists;
pub(crate) mod media;
pub(crate) mod mrtr;
pub(crate) mod query;
pub(crate) mod response;
pub mod result_scan;
pub(crate) mod rewrite;
pub mod scan;
pub mod seal;
pub mod sse;
pub mod state_seal;
pub(crate) mod strict;
pub mod tasks;
mod verdict;

pub use check::{check_request, Claims, VersionPolicy};
pub(crate) use envelope::Envelope;
pub use error::{codes, error_body, Rejection};
pub(crate) use response::{result_body, sse_event};

/// The protocol revision this project speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// The one HTTP path the examples and the default config use for the MCP endpoint.
pub const DEFAULT_ENDPOINT: &str = "/mcp";

/// `_meta` keys reserved by the specification.
pub mod meta {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub(crate) const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub(crate) const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    pub(crate) const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    pub(crate) const PROGRESS_TOKEN: &str = "progressToken";
    /// W3C trace context carried in `_meta` (OpenTelemetry propagation).
    pub(crate) const TRACEPARENT: &str = "traceparent";
    pub(crate) const TRACESTATE: &str = "tracestate";
    /// mcp-edge's own result `_meta` key: the id of the backend instance that produced a result
    /// (a completed call, or the `input_required` that asked). Not a spec key.
    pub const EDGE_INSTANCE: &str = "io.mcp-edge/instance";
}

/// Method names used across the project.
pub mod methods {
    pub const DISCOVER: &str = "server/discover";
    pub const TOOLS_LIST: &str = "tools/list";
    pub const TOOLS_CALL: &str = "tools/call";
    pub(crate) const PROMPTS_LIST: &str = "prompts/list";
    pub(crate) const PROMPTS_GET: &str = "prompts/get";
    pub(crate) const RESOURCES_LIST: &str = "resources/list";
    pub(crate) const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
    pub(crate) const RESOURCES_READ: &str = "resources/read";
    pub(crate) const COMPLETION_COMPLETE: &str = "completion/complete";
    pub(crate) const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
    pub(crate) const ELICITATION_CREATE: &str = "elicitation/create";
    pub(crate) const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
    pub(crate) const ROOTS_LIST: &str = "roots/list";
    pub(crate) const INITIALIZE: &str = "initialize";

    /// Whether a request of `method` is answered with a stream that stays open while the
    /// server idles (so its duration says nothing of the server's work).
    pub(crate) fn holds_open(method: &str) -> bool {
        method == SUBSCRIPTIONS_LISTEN
    }

    /// Client methods a gateway may see: revision 2026-07-28, the Tasks extension, and the
    /// 2025-era ones old clients still send. Metrics give each its own label value.
    pub(crate) const KNOWN: &[&str] = &[
        DISCOVER,
        TOOLS_LIST,
        TOOLS_CALL,
        PROMPTS_LIST,
        PROMPTS_GET,
        RESOURCES_LIST,
        RESOURCES_TEMPLATES_LIST,
        RESOURCES_READ,
        COMPLETION_COMPLETE,
        SUBSCRIPTIONS_LISTEN,
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "tasks/list",
        "notifications/cancelled",
        INITIALIZE,
        "ping",
    ];

    /// Notification methods a server sends (on an SSE response or a listen stream).
    pub(crate) const NOTIFY_PROGRESS: &str = "notifications/progress";
    pub(crate) const NOTIFY_MESSAGE: &str = "notifications/message";
    pub(crate) const NOTIFY_TOOLS_CHANGED: &str = "notifications/tools/list_changed";
    pub(crate) const NOTIFY_PROMPTS_CHANGED: &str = "notifications/prompts/list_changed";
    pub(crate) const NOTIFY_RESOURCES_CHANGED: &str = "notifications/resources/list_changed";
    pub(crate) const NOTIFY_SUBSCRIPTIONS_ACKNOWLEDGED: &str =
        "notifications/subscriptions/acknowledged";

    /// Which body field `Mcp-Name` mirrors for `method`, if the method requires the header.
    pub(crate) fn name_field(method: &str) -> Option<NameField> {
        use super::tasks;
        match method {
            TOOLS_CALL | PROMPTS_GET => Some(NameField::Name),
            RESOURCES_READ => Some(NameField::Uri),
            tasks::GET | tasks::UPDATE | tasks::CANCEL => Some(NameField::TaskId),
            _ => None,
        }
    }

    /// The body field that `Mcp-Name` must equal.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum NameField {
        /// `params.name` (tools/call, prompts/get)
        Name,
        /// `params.uri` (resources/read)
        Uri,
        /// `params.taskId` (tasks/get, tasks/update, tasks/cancel of the Tasks extension)
        TaskId,
    }

    impl NameField {
        pub(crate) fn path(self) -> &'static str {
            match self {
                NameField::Name => "params.name",
                NameField::Uri => "params.uri",
                NameField::TaskId => "params.taskId",
            }
        }
    }
}

/// `resultType` values.
pub mod result_type {
    pub const COMPLETE: &str = "complete";
    pub const INPUT_REQUIRED: &str = "input_required";
    /// A `CreateTaskResult` (Tasks extension).
    pub(crate) const TASK: &str = "task";
}
