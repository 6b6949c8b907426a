//! The certificate files in `--cert-dir` (client-go util/certificate/certificate_store.go):
//! `<prefix>-<YYYY-MM-DD-HH-MM-SS>.pem` (0600: the certificate chain, then the key), the
//! symlink `<prefix>-current.pem` to it (made as `<prefix>-updated.pem` and renamed over,
//! so a reader never sees a missing link), and the kubeconfig a bootstrap writes.
//! Prefixes: `kubelet-client`, `kubelet-server`.
//!
//! Must never: write a key with a mode other than 0600, or half a file (a temporary and a
//! rename).

use std::path::{Path, PathBuf};

use super::{CertificateError, io_err};
use crate::x509::{self, CertificateInfo};

/// kubelet: the client certificate's file prefix.
pub(crate) const CLIENT_PREFIX: &str = "kubelet-client";
/// kubelet: the serving certificate's file prefix.
pub(crate) const SERVER_PREFIX: &str = "kubelet-server";

/// A certificate and its key, as read back.
#[derive(Clone)]
pub(crate) struct Pair {
    /// The chain and the key in one PEM document.
    pub pem: String,
    /// Of the first certificate.
    pub info: CertificateInfo,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// One kind of certificate in one directory.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pub dir: PathBuf,
    pub prefix: &'static str,
}

impl Store {
    pub(crate) fn new(dir: &Path, prefix: &'static str) -> Self {
        Store {
            dir: dir.to_path_buf(),
            prefix,
        }
    }

    /// `<prefix>-current.pem`.
    pub(crate) fn current_path(&self) -> PathBuf {
        self.dir.join(format!("{}-current.pem", self.prefix))
    }

    /// The current pair; `None` when there is none. A file that is there but holds no
    /// certificate and key is an error naming it.
    pub(crate) fn current(&self) -> Result<Option<Pair>, CertificateError> {
        let path = self.current_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        parse_pair(&text, &path).map(Some)
    }

    /// Writes a new pair with its time stamp (Unix seconds `now`) and points
    /// `<prefix>-current.pem` at it. Returns the current path.
    pub(crate) fn update(
        &self,
        chain_pem: &str,
        key_pem: &str,
        now: i64,
    ) -> Result<PathBuf, CertificateError> {
        let text = format!("{}{}", ensure_newline(chain_pem), key_pem);
        parse_pair(&text, &self.current_path())?;
        let stamp = crate::clock::rfc3339(now.max(1) * 1_000_000_000).unwrap_or_default();
        // 2026-12-04T06:37:47Z → 2026-12-04-06-37-47
        let stamp: String = stamp
            .trim_end_matches('Z')
            .chars()
            .map(|c| if c == 'T' || c == ':' { '-' } else { c })
            .collect();
        let name = format!("{}-{stamp}.pem", self.prefix);
        write_private(&self.dir.join(&name), text.as_bytes())?;
        let updated = self.dir.join(format!("{}-updated.pem", self.prefix));
        let _ = std::fs::remove_file(&updated);
        std::os::unix::fs::symlink(&name, &updated).map_err(io_err(&updated))?;
        let current = self.current_path();
        std::fs::rename(&updated, &current).map_err(io_err(&current))?;
        Ok(current)
    }
}

fn ensure_newline(s: &str) -> String {
    if s.ends_with('\n') {
        s.to_string()
    } else {
        format!("{s}\n")
    }
}

/// A PEM document with a certificate (first: the leaf) and a private key.
pub(crate) fn parse_pair(text: &str, path: &Path) -> Result<Pair, CertificateError> {
    let bad = |what: &str| CertificateError::BadFile {
        path: path.to_path_buf(),
        what: what.into(),
    };
    let certs = x509::pem_blocks(text, "CERTIFICATE");
    let leaf = certs.first().ok_or_else(|| bad("no CERTIFICATE block"))?;
    let info = x509::certificate_info(leaf).ok_or_else(|| bad("the certificate cannot be read"))?;
    if !text.contains("PRIVATE KEY-----") {
        return Err(bad("no private key"));
    }
    Ok(Pair {
        pem: text.to_string(),
        info,
    })
}

/// Writes `bytes` to `path` mode 0600 through a temporary and a rename; a missing
/// directory is made 0700 (`checkpoint::write_private`).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), CertificateError> {
    crate::checkpoint::write_private(path, bytes).map_err(io_err(path))
}

/// What the kubeconfig a bootstrap writes points at.
pub(crate) struct KubeconfigParts<'a> {
    pub server: &'a str,
    pub ca_pem: Option<&'a [u8]>,
    pub insecure_skip_tls_verify: bool,
    pub tls_server_name: Option<&'a str>,
    /// `<cert-dir>/kubelet-client-current.pem`.
    pub cert_file: &'a Path,
}

/// kubelet (bootstrap.go `writeKubeconfigFromBootstrapping`): cluster `default-cluster`, user
/// `default-auth` with `client-certificate` = `client-key` = the current pair, context
/// `default-context`, namespace `default`. 0600.
pub(crate) fn write_kubeconfig(
    path: &Path,
    p: &KubeconfigParts<'_>,
) -> Result<(), CertificateError> {
    let mut cluster = format!("    server: {}\n", yaml_str(p.server));
    if let Some(ca) = p.ca_pem {
        cluster.push_str(&format!(
            "    certificate-authority-data: {}\n",
            crate::api::encode_base64(ca)
        ));
    }
    if p.insecure_skip_tls_verify {
        cluster.push_str("    insecure-skip-tls-verify: true\n");
    }
    if let Some(n) = p.tls_server_name {
        cluster.push_str(&format!("    tls-server-name: {}\n", yaml_str(n)));
    }
    let cert = yaml_str(&p.cert_file.to_string_lossy());
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: default-cluster\n  cluster:\n{cluster}\
         contexts:\n- name: default-context\n  context:\n    cluster: default-cluster\n    \
         namespace: default\n    user: default-auth\ncurrent-context: default-context\n\
         users:\n- name: default-auth\n  user:\n    client-certificate: {cert}\n    \
         client-key: {cert}\n"
    );
    write_private(path, text.as_bytes())
}

/// A YAML double-quoted scalar (JSON string syntax is valid YAML).
fn yaml_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A self-signed pair valid from `nb` to `na` (Unix seconds).
    pub(crate) fn pair_pem(nb: i64, na: i64) -> (String, String) {
        let rng = ring::rand::SystemRandom::new();
        let (pkcs8, key) = x509::new_key(&rng).unwrap();
        let req = x509::certificate_request(&super::super::node_subject("n"), &key, &rng).unwrap();
        let cert = x509::issue_for_request(&req, &key, "ca", nb, na, false).unwrap();
        (
            x509::pem("CERTIFICATE", &cert),
            x509::pem("PRIVATE KEY", &pkcs8),
        )
    }

    #[test]
    fn update_writes_0600_and_moves_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(&dir.path().join("pki"), CLIENT_PREFIX);
        assert!(store.current().unwrap().is_none());
        let (c1, k1) = pair_pem(1_000_000, 2_000_000);
        let cur = store.update(&c1, &k1, 1_764_830_267).unwrap();
        assert_eq!(
            std::fs::read_link(&cur).unwrap(),
            PathBuf::from("kubelet-client-2025-12-04-06-37-47.pem")
        );
        let first = store.current().unwrap().unwrap();
        assert_eq!(first.info.not_after, 2_000_000);
        let target = store.dir.join("kubelet-client-2025-12-04-06-37-47.pem");
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(&store.dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let (c2, k2) = pair_pem(1_500_000, 3_000_000);
        store.update(&c2, &k2, 1_764_830_300).unwrap();
        let second = store.current().unwrap().unwrap();
        assert_ne!(second.info.serial, first.info.serial);
        assert!(second.pem.contains(k2.trim()));
        // The old file stays (as the kubelet's), no temporary is left.
        assert!(target.exists());
        assert!(!store.dir.join("kubelet-client-updated.pem").exists());
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path(), SERVER_PREFIX);
        std::fs::write(store.current_path(), "junk").unwrap();
        let err = store.current().unwrap_err().to_string();
        assert!(
            err.contains("kubelet-server-current.pem") && err.contains("no CERTIFICATE"),
            "{err}"
        );
        let (c, _) = pair_pem(1, 2);
        std::fs::write(store.current_path(), &c).unwrap();
        let err = store.current().unwrap_err().to_string();
        assert!(err.contains("no private key"), "{err}");
        // update refuses a pair that does not parse, and writes nothing.
        assert!(store.update("x", "y", 5).is_err());
    }

    #[test]
    fn the_kubeconfig_points_at_the_current_pair() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.conf");
        let cert = dir.path().join("pki/kubelet-client-current.pem");
        let (c, k) = pair_pem(1, 4_000_000_000);
        Store::new(&dir.path().join("pki"), CLIENT_PREFIX)
            .update(&c, &k, 10)
            .unwrap();
        write_kubeconfig(
            &path,
            &KubeconfigParts {
                server: "https://127.0.0.1:6443",
                ca_pem: Some(c.as_bytes()),
                insecure_skip_tls_verify: false,
                tls_server_name: None,
                cert_file: &cert,
            },
        )
        .unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let cfg = crate::kube::ClientConfig::from_kubeconfig(&path).unwrap();
        assert_eq!(cfg.server, "https://127.0.0.1:6443");
        assert!(cfg.tls.client_cert_pem.is_some() && cfg.tls.client_key_pem.is_some());
        assert_eq!(cfg.tls.ca_pem.as_deref(), Some(c.as_bytes()));
    }
}
