//! The node's own Kubernetes API, served by picolet itself so the real `kubectl`
//! works against a board with or without a cluster: HTTPS on `--address`/`--port` (kubelet
//! defaults: port 10250; picolet binds 127.0.0.1 unless told otherwise), a bearer token,
//! and a kubeconfig for it at `<root-dir>/kubeconfig`.
//!
//! - [`certs`]: the serving certificate made on first start when no `--tls-cert-file` is
//!   given (kubelet: a CA of its own and a server certificate it signs, under `--cert-dir`).
//! - [`token`]: the bearer token and the kubeconfig written for it.
//! - [`view`]: the pods served, kept from the agent's pod events.
//! - [`logs`]: the reader behind `pods/log` (`kubectl logs`).
//! - [`printers`], [`select`]: server-side `Table`s and selectors.
//! - [`stats`]: resource usage — `/stats/summary`, `/metrics/resource` and
//!   `metrics.k8s.io` for `kubectl top` — read from the runtime and `/proc` per request.
//! - [`auth`]: who calls and may they (kubelet: x509, TokenReview, anonymous;
//!   `AlwaysAllow` or SubjectAccessReview), with the webhooks' caches.
//! - [`server`]: the listener, TLS and the routes.
//! - [`stream`]: `exec`, `attach` and `port-forward`, proxied to the runtime's streaming
//!   server.
//!
//! picolet differs from the kubelet here on purpose: the kubelet's port serves only its own
//! paths (`/pods`, `/logs`, `/exec`, …) and needs an apiserver for `kubectl`; picolet serves
//! the `v1` API subset kubectl reads as well, so `kubectl get pods` works on an offline board.
//! The API is read-only (a static pod is changed by editing its manifest), except for the
//! streams into running pods that `kubectl exec`, `attach` and `port-forward` open.

pub(crate) mod auth;
pub(crate) mod certs;
pub(crate) mod conns;
pub(crate) mod logs;
pub(crate) mod printers;
mod response;
pub(crate) mod select;
pub(crate) mod server;
pub(crate) mod stats;
pub(crate) mod stream;
pub(crate) mod token;
pub(crate) mod view;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::cri::Runtime;
use crate::messages::{PodEventReceiver, PodEventSender};
use token::Token;

#[derive(Debug, thiserror::Error)]
pub enum LocalApiError {
    #[error("node API: {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("node API: {0}")]
    Cert(#[from] certs::CertError),
    #[error("node API: {0}")]
    Tls(String),
    #[error("node API: {0}")]
    Random(#[from] token::NoRandom),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LocalApiError + '_ {
    move |source| LocalApiError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What the node API needs to know.
#[derive(Debug, Clone)]
pub struct LocalApiOptions {
    pub node_name: String,
    /// `--address` (0.0.0.0 or :: for every interface).
    pub address: IpAddr,
    /// `--port`.
    pub port: u16,
    /// `--cert-dir`: the self-signed certificate and the token.
    pub cert_dir: PathBuf,
    /// `--tls-cert-file` / `--tls-private-key-file`: bring your own.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    /// `--client-ca-file`: client certificates it signed authenticate (user = CN, groups = O).
    pub client_ca_file: Option<PathBuf>,
    /// `authentication:` / `authorization:` (anonymous, webhooks, caches).
    pub auth: auth::AuthConfig,
    /// Where the kubeconfig goes (`<root-dir>/kubeconfig`).
    pub kubeconfig_path: PathBuf,
    /// Names and addresses the self-signed certificate is for, besides localhost.
    pub node_ip: Option<IpAddr>,
    pub pod_log_dir: PathBuf,
    pub labels: std::collections::BTreeMap<String, String>,
    pub max_pods: u32,
    /// What the Node's allocatable subtracts from the capacity.
    pub allocatable: crate::cm::NodeAllocatable,
    /// `--rotate-server-certificates`: the serving certificate is the slot's (issued by the
    /// cluster, rotated), and the written kubeconfig trusts this CA (the cluster's, PEM).
    /// Until the slot holds one, handshakes fail (kubelet: "no serving certificate
    /// available for the kubelet").
    pub serving: Option<(crate::kube::CertSlot, Vec<u8>)>,
}

impl LocalApiOptions {
    /// The URL a local client uses: the address, or loopback when bound to every interface.
    pub fn server_url(&self) -> String {
        let host = match self.address {
            a if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            a => a,
        };
        match host {
            IpAddr::V6(v6) => format!("https://[{v6}]:{}", self.port),
            IpAddr::V4(v4) => format!("https://{v4}:{}", self.port),
        }
    }
}

/// The serving certificate and the token, made on first start (the kubeconfig is written
/// on every start: the address may have changed).
pub(crate) struct Credentials {
    pub tls: Arc<rustls::ServerConfig>,
    pub token: Token,
}

/// The self-signed certificate is made again at a start when less than this is left of it
/// (it is valid for 365 days: renewed after 300).
const RENEW_BEFORE: Duration = Duration::from_secs(65 * 24 * 3600);

/// Writes `bytes` to `path` with mode 0600, by a rename (never half a key on disk). A
/// missing directory is made 0700 (its parents with the default mode).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), LocalApiError> {
    crate::checkpoint::write_private(path, bytes).map_err(io_err(path))
}

fn read(path: &Path) -> Result<Option<Vec<u8>>, LocalApiError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Loads or makes the certificate and the token, writes the kubeconfig. Blocking file I/O:
/// called once at start, before the loop runs.
pub(crate) fn prepare(
    opts: &LocalApiOptions,
    now: crate::clock::UnixNanos,
) -> Result<Credentials, LocalApiError> {
    let (chain, key, ca) = match (&opts.tls_cert_file, &opts.tls_private_key_file) {
        _ if opts.serving.is_some() => (Vec::new(), Vec::new(), Vec::new()),
        (Some(cert), Some(key)) => {
            let chain = read(cert)?
                .ok_or_else(|| LocalApiError::Tls(format!("{}: not found", cert.display())))?;
            let k = read(key)?
                .ok_or_else(|| LocalApiError::Tls(format!("{}: not found", key.display())))?;
            (chain.clone(), k, chain)
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(LocalApiError::Tls(
                "--tls-cert-file and --tls-private-key-file go together".into(),
            ));
        }
        (None, None) => {
            // kubelet: `<cert-dir>/kubelet.crt` and `kubelet.key`, made once.
            let (crt, key, ca) = (
                opts.cert_dir.join("kubelet.crt"),
                opts.cert_dir.join("kubelet.key"),
                opts.cert_dir.join("kubelet-ca.crt"),
            );
            // picolet differs: the kubelet never renews its self-signed certificate; a board
            // runs for years, so one with less than RENEW_BEFORE left (it is valid for a
            // year), or not valid at all at this clock, is made again at start, and so is
            // the kubeconfig that trusts it.
            let now_secs = now / 1_000_000_000;
            let fresh = |chain: &[u8]| {
                let text = String::from_utf8_lossy(chain);
                crate::x509::pem_blocks(&text, "CERTIFICATE")
                    .first()
                    .and_then(|der| crate::x509::certificate_info(der))
                    .is_some_and(|i| {
                        i.not_before <= now_secs
                            && now_secs < i.not_after.saturating_sub(RENEW_BEFORE.as_secs() as i64)
                    })
            };
            match (read(&crt)?, read(&key)?, read(&ca)?) {
                (Some(c), Some(k), Some(a)) if fresh(&c) => (c, k, a),
                _ => {
                    let mut ips: Vec<IpAddr> = opts.node_ip.into_iter().collect();
                    if !opts.address.is_unspecified() && !opts.address.is_loopback() {
                        ips.push(opts.address);
                    }
                    let g = certs::generate(
                        &certs::Subject {
                            node_name: opts.node_name.clone(),
                            dns_names: vec![],
                            ips,
                        },
                        now,
                    )?;
                    write_private(&key, g.key_pem.as_bytes())?;
                    write_private(&crt, g.chain_pem.as_bytes())?;
                    write_private(&ca, g.ca_pem.as_bytes())?;
                    log::info!(
                        "node API: made a self-signed certificate in {}",
                        opts.cert_dir.display()
                    );
                    (
                        g.chain_pem.into_bytes(),
                        g.key_pem.into_bytes(),
                        g.ca_pem.into_bytes(),
                    )
                }
            }
        }
    };
    let token_path = opts.cert_dir.join("token");
    let token = match read(&token_path)?.and_then(|t| Token::parse(&String::from_utf8_lossy(&t))) {
        Some(t) => t,
        None => {
            let t = Token::generate()?;
            write_private(&token_path, t.as_str().as_bytes())?;
            t
        }
    };
    let client_ca = match &opts.client_ca_file {
        Some(path) => Some(
            read(path)?
                .ok_or_else(|| LocalApiError::Tls(format!("{}: not found", path.display())))?,
        ),
        None => None,
    };
    let tls = server_tls(&chain, &key, client_ca.as_deref(), opts.serving.as_ref())?;
    let ca = match &opts.serving {
        Some((_, cluster_ca)) => cluster_ca.clone(),
        None => ca,
    };
    let mut kubeconfig = token::kubeconfig(
        &opts.node_name,
        &opts.server_url(),
        &String::from_utf8_lossy(&ca),
        &token,
    );
    if opts.serving.is_some() {
        // The cluster's serving certificate names the node and its addresses, not loopback:
        // local clients verify it against the node name.
        kubeconfig = kubeconfig.replacen(
            "    certificate-authority-data:",
            &format!(
                "    tls-server-name: {}\n    certificate-authority-data:",
                opts.node_name
            ),
            1,
        );
    }
    write_private(&opts.kubeconfig_path, kubeconfig.as_bytes())?;
    Ok(Credentials { tls, token })
}

fn server_tls(
    chain: &[u8],
    key: &[u8],
    client_ca: Option<&[u8]>,
    serving: Option<&(crate::kube::CertSlot, Vec<u8>)>,
) -> Result<Arc<rustls::ServerConfig>, LocalApiError> {
    let tls = |e: crate::kube::ApiError| LocalApiError::Tls(e.to_string());
    let other = |e: &dyn std::fmt::Display| LocalApiError::Tls(e.to_string());
    let provider = crate::kube::tls::provider();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| other(&e))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in crate::kube::tls::certificates(pem, "--client-ca-file").map_err(tls)? {
                roots.add(c).map_err(|e| other(&e))?;
            }
            // Optional: kubectl with the token presents no certificate.
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| other(&e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut cfg = match serving {
        // kubelet: `tlsConfig.GetCertificate` reads the serving certificate manager's current.
        Some((slot, _)) => builder.with_cert_resolver(Arc::new(slot.clone())),
        None => {
            let certs =
                crate::kube::tls::certificates(chain, "serving certificate").map_err(tls)?;
            let key = crate::kube::tls::private_key(key, "serving key").map_err(tls)?;
            builder
                .with_single_cert(certs, key)
                .map_err(|e| LocalApiError::Tls(e.to_string()))?
        }
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// What the node API reads besides the pods: the CRI operations' counters and the node's
/// event recorder, the agent's metrics (any may be absent: tests).
#[derive(Default)]
pub struct Sources {
    /// The node's apiserver client, for the webhooks (None: standalone).
    pub client: Option<crate::kube::Client>,
    pub runtime_metrics: Option<std::sync::Arc<crate::metrics::RuntimeMetrics>>,
    pub recorder: Option<crate::recorder::Recorder>,
    /// The pod workers' and the probes' metrics (`/metrics`).
    pub agent_metrics: Option<std::rc::Rc<crate::metrics::AgentMetrics>>,
    /// The eviction manager's pressure conditions (the Node's status).
    pub pressure: Option<tokio::sync::watch::Receiver<crate::eviction::Conditions>>,
    /// Graceful node shutdown: `POST /shutdown` asks the loop through it.
    pub node_shutdown: Option<tokio::sync::mpsc::Sender<crate::node::shutdown::Request>>,
    /// The device plugins' resources (the Node's capacity and allocatable).
    pub devices: Option<tokio::sync::watch::Receiver<crate::cm::devicemanager::Resources>>,
}

/// Starts the node API on the current `LocalSet`: the view fed from the agent's pod events
/// (the returned sender joins the agent's), and the server. A port that cannot be bound is
/// retried every 30 s with one WARN: the pods matter more than the API.
pub fn start<R: Runtime, C: Clock>(
    opts: &LocalApiOptions,
    runtime: R,
    clock: C,
    sources: Sources,
    shutdown: &CancellationToken,
) -> Result<PodEventSender, LocalApiError> {
    // The certificate's validity is checked by clients against their own clock, never
    // picolet's injected one.
    let creds = prepare(opts, crate::clock::Clock::now(&crate::clock::SystemClock))?;
    let (tx, rx) = crate::messages::pod_events();
    let view = view::View::new();
    crate::local_tasks::spawn_local(feed(view.clone(), rx, clock.clone()));
    let mut node_opts = crate::node::status::NodeOptions::new(opts.node_name.clone());
    node_opts.max_pods = opts.max_pods;
    node_opts.kubelet_port = opts.port;
    node_opts.node_ip = opts.node_ip;
    node_opts.allocatable = opts.allocatable;
    let facts = crate::node::status::NodeFacts::read(&node_opts);
    let mut api = server::Api::new(
        creds.token,
        view,
        runtime,
        clock,
        facts,
        opts.labels.clone(),
        opts.pod_log_dir.clone(),
    );
    if let Some(api) = std::rc::Rc::get_mut(&mut api) {
        api.auth = auth::Auth::new(opts.auth.clone(), opts.node_name.clone(), sources.client);
        api.runtime_metrics = sources.runtime_metrics;
        api.recorder = sources.recorder;
        api.agent_metrics = sources.agent_metrics;
        api.pressure = sources.pressure;
        api.devices = sources.devices;
        api.node_shutdown = sources.node_shutdown;
    }
    let addr = SocketAddr::new(opts.address, opts.port);
    let url = opts.server_url();
    let kubeconfig = opts.kubeconfig_path.clone();
    let tls = creds.tls;
    let shutdown = shutdown.child_token();
    crate::local_tasks::spawn_local(async move {
        let mut warned = false;
        let listener = loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => break l,
                Err(e) if !warned => {
                    // Loud, once: kubectl and `picolet get` cannot reach this node until
                    // the address is free. picolet keeps running its pods (the kubelet
                    // exits at start instead: a board's pods matter more than its API).
                    let holder = listening_process(std::path::Path::new("/proc"), addr.port())
                        .map(|h| format!(" (held by {h})"))
                        .unwrap_or_default();
                    log::error!(
                        "node API: cannot listen on {addr}: {e}{holder}; kubectl and `picolet get` cannot reach this node until it is free (retrying every 30s; --port chooses another, 0 turns the API off)"
                    );
                    warned = true;
                }
                Err(_) => {}
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(30)) => {}
            }
        };
        log::info!(
            "node API: serving {url} (kubectl --kubeconfig {})",
            kubeconfig.display()
        );
        server::serve(listener, tls, api, shutdown).await;
    });
    Ok(tx)
}

/// The process that listens on TCP `port` (`name (pid N)`), read from `proc`: the sockets
/// in LISTEN state of `net/tcp` and `net/tcp6`, then the process whose descriptors hold one.
/// Only on a failed listen; `None` when it cannot be told (another network namespace, no
/// permission).
fn listening_process(proc: &Path, port: u16) -> Option<String> {
    let mut inodes = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(proc.join(table)) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st … inode (field 9)
            let listening = f.get(3) == Some(&"0A");
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if listening
                && local_port == Some(port)
                && let Some(inode) = f.get(9)
            {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    for entry in std::fs::read_dir(proc).ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let held = std::fs::read_link(fd.path())
                .ok()
                .is_some_and(|t| inodes.iter().any(|i| t.as_os_str() == i.as_str()));
            if held {
                let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
                return Some(format!("{} (pid {pid})", comm.trim()));
            }
        }
    }
    None
}

/// The view follows the agent's pod events until the agent is gone, and lets its watch
/// history go once it is older than [`view::HISTORY_MAX_AGE`].
async fn feed<C: Clock>(view: view::View, mut rx: PodEventReceiver, clock: C) {
    let mut due: Option<crate::clock::UnixNanos> = None;
    loop {
        let expire = async {
            match due {
                Some(at) => {
                    let wait = u64::try_from(at.saturating_sub(clock.now())).unwrap_or(0);
                    tokio::time::sleep(Duration::from_nanos(wait)).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            batch = rx.recv() => match batch {
                Some(batch) => view.apply(batch, clock.now()),
                None => return,
            },
            () = expire => {}
        }
        let dropped;
        (dropped, due) = view.expire_history(clock.now());
        // A burst's history (every pod of a mass delete, say) was the last thing holding
        // those pods' objects: give the heap they leave back.
        if dropped >= HISTORY_TRIM_AFTER {
            crate::node::release_free_memory();
        }
    }
}

/// Changes let go at once, from which on the freed heap is handed back to the system.
const HISTORY_TRIM_AFTER: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_of_a_port_is_named() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let holder = listening_process(Path::new("/proc"), port).expect("found");
        assert!(
            holder.ends_with(&format!("(pid {})", std::process::id())),
            "{holder}"
        );
        drop(l);
        assert_eq!(listening_process(Path::new("/proc"), port), None);
        assert_eq!(listening_process(Path::new("/nonexistent"), port), None);
    }

    fn options(dir: &Path) -> LocalApiOptions {
        LocalApiOptions {
            node_name: "board1".into(),
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 10250,
            cert_dir: dir.join("root/pki"),
            tls_cert_file: None,
            tls_private_key_file: None,
            client_ca_file: None,
            auth: Default::default(),
            kubeconfig_path: dir.join("root/kubeconfig"),
            node_ip: None,
            pod_log_dir: dir.join("logs"),
            labels: Default::default(),
            max_pods: 110,
            allocatable: Default::default(),
            serving: None,
        }
    }

    #[test]
    fn a_serving_slot_makes_no_self_signed_certificate_and_names_the_node() {
        let tmp = tempfile::tempdir().unwrap();
        let mut opts = options(tmp.path());
        let ca = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec();
        opts.serving = Some((crate::kube::CertSlot::default(), ca.clone()));
        prepare(&opts, crate::clock::Clock::now(&crate::clock::SystemClock)).unwrap();
        assert!(!opts.cert_dir.join("kubelet.crt").exists());
        let cfg = crate::kube::ClientConfig::from_kubeconfig_str(
            &std::fs::read_to_string(&opts.kubeconfig_path).unwrap(),
            Path::new("kubeconfig"),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(cfg.tls_server_name.as_deref(), Some("board1"));
        assert_eq!(cfg.tls.ca_pem, Some(ca));
    }

    #[test]
    fn credentials_are_made_once_kept_and_renewed_when_old() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = options(tmp.path());
        let now = crate::clock::Clock::now(&crate::clock::SystemClock);
        let kubeconfig = || std::fs::read_to_string(&opts.kubeconfig_path).unwrap();
        let first = prepare(&opts, now).unwrap();
        let first_kubeconfig = kubeconfig();
        let crt = opts.cert_dir.join("kubelet.crt");
        let pem = std::fs::read(&crt).unwrap();
        let second = prepare(&opts, now).unwrap();
        assert_eq!(std::fs::read(&crt).unwrap(), pem, "kept across starts");
        assert_eq!(first.token, second.token);
        assert_eq!(kubeconfig(), first_kubeconfig);
        for f in ["kubelet.crt", "kubelet.key", "kubelet-ca.crt", "token"] {
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(opts.cert_dir.join(f))
                    .unwrap()
                    .permissions(),
            );
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
        // 301 days later: made again (the token stays).
        let now = now + 301 * 24 * 3600 * 1_000_000_000;
        let third = prepare(&opts, now).unwrap();
        assert_ne!(std::fs::read(&crt).unwrap(), pem, "renewed");
        assert_eq!(third.token, first.token);
        assert_ne!(
            kubeconfig(),
            first_kubeconfig,
            "the kubeconfig trusts the new CA"
        );
        // Bring-your-own files that do not exist: a clear error naming the file.
        let mut own = opts.clone();
        own.tls_cert_file = Some(tmp.path().join("missing.crt"));
        own.tls_private_key_file = Some(tmp.path().join("missing.key"));
        let err = match prepare(&own, now) {
            Ok(_) => panic!("missing files accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("missing.crt"), "{err}");
    }

    /// A board without a real-time clock: made in 1970, the certificate is still valid
    /// when NTP sets the clock, and is kept; made with a true clock, a clock gone back to
    /// 1970 makes it anew (valid on both sides of the floor).
    #[test]
    fn a_certificate_made_in_1970_outlives_the_clock_being_set() {
        const S: i64 = 1_000_000_000;
        let tmp = tempfile::tempdir().unwrap();
        let opts = options(tmp.path());
        let crt = opts.cert_dir.join("kubelet.crt");
        prepare(&opts, 12 * S).unwrap();
        let pem = std::fs::read(&crt).unwrap();
        let validity = || {
            let text = String::from_utf8_lossy(&std::fs::read(&crt).unwrap()).into_owned();
            let der = crate::x509::pem_blocks(&text, "CERTIFICATE").remove(0);
            let i = crate::x509::certificate_info(&der).unwrap();
            (i.not_before, i.not_after)
        };
        let (nb, na) = validity();
        assert!(
            nb <= 12 && na > crate::clock::FLOOR_SECS + 300 * 86_400,
            "{nb} {na}"
        );
        let set = (crate::clock::FLOOR_SECS + 30 * 86_400) * S;
        prepare(&opts, set).unwrap();
        assert_eq!(
            std::fs::read(&crt).unwrap(),
            pem,
            "kept once the clock is set"
        );
        // Made at a true time, then the clock reads 1970: not valid then, made again.
        let tmp = tempfile::tempdir().unwrap();
        let opts = options(tmp.path());
        let crt2 = opts.cert_dir.join("kubelet.crt");
        prepare(&opts, set).unwrap();
        let pem = std::fs::read(&crt2).unwrap();
        prepare(&opts, 12 * S).unwrap();
        assert_ne!(
            std::fs::read(&crt2).unwrap(),
            pem,
            "made again for a 1970 clock"
        );
    }
}
