//! X.509 and PKCS#10 in DER, for the few certificates picolet makes or reads: the node API's
//! self-signed certificate (`local_api::certs`), and the certificate signing requests of the
//! TLS bootstrap and rotation (`certificate`), whose answers it reads back.
//!
//! Owns: the DER writer (definite lengths, the types X.509 needs), ECDSA P-256 keys and
//! signatures (ring), the PKCS#10 request (RFC 2986) with an extensionRequest for
//! subjectAltName, PEM, and a small DER reader for what a caller needs from a certificate
//! (serial, validity, subject) and from a request (subject, key, requested extensions).
//!
//! Must never: do I/O, keep a key, or accept a malformed input silently (the reader answers
//! `None`; callers name the file).

use std::net::IpAddr;

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    #[error("cannot make a key: {0}")]
    Key(String),
    #[error("cannot sign: {0}")]
    Sign(String),
}

/// A fresh ECDSA P-256 key: its PKCS#8 document and the key pair.
pub(crate) fn new_key(rng: &SystemRandom) -> Result<(Vec<u8>, EcdsaKeyPair), X509Error> {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, rng)
        .map_err(|e| X509Error::Key(e.to_string()))?;
    let pair = key_from_pkcs8(pkcs8.as_ref(), rng)?;
    Ok((pkcs8.as_ref().to_vec(), pair))
}

/// An ECDSA P-256 key from its PKCS#8 document.
pub(crate) fn key_from_pkcs8(pkcs8: &[u8], rng: &SystemRandom) -> Result<EcdsaKeyPair, X509Error> {
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8, rng)
        .map_err(|e| X509Error::Key(e.to_string()))
}

/// 16 random bytes, positive.
pub(crate) fn serial(rng: &SystemRandom) -> Result<Vec<u8>, X509Error> {
    let mut b = [0u8; 16];
    rng.fill(&mut b)
        .map_err(|e| X509Error::Key(e.to_string()))?;
    b[0] &= 0x7f;
    b[0] |= 0x01;
    Ok(b.to_vec())
}

/// `SEQUENCE { body, ecdsa-with-SHA256, signature }`: a signed certificate or request.
pub(crate) fn sign(
    key: &EcdsaKeyPair,
    rng: &SystemRandom,
    body: Vec<u8>,
) -> Result<Vec<u8>, X509Error> {
    let sig = key
        .sign(rng, &body)
        .map_err(|e| X509Error::Sign(e.to_string()))?;
    Ok(seq(&[body, ecdsa_sha256(), bit_string(sig.as_ref())]))
}

/// What a certificate signing request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestSubject {
    /// kubelet: `system:node:<nodeName>`.
    pub common_name: String,
    /// kubelet: `[system:nodes]`.
    pub organizations: Vec<String>,
    /// Serving requests only (client requests carry no SANs: the approver refuses them).
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
}

/// A PKCS#10 request (RFC 2986) for `subject`, signed by `key`, in DER.
/// client-go: `x509.CreateCertificateRequest` (version 0, the SANs in an extensionRequest).
pub(crate) fn certificate_request(
    subject: &RequestSubject,
    key: &EcdsaKeyPair,
    rng: &SystemRandom,
) -> Result<Vec<u8>, X509Error> {
    let orgs: Vec<&str> = subject.organizations.iter().map(String::as_str).collect();
    let attributes = if subject.dns_names.is_empty() && subject.ips.is_empty() {
        Vec::new()
    } else {
        // pkcs-9-at-extensionRequest 1.2.840.113549.1.9.14
        seq(&[
            oid(&[1, 2, 840, 113549, 1, 9, 14]),
            set(&[seq(&[subject_alt_name(&subject.dns_names, &subject.ips)])]),
        ])
    };
    let info = seq(&[
        integer(&[0]),
        name_with_orgs(&subject.common_name, &orgs),
        ec_spki(key.public_key().as_ref()),
        tlv(0xa0, &attributes),
    ]);
    sign(key, rng, info)
}

// ---------------------------------------------------------------------------------------
// Reading

/// One TLV: (tag, content, the rest after it). `None` on a truncated or indefinite length.
pub(crate) fn read_tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The TLVs of a constructed value's content, whole (tag and length included).
fn elements(mut content: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (_, _, rest) = read_tlv(content)?;
        out.push(&content[..content.len() - rest.len()]);
        content = rest;
    }
    Some(out)
}

/// What picolet reads from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CertificateInfo {
    pub serial: Vec<u8>,
    /// Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
    /// The subject Name, DER.
    pub subject: Vec<u8>,
}

impl CertificateInfo {
    /// The serial in hex, as `openssl x509 -serial` prints it.
    pub(crate) fn serial_hex(&self) -> String {
        self.serial.iter().map(|b| format!("{b:02X}")).collect()
    }
}

/// Serial, validity and subject of a DER certificate.
pub(crate) fn certificate_info(der: &[u8]) -> Option<CertificateInfo> {
    let (0x30, cert, _) = read_tlv(der)? else {
        return None;
    };
    let (0x30, tbs, _) = read_tlv(cert)? else {
        return None;
    };
    let mut parts = elements(tbs)?.into_iter();
    let mut next = parts.next()?;
    if next.first() == Some(&0xa0) {
        next = parts.next()?;
    }
    let (0x02, serial, _) = read_tlv(next)? else {
        return None;
    };
    let _signature = parts.next()?;
    let _issuer = parts.next()?;
    let (0x30, validity, _) = read_tlv(parts.next()?)? else {
        return None;
    };
    let subject = parts.next()?.to_vec();
    let (t1, nb, rest) = read_tlv(validity)?;
    let (t2, na, _) = read_tlv(rest)?;
    Some(CertificateInfo {
        serial: serial.to_vec(),
        not_before: parse_time(t1, nb)?,
        not_after: parse_time(t2, na)?,
        subject,
    })
}

/// UTCTime (`YYMMDDHHMMSSZ`, 1950–2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) → Unix seconds.
fn parse_time(tag: u8, content: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(content).ok()?.strip_suffix('Z')?;
    let full = match (tag, s.len()) {
        (0x17, 12) => {
            let yy: i64 = s[..2].parse().ok()?;
            format!("{}{s}", if yy < 50 { "20" } else { "19" })
        }
        (0x18, 14) => s.to_string(),
        _ => return None,
    };
    if !full.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let text = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &full[..4],
        &full[4..6],
        &full[6..8],
        &full[8..10],
        &full[10..12],
        &full[12..14]
    );
    crate::clock::parse_rfc3339(&text).map(|n| n / 1_000_000_000)
}

/// The parts of a PKCS#10 request a signer copies.
#[cfg(test)]
pub(crate) fn request_parts(der: &[u8]) -> Option<RequestParts> {
    let (0x30, req, _) = read_tlv(der)? else {
        return None;
    };
    let (0x30, info, _) = read_tlv(req)? else {
        return None;
    };
    let parts = elements(info)?;
    let (subject, spki) = (parts.get(1)?.to_vec(), parts.get(2)?.to_vec());
    let mut extensions = None;
    if let Some(attrs) = parts.get(3) {
        let (0xa0, attrs, _) = read_tlv(attrs)? else {
            return None;
        };
        for attr in elements(attrs)? {
            let (_, body, _) = read_tlv(attr)?;
            let (_, id, rest) = read_tlv(body)?;
            if id == &oid(&[1, 2, 840, 113549, 1, 9, 14])[2..] {
                let (0x31, values, _) = read_tlv(rest)? else {
                    return None;
                };
                let (0x30, _, _) = read_tlv(values)? else {
                    return None;
                };
                extensions = Some(values.to_vec());
            }
        }
    }
    Some(RequestParts {
        subject,
        spki,
        extensions,
    })
}

/// The parts of a PKCS#10 request a signer copies, DER.
#[cfg(test)]
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RequestParts {
    pub subject: Vec<u8>,
    pub spki: Vec<u8>,
    /// The requested extensions' SEQUENCE.
    pub extensions: Option<Vec<u8>>,
}

/// Signs a certificate for a request, as a cluster signer would (tests: the mock apiserver's
/// signer). `usage_server`: serverAuth, else clientAuth.
#[cfg(test)]
pub(crate) fn issue_for_request(
    request_der: &[u8],
    ca_key: &EcdsaKeyPair,
    ca_cn: &str,
    not_before: i64,
    not_after: i64,
    usage_server: bool,
) -> Result<Vec<u8>, X509Error> {
    let rng = SystemRandom::new();
    let RequestParts {
        subject,
        spki,
        extensions: requested,
    } = request_parts(request_der).ok_or_else(|| X509Error::Sign("malformed request".into()))?;
    let eku = if usage_server {
        ext_key_usage_server()
    } else {
        extension(
            &[2, 5, 29, 37],
            false,
            seq(&[oid(&[1, 3, 6, 1, 5, 5, 7, 3, 2])]),
        )
    };
    let mut extensions = vec![basic_constraints(false), key_usage(false), eku];
    if let Some((_, req, _)) = requested.as_deref().and_then(read_tlv) {
        extensions.extend(
            elements(req)
                .unwrap_or_default()
                .into_iter()
                .map(<[u8]>::to_vec),
        );
    }
    let body = seq(&[
        tlv(0xa0, &integer(&[2])),
        integer(&serial(&rng)?),
        ecdsa_sha256(),
        name(ca_cn),
        seq(&[time(not_before), time(not_after)]),
        subject,
        spki,
        tlv(0xa3, &seq(&extensions)),
    ]);
    sign(ca_key, &rng, body)
}

/// The DER of every `label` block of a PEM document.
pub(crate) fn pem_blocks(text: &str, label: &str) -> Vec<Vec<u8>> {
    let (begin, end) = (
        format!("-----BEGIN {label}-----"),
        format!("-----END {label}-----"),
    );
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(&begin) {
        let after = &rest[i + begin.len()..];
        let Some(j) = after.find(&end) else { break };
        let b64: String = after[..j].split_whitespace().collect();
        if let Some(der) = crate::api::decode_base64(&b64) {
            out.push(der);
        }
        rest = &after[j + end.len()..];
    }
    out
}

// ---------------------------------------------------------------------------------------
// DER

pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
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

pub(crate) fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

pub(crate) fn set(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x31, &parts.concat())
}

pub(crate) fn oid(arcs: &[u64]) -> Vec<u8> {
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

pub(crate) fn integer(bytes: &[u8]) -> Vec<u8> {
    tlv(0x02, bytes)
}

pub(crate) fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(bytes);
    tlv(0x03, &body)
}

pub(crate) fn octet_string(bytes: &[u8]) -> Vec<u8> {
    tlv(0x04, bytes)
}

pub(crate) fn boolean(b: bool) -> Vec<u8> {
    tlv(0x01, &[if b { 0xff } else { 0x00 }])
}

pub(crate) fn ecdsa_sha256() -> Vec<u8> {
    seq(&[oid(&[1, 2, 840, 10045, 4, 3, 2])])
}

/// `CN=<cn>`.
pub(crate) fn name(cn: &str) -> Vec<u8> {
    name_with_orgs(cn, &[])
}

/// `O=<org>…, CN=<cn>` (Go's pkix.Name order: the organizations before the common name).
pub(crate) fn name_with_orgs(cn: &str, orgs: &[&str]) -> Vec<u8> {
    let mut rdns: Vec<Vec<u8>> = orgs
        .iter()
        .map(|o| set(&[seq(&[oid(&[2, 5, 4, 10]), tlv(0x0c, o.as_bytes())])]))
        .collect();
    rdns.push(set(&[seq(&[oid(&[2, 5, 4, 3]), tlv(0x0c, cn.as_bytes())])]));
    seq(&rdns)
}

/// RFC 5280: UTCTime through 2049, GeneralizedTime after. Times before the epoch are the
/// epoch (a clock at 1970-01-01T00:00:12Z, one hour earlier for a `notBefore`).
pub(crate) fn time(secs: i64) -> Vec<u8> {
    let secs = secs.max(1);
    let t = crate::clock::rfc3339(secs.saturating_mul(1_000_000_000)).unwrap_or_default();
    // 2026-11-30T05:09:28Z
    let digits: String = t.chars().filter(char::is_ascii_digit).collect();
    let year: i64 = digits.get(..4).and_then(|y| y.parse().ok()).unwrap_or(1970);
    if (1950..2050).contains(&year) {
        tlv(0x17, format!("{}Z", &digits[2..]).as_bytes())
    } else {
        tlv(0x18, format!("{digits}Z").as_bytes())
    }
}

pub(crate) struct TbsParams<'a> {
    pub serial: Vec<u8>,
    pub issuer: &'a [u8],
    pub subject: &'a [u8],
    pub not_before: i64,
    pub not_after: i64,
    pub public_key: &'a [u8],
    pub extensions: &'a [Vec<u8>],
}

pub(crate) fn tbs(p: TbsParams<'_>) -> Vec<u8> {
    let spki = ec_spki(p.public_key);
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

/// The SubjectPublicKeyInfo of an uncompressed P-256 point.
pub(crate) fn ec_spki(public_key: &[u8]) -> Vec<u8> {
    seq(&[
        seq(&[
            oid(&[1, 2, 840, 10045, 2, 1]),
            oid(&[1, 2, 840, 10045, 3, 1, 7]),
        ]),
        bit_string(public_key),
    ])
}

pub(crate) fn extension(id: &[u64], critical: bool, value: Vec<u8>) -> Vec<u8> {
    let mut parts = vec![oid(id)];
    if critical {
        parts.push(boolean(true));
    }
    parts.push(octet_string(&value));
    seq(&parts)
}

pub(crate) fn basic_constraints(ca: bool) -> Vec<u8> {
    let value = if ca { seq(&[boolean(true)]) } else { seq(&[]) };
    extension(&[2, 5, 29, 19], true, value)
}

/// CA: keyCertSign + digitalSignature; server: digitalSignature + keyEncipherment.
pub(crate) fn key_usage(ca: bool) -> Vec<u8> {
    // Bits from the left: 0 digitalSignature, 2 keyEncipherment, 5 keyCertSign.
    let (bits, unused) = if ca {
        (0b1000_0100u8, 2u8)
    } else {
        (0b1010_0000u8, 5u8)
    };
    extension(&[2, 5, 29, 15], true, tlv(0x03, &[unused, bits]))
}

pub(crate) fn ext_key_usage_server() -> Vec<u8> {
    extension(
        &[2, 5, 29, 37],
        false,
        seq(&[oid(&[1, 3, 6, 1, 5, 5, 7, 3, 1])]),
    )
}

pub(crate) fn subject_alt_name(dns: &[String], ips: &[IpAddr]) -> Vec<u8> {
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

pub(crate) fn pem(label: &str, der: &[u8]) -> String {
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
    use super::*;

    #[test]
    fn der_lengths_and_oids() {
        assert_eq!(tlv(0x04, &[1, 2]), vec![0x04, 2, 1, 2]);
        let long = tlv(0x04, &[0u8; 300]);
        assert_eq!(&long[..4], &[0x04, 0x82, 0x01, 0x2c]);
        assert_eq!(
            read_tlv(&long).map(|(t, c, r)| (t, c.len(), r.len())),
            Some((4, 300, 0))
        );
        // 1.2.840.10045.2.1
        assert_eq!(
            oid(&[1, 2, 840, 10045, 2, 1]),
            vec![0x06, 7, 0x2a, 0x86, 0x48, 0xce, 0x3d, 2, 1]
        );
        assert_eq!(time(1), tlv(0x17, b"700101000001Z"));
        assert_eq!(time(2_556_144_000), tlv(0x18, b"20510101000000Z"));
    }

    #[test]
    fn times_read_back() {
        for secs in [1i64, 1_700_000_000, 2_524_607_999, 2_556_144_000] {
            let t = time(secs);
            let (tag, content, _) = read_tlv(&t).unwrap();
            assert_eq!(parse_time(tag, content), Some(secs), "{secs}");
        }
        // Truncated, non-digit, wrong tag.
        assert_eq!(parse_time(0x17, b"7001010000Z"), None);
        assert_eq!(parse_time(0x17, b"70010100000xZ"), None);
        assert_eq!(parse_time(0x04, b"700101000001Z"), None);
        assert_eq!(read_tlv(&[0x30, 0x05, 1]), None);
        assert_eq!(read_tlv(&[0x30, 0x80]), None);
    }

    fn subject(dns: &[&str], ips: &[&str]) -> RequestSubject {
        RequestSubject {
            common_name: "system:node:pi-4".into(),
            organizations: vec!["system:nodes".into()],
            dns_names: dns.iter().map(|s| s.to_string()).collect(),
            ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    /// Table: a request's parts read back as written; a certificate issued for it carries
    /// the request's subject and the validity asked for.
    #[test]
    fn requests_and_certificates_round_trip() {
        let rng = SystemRandom::new();
        let (_, ca) = new_key(&rng).unwrap();
        for (dns, ips, server) in [
            (vec![], vec![], false),
            (vec!["pi-4"], vec!["10.0.0.4"], true),
            (vec![], vec!["10.0.0.4", "fd00::4"], true),
        ] {
            let (_, key) = new_key(&rng).unwrap();
            let s = subject(&dns, &ips);
            let der = certificate_request(&s, &key, &rng).unwrap();
            let RequestParts {
                subject: subj,
                spki,
                extensions: ext,
            } = request_parts(&der).unwrap();
            assert_eq!(subj, name_with_orgs("system:node:pi-4", &["system:nodes"]));
            assert_eq!(spki, ec_spki(key.public_key().as_ref()));
            assert_eq!(ext.is_some(), server);
            let cert =
                issue_for_request(&der, &ca, "ca", 1_700_000_000, 1_700_000_900, server).unwrap();
            let info = certificate_info(&cert).unwrap();
            assert_eq!(
                (info.not_before, info.not_after),
                (1_700_000_000, 1_700_000_900)
            );
            assert_eq!(info.subject, subj);
            assert_eq!(info.serial.len(), 16);
        }
        assert_eq!(certificate_info(&[0x30, 0x00]), None);
        assert_eq!(request_parts(b"garbage"), None);
    }

    /// openssl checks the request's signature and prints its subject and SANs. Skipped
    /// (said so) without openssl.
    #[test]
    fn openssl_verifies_the_request() {
        if std::process::Command::new("openssl")
            .arg("version")
            .output()
            .is_err()
        {
            eprintln!("skipped: openssl is not installed");
            return;
        }
        let rng = SystemRandom::new();
        let (_, key) = new_key(&rng).unwrap();
        let der = certificate_request(&subject(&["pi-4"], &["10.0.0.4"]), &key, &rng).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("req.pem");
        std::fs::write(&path, pem("CERTIFICATE REQUEST", &der)).unwrap();
        let out = std::process::Command::new("openssl")
            .args(["req", "-verify", "-noout", "-text", "-in"])
            .arg(&path)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains("verify OK")
                || text.contains("Certificate request self-signature verify OK"),
            "{text}"
        );
        assert!(
            text.contains("O = system:nodes, CN = system:node:pi-4")
                || text.contains("O=system:nodes, CN=system:node:pi-4"),
            "{text}"
        );
        assert!(text.contains("DNS:pi-4, IP Address:10.0.0.4"), "{text}");
        assert!(
            text.contains("prime256v1") || text.contains("P-256"),
            "{text}"
        );
        assert_eq!(
            pem_blocks(&pem("CERTIFICATE REQUEST", &der), "CERTIFICATE REQUEST"),
            vec![der]
        );
    }
}
