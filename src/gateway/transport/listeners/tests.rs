//! Unit tests of `listeners`.

use super::*;

#[test]
fn utc_dates() {
    assert_eq!(format_utc(0), "1970-01-01 00:00 UTC");
    assert_eq!(format_utc(1_798_675_200), "2026-12-31 00:00 UTC");
    assert_eq!(format_utc(951_782_400 + 3_661), "2000-02-29 01:01 UTC");
}

#[test]
fn sni_patterns() {
    assert!(tls::name_matches("api.example.com", "api.example.com"));
    assert!(tls::name_matches("*.example.com", "api.example.com"));
    assert!(!tls::name_matches("*.example.com", "example.com"));
    assert!(!tls::name_matches("*.example.com", "a.b.example.com"));
    assert!(tls::name_matches("API.example.com", "api.example.com"));
}
