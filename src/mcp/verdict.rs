//! What a response's verdict is made of: its kind ([`ResultKind`]), a task's status
//! ([`TaskStatus`]) and the [`Verdict`] itself. The tokenizer ([`super::json_scan`]) fills one in
//! and the streaming reader ([`super::result_scan`]) hands it out; both name these types, so
//! they live below both.

/// What the response was, as far as MRTR flows are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultKind {
    /// No JSON-RPC response was seen (not JSON, cut off, or only notifications).
    #[default]
    Unknown,
    /// A result whose `resultType` is `complete` or absent.
    Complete,
    /// A result whose `resultType` is `input_required`.
    InputRequired,
    /// A JSON-RPC error response.
    Error,
    /// A result whose `resultType` is `task` (Tasks extension: a `CreateTaskResult`).
    Task,
}

/// A task's `status` (Tasks extension), as read from `result.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    /// The status named by a wire value, if it is one of the spec's.
    pub(crate) fn from_wire(v: &[u8]) -> Option<TaskStatus> {
        use super::tasks::status;
        Some(match v {
            v if v == status::WORKING.as_bytes() => TaskStatus::Working,
            v if v == status::INPUT_REQUIRED.as_bytes() => TaskStatus::InputRequired,
            v if v == status::COMPLETED.as_bytes() => TaskStatus::Completed,
            v if v == status::FAILED.as_bytes() => TaskStatus::Failed,
            v if v == status::CANCELLED.as_bytes() => TaskStatus::Cancelled,
            _ => return None,
        })
    }

    /// The wire value.
    pub(crate) fn as_str(self) -> &'static str {
        use super::tasks::status;
        match self {
            TaskStatus::Working => status::WORKING,
            TaskStatus::InputRequired => status::INPUT_REQUIRED,
            TaskStatus::Completed => status::COMPLETED,
            TaskStatus::Failed => status::FAILED,
            TaskStatus::Cancelled => status::CANCELLED,
        }
    }

    /// A status no task leaves.
    pub(crate) fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// The verdict on one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    pub kind: ResultKind,
    /// The digest of `result.requestState` when it is a string.
    pub state_digest: Option<u64>,
    /// The [digest](super::digest) of `result.taskId` when it is a string (a `CreateTaskResult`
    /// or a `DetailedTask`).
    pub task_digest: Option<u64>,
    /// `result.status` when it is a task status.
    pub task_status: Option<TaskStatus>,
    /// A complete result with `isError: true` (the tool failed).
    pub tool_error: bool,
    /// An error response's `error.code`, when it is an integer.
    pub error_code: Option<i64>,
}
