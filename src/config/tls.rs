//! The `gateway.yaml` keys for TLS and HTTP/2: downstream listeners (`listen.mcp`,
//! `listen.extra`, `listen.admin`, each a `host:port` or `{ address, tls, h2c, allow_plain }`)
//! and upstream TLS per pool (`pools.<name>.tls`, `pools.<name>.http`).
//!
//! Only the shape and the file-free rules live here; reading and checking the PEM files (a bad
//! or mismatched certificate/key) is `gateway::transport::tls`, which runs at start, on reload and in
//! `mcp-edge check`, and names the file.

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// `listen:` as written in the file; turned into [`super::Listen`].
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListenFile {
    #[serde(default = "default_mcp")]
    pub mcp: ListenerSpec,
    /// Further MCP listeners serving the same gateway (e.g. a plain one on loopback).
    #[serde(default)]
    pub extra: Vec<ListenerSpec>,
    #[serde(default = "default_admin")]
    pub admin: Option<ListenerSpec>,
}

fn default_mcp() -> ListenerSpec {
    ListenerSpec::plain(SocketAddr::from(([127, 0, 0, 1], 8080)))
}

fn default_admin() -> Option<ListenerSpec> {
    Some(ListenerSpec::plain(SocketAddr::from((
        [127, 0, 0, 1],
        9090,
    ))))
}

/// The TLS and HTTP/2 settings of every listener (the addresses of `listen.mcp` and
/// `listen.admin` are also kept as plain fields of [`super::Listen`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listeners {
    pub mcp: ListenerOptions,
    pub extra: Vec<ListenerSpec>,
    pub admin: ListenerOptions,
}

/// One listener: `127.0.0.1:8080`, or `{ address: 0.0.0.0:8443, tls: {...} }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenerSpec {
    pub address: SocketAddr,
    pub options: ListenerOptions,
}

impl ListenerSpec {
    pub(crate) fn plain(address: SocketAddr) -> Self {
        ListenerSpec {
            address,
            options: ListenerOptions::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListenerOptions {
    /// TLS on this listener (HTTP/1.1 and h2 by ALPN).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// On a plain listener: also accept HTTP/2 with prior knowledge (h2c).
    #[serde(default)]
    pub h2c: bool,
    /// Allow this plain listener on a non-loopback address next to TLS listeners.
    #[serde(default)]
    pub allow_plain: bool,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListenerMap {
    address: SocketAddr,
    #[serde(flatten)]
    options: ListenerOptions,
}

impl<'de> Deserialize<'de> for ListenerSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ListenerSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a host:port such as 127.0.0.1:8080, or { address, tls, h2c }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ListenerSpec, E> {
                s.parse().map(ListenerSpec::plain).map_err(|_| {
                    E::custom(format!(
                        "{s:?} is not an IP:port; write e.g. 127.0.0.1:8080 or 0.0.0.0:8443"
                    ))
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ListenerSpec, A::Error> {
                let m = ListenerMap::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(ListenerSpec {
                    address: m.address,
                    options: m.options,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// Downstream TLS of one listener.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The first is served when the client names no host (or an unknown one); the others are
    /// chosen by SNI.
    pub certificates: Vec<CertificateConfig>,
    /// Require a client certificate signed by one of these CAs (PEM bundle): mTLS.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    #[serde(default)]
    pub min_version: TlsVersion,
    /// Protocols offered by ALPN, in order of preference.
    #[serde(default = "default_alpn")]
    pub alpn: Vec<Alpn>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CertificateConfig {
    /// PEM: the leaf certificate first, then its intermediates.
    pub cert: PathBuf,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Host names this certificate answers (`*.example.com` matches one label); default: the
    /// certificate's DNS names.
    #[serde(default)]
    pub sni: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub enum TlsVersion {
    #[default]
    #[serde(rename = "1.2")]
    Tls12,
    #[serde(rename = "1.3")]
    Tls13,
}

impl fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            TlsVersion::Tls12 => "TLS 1.2",
            TlsVersion::Tls13 => "TLS 1.3",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub enum Alpn {
    #[serde(rename = "h2")]
    H2,
    #[serde(rename = "http/1.1")]
    Http11,
}

fn default_alpn() -> Vec<Alpn> {
    vec![Alpn::H2, Alpn::Http11]
}

/// `pools.<name>.tls`: connect to the instances over TLS.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTls {
    /// The name sent by SNI and checked against the instance's certificate; default: the host
    /// part of each instance's address.
    #[serde(default)]
    pub sni: Option<String>,
    /// Trust these CAs (PEM bundle) instead of the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Verify the instance's certificate and name (default true; false is for tests only).
    #[serde(default = "yes")]
    pub verify: bool,
    /// A client certificate (PEM chain) and key presented to instances that ask for one.
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    #[serde(default)]
    pub client_key: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

/// `pools.<name>.http`: the HTTP version spoken to the instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamHttp {
    /// HTTP/1.1.
    #[default]
    H1,
    /// HTTP/2 only: by ALPN over TLS, with prior knowledge (h2c) on plain connections.
    H2,
    /// Over TLS, let ALPN choose (h2 preferred, HTTP/1.1 accepted).
    Auto,
}

/// The file-free rules: what a listener or pool says must make sense on its own. Returns the
/// key and the message.
pub(crate) fn check_listeners(
    set: &Listeners,
    mcp: SocketAddr,
    admin: Option<SocketAddr>,
) -> Result<(), (String, String)> {
    let all: Vec<(String, SocketAddr, &ListenerOptions)> =
        std::iter::once(("listen.mcp".to_string(), mcp, &set.mcp))
            .chain(
                set.extra
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (format!("listen.extra[{i}]"), l.address, &l.options)),
            )
            .collect();
    let any_tls = all.iter().any(|(_, _, o)| o.tls.is_some());
    let mut named = all.clone();
    if let Some(a) = admin {
        named.push(("listen.admin".into(), a, &set.admin));
    }
    for (i, (key, addr, o)) in named.iter().enumerate() {
        if let Some((other, _, _)) = named[..i].iter().find(|(_, a, _)| a == addr) {
            return Err((
                key.clone(),
                format!("{addr} is already used by {other}; give each listener its own port"),
            ));
        }
        if let Some(tls) = &o.tls {
            if o.h2c {
                return Err((format!("{key}.h2c"), "h2c is HTTP/2 without TLS; on a TLS listener h2 is offered by ALPN (tls.alpn), remove h2c".into()));
            }
            if tls.certificates.is_empty() {
                return Err((
                    format!("{key}.tls.certificates"),
                    "list at least one { cert, key }".into(),
                ));
            }
            if tls.alpn.is_empty() {
                return Err((
                    format!("{key}.tls.alpn"),
                    "offer at least one of h2, http/1.1".into(),
                ));
            }
        }
    }
    for (key, addr, o) in &all {
        if any_tls && o.tls.is_none() && !addr.ip().is_loopback() && !o.allow_plain {
            return Err((key.clone(), format!(
                "plain listener on {addr} next to a TLS listener would serve the gateway unencrypted; bind it to 127.0.0.1 or [::1], give it tls, or set allow_plain: true"
            )));
        }
    }
    Ok(())
}

/// The rules of one pool's `tls` and `http` keys.
pub(crate) fn check_pool(
    pool: &str,
    tls: Option<&UpstreamTls>,
    http: UpstreamHttp,
) -> Result<(), (String, String)> {
    let key = format!("pools.{pool}");
    if http == UpstreamHttp::Auto && tls.is_none() {
        return Err((format!("{key}.http"), "auto lets ALPN choose, which needs tls; use h1 or h2 (h2c) on a plain pool, or add tls".into()));
    }
    if let Some(t) = tls {
        if t.client_cert.is_some() != t.client_key.is_some() {
            return Err((
                format!("{key}.tls"),
                "client_cert and client_key go together; set both or neither".into(),
            ));
        }
        if t.sni.as_deref().is_some_and(str::is_empty) {
            return Err((format!("{key}.tls.sni"), "an empty SNI disables certificate checks in pingora; omit sni to use each instance's host".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const POOL: &str = "pools:\n  p:\n    instances: [127.0.0.1:7001]\n";

    fn parse(listen: &str) -> Result<Config, String> {
        Config::parse(&format!("{listen}{POOL}"), "gw.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn a_listener_is_an_address_or_an_object() {
        let c = parse("listen:\n  mcp: 127.0.0.1:8080\n").unwrap();
        assert_eq!(c.listen.mcp.port(), 8080);
        assert!(c.listen.tls.mcp.tls.is_none());
        let c = parse(
            "listen:\n  mcp:\n    address: 0.0.0.0:8443\n    tls:\n      certificates: [{ cert: a.crt, key: a.key, sni: [api.example.com] }]\n      client_ca: ca.pem\n      min_version: \"1.3\"\n  extra: [ { address: 127.0.0.1:8080, h2c: true } ]\n  admin: null\n",
        )
        .unwrap();
        assert_eq!(c.listen.mcp.port(), 8443);
        let t = c.listen.tls.mcp.tls.as_ref().unwrap();
        assert_eq!(t.certificates[0].sni, ["api.example.com"]);
        assert_eq!(t.min_version, super::TlsVersion::Tls13);
        assert_eq!(t.alpn, [super::Alpn::H2, super::Alpn::Http11]);
        assert!(c.listen.tls.extra[0].options.h2c);
        assert_eq!(c.listen.admin, None);
    }

    #[test]
    fn mistakes_are_named_with_their_line() {
        let e = parse("listen:\n  mcp: localhost:80\n").unwrap_err();
        assert!(
            e.contains("gw.yaml:2") && e.contains("not an IP:port"),
            "{e}"
        );
        let e = parse("listen:\n  mcp:\n    address: 127.0.0.1:1\n    tsl: {}\n").unwrap_err();
        assert!(e.contains("unknown field `tsl`"), "{e}");
        let e = parse(
            "listen:\n  mcp:\n    address: 127.0.0.1:1\n    tls: { certificates: [{ cert: a }] }\n",
        )
        .unwrap_err();
        assert!(e.contains("missing field `key`"), "{e}");
        let e = parse("listen:\n  mcp:\n    address: 127.0.0.1:1\n    tls: { certificates: [], min_version: \"1.1\" }\n")
            .unwrap_err();
        assert!(e.contains("1.1"), "{e}");
    }

    #[test]
    fn listener_rules() {
        let tls = "tls: { certificates: [{ cert: a, key: b }] }";
        let e = parse(&format!(
            "listen:\n  mcp: {{ address: 127.0.0.1:1, h2c: true, {tls} }}\n"
        ))
        .unwrap_err();
        assert!(e.contains("listen.mcp.h2c") && e.contains("ALPN"), "{e}");
        let e = parse("listen:\n  mcp: { address: 127.0.0.1:1, tls: { certificates: [] } }\n")
            .unwrap_err();
        assert!(e.contains("listen.mcp.tls.certificates"), "{e}");
        let e = parse("listen:\n  mcp: 127.0.0.1:1\n  extra: [127.0.0.1:1]\n").unwrap_err();
        assert!(
            e.contains("gw.yaml:3") && e.contains("already used by listen.mcp"),
            "{e}"
        );
        let e = parse(&format!(
            "listen:\n  mcp: {{ address: 0.0.0.0:443, {tls} }}\n  extra: [0.0.0.0:80]\n"
        ))
        .unwrap_err();
        assert!(
            e.contains("listen.extra[0]") && e.contains("allow_plain"),
            "{e}"
        );
        parse(&format!("listen:\n  mcp: {{ address: 0.0.0.0:443, {tls} }}\n  extra: [{{ address: 0.0.0.0:80, allow_plain: true }}]\n")).unwrap();
        parse(&format!(
            "listen:\n  mcp: {{ address: 0.0.0.0:443, {tls} }}\n  extra: [\"[::1]:80\"]\n"
        ))
        .unwrap();
        // Without any TLS listener, plain listeners anywhere are the operator's choice.
        parse("listen:\n  mcp: 0.0.0.0:80\n").unwrap();
    }

    #[test]
    fn pool_rules() {
        let y = |pool: &str| {
            Config::parse(
                &format!("pools:\n  p:\n    instances: [127.0.0.1:7001]\n{pool}"),
                "gw.yaml",
            )
        };
        assert!(y("    http: h2\n").is_ok());
        assert!(y("    tls: { ca_file: ca.pem }\n    http: auto\n").is_ok());
        let e = y("    tls: { sni: \"\" }\n").unwrap_err().to_string();
        assert!(e.contains("pools.p.tls.sni"), "{e}");
        let e = y("    tls: { client_key: k.pem }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("go together"), "{e}");
    }
}
