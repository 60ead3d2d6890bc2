//! Unit tests of `backend`.

use super::*;

#[test]
fn port_in_use_is_named() {
    let pool = Pool::start(PoolOptions::local(1)).unwrap();
    let taken = pool.addrs()[0];
    let err = Pool::start(PoolOptions {
        listen: vec![taken],
        ..PoolOptions::local(1)
    })
    .err()
    .unwrap();
    assert!(
        format!("{err:#}").contains(&taken.port().to_string()),
        "{err:#}"
    );
    pool.shutdown();
}

#[test]
fn host_policy_defaults() {
    let lo = [SocketAddr::from(([127, 0, 0, 1], 1))];
    let any = [SocketAddr::from(([0, 0, 0, 0], 1))];
    assert!(host_policy(&[], &lo)
        .unwrap()
        .contains(&"localhost".to_string()));
    assert_eq!(host_policy(&[], &any), None);
    assert!(host_policy(&["api.example".into()], &any)
        .unwrap()
        .contains(&"api.example".to_string()));
    assert_eq!(host_policy(&["*".into()], &lo), None);
}
