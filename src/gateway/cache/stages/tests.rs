//! Unit tests of the stores: bounds, invalidation, purge, and what a reload keeps.

use super::*;
use crate::gateway::stages::route::RouteTable;
use bytes::Bytes;

fn cfg(yaml_cache: &str, instances: &str) -> Config {
    let y = format!(
        "pools:\n  p:\n    instances: [{instances}]\n  q:\n    instances: [127.0.0.1:7002]\nroutes:\n  - name: lists\n    match: {{method: \"tools/list\"}}\n    pool: p\n    {yaml_cache}\n  - name: other\n    pool: q\ndefault_route: {{pool: p}}\n"
    );
    Config::parse(&y, "t.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn set(c: &Config, prev: Option<(&CacheSet, &Config, &RouteTable)>) -> (CacheSet, RouteTable) {
    let t = RouteTable::from_config(c);
    let reg = prometheus::Registry::new();
    (CacheSet::build(c, &t, &reg, prev).unwrap(), t)
}

fn entry(store: &RouteCache, method: &'static str, uri: Option<&str>, len: usize) -> Entry {
    let pad = "x".repeat(len);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"result":{{"pad":"{pad}","ttlMs":60000,"cacheScope":"public"}}}}"#
    );
    let entry::Judgement::Store(parsed) = entry::judge(body.as_bytes()) else {
        panic!()
    };
    Entry {
        weight: store.weight(body.len()),
        body: Bytes::from(body),
        parsed,
        stored: Instant::now(),
        headers: vec![],
        method,
        uri: uri.map(str::to_owned),
    }
}

fn k(i: u32) -> Key {
    let mut b = [0u8; 32];
    b[..4].copy_from_slice(&i.to_le_bytes());
    Key(b)
}

#[test]
fn a_flood_of_distinct_keys_never_exceeds_max_bytes_or_max_entries() {
    let c = cfg(
        "cache: {max_bytes: 65536, max_entries: 40, max_entry_bytes: 8192}",
        "127.0.0.1:7001",
    );
    let (s, _) = set(&c, None);
    let store = s.get(RouteRef::Index(0)).unwrap();
    for i in 0..2000 {
        let len = (i as usize * 37) % 6000;
        assert!(store.put(
            k(i),
            entry(&store, "tools/list", None, len),
            store.generation()
        ));
        assert!(store.bytes() <= 65536, "after {i}: {} bytes", store.bytes());
    }
    store.store.run_pending_tasks();
    assert!(
        store.store.entry_count() <= 40,
        "{}",
        store.store.entry_count()
    );
    assert_eq!(store.bytes(), store.store.weighted_size());
    assert!(store.bytes() > 0);
}

#[test]
fn notifications_drop_only_their_pool_and_methods_and_stop_in_flight_stores() {
    let c = cfg("", "127.0.0.1:7001");
    let (s, _) = set(&c, None);
    let lists = s.get(RouteRef::Index(0)).unwrap();
    let other = s.get(RouteRef::Index(1)).unwrap();
    let default = s.get(RouteRef::Default).unwrap();
    let g = lists.generation();
    lists.put(k(1), entry(&lists, "tools/list", None, 10), g);
    default.put(k(2), entry(&default, "prompts/list", None, 10), g);
    default.put(
        k(3),
        entry(&default, "resources/read", Some("file:///a"), 10),
        g,
    );
    default.put(
        k(4),
        entry(&default, "resources/read", Some("file:///b"), 10),
        g,
    );
    other.put(
        k(5),
        entry(&other, "tools/list", None, 10),
        other.generation(),
    );
    s.shared
        .invalidate("p", &Invalidation::Lists(&["tools/list"]));
    assert!(lists.get(&k(1)).is_none());
    assert!(default.get(&k(2)).is_some());
    assert!(other.get(&k(5)).is_some(), "another pool keeps its entries");
    // A fetch that started before the notification is not stored.
    assert!(!lists.put(k(1), entry(&lists, "tools/list", None, 10), g));
    s.shared
        .invalidate("p", &Invalidation::Resource("file:///a".into()));
    assert!(default.get(&k(3)).is_none());
    assert!(default.get(&k(4)).is_some());
}

#[test]
fn purge_by_method_and_name() {
    let c = cfg("", "127.0.0.1:7001");
    let (s, _) = set(&c, None);
    let d = s.get(RouteRef::Default).unwrap();
    d.put(k(1), entry(&d, "tools/list", None, 1), d.generation());
    d.put(
        k(2),
        entry(&d, "resources/read", Some("file:///a b"), 1),
        d.generation(),
    );
    d.put(
        k(3),
        entry(&d, "resources/read", Some("file:///c"), 1),
        d.generation(),
    );
    assert_eq!(s.shared.purge(None, Some("file:///a b".into())), 3);
    assert!(d.get(&k(2)).is_none() && d.get(&k(3)).is_some() && d.get(&k(1)).is_some());
    s.shared.purge(Some("tools/list".into()), None);
    assert!(d.get(&k(1)).is_none() && d.get(&k(3)).is_some());
    s.shared.purge(None, None);
    assert!(d.get(&k(3)).is_none());
    assert_eq!(
        decode_component("file%3A%2F%2F%2Fa+b").as_deref(),
        Some("file:///a b")
    );
    assert_eq!(decode_component("%zz"), None);
}

#[test]
fn a_reload_keeps_unchanged_routes_and_drops_changed_pools() {
    let c1 = cfg("", "127.0.0.1:7001");
    let (s1, t1) = set(&c1, None);
    let same = cfg("", "127.0.0.1:7001");
    let (s2, _) = set(&same, Some((&s1, &c1, &t1)));
    assert!(Arc::ptr_eq(
        &s1.get(RouteRef::Index(0)).unwrap(),
        &s2.get(RouteRef::Index(0)).unwrap()
    ));
    assert!(Arc::ptr_eq(&s1.shared, &s2.shared));
    s1.shared.params.learn(&"p".into(), br#"{"result":{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"x-mcp-header":"A"}}}}]}}"#);
    let moved = cfg("", "127.0.0.1:7003");
    let (s3, _) = set(&moved, Some((&s1, &c1, &t1)));
    assert!(!Arc::ptr_eq(
        &s1.get(RouteRef::Index(0)).unwrap(),
        &s3.get(RouteRef::Index(0)).unwrap()
    ));
    assert!(
        Arc::ptr_eq(
            &s1.get(RouteRef::Index(1)).unwrap(),
            &s3.get(RouteRef::Index(1)).unwrap()
        ),
        "pool q did not change"
    );
    assert!(
        s3.shared.params.get("p", "t").is_none(),
        "a changed pool forgets its tools"
    );
    let off = cfg("cache: {enabled: false}", "127.0.0.1:7001");
    let (s4, _) = set(&off, Some((&s1, &c1, &t1)));
    assert!(s4.get(RouteRef::Index(0)).is_none());
    let resized = cfg("cache: {max_bytes: 1048576}", "127.0.0.1:7001");
    let (s5, _) = set(&resized, Some((&s1, &c1, &t1)));
    assert!(!Arc::ptr_eq(
        &s1.get(RouteRef::Index(0)).unwrap(),
        &s5.get(RouteRef::Index(0)).unwrap()
    ));
}
