//! Unit tests of instance health: refused connections eject with a growing backoff, 5xx in a
//! row eject and a success resets the count, active checks follow their thresholds.

use super::*;

fn pool(threshold: u32) -> PoolHealth {
    let ej = EjectionConfig {
        consecutive_failures: threshold,
        base_time: Duration::from_millis(100),
        max_time: Duration::from_millis(250),
    };
    PoolHealth::new(2, HealthConfig::default(), ej)
}

#[test]
fn refused_connections_eject_with_growing_backoff() {
    let p = pool(3);
    assert!(p.usable(0));
    assert_eq!(
        p.on_connect_failure(0),
        Change::Ejected(Duration::from_millis(100))
    );
    assert!(!p.usable(0) && p.usable(1) && p.any_usable());
    std::thread::sleep(Duration::from_millis(120));
    assert!(p.usable(0), "re-admitted after the ejection time");
    assert_eq!(
        p.on_connect_failure(0),
        Change::Ejected(Duration::from_millis(200))
    );
    std::thread::sleep(Duration::from_millis(220));
    assert_eq!(
        p.on_connect_failure(0),
        Change::Ejected(Duration::from_millis(250)),
        "capped"
    );
}

#[test]
fn consecutive_5xx_eject_and_success_resets() {
    let p = pool(3);
    p.on_response(0, 502);
    p.on_response(0, 503);
    p.on_response(0, 200);
    p.on_response(0, 500);
    assert!(p.usable(0), "the streak was broken");
    p.on_response(0, 500);
    assert!(matches!(p.on_response(0, 500), Change::Ejected(_)));
    assert!(!p.usable(0));
    let off = pool(0);
    for _ in 0..10 {
        assert_eq!(off.on_response(0, 500), Change::None);
    }
    assert!(off.usable(0));
}

#[test]
fn active_checks_use_thresholds() {
    let p = pool(3);
    assert_eq!(p.on_check(0, false), Change::None);
    assert_eq!(p.on_check(0, false), Change::WentDown);
    assert!(!p.usable(0));
    assert_eq!(p.on_check(0, true), Change::None);
    assert_eq!(p.on_check(0, true), Change::CameUp);
    assert!(p.usable(0));
}

#[tokio::test]
async fn probes_over_loopback() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cfg: crate::config::PoolConfig =
        serde_yaml::from_str("instances: [\"127.0.0.1:1\"]").unwrap();
    let peers = PoolPeers::build("p", &cfg).unwrap();
    let check = |check, ms| HealthConfig {
        check,
        timeout: Duration::from_millis(ms),
        ..HealthConfig::default()
    };
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let tcp = check(HealthCheckKind::Tcp, 500);
    assert!(!probe(&peers, (dead, "dead"), &tcp, "/mcp", None).await);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        for status in ["200 OK", "503 Service Unavailable"] {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            assert!(
                req.starts_with("POST /mcp ") && req.contains("mcp-method: server/discover"),
                "{req}"
            );
            s.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                .await
                .unwrap();
        }
    });
    let mcp = check(HealthCheckKind::Mcp, 2000);
    assert!(probe(&peers, (addr, "up"), &mcp, "/mcp", None).await);
    assert!(!probe(&peers, (addr, "up"), &mcp, "/mcp", None).await);
}
