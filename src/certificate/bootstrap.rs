//! TLS bootstrapping (kubelet pkg/kubelet/certificate/bootstrap/bootstrap.go
//! `LoadClientCert`): before anything talks to the cluster, make sure `--kubeconfig` holds
//! a valid client certificate, or get one with the bootstrap kubeconfig's token.
//!
//! ```text
//!   --kubeconfig readable, its client certificate unexpired ─────────▶ Reuse (no CSR)
//!   <cert-dir>/kubelet-client-current.pem unexpired ─────────────────▶ WriteKubeconfig
//!   otherwise (missing, expired) ────────────────────────────────────▶ Bootstrap:
//!       key <cert-dir>/kubelet-client.key.tmp (kept across failed attempts: the retry
//!       finds its own CSR, named from the key) → CSR node-csr-… with the bootstrap
//!       token → wait ≤ 1 h → kubelet-client-<stamp>.pem + the -current link → kubeconfig
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::store::{self, CLIENT_PREFIX, KubeconfigParts, Store};
use super::{CLIENT_SIGNER, CLIENT_USAGES, CertificateError, csr, io_err, node_subject};
use crate::kube::{Client, ClientConfig};
use crate::x509;

/// kubelet: the bootstrap CSR is watched for up to an hour.
pub(crate) const BOOTSTRAP_WAIT: Duration = Duration::from_secs(3600);

/// What the bootstrap needs.
#[derive(Debug, Clone)]
pub(crate) struct BootstrapOptions {
    /// `--kubeconfig`: read when it exists, written after a bootstrap.
    pub kubeconfig: PathBuf,
    /// `--bootstrap-kubeconfig`.
    pub bootstrap_kubeconfig: PathBuf,
    /// `--cert-dir`.
    pub cert_dir: PathBuf,
    pub node_name: String,
    /// How often the CSR is read back.
    pub poll: Duration,
}

/// What the start decided (pure: [`decide`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The kubeconfig's certificate is valid: nothing to do.
    Reuse,
    /// The store has a valid certificate: point the kubeconfig at it.
    WriteKubeconfig,
    /// Ask the cluster for a certificate.
    Bootstrap,
}

/// The validity (NotAfter, Unix seconds) of the kubeconfig's certificate (`Some(None)`: the
/// kubeconfig has no client certificate, e.g. a token) and of the store's, at `now`.
pub(crate) fn decide(kubeconfig: Option<Option<i64>>, store: Option<i64>, now: i64) -> Decision {
    match (kubeconfig, store) {
        // kubelet: `isClientConfigStillValid` — a kubeconfig without certificates is valid.
        (Some(None), _) => Decision::Reuse,
        (Some(Some(not_after)), _) if now < not_after => Decision::Reuse,
        (_, Some(not_after)) if now < not_after => Decision::WriteKubeconfig,
        _ => Decision::Bootstrap,
    }
}

/// The NotAfter of the kubeconfig's client certificate: `None` if the kubeconfig cannot be
/// used (missing, unreadable: bootstrap), `Some(None)` when it has no certificate.
fn kubeconfig_validity(path: &Path) -> Option<Option<i64>> {
    let cfg = ClientConfig::from_kubeconfig(path).ok()?;
    match cfg.tls.client_cert_pem {
        None => Some(None),
        Some(pem) => {
            let text = String::from_utf8_lossy(&pem);
            let der = x509::pem_blocks(&text, "CERTIFICATE").into_iter().next()?;
            Some(Some(x509::certificate_info(&der)?.not_after))
        }
    }
}

/// kubelet `LoadClientCert`. `now`: Unix seconds. Returns what it decided.
pub(crate) async fn load_client_cert(
    opts: &BootstrapOptions,
    now: i64,
    shutdown: &CancellationToken,
) -> Result<Decision, CertificateError> {
    let store = Store::new(&opts.cert_dir, CLIENT_PREFIX);
    let stored = match store.current() {
        Ok(p) => p,
        Err(e) => {
            log::warn!("{e}; bootstrapping a new client certificate");
            None
        }
    };
    let decision = decide(
        kubeconfig_validity(&opts.kubeconfig),
        stored.as_ref().map(|p| p.info.not_after),
        now,
    );
    if decision == Decision::Reuse {
        log::info!(
            "kubeconfig {} has a valid client certificate: no bootstrap",
            opts.kubeconfig.display()
        );
        return Ok(decision);
    }
    let boot = ClientConfig::from_kubeconfig(&opts.bootstrap_kubeconfig)?;
    match decision {
        Decision::Reuse | Decision::WriteKubeconfig => {}
        Decision::Bootstrap => {
            log::info!(
                "no valid client certificate for {}: bootstrapping with {}",
                opts.kubeconfig.display(),
                opts.bootstrap_kubeconfig.display()
            );
            let client = Client::new(&boot)?;
            // kubelet: the key is kept in kubelet-client.key.tmp until a certificate comes.
            let key_tmp = opts.cert_dir.join("kubelet-client.key.tmp");
            let key_pem = match std::fs::read_to_string(&key_tmp) {
                Ok(k) => k,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let (k, _, _) = csr::new_request(&node_subject(&opts.node_name))?;
                    store::write_private(&key_tmp, k.as_bytes())?;
                    k
                }
                Err(e) => return Err(io_err(&key_tmp)(e)),
            };
            let pkcs8 = x509::pem_blocks(&key_pem, "PRIVATE KEY")
                .into_iter()
                .next()
                .ok_or_else(|| CertificateError::BadFile {
                    path: key_tmp.clone(),
                    what: "no PKCS#8 PRIVATE KEY block".into(),
                })?;
            let subject = node_subject(&opts.node_name);
            let (der, public) = csr::request_for_key(&pkcs8, &subject)?;
            let req = csr::Request {
                name: Some(csr::bootstrap_name(&public, &subject, &CLIENT_USAGES)),
                der: &der,
                signer: CLIENT_SIGNER,
                usages: &CLIENT_USAGES,
                timeout: BOOTSTRAP_WAIT,
                poll: opts.poll,
            };
            let (name, chain) = csr::request(&client, &req, shutdown).await?;
            store.update(&chain, &key_pem, now)?;
            let _ = std::fs::remove_file(&key_tmp);
            log::info!(
                "client certificate issued by {name}: {}",
                store.current_path().display()
            );
        }
    }
    store::write_kubeconfig(
        &opts.kubeconfig,
        &KubeconfigParts {
            server: &boot.server,
            ca_pem: boot.tls.ca_pem.as_deref(),
            insecure_skip_tls_verify: boot.tls.insecure_skip_verify,
            tls_server_name: boot.tls_server_name.as_deref(),
            cert_file: &store.current_path(),
        },
    )?;
    log::info!("wrote {}", opts.kubeconfig.display());
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        // (kubeconfig, store, now, decision)
        for (kc, st, now, want) in [
            (None, None, 100, Decision::Bootstrap),
            (Some(Some(200)), None, 100, Decision::Reuse),
            (Some(None), None, 100, Decision::Reuse),
            (Some(Some(100)), None, 100, Decision::Bootstrap),
            (Some(Some(50)), Some(200), 100, Decision::WriteKubeconfig),
            (None, Some(200), 100, Decision::WriteKubeconfig),
            (None, Some(99), 100, Decision::Bootstrap),
            (Some(Some(50)), Some(60), 100, Decision::Bootstrap),
        ] {
            assert_eq!(decide(kc, st, now), want, "{kc:?} {st:?}");
        }
    }
}
