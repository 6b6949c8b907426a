//! Certificate rotation (client-go util/certificate/certificate_manager.go): one task per
//! certificate (the client's with `--rotate-certificates`, the serving one with
//! `--rotate-server-certificates`) that sleeps until the jittered deadline of the
//! certificate in its [`CertSlot`], asks for a new one with a fresh key, stores it, and puts
//! it in the slot — new TLS handshakes present it from then on.
//!
//! ```text
//!   Valid { deadline } --sleep--> RenewDue --CSR issued--> store + slot --> Valid { new deadline }
//!   Missing (serving: none yet) ----------/      \--failure--> retry after 2,4,…,32 s
//!   Expired (client) --> keeps trying with what it has; a restart bootstraps again
//! ```

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::manager::{self, Phase};
use super::store::Store;
use super::{CertSlot, CertificateError, csr};
use crate::clock::Clock;
use crate::kube::Client;
use crate::x509::{self, RequestSubject};

/// kubelet: each rotation's CSR is waited for up to 15 minutes.
pub(crate) const ROTATION_WAIT: Duration = Duration::from_secs(15 * 60);

/// One certificate to keep current.
pub(crate) struct Rotation<C: Clock> {
    /// Sends the CSRs (the node's own client: its certificate authenticates the renewal).
    pub client: Client,
    pub slot: CertSlot,
    pub store: Store,
    pub subject: RequestSubject,
    pub signer: &'static str,
    pub usages: &'static [&'static str],
    /// Renew this client's connections after a rotation (the client certificate).
    pub renew: Option<Client>,
    pub clock: C,
    pub poll: Duration,
}

/// (NotBefore, NotAfter) of the slot's certificate.
pub(crate) fn slot_validity(slot: &CertSlot) -> Option<(i64, i64)> {
    let ck = slot.current()?;
    let info = x509::certificate_info(ck.cert.first()?.as_ref())?;
    Some((info.not_before, info.not_after))
}

impl<C: Clock> Rotation<C> {
    fn now(&self) -> i64 {
        self.clock.now() / 1_000_000_000
    }

    /// Fills the slot from the store when the store's certificate is valid (a restart).
    pub(crate) fn load(&self) -> Result<bool, CertificateError> {
        match self.store.current()? {
            Some(pair) if self.now() < pair.info.not_after => {
                self.slot.set_pem(
                    pair.pem.as_bytes(),
                    pair.pem.as_bytes(),
                    "stored certificate",
                )?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// One renewal: a new key, a CSR, the certificate stored and put in the slot.
    pub(crate) async fn rotate(
        &self,
        shutdown: &CancellationToken,
    ) -> Result<String, CertificateError> {
        let (key_pem, der, _) = csr::new_request(&self.subject)?;
        let req = csr::Request {
            name: None,
            der: &der,
            signer: self.signer,
            usages: self.usages,
            timeout: ROTATION_WAIT,
            poll: self.poll,
        };
        let (name, chain) = csr::request(&self.client, &req, shutdown).await?;
        let path = self.store.update(&chain, &key_pem, self.now())?;
        self.slot.set_pem(
            chain.as_bytes(),
            key_pem.as_bytes(),
            &path.to_string_lossy(),
        )?;
        if let Some(c) = &self.renew {
            c.renew_connections();
        }
        let serial = self
            .store
            .current()?
            .map(|p| p.info.serial_hex())
            .unwrap_or_default();
        log::info!(
            "{}: new certificate from {name} (serial {serial}) in {}",
            self.signer,
            path.display()
        );
        Ok(name)
    }

    /// Keeps the slot's certificate current until `shutdown`.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut jitter = manager::jitter();
        let mut failures = 0u32;
        loop {
            let wait = match manager::assess(slot_validity(&self.slot), self.now(), jitter) {
                Phase::Valid { deadline } => {
                    log::info!(
                        "{}: certificate rotation at {}",
                        self.signer,
                        crate::clock::rfc3339(deadline * 1_000_000_000).unwrap_or_default()
                    );
                    Duration::from_secs((deadline - self.now()).max(1) as u64)
                }
                phase => {
                    if phase == Phase::Expired {
                        log::error!("{}: the certificate has expired", self.signer);
                    }
                    match self.rotate(&shutdown).await {
                        Ok(_) => {
                            failures = 0;
                            jitter = manager::jitter();
                            continue;
                        }
                        Err(CertificateError::Shutdown) => return,
                        Err(e) => {
                            let d = manager::retry_delay(failures);
                            failures += 1;
                            log::warn!("{}: rotation failed, retrying in {d:?}: {e}", self.signer);
                            d
                        }
                    }
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}
