//! The serving certificate of the node's own API when no `--tls-cert-file` is given
//! (kubelet: `certutil.GenerateSelfSignedCertKey` — a CA made for the purpose and a server
//! certificate it signs, for `localhost`, the node name and the loopback and node IPs).
//!
//! Owns: the DER encoding of the two X.509 v3 certificates (ECDSA P-256 with SHA-256, signed
//! with `ring`) and their PEM form. Only what a TLS client checks is encoded: names, validity,
//! the key, basicConstraints, keyUsage, extKeyUsage, subjectAltName.
//!
//! Must never: do I/O (the caller writes the files, the key mode 0600) or reuse a key: every
//! call makes fresh keys from the system's random source.

use std::net::IpAddr;

use ring::rand::SystemRandom;
use ring::signature::KeyPair;

use crate::clock::UnixNanos;
use crate::x509::{
    TbsParams, X509Error, basic_constraints, ext_key_usage_server, key_usage, name, new_key, pem,
    serial, sign, subject_alt_name, tbs,
};

/// Making a key or a signature failed (the DER writer is `crate::x509`).
pub(crate) type CertError = X509Error;

/// A certificate chain and its key, in PEM.
#[derive(Clone)]
pub struct Generated {
    /// The server certificate, then the CA certificate (what the server presents).
    pub chain_pem: String,
    /// The CA certificate alone (what a kubeconfig trusts).
    pub ca_pem: String,
    /// The server's key, PKCS#8.
    pub key_pem: String,
}

impl std::fmt::Debug for Generated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generated")
            .field("key_pem", &"<hidden>")
            .finish()
    }
}

/// What the server certificate is for.
#[derive(Debug, Clone)]
pub struct Subject {
    /// The node name: the certificates' common names and a DNS name of the server's.
    pub node_name: String,
    /// DNS names besides `localhost` and the node name.
    pub dns_names: Vec<String>,
    /// IP addresses besides 127.0.0.1 and ::1.
    pub ips: Vec<IpAddr>,
}

/// kubelet: the self-signed certificate is valid for a year (its CA for the same year).
const VALIDITY_SECONDS: i64 = 365 * 24 * 3600;

/// A CA and a server certificate it signs, both valid from `now` (one hour earlier, for
/// clocks a little behind) for a year. picolet: a clock below `clock::FLOOR_SECS` (a board
/// without an RTC, before NTP) gives certificates valid from `now` to a year after the
/// floor, so they stay valid when NTP sets the clock (the kubelet's, made in 1970, expire
/// in 1971).
pub fn generate(subject: &Subject, now: UnixNanos) -> Result<Generated, CertError> {
    let rng = SystemRandom::new();
    let (_, ca_key) = new_key(&rng)?;
    let (server_key_pkcs8, server_key) = new_key(&rng)?;
    let secs = now / 1_000_000_000;
    let (not_before, not_after) = (
        secs - 3600,
        secs.max(crate::clock::FLOOR_SECS) + VALIDITY_SECONDS,
    );
    let stamp = secs.to_string();

    let ca_name = name(&format!("{}-ca@{stamp}", subject.node_name));
    let ca_tbs = tbs(TbsParams {
        serial: serial(&rng)?,
        issuer: &ca_name,
        subject: &ca_name,
        not_before,
        not_after,
        public_key: ca_key.public_key().as_ref(),
        extensions: &[basic_constraints(true), key_usage(true)],
    });
    let ca_der = sign(&ca_key, &rng, ca_tbs)?;

    let mut dns = vec!["localhost".to_string(), subject.node_name.clone()];
    dns.extend(subject.dns_names.iter().cloned());
    dns.dedup();
    let mut ips: Vec<IpAddr> = vec![
        IpAddr::from([127, 0, 0, 1]),
        IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
    ];
    for ip in &subject.ips {
        if !ips.contains(ip) {
            ips.push(*ip);
        }
    }
    let server_tbs = tbs(TbsParams {
        serial: serial(&rng)?,
        issuer: &ca_name,
        subject: &name(&format!("{}@{stamp}", subject.node_name)),
        not_before,
        not_after,
        public_key: server_key.public_key().as_ref(),
        extensions: &[
            basic_constraints(false),
            key_usage(false),
            ext_key_usage_server(),
            subject_alt_name(&dns, &ips),
        ],
    });
    let server_der = sign(&ca_key, &rng, server_tbs)?;

    let ca_pem = pem("CERTIFICATE", &ca_der);
    Ok(Generated {
        chain_pem: format!("{}{ca_pem}", pem("CERTIFICATE", &server_der)),
        ca_pem,
        key_pem: pem("PRIVATE KEY", server_key_pkcs8.as_ref()),
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::Arc;

    use super::*;
    use crate::clock::Clock;

    /// The proof that the encoding is right: a rustls server presents the chain, a rustls
    /// client that trusts only the CA completes the handshake for every name.
    #[test]
    fn a_tls_client_trusting_the_ca_accepts_the_server() {
        let now = crate::clock::SystemClock.now();
        let g = generate(
            &Subject {
                node_name: "pi-4".into(),
                dns_names: vec!["pi-4.local".into()],
                ips: vec!["192.168.1.40".parse().unwrap()],
            },
            now,
        )
        .unwrap();
        assert!(!format!("{g:?}").contains("PRIVATE"));
        if let Ok(dir) = std::env::var("PICOLET_DUMP_CERTS") {
            std::fs::write(format!("{dir}/chain.pem"), &g.chain_pem).unwrap();
            std::fs::write(format!("{dir}/ca.pem"), &g.ca_pem).unwrap();
            std::fs::write(format!("{dir}/key.pem"), &g.key_pem).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<_> =
            rustls_pki_types::pem::PemObject::pem_slice_iter(g.chain_pem.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        assert_eq!(chain.len(), 2);
        let key: rustls_pki_types::PrivateKeyDer<'static> =
            rustls_pki_types::pem::PemObject::from_pem_slice(g.key_pem.as_bytes()).unwrap();
        let server = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap(),
        );
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pki_types::pem::PemObject::pem_slice_iter(g.ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let client = Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        for name in [
            "localhost",
            "pi-4",
            "pi-4.local",
            "127.0.0.1",
            "::1",
            "192.168.1.40",
        ] {
            let sn = rustls_pki_types::ServerName::try_from(name.to_string()).unwrap();
            let mut c = rustls::ClientConnection::new(client.clone(), sn).unwrap();
            let mut s = rustls::ServerConnection::new(server.clone()).unwrap();
            let mut buf = Vec::new();
            for _ in 0..10 {
                buf.clear();
                c.write_tls(&mut buf).unwrap();
                s.read_tls(&mut buf.as_slice()).unwrap();
                s.process_new_packets()
                    .unwrap_or_else(|e| panic!("{name}: server: {e}"));
                buf.clear();
                s.write_tls(&mut buf).unwrap();
                c.read_tls(&mut buf.as_slice()).unwrap();
                c.process_new_packets()
                    .unwrap_or_else(|e| panic!("{name}: client: {e}"));
                if !c.is_handshaking() && !s.is_handshaking() {
                    break;
                }
            }
            assert!(!c.is_handshaking(), "{name}: no handshake");
            c.writer().write_all(b"ping").unwrap();
            buf.clear();
            c.write_tls(&mut buf).unwrap();
            s.read_tls(&mut buf.as_slice()).unwrap();
            s.process_new_packets().unwrap();
            let mut got = [0u8; 4];
            s.reader().read_exact(&mut got).unwrap();
            assert_eq!(&got, b"ping");
        }
        // A name the certificate does not carry is refused.
        let sn = rustls_pki_types::ServerName::try_from("elsewhere".to_string()).unwrap();
        let mut c = rustls::ClientConnection::new(client, sn).unwrap();
        let mut s = rustls::ServerConnection::new(server).unwrap();
        let mut refused = false;
        for _ in 0..10 {
            let mut buf = Vec::new();
            c.write_tls(&mut buf).unwrap();
            s.read_tls(&mut buf.as_slice()).unwrap();
            if s.process_new_packets().is_err() {
                break;
            }
            buf.clear();
            s.write_tls(&mut buf).unwrap();
            c.read_tls(&mut buf.as_slice()).unwrap();
            if c.process_new_packets().is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "a wrong name was accepted");
    }
}
