//! Aligned text tables, the text report's and the tasks section's: [`table`] lays rows out,
//! [`lat_row`] and [`LAT_HEADER`] are the latency row every table of the report shares.

use super::LatencySummary;

pub(super) const LAT_HEADER: [&str; 9] = [
    "", "count", "errors", "mean", "p50", "p90", "p99", "p99.9", "max",
];

pub(super) fn table(rows: &[Vec<String>], right_from: usize) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        out.push_str("  ");
        for (c, cell) in r.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c >= right_from {
                out.push_str(&" ".repeat(pad + 2));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            }
        }
        out.push('\n');
        if i == 0 {
            let w: usize = widths.iter().sum::<usize>() + 2 * cols.saturating_sub(right_from);
            out.push_str("  ");
            out.push_str(&"─".repeat(w));
            out.push('\n');
        }
    }
    out
}

/// A latency in ms, with the figures its size deserves.
pub(super) fn f(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub(super) fn lat_row(name: &str, s: &LatencySummary, errors: Option<u64>) -> Vec<String> {
    let mut r = vec![name.to_string(), s.count.to_string()];
    r.push(errors.map_or("".into(), |e| e.to_string()));
    if s.count == 0 {
        r.extend(std::iter::repeat_n("-".to_string(), 6));
    } else {
        r.extend([s.mean_ms, s.p50_ms, s.p90_ms, s.p99_ms, s.p999_ms, s.max_ms].map(f));
    }
    r
}
