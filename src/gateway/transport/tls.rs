//! Downstream TLS: reading and checking certificate/key files, choosing a certificate by SNI,
//! client-certificate verification (mTLS), the minimum TLS version, and swapping all of it on
//! reload without touching the listening sockets.
//!
//! pingora builds each listener's rustls `ServerConfig` once, at start. Everything that must
//! change on reload therefore sits behind two hooks installed in that config: a certificate
//! resolver ([`Resolver`]) and a client-certificate verifier ([`Verifier`]). Both read the
//! listener's [`Shared`] state, which a reload replaces whole; handshakes already done keep
//! their session, new handshakes see the new files. ALPN is fixed at start (pingora offers no
//! hook for it): a reload that changes `alpn` warns that it needs a restart.
//!
//! This module never panics on a bad file: pingora's own loader would, so files are read
//! here, and an error names the file and what is wrong with it.

use arc_swap::ArcSwap;
use pingora::listeners::tls::TlsSettings;
use pingora::protocols::ALPN;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

use crate::config::tls::{Alpn, ListenerOptions, TlsConfig, TlsVersion};

/// What `check` and the metrics say about one certificate.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CertInfo {
    /// The file it was read from.
    pub file: String,
    pub subject: String,
    /// The names it is chosen for by SNI.
    pub names: Vec<String>,
    /// notAfter, Unix seconds.
    pub not_after: i64,
}

struct Cert {
    key: Arc<CertifiedKey>,
    info: CertInfo,
}

/// A listener's TLS material, loaded and checked.
pub(crate) struct Loaded {
    certs: Vec<Cert>,
    client: Arc<dyn ClientCertVerifier>,
    min13: bool,
    pub alpn: Vec<Alpn>,
}

impl Loaded {
    pub(crate) fn certificates(&self) -> impl Iterator<Item = &CertInfo> {
        self.certs.iter().map(|c| &c.info)
    }

    fn pick(&self, sni: Option<&str>) -> &Cert {
        let sni = sni.map(str::to_ascii_lowercase);
        sni.and_then(|host| {
            self.certs
                .iter()
                .find(|c| c.info.names.iter().any(|n| name_matches(n, &host)))
        })
        .unwrap_or(&self.certs[0])
    }
}

/// `pattern` (`api.example.com` or `*.example.com`, one label) against a lowercase host.
pub(crate) fn name_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(suffix) => host
            .split_once('.')
            .is_some_and(|(label, rest)| !label.is_empty() && rest == suffix),
        None => pattern == host,
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub(crate) use crate::tls_util::{read_chain, read_roots};

/// Read a PEM private key; an error names the file.
pub(crate) fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let name = path.display();
    std::fs::metadata(path).map_err(|e| format!("{name}: cannot read the key file: {e}"))?;
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        format!("{name}: holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}")
    })
}

/// Subject, DNS names and notAfter of a DER certificate.
pub(crate) fn describe_cert(der: &[u8], file: &str) -> Result<CertInfo, String> {
    use x509_parser::prelude::*;
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|e| format!("{file}: the certificate does not parse as X.509: {e}"))?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let GeneralName::DNSName(d) = n {
                names.push(d.to_ascii_lowercase());
            }
        }
    }
    Ok(CertInfo {
        file: file.to_string(),
        subject: cert.subject().to_string(),
        names,
        not_after: cert.validity().not_after.timestamp(),
    })
}

/// Load and check one listener's TLS files.
pub(crate) fn load(cfg: &TlsConfig) -> Result<Loaded, String> {
    let mut certs = Vec::with_capacity(cfg.certificates.len());
    for c in &cfg.certificates {
        let chain = read_chain(&c.cert)?;
        let key = read_key(&c.key)?;
        let file = c.cert.display().to_string();
        let mut info = describe_cert(&chain[0], &file)?;
        if !c.sni.is_empty() {
            info.names = c.sni.iter().map(|n| n.to_ascii_lowercase()).collect();
        }
        let key = CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
            format!(
                "{file} and {}: the key does not belong to the certificate, or is of an unsupported type ({e})",
                c.key.display()
            )
        })?;
        certs.push(Cert {
            key: Arc::new(key),
            info,
        });
    }
    let client = match &cfg.client_ca {
        Some(ca) => {
            WebPkiClientVerifier::builder_with_provider(Arc::new(read_roots(ca)?), provider())
                .build()
                .map_err(|e| {
                    format!(
                        "{}: cannot verify client certificates with it: {e}",
                        ca.display()
                    )
                })?
        }
        None => WebPkiClientVerifier::no_client_auth(),
    };
    Ok(Loaded {
        certs,
        client,
        min13: cfg.min_version == TlsVersion::Tls13,
        alpn: cfg.alpn.clone(),
    })
}

/// One TLS listener's live state, shared by its resolver and verifier.
pub(crate) struct Shared {
    current: ArcSwap<Loaded>,
}

impl Shared {
    pub(crate) fn new(loaded: Loaded) -> Arc<Shared> {
        Arc::new(Shared {
            current: ArcSwap::from_pointee(loaded),
        })
    }

    /// Swap in new material (a reload); new handshakes use it.
    pub(crate) fn replace(&self, loaded: Loaded) {
        self.current.store(Arc::new(loaded));
    }

    pub(crate) fn load(&self) -> Arc<Loaded> {
        self.current.load_full()
    }

    /// Whether this listener refuses clients that do not offer TLS 1.3.
    pub(crate) fn requires_tls13(&self) -> bool {
        self.current.load().min13
    }

    /// pingora's settings for this listener: our resolver and verifier, and the ALPN list.
    pub(crate) fn settings(self: &Arc<Self>) -> anyhow::Result<TlsSettings> {
        let mut s = TlsSettings::intermediate("", "")?;
        s.set_cert_resolver(Arc::new(Resolver(self.clone())));
        s.set_client_cert_verifier(Arc::new(Verifier(self.clone())));
        s.set_alpn(alpn(&self.load().alpn));
        Ok(s)
    }
}

/// The ALPN setting pingora can express: h2 is preferred whenever it is offered.
pub(crate) fn alpn(list: &[Alpn]) -> ALPN {
    match (list.contains(&Alpn::H2), list.contains(&Alpn::Http11)) {
        (true, true) => ALPN::H2H1,
        (true, false) => ALPN::H2,
        _ => ALPN::H1,
    }
}

/// Chooses the certificate by SNI (the minimum version is enforced before the handshake, by
/// [`crate::gateway::transport::listeners`] with [`crate::gateway::transport::client_hello`]).
#[derive(Debug)]
struct Resolver(Arc<Shared>);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("tls::Shared")
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let loaded = self.0.load();
        Some(loaded.pick(hello.server_name()).key.clone())
    }
}

/// Delegates to the listener's current client verifier (none, or the `client_ca` bundle).
#[derive(Debug)]
struct Verifier(Arc<Shared>);

impl ClientCertVerifier for Verifier {
    fn offer_client_auth(&self) -> bool {
        self.0.load().client.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.0.load().client.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The hints would borrow from state a reload may replace; an empty list means "any CA"
        // to clients, which then offer the certificate they have.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.0
            .load()
            .client
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, &algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, &algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A listener's protocols as `check` prints them.
pub(crate) fn protocols(o: &ListenerOptions) -> String {
    match &o.tls {
        Some(t) => {
            let alpn: Vec<&str> = t
                .alpn
                .iter()
                .map(|a| match a {
                    Alpn::H2 => "h2",
                    Alpn::Http11 => "http/1.1",
                })
                .collect();
            let mtls = if t.client_ca.is_some() {
                ", client certificates required"
            } else {
                ""
            };
            format!("TLS (>= {}, ALPN {}){mtls}", t.min_version, alpn.join(" "))
        }
        None if o.h2c => "plain HTTP/1.1 + h2c (prior knowledge)".into(),
        None => "plain HTTP/1.1".into(),
    }
}
