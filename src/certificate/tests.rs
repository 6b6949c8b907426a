//! The bootstrap and the rotation against the mock apiserver, whose CSR hook signs with a
//! test CA (as the controller-manager's approver and signer would) or denies.

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::bootstrap::{BootstrapOptions, Decision, load_client_cert};
use super::rotation::{Rotation, slot_validity};
use super::store::{CLIENT_PREFIX, Store};
use super::*;
use crate::clock::Clock;
use crate::kube::mock::{CsrAnswer, MockApiServer};
use crate::x509;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Issue,
    Deny,
}

/// A signer: certificates valid from `now - 300` for `lifetime` seconds.
fn signer(mock: &MockApiServer, mode: Arc<Mutex<Mode>>, lifetime: i64) {
    let rng = ring::rand::SystemRandom::new();
    let (ca_pkcs8, _) = x509::new_key(&rng).unwrap();
    mock.on_csr(move |csr: &Value| {
        if *mode.lock().unwrap() == Mode::Deny {
            return CsrAnswer::Denied("not this node".into());
        }
        let pem = crate::api::decode_base64(csr["spec"]["request"].as_str().unwrap()).unwrap();
        let der =
            x509::pem_blocks(&String::from_utf8(pem).unwrap(), "CERTIFICATE REQUEST").remove(0);
        let rng = ring::rand::SystemRandom::new();
        let ca = x509::key_from_pkcs8(&ca_pkcs8, &rng).unwrap();
        let now = crate::clock::SystemClock.now() / 1_000_000_000;
        let server = csr["spec"]["signerName"] == SERVING_SIGNER;
        let cert = x509::issue_for_request(&der, &ca, "test-ca", now - 300, now + lifetime, server)
            .unwrap();
        CsrAnswer::Issue(x509::pem("CERTIFICATE", &cert))
    });
}

fn mode_of(b: &std::path::Path) -> u32 {
    std::fs::metadata(b).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn bootstrap_reuse_expiry_and_denial() {
    let mock = MockApiServer::start_new().await.unwrap();
    let mode = Arc::new(Mutex::new(Mode::Issue));
    signer(&mock, mode.clone(), 3600);
    let dir = tempfile::tempdir().unwrap();
    let boot = dir.path().join("bootstrap-kubeconfig");
    mock.write_kubeconfig(&boot, Some("abcdef.0123456789abcdef"), None)
        .unwrap();
    let opts = BootstrapOptions {
        kubeconfig: dir.path().join("kubelet.conf"),
        bootstrap_kubeconfig: boot,
        cert_dir: dir.path().join("pki"),
        node_name: "pi-4".into(),
        poll: Duration::from_millis(20),
    };
    let now = crate::clock::SystemClock.now() / 1_000_000_000;
    let stop = CancellationToken::new();

    // 1. Nothing yet: a CSR, the files 0600, the kubeconfig.
    assert_eq!(
        load_client_cert(&opts, now, &stop).await.unwrap(),
        Decision::Bootstrap
    );
    let csrs = mock.csrs();
    assert_eq!(csrs.len(), 1);
    let (name, csr) = csrs.iter().next().unwrap();
    assert!(name.starts_with("node-csr-"), "{name}");
    assert_eq!(csr["spec"]["signerName"], CLIENT_SIGNER);
    assert_eq!(
        csr["spec"]["usages"],
        serde_json::json!(["digital signature", "client auth"])
    );
    let store = Store::new(&opts.cert_dir, CLIENT_PREFIX);
    let first = store.current().unwrap().unwrap();
    let target = opts
        .cert_dir
        .join(std::fs::read_link(store.current_path()).unwrap());
    assert_eq!(mode_of(&target), 0o600);
    assert_eq!(mode_of(&opts.kubeconfig), 0o600);
    assert!(!opts.cert_dir.join("kubelet-client.key.tmp").exists());
    let cfg = crate::kube::ClientConfig::from_kubeconfig(&opts.kubeconfig).unwrap();
    assert_eq!(cfg.server, mock.url());
    assert!(cfg.tls.client_cert_pem.is_some());
    assert_eq!(cfg.credentials, crate::kube::Credentials::None);
    // The subject is the node's.
    assert_eq!(
        first.info.subject,
        x509::name_with_orgs("system:node:pi-4", &["system:nodes"])
    );

    // 2. A restart: the certificate is valid, no CSR.
    assert_eq!(
        load_client_cert(&opts, now + 60, &stop).await.unwrap(),
        Decision::Reuse
    );
    assert_eq!(mock.csrs().len(), 1);

    // 3. Expired (the node's clock past NotAfter): bootstrap again, a new key, a new CSR.
    assert_eq!(
        load_client_cert(&opts, now + 7200, &stop).await.unwrap(),
        Decision::Bootstrap
    );
    assert_eq!(mock.csrs().len(), 2);
    let second = store.current().unwrap().unwrap();
    assert_ne!(second.info.serial, first.info.serial);

    // 4. The kubeconfig gone, the store valid: the kubeconfig is written again, no CSR.
    std::fs::remove_file(&opts.kubeconfig).unwrap();
    assert_eq!(
        load_client_cert(&opts, now, &stop).await.unwrap(),
        Decision::WriteKubeconfig
    );
    assert_eq!(mock.csrs().len(), 2);

    // 5. Denied: a clear error naming the CSR and the reason; the key is kept for a retry,
    // which finds the same CSR (named from the key).
    *mode.lock().unwrap() = Mode::Deny;
    let err = load_client_cert(&opts, now + 7200, &stop)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("was denied (MockDenied): not this node") && err.contains("node-csr-"),
        "{err}"
    );
    assert!(!err.contains("PRIVATE"));
    let key_tmp = opts.cert_dir.join("kubelet-client.key.tmp");
    assert_eq!(mode_of(&key_tmp), 0o600);
    assert_eq!(mock.csrs().len(), 3);
    let again = load_client_cert(&opts, now + 7200, &stop)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(again, err);
    assert_eq!(mock.csrs().len(), 3);
}

#[tokio::test]
async fn a_pending_csr_times_out_and_shutdown_stops_the_wait() {
    let mock = MockApiServer::start_new().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let boot = dir.path().join("bootstrap-kubeconfig");
    mock.write_kubeconfig(&boot, Some("abcdef.0123456789abcdef"), None)
        .unwrap();
    let client =
        crate::kube::Client::new(&crate::kube::ClientConfig::from_kubeconfig(&boot).unwrap())
            .unwrap();
    let (_, der, _) = csr::new_request(&node_subject("n")).unwrap();
    let req = csr::Request {
        name: None,
        der: &der,
        signer: SERVING_SIGNER,
        usages: &SERVING_USAGES,
        timeout: Duration::from_millis(50),
        poll: Duration::from_millis(10),
    };
    let err = csr::request(&client, &req, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, CertificateError::Timeout { .. }), "{err}");
    let stop = CancellationToken::new();
    stop.cancel();
    let req = csr::Request {
        timeout: Duration::from_secs(3600),
        ..req
    };
    let err = csr::request(&client, &req, &stop).await.unwrap_err();
    assert!(matches!(err, CertificateError::Shutdown), "{err}");
    // Both CSRs are there, pending, with generated names.
    assert!(mock.csrs().keys().all(|n| n.starts_with("csr-")));
    // An operator approves one later: the next read sees the certificate.
    let name = mock.csrs().keys().next().unwrap().clone();
    mock.answer_csr(&name, CsrAnswer::Issue("x".into()));
    assert_eq!(
        csr::outcome(&mock.csrs()[&name]),
        csr::Outcome::Issued("x".into())
    );
}

/// A client certificate past its deadline is renewed: a new CSR (generateName, the
/// client-kubelet signer), a new serial in the store and in the slot, the old file kept.
#[tokio::test]
async fn rotation_renews_a_due_certificate() {
    let mock = MockApiServer::start_new().await.unwrap();
    let mode = Arc::new(Mutex::new(Mode::Issue));
    signer(&mock, mode, 3600);
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let client =
        crate::kube::Client::new(&crate::kube::ClientConfig::from_kubeconfig(&kc).unwrap())
            .unwrap();
    let store = Store::new(&dir.path().join("pki"), CLIENT_PREFIX);
    let now = crate::clock::SystemClock.now() / 1_000_000_000;
    // An old certificate: 1000 s of life, 900 gone (past any 70–90 % deadline).
    let rng = ring::rand::SystemRandom::new();
    let (pkcs8, key) = x509::new_key(&rng).unwrap();
    let req = x509::certificate_request(&node_subject("pi-4"), &key, &rng).unwrap();
    let old = x509::issue_for_request(&req, &key, "ca", now - 900, now + 100, false).unwrap();
    store
        .update(
            &x509::pem("CERTIFICATE", &old),
            &x509::pem("PRIVATE KEY", &pkcs8),
            now - 900,
        )
        .unwrap();
    let slot = CertSlot::default();
    let rotation = Rotation {
        client: client.clone(),
        slot: slot.clone(),
        store: store.clone(),
        subject: node_subject("pi-4"),
        signer: CLIENT_SIGNER,
        usages: &CLIENT_USAGES,
        renew: Some(client),
        clock: crate::clock::SystemClock,
        poll: Duration::from_millis(20),
    };
    assert!(rotation.load().unwrap());
    assert_eq!(slot_validity(&slot), Some((now - 900, now + 100)));
    let stop = CancellationToken::new();
    let local = tokio::task::LocalSet::new();
    let task = local.spawn_local(rotation.run(stop.clone()));
    let slot2 = slot.clone();
    let renewed = local
        .run_until(async move {
            // Lasting evidence: the slot's certificate changes (bounded wait).
            for _ in 0..500 {
                match slot_validity(&slot2) {
                    Some(v) if v != (now - 900, now + 100) => return Some(v),
                    _ => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
            None
        })
        .await;
    stop.cancel();
    local.run_until(task).await.unwrap();
    let (nb, na) = renewed.expect("the certificate was renewed");
    assert!(na - nb >= 3600);
    let csrs = mock.csrs();
    assert_eq!(csrs.len(), 1, "one renewal, then a valid certificate");
    let csr = csrs.values().next().unwrap();
    assert_eq!(csr["metadata"]["generateName"], "csr-");
    assert_eq!(csr["spec"]["signerName"], CLIENT_SIGNER);
    let current = store.current().unwrap().unwrap();
    assert_eq!((current.info.not_before, current.info.not_after), (nb, na));
    let files = std::fs::read_dir(&store.dir).unwrap().count();
    assert!(files >= 2, "the old file stays beside the new one");
}
