//! The index against ordered matching: for random tables mixing exact and pattern routes, the
//! index picks the route a scan in file order picks, for every claim.

use super::*;
use proptest::prelude::*;

fn route(i: usize, method: Option<&str>, name: Option<&str>) -> Route {
    Route {
        name: format!("r{i}"),
        method: method.map(Pattern::parse),
        mcp_name: name.map(Pattern::parse),
        pool: 0,
        sample: 1.0,
    }
}

fn linear(routes: &[Route], m: Option<&str>, n: Option<&str>) -> Option<usize> {
    routes.iter().position(|r| r.matches(m, n))
}

#[test]
fn an_exact_route_never_jumps_ahead_of_an_earlier_pattern() {
    let routes = vec![
        route(0, Some("tools/call"), Some("deploy_*")),
        route(1, Some("tools/call"), Some("deploy_prod")),
        route(2, Some("tools/*"), None),
        route(3, Some("tools/list"), None),
        route(4, None, Some("echo")),
        route(5, Some("tools/call"), Some("echo")),
    ];
    let ix = RouteIndex::new(&routes);
    let pick = |m, n| ix.first_match(&routes, m, n);
    assert_eq!(pick(Some("tools/call"), Some("deploy_prod")), Some(0));
    assert_eq!(pick(Some("tools/list"), None), Some(2));
    assert_eq!(pick(Some("tools/call"), Some("echo")), Some(2));
    assert_eq!(pick(Some("prompts/get"), Some("echo")), Some(4));
    assert_eq!(pick(Some("prompts/get"), None), None);
    assert_eq!(pick(None, None), None);
}

#[test]
fn the_first_of_equal_exact_routes_wins() {
    let routes = vec![
        route(0, Some("tools/call"), Some("a")),
        route(1, Some("tools/call"), Some("a")),
        route(2, Some("tools/call"), None),
        route(3, Some("tools/call"), None),
        route(4, None, None),
        route(5, None, None),
    ];
    let ix = RouteIndex::new(&routes);
    assert_eq!(
        ix.first_match(&routes, Some("tools/call"), Some("a")),
        Some(0)
    );
    assert_eq!(
        ix.first_match(&routes, Some("tools/call"), Some("b")),
        Some(2)
    );
    assert_eq!(ix.first_match(&routes, Some("ping"), None), Some(4));
    assert_eq!(ix.first_match(&routes, None, Some("x")), Some(4));
}

const METHODS: &[&str] = &[
    "tools/call",
    "tools/list",
    "resources/read",
    "tools/*",
    "*",
    "t?ols/call",
];
const NAMES: &[&str] = &["a", "b", "ab", "a*", "*", "?", "*b"];

fn condition(pool: &'static [&'static str]) -> impl Strategy<Value = Option<&'static str>> {
    proptest::option::weighted(0.7, proptest::sample::select(pool))
}

proptest! {
    #[test]
    fn the_index_picks_what_a_scan_in_file_order_picks(
        conds in proptest::collection::vec((condition(METHODS), condition(NAMES)), 0..24),
        claims in proptest::collection::vec((condition(METHODS), condition(NAMES)), 1..16),
    ) {
        let routes: Vec<Route> = conds
            .iter()
            .enumerate()
            .map(|(i, (m, n))| route(i, *m, *n))
            .collect();
        let ix = RouteIndex::new(&routes);
        for (m, n) in claims {
            prop_assert_eq!(ix.first_match(&routes, m, n), linear(&routes, m, n), "{:?} {:?}", m, n);
        }
    }
}
