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

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

use crate::clock::UnixNanos;

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot make a key: {0}")]
    Key(String),
    #[error("cannot sign the certificate: {0}")]
    Sign(String),
}

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
/// clocks a little behind) for a year.
pub fn generate(subject: &Subject, now: UnixNanos) -> Result<Generated, CertError> {
    let rng = SystemRandom::new();
    let ca_key = new_key(&rng)?;
    let server_key_pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
        .map_err(|e| CertError::Key(e.to_string()))?;
    let server_key = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_ASN1_SIGNING,
        server_key_pkcs8.as_ref(),
        &rng,
    )
    .map_err(|e| CertError::Key(e.to_string()))?;
    let secs = now / 1_000_000_000;
    let (not_before, not_after) = (secs - 3600, secs + VALIDITY_SECONDS);
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

fn new_key(rng: &SystemRandom) -> Result<EcdsaKeyPair, CertError> {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, rng)
        .map_err(|e| CertError::Key(e.to_string()))?;
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), rng)
        .map_err(|e| CertError::Key(e.to_string()))
}

/// 16 random bytes, positive.
fn serial(rng: &SystemRandom) -> Result<Vec<u8>, CertError> {
    let mut b = [0u8; 16];
    rng.fill(&mut b)
        .map_err(|e| CertError::Key(e.to_string()))?;
    b[0] &= 0x7f;
    b[0] |= 0x01;
    Ok(b.to_vec())
}

fn sign(key: &EcdsaKeyPair, rng: &SystemRandom, tbs: Vec<u8>) -> Result<Vec<u8>, CertError> {
    let sig = key
        .sign(rng, &tbs)
        .map_err(|e| CertError::Sign(e.to_string()))?;
    Ok(seq(&[tbs, ecdsa_sha256(), bit_string(sig.as_ref())]))
}

// ---------------------------------------------------------------------------------------
// DER

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(content);
    out
}

fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

fn set(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x31, &parts.concat())
}

fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut body = vec![(arcs[0] * 40 + arcs[1]) as u8];
    for &a in &arcs[2..] {
        let mut chunk = vec![(a & 0x7f) as u8];
        let mut v = a >> 7;
        while v > 0 {
            chunk.push(0x80 | (v & 0x7f) as u8);
            v >>= 7;
        }
        chunk.reverse();
        body.extend(chunk);
    }
    tlv(0x06, &body)
}

fn integer(bytes: &[u8]) -> Vec<u8> {
    tlv(0x02, bytes)
}

fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(bytes);
    tlv(0x03, &body)
}

fn octet_string(bytes: &[u8]) -> Vec<u8> {
    tlv(0x04, bytes)
}

fn boolean(b: bool) -> Vec<u8> {
    tlv(0x01, &[if b { 0xff } else { 0x00 }])
}

fn ecdsa_sha256() -> Vec<u8> {
    seq(&[oid(&[1, 2, 840, 10045, 4, 3, 2])])
}

/// `CN=<cn>`.
fn name(cn: &str) -> Vec<u8> {
    seq(&[set(&[seq(&[oid(&[2, 5, 4, 3]), tlv(0x0c, cn.as_bytes())])])])
}

/// RFC 5280: UTCTime through 2049, GeneralizedTime after.
fn time(secs: i64) -> Vec<u8> {
    let t = crate::clock::rfc3339(secs * 1_000_000_000).unwrap_or_default();
    // 2026-11-30T05:09:28Z
    let digits: String = t.chars().filter(char::is_ascii_digit).collect();
    let year: i64 = digits.get(..4).and_then(|y| y.parse().ok()).unwrap_or(1970);
    if (1950..2050).contains(&year) {
        tlv(0x17, format!("{}Z", &digits[2..]).as_bytes())
    } else {
        tlv(0x18, format!("{digits}Z").as_bytes())
    }
}

struct TbsParams<'a> {
    serial: Vec<u8>,
    issuer: &'a [u8],
    subject: &'a [u8],
    not_before: i64,
    not_after: i64,
    public_key: &'a [u8],
    extensions: &'a [Vec<u8>],
}

fn tbs(p: TbsParams<'_>) -> Vec<u8> {
    let spki = seq(&[
        seq(&[
            oid(&[1, 2, 840, 10045, 2, 1]),
            oid(&[1, 2, 840, 10045, 3, 1, 7]),
        ]),
        bit_string(p.public_key),
    ]);
    seq(&[
        tlv(0xa0, &integer(&[2])),
        integer(&p.serial),
        ecdsa_sha256(),
        p.issuer.to_vec(),
        seq(&[time(p.not_before), time(p.not_after)]),
        p.subject.to_vec(),
        spki,
        tlv(0xa3, &seq(p.extensions)),
    ])
}

fn extension(id: &[u64], critical: bool, value: Vec<u8>) -> Vec<u8> {
    let mut parts = vec![oid(id)];
    if critical {
        parts.push(boolean(true));
    }
    parts.push(octet_string(&value));
    seq(&parts)
}

fn basic_constraints(ca: bool) -> Vec<u8> {
    let value = if ca { seq(&[boolean(true)]) } else { seq(&[]) };
    extension(&[2, 5, 29, 19], true, value)
}

/// CA: keyCertSign + digitalSignature; server: digitalSignature + keyEncipherment.
fn key_usage(ca: bool) -> Vec<u8> {
    // Bits from the left: 0 digitalSignature, 2 keyEncipherment, 5 keyCertSign.
    let (bits, unused) = if ca {
        (0b1000_0100u8, 2u8)
    } else {
        (0b1010_0000u8, 5u8)
    };
    extension(&[2, 5, 29, 15], true, tlv(0x03, &[unused, bits]))
}

fn ext_key_usage_server() -> Vec<u8> {
    extension(
        &[2, 5, 29, 37],
        false,
        seq(&[oid(&[1, 3, 6, 1, 5, 5, 7, 3, 1])]),
    )
}

fn subject_alt_name(dns: &[String], ips: &[IpAddr]) -> Vec<u8> {
    let mut names: Vec<Vec<u8>> = dns.iter().map(|d| tlv(0x82, d.as_bytes())).collect();
    for ip in ips {
        let bytes = match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        names.push(tlv(0x87, &bytes));
    }
    extension(&[2, 5, 29, 17], false, seq(&names))
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = crate::api::encode_base64(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::Arc;

    use super::*;
    use crate::clock::Clock;

    #[test]
    fn der_lengths_and_oids() {
        assert_eq!(tlv(0x04, &[1, 2]), vec![0x04, 2, 1, 2]);
        let long = tlv(0x04, &[0u8; 300]);
        assert_eq!(&long[..4], &[0x04, 0x82, 0x01, 0x2c]);
        // 1.2.840.10045.2.1
        assert_eq!(
            oid(&[1, 2, 840, 10045, 2, 1]),
            vec![0x06, 7, 0x2a, 0x86, 0x48, 0xce, 0x3d, 2, 1]
        );
        assert_eq!(time(1), tlv(0x17, b"700101000001Z"));
        assert_eq!(time(2_556_144_000), tlv(0x18, b"20510101000000Z"));
    }

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
