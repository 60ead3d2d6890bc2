//! Tests over the rendered HTML report: the start time reads as a date, and every chart label
//! stays inside its chart (judged from the SVG itself, with a font's glyph widths rather than
//! the renderer's own estimate).

use std::time::Duration;

use regex::Regex;

use super::html::{render, started_at};
use super::Report;
use crate::loadtest::flows::Scenario;
use crate::loadtest::measure::{Bucket, InstanceCounts, LegKind, Measures};
use crate::loadtest::LoadTestArgs;

/// A report with wide labels everywhere: latencies up to ~110 s (`125000 ms` on the y axis), an
/// instance with a long name and counts in the millions, 30 s of timeline.
fn wide_report() -> Report {
    let mut m = Measures::new(&["create_repo".into()]);
    for i in 0..2_000u64 {
        let ms = Duration::from_millis(1 + i * i / 36);
        m.record_leg(0, LegKind::First, ms, (i / 70) as usize, None, None, None);
        m.record_leg(0, LegKind::Retry, ms, (i / 70) as usize, None, None, None);
    }
    m.timeline = (0..30)
        .map(|s| Bucket {
            requests: 190_000 + s * 1_000,
            errors: s % 7,
            flows_completed: 90_000,
        })
        .collect();
    for (name, n) in [
        ("be-1", 3_999_999u64),
        ("backend-eu-west-1.internal.example.com:8443", 1_234_567),
    ] {
        let c = InstanceCounts {
            first: n,
            retry: n / 2,
            plain: 0,
        };
        m.landing.instances.insert(name.into(), c);
    }
    let scenario = Scenario::builtin("mixed").expect("the built-in mixed scenario");
    let p99 = (0..30).map(|s| Some(9_000_000 + s * 100_000)).collect();
    let elapsed = Duration::from_secs(30);
    Report::new(
        LoadTestArgs::default(),
        scenario,
        1_796_178_152_512,
        elapsed,
        m,
        p99,
    )
}

#[test]
fn the_start_time_is_a_date_and_time_in_utc() {
    assert_eq!(
        started_at(1_796_178_152_512),
        (
            "2026-12-02 02:22:32 UTC".into(),
            "2026-12-02T02:22:32Z".into()
        )
    );
    let html = render(&wide_report());
    assert!(
        html.contains(r#"started <time datetime="2026-12-02T02:22:32Z" title="unix ms 1796178152512">2026-12-02 02:22:32 UTC</time>"#),
        "{}",
        &html[..html.find("</header>").unwrap_or(html.len())]
    );
}

/// Width (px) of `text` at `px` in Helvetica / Arial (their advance widths, in em; the page's
/// other fonts are no wider).
fn estimate(text: &str, px: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            ' ' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | 'i' | 'j' | 'l' => 0.28,
            '-' | '(' | ')' => 0.33,
            'm' | 'w' | 'M' => 0.83,
            '%' => 0.89,
            'W' => 0.94,
            '@' | '…' => 1.0,
            c if c.is_uppercase() => 0.72,
            _ => 0.56,
        })
        .sum();
    em * px
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

#[test]
fn every_chart_label_fits_inside_its_svg() {
    let html = render(&wide_report());
    let svg = Regex::new(r#"(?s)<svg viewBox="0 0 ([0-9.]+) ([0-9.]+)"(.*?)</svg>"#).unwrap();
    let text = Regex::new(r#"<text x="([-0-9.]+)" y="[-0-9.]+" class="(\w+)"(?: text-anchor="(\w+)")?>([^<]*)</text>"#).unwrap();
    let mut charts = 0;
    let mut last_percentile = None;
    for c in svg.captures_iter(&html) {
        charts += 1;
        let width: f64 = c[1].parse().unwrap();
        for t in text.captures_iter(&c[3]) {
            let x: f64 = t[1].parse().unwrap();
            let px = match &t[2] {
                "axis" => 12.0,
                "val" => 10.0,
                _ => 11.0,
            };
            let label = unescape(&t[4]);
            let w = estimate(&label, px);
            let (start, end) = match t.get(3).map_or("start", |a| a.as_str()) {
                "end" => (x - w, x),
                "middle" => (x - w / 2.0, x + w / 2.0),
                _ => (x, x + w),
            };
            assert!(
                start >= 0.0 && end <= width,
                "{label:?} spans {start:.1}..{end:.1}, outside 0..{width} of its chart"
            );
            if label.starts_with("99.999") {
                last_percentile = Some((x, end, width));
            }
        }
    }
    assert_eq!(charts, 4, "percentile, throughput, p99, instances");
    let (x, end, width) = last_percentile.expect("the 99.999% label");
    assert!(x < width && end <= width, "{x} {end} {width}");
    assert!(
        html.contains("backend-eu-west-1.internal.example.com:8443"),
        "the long instance name, whole, in its tooltip"
    );
}
