//! rustls pieces the gateway, auth (JWKS, introspection and token endpoints) and the load tester
//! share: the one reading of a PEM certificate file ([`read_chain`]) and of a CA bundle into a
//! root store ([`read_roots`]), errors naming the file and what is wrong; the verifier of
//! `verify: false` / `--insecure`.

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
