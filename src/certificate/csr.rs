//! One CertificateSigningRequest round trip (client-go util/certificate/csr/csr.go):
//! create it (`certificates.k8s.io/v1`), then read it until it is issued, denied or failed.
//!
//! picolet differs: it polls `GET …/certificatesigningrequests/<name>` every
//! [`Request::poll`] instead of a watch with `fieldSelector=metadata.name=<name>`; the answer
//! is the same object, and a poll needs no resumption logic.

use std::time::Duration;

use ring::rand::SystemRandom;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::CertificateError;
use crate::kube::Client;
use crate::x509;

pub(crate) const CSR_PATH: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// What to ask for.
pub(crate) struct Request<'a> {
    /// `metadata.name`; `None`: `generateName: csr-` (the kubelet's rotation).
    pub name: Option<String>,
    /// The PKCS#10 request, DER.
    pub der: &'a [u8],
    pub signer: &'a str,
    pub usages: &'a [&'a str],
    /// How long to wait for the certificate (kubelet: 3600 s at bootstrap, 15 min at a
    /// rotation).
    pub timeout: Duration,
    pub poll: Duration,
}

/// The CSR object.
pub(crate) fn body(req: &Request<'_>) -> Value {
    let pem = x509::pem("CERTIFICATE REQUEST", req.der);
    let metadata = match &req.name {
        Some(n) => json!({"name": n}),
        None => json!({"generateName": "csr-"}),
    };
    json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": metadata,
        "spec": {
            "request": crate::api::encode_base64(pem.as_bytes()),
            "signerName": req.signer,
            "usages": req.usages,
        }
    })
}

/// kubelet (bootstrap.go `requestNodeCertificate`): the name `node-csr-` + base64url of a
/// SHA-512/256 digest of the key and the subject, so a retry with the same key (kept in
/// `kubelet-client.key.tmp`) finds its own request again.
pub(crate) fn bootstrap_name(
    public_key: &[u8],
    subject: &x509::RequestSubject,
    usages: &[&str],
) -> String {
    let mut input = public_key.to_vec();
    input.extend_from_slice(subject.common_name.as_bytes());
    for o in &subject.organizations {
        input.extend_from_slice(o.as_bytes());
    }
    for u in usages {
        input.extend_from_slice(u.as_bytes());
    }
    let digest = ring::digest::digest(&ring::digest::SHA512_256, &input);
    let b64 = crate::api::encode_base64(digest.as_ref())
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_");
    format!("node-csr-{b64}")
}

/// Where a CSR stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pending,
    /// The issued chain, PEM.
    Issued(String),
    Denied {
        reason: String,
        message: String,
    },
    Failed {
        reason: String,
        message: String,
    },
}

/// Reads `status`: Denied or Failed win; Approved with `status.certificate` is issued.
pub(crate) fn outcome(csr: &Value) -> Outcome {
    let conditions = csr
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    for c in &conditions {
        match c.get("type").and_then(Value::as_str) {
            Some("Denied") => {
                return Outcome::Denied {
                    reason: text(c, "reason"),
                    message: text(c, "message"),
                };
            }
            Some("Failed") => {
                return Outcome::Failed {
                    reason: text(c, "reason"),
                    message: text(c, "message"),
                };
            }
            _ => {}
        }
    }
    let approved = conditions
        .iter()
        .any(|c| c.get("type").and_then(Value::as_str) == Some("Approved"));
    match csr.pointer("/status/certificate").and_then(Value::as_str) {
        Some(b64) if approved && !b64.is_empty() => {
            match crate::api::decode_base64(b64).and_then(|b| String::from_utf8(b).ok()) {
                Some(pem) => Outcome::Issued(pem),
                None => Outcome::Pending,
            }
        }
        _ => Outcome::Pending,
    }
}

/// Creates the CSR (an existing one of the same name is re-used) and waits for its
/// certificate. Returns the CSR's name and the issued chain (PEM).
pub(crate) async fn request(
    client: &Client,
    req: &Request<'_>,
    shutdown: &CancellationToken,
) -> Result<(String, String), CertificateError> {
    let created: Result<Value, _> = client.create(CSR_PATH, &body(req)).await;
    let name = match (created, &req.name) {
        (Ok(obj), _) => obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        (Err(e), Some(n)) if e.is_already_exists() => n.clone(),
        (Err(e), _) => return Err(e.into()),
    };
    if name.is_empty() {
        return Err(CertificateError::BadAnswer {
            name: "(generated)".into(),
            what: "the created object has no name".into(),
        });
    }
    log::info!(
        "certificate signing request {name} ({}) sent; waiting for its certificate",
        req.signer
    );
    let path = format!("{CSR_PATH}/{name}");
    let deadline = tokio::time::Instant::now() + req.timeout;
    loop {
        match client.get::<Value>(&path).await {
            Ok(obj) => match outcome(&obj) {
                Outcome::Issued(pem) => {
                    if x509::pem_blocks(&pem, "CERTIFICATE").is_empty() {
                        return Err(CertificateError::BadAnswer {
                            name,
                            what: "status.certificate holds no certificate".into(),
                        });
                    }
                    return Ok((name, pem));
                }
                Outcome::Denied { reason, message } => {
                    return Err(CertificateError::Denied {
                        name,
                        reason,
                        message,
                    });
                }
                Outcome::Failed { reason, message } => {
                    return Err(CertificateError::Failed {
                        name,
                        reason,
                        message,
                    });
                }
                Outcome::Pending => {}
            },
            // A transient error: keep polling until the deadline.
            Err(e) if !e.is_not_found() => log::debug!("certificate signing request {name}: {e}"),
            Err(e) => return Err(e.into()),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CertificateError::Timeout {
                name,
                after: req.timeout,
            });
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Err(CertificateError::Shutdown),
            _ = tokio::time::sleep(req.poll) => {}
        }
    }
}

/// A fresh key and a request for `subject`: (the key's PKCS#8 PEM, the request DER, the
/// public key).
pub(crate) fn new_request(
    subject: &x509::RequestSubject,
) -> Result<(String, Vec<u8>, Vec<u8>), CertificateError> {
    let rng = SystemRandom::new();
    let (pkcs8, _) = x509::new_key(&rng)?;
    request_for_key(&pkcs8, subject)
        .map(|(der, public)| (x509::pem("PRIVATE KEY", &pkcs8), der, public))
}

/// A request for `subject` signed by the PKCS#8 key: (the request DER, the public key).
pub(crate) fn request_for_key(
    pkcs8: &[u8],
    subject: &x509::RequestSubject,
) -> Result<(Vec<u8>, Vec<u8>), CertificateError> {
    use ring::signature::KeyPair;
    let rng = SystemRandom::new();
    let key = x509::key_from_pkcs8(pkcs8, &rng)?;
    let der = x509::certificate_request(subject, &key, &rng)?;
    Ok((der, key.public_key().as_ref().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes() {
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let cert = crate::api::encode_base64(pem.as_bytes());
        for (status, want) in [
            (json!({}), Outcome::Pending),
            (
                json!({"conditions": [{"type": "Approved"}]}),
                Outcome::Pending,
            ),
            (json!({"certificate": cert}), Outcome::Pending),
            (
                json!({"conditions": [{"type": "Approved"}], "certificate": cert}),
                Outcome::Issued(pem.into()),
            ),
            (
                json!({"conditions": [{"type": "Approved"}, {"type": "Failed", "reason": "SignerValidationFailure", "message": "m"}]}),
                Outcome::Failed {
                    reason: "SignerValidationFailure".into(),
                    message: "m".into(),
                },
            ),
            (
                json!({"conditions": [{"type": "Denied", "reason": "NotMine", "message": "no"}]}),
                Outcome::Denied {
                    reason: "NotMine".into(),
                    message: "no".into(),
                },
            ),
        ] {
            assert_eq!(outcome(&json!({"status": status})), want, "{status}");
        }
    }

    #[test]
    fn the_bootstrap_name_depends_on_key_and_subject() {
        let s = crate::certificate::node_subject("pi");
        let a = bootstrap_name(b"key1", &s, &crate::certificate::CLIENT_USAGES);
        assert_eq!(
            a,
            bootstrap_name(b"key1", &s, &crate::certificate::CLIENT_USAGES)
        );
        assert_ne!(
            a,
            bootstrap_name(b"key2", &s, &crate::certificate::CLIENT_USAGES)
        );
        assert!(
            a.starts_with("node-csr-") && !a.contains(['+', '/', '=']),
            "{a}"
        );
        // A DNS-1123 subdomain is at most 253 characters.
        assert!(a.len() < 64);
    }

    #[test]
    fn the_body_carries_the_pem_request() {
        let b = body(&Request {
            name: None,
            der: &[0x30, 0x00],
            signer: crate::certificate::SERVING_SIGNER,
            usages: &crate::certificate::SERVING_USAGES,
            timeout: Duration::from_secs(1),
            poll: Duration::from_secs(1),
        });
        assert_eq!(b["metadata"]["generateName"], "csr-");
        let pem = crate::api::decode_base64(b["spec"]["request"].as_str().unwrap()).unwrap();
        assert!(
            String::from_utf8(pem)
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE REQUEST-----")
        );
        assert_eq!(
            b["spec"]["usages"],
            json!(["digital signature", "server auth"])
        );
    }
}
