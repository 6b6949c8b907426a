//! rustls client configuration (the `ring` provider, TLS 1.2 and 1.3, ALPN http/1.1), PEM
//! certificates and keys, and the base64 of kubeconfig `*-data` fields.
//!
//! Must never: skip certificate verification unless `insecure-skip-tls-verify` was set
//! explicitly.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use super::ApiError;

/// Where a client finds its trust anchors and its identity. PEM bytes, already read.
#[derive(Debug, Clone, Default)]
pub struct TlsSettings {
    /// Trust only these CAs (kubeconfig `certificate-authority(-data)`); `None` uses the
    /// system bundle.
    pub ca_pem: Option<Vec<u8>>,
    /// kubeconfig `insecure-skip-tls-verify: true`: accept any server certificate.
    pub insecure_skip_verify: bool,
    /// Client certificate chain and key (kubeconfig `client-certificate(-data)` /
    /// `client-key(-data)`).
    pub client_cert_pem: Option<Vec<u8>>,
    pub client_key_pem: Option<Vec<u8>>,
    /// A client certificate that rotates (`--rotate-certificates`): each new connection
    /// presents the slot's current one; overrides the PEM fields.
    pub client_cert_slot: Option<CertSlot>,
}

/// A certificate and key that may change while a TLS configuration lives (kubelet: the
/// certificate manager's `Current()`, read by the transport's `GetClientCertificate` and by
/// the server's `GetCertificate`). New handshakes read the current one; an empty slot
/// presents nothing (a server then fails the handshake, as the kubelet's "no serving
/// certificate available").
#[derive(Clone, Default)]
pub struct CertSlot(Arc<std::sync::RwLock<Option<Arc<rustls::sign::CertifiedKey>>>>);

impl std::fmt::Debug for CertSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CertSlot({})",
            if self.current().is_some() {
                "set"
            } else {
                "empty"
            }
        )
    }
}

impl CertSlot {
    /// Puts the chain and key of a PEM document (both in one, or in two) in the slot.
    pub fn set_pem(&self, chain_pem: &[u8], key_pem: &[u8], what: &str) -> Result<(), ApiError> {
        let chain = certificates(chain_pem, what)?;
        let key = private_key(key_pem, what)?;
        let ck =
            rustls::sign::CertifiedKey::from_der(chain, key, &provider()).map_err(ApiError::Tls)?;
        if let Ok(mut slot) = self.0.write() {
            *slot = Some(Arc::new(ck));
        }
        Ok(())
    }

    pub fn current(&self) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.0.read().ok().and_then(|s| s.clone())
    }
}

impl rustls::client::ResolvesClientCert for CertSlot {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.current()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl rustls::server::ResolvesServerCert for CertSlot {
    fn resolve(
        &self,
        _client_hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.current()
    }
}

/// Well-known system CA bundles (Debian/Ubuntu/OpenWrt/Alpine, Fedora/RHEL, others).
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/certs/ca-bundle.crt",
];

/// The one crypto provider of picolet's TLS (client and node API): *ring*. rustls 0.23.48
/// deprecates it for lacking post-quantum key exchange; its alternative, aws-lc-rs, would
/// cost far more than the ARM size budgets have, and the apiserver and kubectl still offer
/// classic key exchange. Deliberate.
#[allow(deprecated)]
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the rustls client configuration for `settings`.
pub(crate) fn client_config(settings: &TlsSettings) -> Result<Arc<rustls::ClientConfig>, ApiError> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(ApiError::Tls)?;
    let builder = if settings.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(
                provider.signature_verification_algorithms,
            )))
    } else {
        let roots = match &settings.ca_pem {
            Some(pem) => root_store(pem, "certificate authority")?,
            None => system_roots()?,
        };
        builder.with_root_certificates(roots)
    };
    let mut config = match (&settings.client_cert_pem, &settings.client_key_pem) {
        _ if settings.client_cert_slot.is_some() => {
            let slot = settings.client_cert_slot.clone().unwrap_or_default();
            builder.with_client_cert_resolver(Arc::new(slot))
        }
        (Some(cert), Some(key)) => {
            let chain = certificates(cert, "client certificate")?;
            let key = private_key(key, "client key")?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(ApiError::Tls)?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => {
            return Err(ApiError::Pem {
                what: "client certificate".into(),
                reason: "a client certificate needs a client key".into(),
            });
        }
        (None, Some(_)) => {
            return Err(ApiError::Pem {
                what: "client key".into(),
                reason: "a client key needs a client certificate".into(),
            });
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The server name to verify: `tls-server-name` if given, else the URL's host (an IP
/// address is checked against the certificate's IP SANs).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, ApiError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|_| ApiError::BadUrl {
        url: host.to_string(),
        reason: "the host is not a valid DNS name or IP address",
    })
}

fn root_store(pem: &[u8], what: &str) -> Result<RootCertStore, ApiError> {
    let mut roots = RootCertStore::empty();
    let certs = certificates(pem, what)?;
    let (_, ignored) = roots.add_parsable_certificates(certs);
    if roots.is_empty() {
        return Err(ApiError::Pem {
            what: what.into(),
            reason: "no usable CA certificate".into(),
        });
    }
    if ignored > 0 {
        log::warn!("{what}: {ignored} certificates could not be used");
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore, ApiError> {
    for path in SYSTEM_BUNDLES {
        if let Ok(pem) = std::fs::read(path) {
            return root_store(&pem, path);
        }
    }
    Err(ApiError::Pem {
        what: "system CA bundle".into(),
        reason: format!(
            "none found (looked for {}); give a certificate authority",
            SYSTEM_BUNDLES.join(", ")
        ),
    })
}

/// All `CERTIFICATE` blocks of a PEM document.
pub(crate) fn certificates(
    pem: &[u8],
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, ApiError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| ApiError::Pem {
            what: what.into(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(ApiError::Pem {
            what: what.into(),
            reason: "no CERTIFICATE block found".into(),
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) of a PEM document.
pub(crate) fn private_key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, ApiError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| ApiError::Pem {
        what: what.into(),
        reason: e.to_string(),
    })
}

/// Reads a PEM file named in a kubeconfig.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, ApiError> {
    std::fs::read(path).map_err(|source| ApiError::ReadFile {
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) use crate::api::decode_base64;

/// `insecure-skip-tls-verify`: the chain is not checked, the handshake signatures still are.
#[derive(Debug)]
struct NoVerify(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        for (text, want) in [
            ("", Some(&b""[..])),
            ("Zg==", Some(b"f")),
            ("Zm8=", Some(b"fo")),
            ("Zm9v", Some(b"foo")),
            ("Zm9vYg", Some(b"foob")),
            ("Zm9v\nYmFy\n", Some(b"foobar")),
            ("+/8=", Some(&[0xfb, 0xff][..])),
            ("Zm9v!", None),
            ("Zg==Zg", None),
            ("Z", None),
            ("Zh==", None),
        ] {
            assert_eq!(decode_base64(text).as_deref(), want, "{text:?}");
        }
    }

    #[test]
    fn pem_errors_name_what() {
        let err = certificates(b"not pem", "certificate authority").unwrap_err();
        assert!(err.to_string().contains("certificate authority"), "{err}");
        let err = private_key(b"", "client key").unwrap_err();
        assert!(err.to_string().contains("client key"), "{err}");
        let err = client_config(&TlsSettings {
            ca_pem: Some(b"junk".to_vec()),
            ..TlsSettings::default()
        })
        .unwrap_err();
        assert!(err.is_config(), "{err}");
    }

    #[test]
    fn insecure_needs_no_roots() {
        let cfg = client_config(&TlsSettings {
            insecure_skip_verify: true,
            ..TlsSettings::default()
        })
        .unwrap();
        assert_eq!(cfg.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn server_names() {
        assert!(matches!(
            server_name("10.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("kubernetes.default.svc").unwrap(),
            ServerName::DnsName(_)
        ));
        assert!(server_name("bad host!").is_err());
    }
}
