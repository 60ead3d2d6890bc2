//! rustls pieces the gateway, auth (JWKS, introspection and token endpoints) and the load tester
//! share: the one reading of a PEM certificate file ([`read_chain`]) and of a CA bundle into a
//! root store ([`read_roots`]), errors naming the file and what is wrong; the one trust policy
//! of every outgoing TLS connection ([`trust_roots`]); the verifier of `verify: false` /
//! `--insecure`.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// Read the certificates of a PEM file (a chain, or a CA bundle); an error names the file and
/// says what is wrong: it cannot be read, a PEM block is bad, or it holds no certificate.
pub(crate) fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let name = path.display();
    std::fs::metadata(path)
        .map_err(|e| format!("{name}: cannot read the certificate file: {e}"))?;
    let chain = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{name}: not a PEM certificate file, a bad PEM block ({e})"))?;
    if chain.is_empty() {
        return Err(format!(
            "{name}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(chain)
}

/// A PEM CA bundle as a root store; an error names the file (see [`read_chain`]; also a
/// certificate that is no usable CA).
pub(crate) fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for c in read_chain(path)? {
        roots
            .add(c)
            .map_err(|e| format!("{}: a CA certificate is not usable: {e}", path.display()))?;
    }
    Ok(roots)
}

/// What an outgoing TLS connection trusts, one policy for pools (and their health probes), auth
/// sources (JWKS, introspection), token endpoints and the load tester:
///
/// - a configured CA file (`ca_file`, `--cacert`) is the whole trust: only its certificates,
///   so a private PKI is never widened to every public CA;
/// - without one, the system's store (`SSL_CERT_FILE` / `SSL_CERT_DIR` honoured), which is what
///   pingora's connector trusts for a pool's forwarded requests, so a probe and the requests it
///   vouches for agree;
/// - on a system with no usable store (a minimal container), the Mozilla roots built in
///   (webpki-roots), so verification still works, said once in the log.
pub(crate) fn trust_roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    if let Some(path) = ca_file {
        return read_roots(path);
    }
    let mut roots = RootCertStore::empty();
    // pingora's own reading of the store, the one its connector uses.
    if pingora::tls::load_platform_certs_incl_env_into_store(&mut roots).is_err() {
        roots = RootCertStore::empty();
    }
    if roots.is_empty() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!("no usable CA certificates in the system's store; trusting the Mozilla roots built in (install ca-certificates, or set ca_file)");
        });
        roots.roots = webpki_roots::TLS_SERVER_ROOTS.to_vec();
    }
    Ok(roots)
}

/// Accepts any server certificate and name; the handshake's signatures are still checked with
/// the provider's algorithms. For `verify: false` / `--insecure` only.
#[derive(Debug)]
pub(crate) struct AcceptAnyServerCert(pub Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_bundle_error_names_the_file_and_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("mcp-edge-tls-util-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The error for a file holding `pem` (none: no file), which must start with its name.
        let error = |name: &str, pem: Option<&str>| {
            let path = dir.join(name);
            if let Some(pem) = pem {
                std::fs::write(&path, pem).unwrap();
            }
            let e = read_roots(&path).unwrap_err();
            assert!(e.starts_with(&path.display().to_string()), "{e}");
            e
        };
        let block = |body: &str| {
            format!("-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n")
        };
        for (name, pem, what) in [
            ("missing.pem", None, "cannot read"),
            (
                "empty.pem",
                Some("no PEM here\n".to_string()),
                "holds no PEM certificate",
            ),
            ("bad.pem", Some(block("!!!!")), "bad PEM block"),
            ("not-ca.pem", Some(block("AAAA")), "not usable"),
        ] {
            let e = error(name, pem.as_deref());
            assert!(e.contains(what), "{name}: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
