//! Protocol facts of the Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) shared by
//! the gateway and the reference backend: the extension id, the method, field and status names,
//! and the owner hint that mcp-edge backends put in their task ids.
//!
//! **Owner hints.** A task of a backend without a shared store lives in the memory of the
//! instance that created it, so `tasks/get|update|cancel` must reach that instance. Such a
//! backend mints ids `<hint>.<random>`: `hint` is 16 lowercase hex digits, the first 8 bytes of
//! SHA-256(`"mcp-edge-owner:" + advertise`), where `advertise` is the instance's address as
//! the gateway's pool lists it (`host:port`); `random` is 128 random bits in unpadded base64url.
//! The gateway hashes each instance address of a pool once and sends a task request whose
//! `Mcp-Name` carries a known hint to that instance. Any gateway replica computes the same
//! hints from its config, so routing survives gateway restarts and needs no shared table.
//! Ids without a hint (other servers) are balanced as usual.

use sha2::{Digest, Sha256};

/// The extension id, under `capabilities.extensions` (server) and
/// `clientCapabilities.extensions` (client).
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// `params.taskId` of tasks/get, tasks/update and tasks/cancel (mirrored in `Mcp-Name`).
pub(crate) const TASK_ID: &str = "taskId";

/// Methods of the extension.
pub(crate) const GET: &str = "tasks/get";
pub(crate) const UPDATE: &str = "tasks/update";
pub(crate) const CANCEL: &str = "tasks/cancel";

/// Is `method` one of the methods that address an existing task?
pub(crate) fn is_task_method(method: &str) -> bool {
    matches!(method, GET | UPDATE | CANCEL)
}

/// Task statuses.
pub(crate) mod status {
    pub(crate) const WORKING: &str = "working";
    pub(crate) const INPUT_REQUIRED: &str = "input_required";
    pub(crate) const COMPLETED: &str = "completed";
    pub(crate) const FAILED: &str = "failed";
    pub(crate) const CANCELLED: &str = "cancelled";
}

/// How many hex digits an owner hint has.
pub(crate) const HINT_LEN: usize = 16;
const HINT_DOMAIN: &str = "mcp-edge-owner:";

/// The owner hint of the instance reachable at `advertise` (`host:port`, as a pool lists it).
pub fn owner_hint(advertise: &str) -> String {
    let digest = Sha256::new()
        .chain_update(HINT_DOMAIN)
        .chain_update(advertise)
        .finalize();
    super::hex::encode(&digest[..HINT_LEN / 2])
}

/// The owner hint a task id starts with, if it has one (`<16 lowercase hex>.` and a non-empty
/// rest).
pub fn parse_owner_hint(task_id: &str) -> Option<&str> {
    let (hint, rest) = task_id.split_once('.')?;
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    (hint.len() == HINT_LEN && hint.bytes().all(hex) && !rest.is_empty()).then_some(hint)
}

/// A fresh task id carrying `hint`.
pub(crate) fn mint_task_id(hint: &str) -> String {
    use base64::Engine;
    let random: [u8; 16] = rand::random();
    format!(
        "{hint}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_stable_distinct_and_parse_back() {
        let a = owner_hint("127.0.0.1:7001");
        assert_eq!(a, owner_hint("127.0.0.1:7001"));
        assert_ne!(a, owner_hint("127.0.0.1:7002"));
        assert_eq!(a.len(), HINT_LEN);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        let id = mint_task_id(&a);
        assert_eq!(parse_owner_hint(&id), Some(a.as_str()));
        assert_ne!(id, mint_task_id(&a), "ids are random");
        // 128 bits in unpadded base64url: 22 characters.
        assert_eq!(id.len(), HINT_LEN + 1 + 22);
    }

    #[test]
    fn ids_without_a_hint() {
        for id in [
            "",
            "abc",
            "tasks-conformance-nonexistent-12345",
            "0123456789abcdef",
            "0123456789abcdef.",
            "0123456789ABCDEF.x",
            "0123456789abcde.x",
            "0123456789abcdefg.x",
        ] {
            assert_eq!(parse_owner_hint(id), None, "{id:?}");
        }
        assert_eq!(
            parse_owner_hint("0123456789abcdef.x"),
            Some("0123456789abcdef")
        );
    }

    /// A fixed vector, so a backend in another language can check its hints against ours.
    #[test]
    fn known_vector() {
        let want: String = Sha256::digest(b"mcp-edge-owner:10.0.0.5:7001")[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(owner_hint("10.0.0.5:7001"), want);
    }
}
