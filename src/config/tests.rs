//! Unit tests of loading `gateway.yaml`: defaults, errors with their lines, value parsers.

use super::*;

const MIN: &str = "pools:\n  default:\n    instances: [127.0.0.1:7001]\n";

#[test]
fn the_embedded_default_is_valid() {
    let c = Config::parse(EMBEDDED_DEFAULT, "gateway.yaml").unwrap();
    assert_eq!(c.listen.mcp.port(), 8080);
    assert_eq!(c.pools["default"].instances.len(), 3);
    assert!(c.describe().contains("default"));
}

#[test]
fn defaults_fill_in() {
    let c = Config::parse(MIN, "t.yaml").unwrap();
    assert_eq!(c.endpoint, "/mcp");
    assert_eq!(c.limits.max_body_bytes, 1 << 20);
    assert_eq!(c.validation.sample, 1.0);
    assert_eq!(c.upstream_header.as_deref(), Some("x-mcp-edge-upstream"));
}

fn err(text: &str) -> ConfigError {
    Config::parse(text, "t.yaml").unwrap_err()
}

#[test]
fn unknown_keys_name_the_line_and_the_key() {
    let e = err("pools:\n  default:\n    instances: [127.0.0.1:7001]\nroutes:\n  - match: {nmae: x}\n    pool: default\n");
    assert_eq!(e.line, Some(5), "{e}");
    assert!(
        e.message.contains("nmae") && e.message.contains("expected `method` or `name`"),
        "{e}"
    );
    let e = err(&format!("{MIN}listn:\n  mcp: 127.0.0.1:1\n"));
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.message.contains("listn"), "{e}");
}

#[test]
fn bad_values_say_what_is_valid() {
    let e = err(&format!("{MIN}validation:\n  sample: 2\n"));
    assert!(e.message.contains("between 0.0"), "{e}");
    assert!(e.line.is_some());
    let e = err("pools:\n  default:\n    instances: [127.0.0.1:7001]\n    balance: random\n");
    assert!(
        e.message.contains("round_robin") && e.message.contains("hash"),
        "{e}"
    );
    assert_eq!(e.line, Some(4), "{e}");
    let e = err(&format!("{MIN}timeouts:\n  connect: soon\n"));
    assert!(e.message.contains("not a duration"), "{e}");
    let e = err("pools:\n  default:\n    instances: [127.0.0.1:7001]\n    balance: hash\n    hash_key: tenant\n");
    assert!(e.message.contains("header:<name>"), "{e}");
}

#[test]
fn dangling_pool_reference_names_its_line() {
    let e = err(&format!(
        "{MIN}routes:\n  - match: {{method: tools/call}}\n    pool: tools\n"
    ));
    assert_eq!(e.line, Some(6), "{e}");
    assert!(
        e.message.contains("routes[0].pool") && e.message.contains("defined pools: default"),
        "{e}"
    );
}

#[test]
fn empty_and_bad_instances() {
    let e = err("pools:\n  default:\n    instances: []\n");
    assert!(e.message.contains("at least one instance"), "{e}");
    let e = err("pools:\n  default:\n    instances: [nowhere]\n");
    assert!(e.message.contains("host:port"), "{e}");
    assert_eq!(e.line, Some(3));
}

#[test]
fn durations() {
    assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
    assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
    assert!(parse_duration("10 parsecs").is_err());
    assert!(parse_duration("m").is_err());
    assert!(parse_duration("").is_err());
}

#[test]
fn upstream_header_can_be_turned_off() {
    let c = Config::parse(&format!("{MIN}upstream_header: false\n"), "t").unwrap();
    assert_eq!(c.upstream_header, None);
    let c = Config::parse(&format!("{MIN}upstream_header: x-served-by\n"), "t").unwrap();
    assert_eq!(c.upstream_header.as_deref(), Some("x-served-by"));
}

/// `file:line:column: key: ...` for an error expected at `line`, `column`.
fn expect_at(e: &ConfigError, line: usize, column: usize, key: &str, fix: &str) {
    assert_eq!((e.line, e.column), (Some(line), Some(column)), "{e}");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("t.yaml:{line}:{column}: {key}: ")),
        "{shown}"
    );
    assert!(shown.contains(fix), "{shown}");
}

#[test]
fn a_duplicate_name_points_at_the_second_occurrence() {
    let text = format!(
        "{MIN}rate_limits:\n  - name: a\n    rate: 1/s\n  - name: b\n    rate: 1/s\n  - name: a\n    rate: 2/s\n"
    );
    expect_at(&err(&text), 9, 11, "rate_limits[2].name", "must be unique");
    let text = format!(
        "{MIN}concurrency_limits:\n  - {{name: a, max_in_flight: 1}}\n  - {{name: a, max_in_flight: 2}}\n"
    );
    expect_at(
        &err(&text),
        6,
        12,
        "concurrency_limits[1].name",
        "must be unique",
    );
}

#[test]
fn a_dangling_reference_points_at_itself_not_at_the_same_text_elsewhere() {
    // The text `tools` first appears as the name of a valid route; the faulty reference is the
    // second route's `pool: tools`.
    let text = "pools:\n  default:\n    instances: [127.0.0.1:7001]\nroutes:\n  - name: tools\n    pool: default\n  - match: {method: tools/call}\n    pool: tools\n";
    expect_at(
        &err(text),
        8,
        11,
        "routes[1].pool",
        "defined pools: default",
    );
    let text = "pools:\n  a:\n    instances: [127.0.0.1:7001]\n  b:\n    instances: [127.0.0.1:7002, nowhere]\n";
    expect_at(
        &err(text),
        5,
        33,
        "pools.b.instances",
        "write e.g. 127.0.0.1:7001",
    );
}

#[test]
fn an_unknown_key_names_its_own_line_and_column() {
    let text = format!("{MIN}timeouts:\n  connect: 1s\n  conect: 2s\n");
    let e = err(&text);
    assert_eq!((e.line, e.column), (Some(6), Some(3)), "{e}");
    assert!(
        e.to_string()
            .starts_with("t.yaml:6:3: timeouts: unknown field `conect`"),
        "{e}"
    );
    assert!(e.message.contains("expected one of `connect`"), "{e}");
}

#[test]
fn a_missing_key_points_at_the_section_that_should_hold_it() {
    let text = format!("{MIN}rate_limits:\n  - name: a\n    rate: 1/s\n    max_keys: 0\n");
    expect_at(&err(&text), 7, 15, "rate_limits[0].max_keys", "at least 1");
    let text = "pools:\n  default:\n    instances: [127.0.0.1:7001]\n    hash_key: principal\n";
    expect_at(&err(text), 4, 15, "pools.default.hash_key", "balance: hash");
}

#[test]
fn balancing_keys_are_checked_with_their_fix() {
    let pool = |extra: &str| {
        format!(
            "pools:\n  default:\n    instances: [127.0.0.1:7001, 127.0.0.1:7002]\n{extra}default_route: {{pool: default}}\n"
        )
    };
    let e = err(&pool("    load_bound: 0.25\n"));
    assert!(e.message.contains("only used with `balance: hash`"), "{e}");
    assert_eq!(e.line, Some(4), "{e}");
    let e = err(&pool("    balance: hash\n    load_bound: 0\n"));
    assert!(e.message.contains("e.g. 0.25"), "{e}");
    let e = err(&pool("    weights: {\"127.0.0.1:7009\": 2}\n"));
    assert!(e.message.contains("127.0.0.1:7001, 127.0.0.1:7002"), "{e}");
    let e = err(&pool("    weights: {\"127.0.0.1:7001\": 0}\n"));
    assert!(e.message.contains("from 1 to 1000"), "{e}");
    let e = err(&pool("    balance: hash\n    slow_start: 30s\n"));
    assert!(e.message.contains("add load_bound"), "{e}");
    let e = err(&pool("    balance: least_loaded\n    latency_decay: 1ms\n"));
    assert!(e.message.contains("at least 100ms"), "{e}");
    let e = err(&pool(
        "    balance: least_loaded\n    probe_interval: 10ms\n",
    ));
    assert!(
        e.message.contains("probe_interval") && e.message.contains("at least 100ms"),
        "{e}"
    );
    let e = err(&pool("    balance: least_loaded\n    probe_share: 0\n"));
    assert!(e.message.contains("e.g. 0.01"), "{e}");
    let ok = pool(
        "    balance: least_loaded\n    weights: {\"127.0.0.1:7002\": 3}\n    slow_start: 30s\n",
    );
    let c = Config::parse(&ok, "t.yaml").unwrap();
    assert_eq!(c.pools["default"].balance, Balance::LeastLoaded);
    assert_eq!(
        c.pools["default"].mrtr.retry_landing,
        super::RetryLanding::Any
    );
}

#[test]
fn retry_landing_elsewhere_needs_flows_and_a_known_value() {
    let pool = |extra: &str| {
        format!(
            "pools:\n  default:\n    instances: [127.0.0.1:7001, 127.0.0.1:7002]\n    mrtr: {{retry_landing: elsewhere}}\ndefault_route: {{pool: default}}\n{extra}"
        )
    };
    let c = Config::parse(&pool(""), "t.yaml").unwrap();
    assert_eq!(
        c.pools["default"].mrtr.retry_landing,
        super::RetryLanding::Elsewhere
    );
    let e = err(&pool("flows: {enabled: false}\n"));
    expect_at(
        &e,
        4,
        27,
        "pools.default.mrtr.retry_landing",
        "turn flows on",
    );
    let e = err(&pool("").replace("elsewhere", "far"));
    assert!(e.message.contains("elsewhere"), "{e}");
}
