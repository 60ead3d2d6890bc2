//! Label floods, and refusals no dearer than successes.

use super::*;

#[test]
fn i13_4_a_flood_of_refused_names_cannot_push_real_tools_into_other() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(&up, "metrics: { name_label_limit: 5 }\n");
    for i in 0..50 {
        // The headers claim a junk name the body does not carry: refused, no label place.
        let h = call_headers(&format!("junk_{i}"));
        assert_eq!(
            post(gw.mcp_addr, &refs(&h), &call(1, "get_weather")).status,
            400
        );
    }
    let h = call_headers("get_weather");
    assert_eq!(
        post(gw.mcp_addr, &refs(&h), &call(2, "get_weather")).status,
        200
    );
    // The metrics of a request are recorded just after its answer is sent: wait for them.
    let scrape = || {
        let r = raw(
            gw.admin_addr.unwrap(),
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        String::from_utf8(r.body).unwrap()
    };
    assert!(
        eventually(Duration::from_secs(5), || scrape()
            .contains("name=\"get_weather\"")),
        "get_weather lost its label"
    );
    assert!(!scrape().contains("junk_"), "a refused name took a label");
}

#[test]
fn i13_5_100_continue_is_not_sent_before_the_limits_refuse() {
    let up = Upstreams::start(1);
    let gw = simple_gateway(
        &up,
        "rate_limits:\n  - name: one\n    key: [method]\n    rate: 1/m\n    burst: 1\n",
    );
    let h = call_headers("get_weather");
    assert_eq!(
        post(gw.mcp_addr, &refs(&h), &call(1, "get_weather")).status,
        200
    );
    let body = call(2, "get_weather");
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&head_for(body.len(), &[("Expect", "100-continue".into())]))
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut first = String::new();
    let mut r = BufReader::new(s);
    std::io::BufRead::read_line(&mut r, &mut first).unwrap();
    assert!(
        first.starts_with("HTTP/1.1 429"),
        "got {first:?} before the refusal"
    );
}

#[test]
fn i13_5_a_refusal_reads_at_most_a_small_prefix_of_a_large_body() {
    let up = Upstreams::start(1);
    let cfg = config(
        &[("p", &up.addrs, "balance: round_robin")],
        "routes:\n  - match: { name: other }\n    pool: p\n",
    );
    let gw = mcp_edge::gateway::RunningGateway::start(cfg).unwrap();
    // A 500 KB body that matches no route: only the head and 10 KB are ever sent.
    let s = TcpStream::connect(gw.mcp_addr).unwrap();
    (&s).write_all(&head_for(500_000, &[])).unwrap();
    (&s).write_all(&[b' '; 10_000]).unwrap();
    let r = read_one(&s);
    assert_eq!((r.status, r.error_code()), (404, -32601), "{}", r.text());
    assert!(
        r.json().get("id").is_none(),
        "an id was read from a body that was not read"
    );
}
