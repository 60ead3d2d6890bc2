//! Reading a gateway's Prometheus text: one scrape of its admin listener, and the sum of the
//! samples of one metric whose labels contain given strings. Re-exported at `support::`.

use mcp_edge::gateway::RunningGateway;

use super::http::raw;

/// The gateway's `/metrics` text (the scrape must answer 200).
pub fn scrape(gw: &RunningGateway) -> String {
    let r = raw(
        gw.admin_addr.unwrap(),
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(r.status, 200, "GET /metrics");
    String::from_utf8(r.body).unwrap()
}

/// The sum of the samples named exactly `name` whose line contains every one of `parts`.
pub fn sample(text: &str, name: &str, parts: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}
