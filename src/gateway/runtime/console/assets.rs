//! The console's files, embedded at build time, and the headers they are served with: a
//! Content-Security-Policy that allows only this origin's script, style and fetches (no inline
//! script, no remote load), no framing, no sniffing.

/// `(path, content type, body)` of each file the admin listener serves for the console.
pub(crate) const FILES: [(&str, &str, &str); 3] = [
    (
        "/ui",
        "text/html; charset=utf-8",
        include_str!("ui/index.html"),
    ),
    (
        "/ui/console.js",
        "text/javascript; charset=utf-8",
        include_str!("ui/console.js"),
    ),
    (
        "/ui/console.css",
        "text/css; charset=utf-8",
        include_str!("ui/console.css"),
    ),
];

pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The file at `path`, if it is one of the console's.
pub(crate) fn file(path: &str) -> Option<(&'static str, &'static str)> {
    let path = if path == "/ui/" { "/ui" } else { path };
    FILES
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, t, b)| (*t, *b))
}
