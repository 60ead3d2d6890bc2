//! Matching a `Content-Type` against a media type, once, for every reader in the project: the
//! type and subtype compare case-insensitively and parameters (`; charset=utf-8`) are ignored
//! (RFC 9110 §8.3.1), so the gateway, the backend and the load tester agree on what is JSON and
//! what is an event stream. `application/json-seq` is not `application/json`.

/// The media type of a JSON-RPC message.
pub(crate) const JSON: &str = "application/json";

/// Whether `content_type` names `media` (optional whitespace, then parameters, may follow).
pub(crate) fn matches(content_type: &[u8], media: &str) -> bool {
    let ct = content_type.trim_ascii_start();
    let n = media.len();
    ct.len() >= n
        && ct[..n].eq_ignore_ascii_case(media.as_bytes())
        && ct[n..]
            .trim_ascii_start()
            .first()
            .is_none_or(|b| *b == b';')
}

/// Whether a `Content-Type` value names JSON.
pub(crate) fn is_json(content_type: &[u8]) -> bool {
    matches(content_type, JSON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_and_parameters_do_not_matter_other_types_do() {
        for yes in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            " application/json ;charset=UTF-8",
        ] {
            assert!(is_json(yes.as_bytes()), "{yes}");
        }
        for no in [
            "application/json-seq",
            "application/jsonx",
            "text/json",
            "",
            "application/",
        ] {
            assert!(!is_json(no.as_bytes()), "{no}");
        }
        assert!(matches(
            b"Text/Event-Stream; charset=utf-8",
            "text/event-stream"
        ));
    }
}
