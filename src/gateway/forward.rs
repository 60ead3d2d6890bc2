//! Forward stage: the header policy of the request that goes upstream, and the peer it goes to.
//!
//! The body is never touched here: it leaves exactly as the client sent it. Headers leave as
//! the client sent them minus the hop-by-hop ones (RFC 9110 §7.6.1): the fixed list below and
//! every name the client listed in `Connection`. Unknown headers and `Mcp-Param-*` pass through.

use pingora::upstreams::peer::HttpPeer;

use crate::config::Timeouts;

/// Headers that belong to one connection and are never forwarded.
pub const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// The headers to remove from a request going upstream: the hop-by-hop ones present, and those
/// named in `Connection`. Empty (and no allocation) in the common case.
pub fn hop_by_hop_names(headers: &http::HeaderMap) -> Vec<String> {
    // One pass over the names instead of a lookup per hop-by-hop name (names listed in
    // `Connection` need a `Connection` header).
    if !headers.keys().any(|k| HOP_BY_HOP.contains(&k.as_str())) {
        return Vec::new();
    }
    let mut names: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .filter(|s| !s.is_empty() && s != "close" && s != "keep-alive")
        .collect();
    names.extend(
        HOP_BY_HOP
            .iter()
            .filter(|n| headers.contains_key(**n))
            .map(|n| n.to_string()),
    );
    names
}

/// The peer for one instance (as its pool reaches it: plain or TLS, h1 or h2), with the
/// configured timeouts.
pub fn peer(mut peer: HttpPeer, t: &Timeouts) -> HttpPeer {
    peer.options.connection_timeout = Some(t.connect);
    peer.options.total_connection_timeout = Some(t.connect);
    peer.options.read_timeout = Some(t.upstream_read);
    peer.options.write_timeout = Some(t.upstream_write);
    peer.options.idle_timeout = Some(t.upstream_idle);
    peer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn hop_by_hop_and_connection_listed_headers_are_removed() {
        let mut h = map(&[
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("te", "trailers"),
            ("mcp-param-region", "eu"),
            ("x-other", "kept"),
        ]);
        for n in hop_by_hop_names(&h) {
            h.remove(n.as_str());
        }
        let names: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["mcp-param-region", "x-other"]);
    }

    #[test]
    fn a_request_without_hop_by_hop_headers_is_untouched() {
        let h = map(&[("mcp-method", "tools/call"), ("x-other", "kept")]);
        assert!(hop_by_hop_names(&h).is_empty());
    }
}
