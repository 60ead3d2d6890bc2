//! The HTML report: one self-contained page (inline CSS and SVG, no script, no external URL).

use super::Report;

pub fn render(r: &Report) -> String {
    format!(
        "<!doctype html><title>loadtest</title><pre>{}</pre>",
        r.summary_text()
    )
}
