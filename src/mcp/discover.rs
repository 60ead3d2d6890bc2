//! Reading a `server/discover` result: the revisions it supports and the `serverInfo` it names
//! in `_meta`. One reading for the federation (merged discovery), the bridge (`initialize` from
//! discovery), `init` and the load tester's preflight.

use serde_json::{Map, Value};

use super::meta;

/// `supportedVersions`, the strings of it (empty when absent or not an array, or when the
/// result is not an object).
pub(crate) fn supported_versions(result: &Value) -> Vec<String> {
    result.as_object().map(versions_in).unwrap_or_default()
}

/// [`supported_versions`] of a result object.
pub(crate) fn versions_in(result: &Map<String, Value>) -> Vec<String> {
    let list = result.get("supportedVersions").and_then(Value::as_array);
    let strings = list.into_iter().flatten().filter_map(Value::as_str);
    strings.map(str::to_owned).collect()
}

/// `_meta["io.modelcontextprotocol/serverInfo"]`, when the result names one.
pub(crate) fn server_info(result: &Value) -> Option<&Value> {
    result.get("_meta")?.get(meta::SERVER_INFO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_and_server_info_are_read_as_the_spec_writes_them() {
        let d = json!({"supportedVersions": ["2026-07-28", 7, "2025-11-25"],
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s"}}});
        assert_eq!(supported_versions(&d), ["2026-07-28", "2025-11-25"]);
        assert_eq!(server_info(&d).unwrap()["name"], "s");
        assert!(supported_versions(&json!({"supportedVersions": "x"})).is_empty());
        assert!(server_info(&json!({"serverInfo": {}})).is_none());
    }
}
