//! The console's files, embedded at build time, and the headers they are served with: a
//! Content-Security-Policy that allows only this origin's script, style and fetches (no inline
//! script, no remote load), no framing, no sniffing.

/// `(path, content type, body)` of each file the admin listener serves for the console.
pub(crate) const FILES: [(&str, &str, &str); 4] = [
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
        "/ui/charts.js",
        "text/javascript; charset=utf-8",
        include_str!("ui/charts.js"),
    ),
    (
        "/ui/console.css",
        "text/css; charset=utf-8",
        include_str!("ui/console.css"),
    ),
];

pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The console's tabs: `/ui/<tab>` is the page opened on that tab (as is `/ui#<tab>`).
pub(crate) const TABS: [&str; 9] = [
    "overview", "topology", "routes", "pools", "tools", "refusals", "catalog", "config", "explain",
];

/// The file at `path`, if it is one of the console's.
pub(crate) fn file(path: &str) -> Option<(&'static str, &'static str)> {
    let tab = path.strip_prefix("/ui/").is_some_and(|t| TABS.contains(&t));
    let path = if path == "/ui/" || tab { "/ui" } else { path };
    FILES
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, t, b)| (*t, *b))
}
