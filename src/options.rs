//! Command line and config file.
//!
//! Owns: parsing `picolet run|check|version [flags]` and the optional YAML config file into
//! one `Options` value. Flag names are the kubelet's where one exists; the config file uses
//! the kubelet's `KubeletConfiguration` field names where one exists (`staticPodPath`,
//! `containerRuntimeEndpoint`, `podLogsDir`, `fileCheckFrequency`, …). Flags win over the
//! file, the file wins over defaults.
//!
//! Must never: touch the system (no I/O besides reading the config file).
//! A hand-written parser instead of clap: a dozen flags do not earn ~300 KiB of binary.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error(
        "unknown command {0:?} (expected run, check, kubeconfig, validate, get, describe, logs, node-shutdown or version; see --help)"
    )]
    UnknownCommand(String),
    #[error("unknown flag {0} (see --help)")]
    UnknownFlag(String),
    #[error("flag {0} needs a value")]
    MissingValue(String),
    #[error("flag {flag}: {reason}")]
    BadValue { flag: String, reason: String },
    #[error("config file {path}: {source}")]
    ConfigRead {
        path: String,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    ConfigParse { path: String, message: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run(Options),
    Check(Options),
    /// `picolet kubeconfig`: print the node API's kubeconfig.
    Kubeconfig(Options),
    /// `picolet validate|get|describe|logs …`: the board's own commands (`cli`), given the
    /// whole command line; they parse their own flags.
    Cli(Vec<String>),
    Version,
    Help,
}

/// Everything `picolet run` needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--pod-manifest-path`: the static pod directory (kubelet `staticPodPath`).
    pub pod_manifest_path: PathBuf,
    /// `--container-runtime-endpoint`.
    pub container_runtime_endpoint: String,
    /// `--root-dir`: picolet's state (emptyDir volumes, pod dirs).
    pub root_dir: PathBuf,
    /// `--pod-log-dir` (kubelet `podLogsDir`).
    pub pod_log_dir: PathBuf,
    /// `--hostname-override`; the node name is this, else the hostname, lower-cased.
    pub hostname_override: Option<String>,
    /// `--file-check-frequency`: full re-list period of the manifest directory.
    pub file_check_frequency: Duration,
    /// `--runtime-request-timeout`: deadline of mutating CRI calls.
    pub runtime_request_timeout: Duration,
    /// `--sync-frequency`: periodic resync of a running pod.
    pub sync_frequency: Duration,
    /// `--resolv-conf`: the host resolver file used for `dnsPolicy: Default`.
    pub resolv_conf: PathBuf,
    /// `--allowed-unsafe-sysctls` (kubelet `allowedUnsafeSysctls`): sysctls or prefixes
    /// (`net.core.*`) a pod may set beyond the safe ones; each must be namespaced (checked at
    /// start, `admission::Sysctls`).
    pub allowed_unsafe_sysctls: Vec<String>,
    /// `--watchdog-device` (picolet's own): a hardware watchdog petted from the event loop
    /// (`node::HwWatchdog`); none by default.
    pub watchdog_device: Option<PathBuf>,
    /// `--cni-cache-dir` (picolet's own): libcni's cache of the runtime, whose empty files
    /// (left by a power cut) picolet removes on its first start in a boot
    /// (`kuberuntime::cni_cache`); empty: never.
    pub cni_cache_dir: PathBuf,
    /// `--cgroups-per-qos` (kubelet `cgroupsPerQOS`, default true): the `kubepods`
    /// hierarchy with a cgroup per pod (`cm`).
    pub cgroups_per_qos: bool,
    /// `--cgroup-root` (kubelet `cgroupRoot`): where `kubepods` goes ("/" by default);
    /// without `--cgroups-per-qos`, the sandboxes' cgroup parent ("": the runtime's
    /// default). `--cgroup-parent` is its old, deprecated spelling.
    pub cgroup_root: String,
    /// `--cgroup-driver` (kubelet `cgroupDriver`): cgroupfs or systemd.
    pub cgroup_driver: crate::cm::CgroupDriver,
    /// `--system-reserved`, `--kube-reserved` (cpu and memory; kubelet `systemReserved`,
    /// `kubeReserved`): taken from the Node's allocatable.
    pub system_reserved: crate::cm::Reserved,
    pub kube_reserved: crate::cm::Reserved,
    /// `--enforce-node-allocatable` has `pods` (the kubelet's default): `kubepods` is
    /// limited to capacity − reserved.
    pub enforce_node_allocatable: bool,
    /// `--seccomp-default`: `RuntimeDefault` seccomp for containers that ask for none
    /// (kubelet `seccompDefault`, off by default).
    pub seccomp_default: bool,
    /// `--fail-swap-on` (kubelet `failSwapOn`): refuse to start when the node has swap.
    /// picolet's default is false (the kubelet's is true): boards run with swap (Raspberry
    /// Pi OS's dphys-swapfile), and pods get none of it unless `LimitedSwap` is set.
    pub fail_swap_on: bool,
    /// kubelet `memorySwap.swapBehavior` (config file only, as the kubelet).
    pub swap_behavior: crate::qos::SwapBehavior,
    /// `--minimum-container-ttl-duration`: container GC leaves a dead container alone until
    /// it is this old (kubelet: `GCPolicy.MinAge`, default 0).
    pub minimum_container_ttl_duration: Duration,
    /// `--maximum-dead-containers-per-container`: dead instances kept per container of a
    /// pod that is still wanted (kubelet default 1; a negative value: no limit).
    pub maximum_dead_containers_per_container: Option<usize>,
    /// `--eviction-hard` (kubelet `evictionHard`): the hard eviction thresholds; empty: no
    /// eviction manager.
    pub eviction_hard: Vec<crate::eviction::Threshold>,
    /// `--eviction-pressure-transition-period` (kubelet default 5m).
    pub eviction_pressure_transition_period: Duration,
    /// kubelet `shutdownGracePeriod` (config file only, as the kubelet's) and
    /// `shutdownGracePeriodCriticalPods` (its share for system-critical pods): see
    /// `node::shutdown`. picolet's defaults are 30s and 10s (the kubelet's: 0, off): a
    /// shutdown only happens when the system's hook asks for one, so it is on.
    pub shutdown_grace_period: Duration,
    pub shutdown_grace_period_critical_pods: Duration,
    // ---- log rotation and image GC (kubelet: container log manager, image GC manager)
    /// `--container-log-max-size` (kubelet `containerLogMaxSize`, 10Mi): a running
    /// container's log is rotated once it reaches this many bytes.
    pub container_log_max_size: u64,
    /// `--container-log-max-files` (kubelet `containerLogMaxFiles`, 5; at least 2): log
    /// files kept per container, the live one included.
    pub container_log_max_files: usize,
    /// `--image-gc-high-threshold` (kubelet `imageGCHighThresholdPercent`, 85; 100: no
    /// image GC).
    pub image_gc_high_threshold: u8,
    /// `--image-gc-low-threshold` (kubelet `imageGCLowThresholdPercent`, 80).
    pub image_gc_low_threshold: u8,
    /// `--minimum-image-ttl-duration` (kubelet `imageMinimumGCAge`, 2m).
    pub minimum_image_ttl_duration: Duration,
    /// `--pod-infra-container-image` (kubelet: only what image GC must never remove): the
    /// sandbox image of the runtime's config; its repository is kept, any tag.
    pub pod_infra_container_image: String,
    /// `--image-archive-dir` / `imageArchiveDir` (picolet's own): the directory of image
    /// archives the image mirror serves (`mirror`); None: ROOT-DIR/images.
    pub image_archive_dir: Option<PathBuf>,
    /// `--device-plugin-dir` / `devicePluginDir` (picolet's own; the kubelet has no flag: its
    /// `/var/lib/kubelet/device-plugins` is compiled in, and plugins hard-code it): where the
    /// device manager's registration socket `kubelet.sock`, the plugins' sockets and the
    /// checkpoint live. None: the kubelet's directory (`cm::devicemanager::DEFAULT_DIR`,
    /// whatever the root directory: plugins look there); empty: no device manager.
    pub device_plugin_dir: Option<PathBuf>,
    /// `--image-mirror-address` / `imageMirrorAddress` (picolet's own): where the image
    /// mirror listens (the packages: [`IMAGE_MIRROR_ADDRESS`], loopback); empty (the
    /// default): no mirror.
    pub image_mirror_address: String,
    /// `prePullImages` (config file, picolet's own): images pulled at start besides those
    /// the static pods name.
    pub pre_pull_images: Vec<String>,
    // ---- apiserver mode (feature `apiserver`)
    /// `--kubeconfig`: join the cluster this file points at (node, lease, API pods, status,
    /// mirror pods). None: static pods only.
    pub kubeconfig: Option<PathBuf>,
    /// `--bootstrap-kubeconfig` (kubelet: a flag only): when `--kubeconfig` holds no valid
    /// client certificate, get one with this kubeconfig's bootstrap token (TLS bootstrapping).
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `--rotate-certificates` (kubelet `rotateCertificates`, default false): renew the
    /// client certificate by CSR before it expires.
    pub rotate_certificates: bool,
    /// `--rotate-server-certificates` (kubelet `serverTLSBootstrap`, default false): the
    /// node API's serving certificate by CSR (signer `kubernetes.io/kubelet-serving`),
    /// renewed before it expires.
    pub rotate_server_certificates: bool,
    /// `--node-labels k=v,…`: extra labels of the Node.
    pub node_labels: BTreeMap<String, String>,
    /// `--max-pods`: the Node's pod capacity.
    pub max_pods: u32,
    /// `--node-ip`: the Node's InternalIP (default: the address that reaches the apiserver).
    pub node_ip: Option<IpAddr>,
    /// `--node-status-update-frequency`.
    pub node_status_update_frequency: Duration,
    /// `--manifest-url`: a URL serving a Pod or a PodList (kubelet `staticPodURL`).
    pub manifest_url: Option<String>,
    /// `--manifest-url-header 'Name:Value'` (repeatable; kubelet `staticPodURLHeader`).
    pub manifest_url_headers: Vec<(String, String)>,
    // ---- the node API (feature `apiserver`)
    /// `--address`: where the node API listens (kubelet `address`; picolet's default is
    /// loopback: a board's API is for its own console unless told otherwise).
    pub address: IpAddr,
    /// `--port` (kubelet `port`, 10250); 0: no node API.
    pub port: u16,
    /// `--cert-dir`: the self-signed serving certificate and the token [`<root-dir>/pki`].
    pub cert_dir: Option<PathBuf>,
    /// `--tls-cert-file` / `--tls-private-key-file` (kubelet `tlsCertFile`, `tlsPrivateKeyFile`).
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    /// `--client-ca-file` (kubelet `authentication.x509.clientCAFile`): client certificates
    /// it signed may use the node API (the apiserver's kubelet-client certificate).
    pub client_ca_file: Option<PathBuf>,
    /// `--anonymous-auth` (kubelet `authentication.anonymous.enabled`): requests without
    /// credentials are `system:anonymous`. Off by default (the kubelet's flag default is on,
    /// its config file's off).
    pub anonymous_auth: bool,
    /// `--authentication-token-webhook` (`authentication.webhook.enabled`): bearer tokens
    /// are checked with the apiserver's TokenReview.
    pub authentication_token_webhook: bool,
    /// `--authentication-token-webhook-cache-ttl` (`authentication.webhook.cacheTTL`, 2m).
    pub authentication_token_webhook_cache_ttl: Duration,
    /// `--authorization-mode=Webhook` (`authorization.mode`; default AlwaysAllow): each
    /// request is a SubjectAccessReview.
    pub authorization_webhook: bool,
    /// `--authorization-webhook-cache-authorized-ttl` (5m).
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (30s).
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
}

/// The image mirror's address the packages set (`imageMirrorAddress`): loopback, a port no
/// Kubernetes component uses. picolet itself opens no port for it unless told.
pub const IMAGE_MIRROR_ADDRESS: &str = "127.0.0.1:10261";

impl Default for Options {
    fn default() -> Self {
        Options {
            pod_manifest_path: PathBuf::from("/etc/kubernetes/manifests"),
            container_runtime_endpoint: "unix:///run/containerd/containerd.sock".into(),
            root_dir: PathBuf::from("/var/lib/picolet"),
            pod_log_dir: PathBuf::from("/var/log/pods"),
            hostname_override: None,
            file_check_frequency: Duration::from_secs(20),
            runtime_request_timeout: Duration::from_secs(120),
            sync_frequency: Duration::from_secs(60),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            allowed_unsafe_sysctls: Vec::new(),
            watchdog_device: None,
            // kuberuntime::cni_cache::DEFAULT_CACHE_DIR (options sits below kuberuntime).
            cni_cache_dir: PathBuf::from("/var/lib/cni"),
            cgroups_per_qos: true,
            cgroup_root: String::new(),
            cgroup_driver: crate::cm::CgroupDriver::Cgroupfs,
            system_reserved: crate::cm::Reserved::default(),
            kube_reserved: crate::cm::Reserved::default(),
            enforce_node_allocatable: true,
            seccomp_default: false,
            fail_swap_on: false,
            swap_behavior: crate::qos::SwapBehavior::NoSwap,
            minimum_container_ttl_duration: Duration::ZERO,
            maximum_dead_containers_per_container: Some(1),
            eviction_hard: crate::eviction::parse_thresholds(
                crate::eviction::DEFAULT_EVICTION_HARD,
            )
            .unwrap_or_default(),
            eviction_pressure_transition_period:
                crate::eviction::DEFAULT_PRESSURE_TRANSITION_PERIOD,
            shutdown_grace_period: Duration::from_secs(30),
            shutdown_grace_period_critical_pods: Duration::from_secs(10),
            container_log_max_size: 10 * 1024 * 1024,
            container_log_max_files: 5,
            image_gc_high_threshold: 85,
            image_gc_low_threshold: 80,
            minimum_image_ttl_duration: Duration::from_secs(120),
            pod_infra_container_image: crate::images::DEFAULT_SANDBOX_IMAGE.into(),
            image_archive_dir: None,
            device_plugin_dir: None,
            image_mirror_address: String::new(),
            pre_pull_images: Vec::new(),
            kubeconfig: None,
            bootstrap_kubeconfig: None,
            rotate_certificates: false,
            rotate_server_certificates: false,
            node_labels: BTreeMap::new(),
            max_pods: 110,
            node_ip: None,
            node_status_update_frequency: Duration::from_secs(10),
            manifest_url: None,
            manifest_url_headers: Vec::new(),
            address: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            port: 10250,
            cert_dir: None,
            tls_cert_file: None,
            tls_private_key_file: None,
            client_ca_file: None,
            anonymous_auth: false,
            authentication_token_webhook: false,
            authentication_token_webhook_cache_ttl: Duration::from_secs(120),
            authorization_webhook: false,
            authorization_webhook_cache_authorized_ttl: Duration::from_secs(300),
            authorization_webhook_cache_unauthorized_ttl: Duration::from_secs(30),
        }
    }
}

/// What this build carries, for `picolet --version` and the start line: its cargo features
/// (the default ones first, in `Cargo.toml`'s order) and the most detailed log level compiled
/// in, e.g. `features: apiserver image-mirror device-plugins in-place-resize; log: debug`.
/// A board's owner sees what the binary runs; `packaging/build-all.sh` checks that every
/// release build names every default feature and `log: debug`.
pub fn build_features() -> String {
    let features = [
        ("apiserver", cfg!(feature = "apiserver")),
        ("image-mirror", cfg!(feature = "image-mirror")),
        ("device-plugins", cfg!(feature = "device-plugins")),
        ("in-place-resize", cfg!(feature = "in-place-resize")),
        ("fakes", cfg!(feature = "fakes")),
        ("fake-cri", cfg!(feature = "fake-cri")),
        ("mock-apiserver", cfg!(feature = "mock-apiserver")),
    ];
    let mut out = String::from("features:");
    for (name, on) in features {
        if on {
            out.push(' ');
            out.push_str(name);
        }
    }
    if out.ends_with(':') {
        out.push_str(" none");
    }
    let level = log::STATIC_MAX_LEVEL.as_str().to_ascii_lowercase();
    out.push_str("; log: ");
    out.push_str(&level);
    out
}

pub const HELP: &str = "\
picolet — a kubelet for edge devices

USAGE:
    picolet run [FLAGS]      run the agent
    picolet check [FLAGS]    preflight: CRI, cgroups, directories; non-zero exit if picolet cannot work
    picolet kubeconfig [--root-dir DIR]
                             print the node API's kubeconfig (kubectl --kubeconfig <(picolet kubeconfig) get pods -A)
    picolet --version        print the version

On the board (kubectl's names and flags; see picolet validate --help, picolet get --help):
    picolet validate [-o json] FILE...   what picolet would do with these manifests
    picolet get pods|nodes|events [NAME] [-n NS | -A] [-o wide|json|yaml|name]
    picolet describe pod NAME [-n NS]
    picolet logs NAME [-n NS] [-c CONTAINER] [-f] [--tail N] [-p] [--timestamps]
                             the node API's answers (kubeconfig: ROOT-DIR/kubeconfig
                             or --kubeconfig FILE)
    picolet node-shutdown    for the system's shutdown hook: stop every pod gracefully
                             (shutdownGracePeriod) and wait

FLAGS (kubelet names):
    --config FILE                       YAML config file (KubeletConfiguration field names)
    --pod-manifest-path DIR             static pod directory [/etc/kubernetes/manifests]
    --container-runtime-endpoint URL    CRI socket [unix:///run/containerd/containerd.sock]
    --root-dir DIR                      state directory [/var/lib/picolet]
    --pod-log-dir DIR                   container logs [/var/log/pods]
    --hostname-override NAME            node name [the hostname, lower-cased]
    --file-check-frequency DURATION     manifest directory re-list period [20s]
    --runtime-request-timeout DURATION  CRI call deadline [2m]
    --sync-frequency DURATION           periodic pod resync [1m]
    --resolv-conf FILE                  resolver for dnsPolicy Default [/etc/resolv.conf]
    --allowed-unsafe-sysctls LIST       sysctls (or prefixes, net.core.*) pods may set beyond the
                                        safe ones; others are refused: SysctlForbidden [none]
    --watchdog-device PATH              a hardware watchdog (/dev/watchdog) petted from the
                                        event loop; only where nothing else owns it [none]
    --cni-cache-dir DIR                 the runtime's CNI cache: its empty files (a power
                                        cut's) removed at the first start in a boot;
                                        empty: never [/var/lib/cni]
    --cgroups-per-qos[=true|false]      pod cgroups ROOT/kubepods[/burstable|/besteffort]/pod<uid>
                                        with the pods' limits [true]
    --cgroup-root PATH                  where kubepods goes; without --cgroups-per-qos the
                                        sandboxes' cgroup parent [/; runtime default]
    --cgroup-driver cgroupfs|systemd    as the runtime's; systemd only with
                                        --cgroups-per-qos=false (see README) [cgroupfs]
    --system-reserved cpu=..,memory=..  taken from the node's allocatable [none]
    --kube-reserved cpu=..,memory=..    likewise [none]
    --enforce-node-allocatable pods|none
                                        pods: kubepods limited to capacity - reserved [pods]
    --seccomp-default[=true|false]      RuntimeDefault seccomp for containers that set no
                                        seccompProfile [false: Unconfined, as the kubelet]
    --fail-swap-on[=true|false]         refuse to start when the node has swap [false]
                                        (config memorySwap.swapBehavior: NoSwap|LimitedSwap)
    --node-ip IP                        the node's IP: pods' hostIP, host-network pods' podIP,
                                        the Node's InternalIP [the default route's address;
                                        cluster mode: the address reaching the apiserver]
    --minimum-container-ttl-duration D  container GC spares dead containers younger than D [0]
    --container-log-max-size Q          rotate a container's log at Q bytes (e.g. 10Mi) [10Mi]
    --container-log-max-files N         log files kept per container, live one included [5]
    --image-gc-high-threshold P         image GC starts at P % disk use; 100: never [85]
    --image-gc-low-threshold P          image GC frees down to P % [80]
    --minimum-image-ttl-duration D      image GC spares images first seen less than D ago [2m]
    --pod-infra-container-image IMG     the runtime's sandbox image: never removed, any tag
                                        [registry.k8s.io/pause:3.10]
    --image-archive-dir DIR             image archives (docker save, OCI) the image mirror
                                        serves to the runtime [ROOT-DIR/images]
    --device-plugin-dir DIR             device plugins register on DIR/kubelet.sock; empty:
                                        none [/var/lib/kubelet/device-plugins]
    --image-mirror-address HOST:PORT    serve the archives to the runtime here (the
                                        packages: 127.0.0.1:10261) [none: no mirror]
    --maximum-dead-containers-per-container N
                                        dead instances kept per container of a wanted pod;
                                        -1: no limit [1]
    --eviction-hard SIGNAL<Q,...        hard eviction thresholds; empty: none [memory.available<100Mi,
                                        nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%]
    --eviction-pressure-transition-period D
                                        how long a pressure condition outlasts its signal [5m]

Cluster mode (builds with the `apiserver` feature):
    --kubeconfig FILE                   join the cluster of this kubeconfig: Node, Lease, API
                                        pods (kept running offline), status, mirror pods
    --bootstrap-kubeconfig FILE         join with a bootstrap token: when --kubeconfig has no
                                        valid client certificate, get one by CSR, write it to
                                        CERT-DIR and write --kubeconfig to use it
    --rotate-certificates[=true|false]  renew the client certificate by CSR (70-90 % of its life)
    --rotate-server-certificates[=true|false]
                                        the node API's certificate by CSR (kubelet-serving
                                        signer; an operator approves it), renewed likewise
    --node-labels k=v,...               extra Node labels
    --max-pods N                        the Node's pod capacity [110]
    --node-status-update-frequency DUR  node status period [10s]
    --manifest-url URL                  also run the Pod or PodList served at URL (GET every 20s)
    --manifest-url-header 'Name:Value'  header for --manifest-url (repeatable)

The node API (builds with the `apiserver` feature; kubectl works against it):
    --address IP                        listen address [127.0.0.1]
    --port N                            HTTPS port; 0: no node API [10250]
    --cert-dir DIR                      certificates (self-signed or by CSR) and token [ROOT-DIR/pki]
    --tls-cert-file FILE                serving certificate chain (PEM) instead of a self-signed one
    --tls-private-key-file FILE         its key
    --client-ca-file FILE               also admit client certificates this CA signed
                                        (the apiserver's kubelet-client certificate)
    --anonymous-auth[=BOOL]             no credentials = system:anonymous [false]
    --authentication-token-webhook[=BOOL]  check bearer tokens with TokenReview [false]
    --authentication-token-webhook-cache-ttl D   [2m]
    --authorization-mode MODE           AlwaysAllow or Webhook (SubjectAccessReview) [AlwaysAllow]
    --authorization-webhook-cache-authorized-ttl D   [5m]
    --authorization-webhook-cache-unauthorized-ttl D [30s]
    (picolet writes ROOT-DIR/kubeconfig, mode 0600; `picolet kubeconfig` prints it)

Logging: RUST_LOG=debug|info|warn (default info).
";

/// The config file, KubeletConfiguration-style field names (plus picolet's flag names as
/// aliases). Unknown keys are logged and ignored, so a kubelet config can be reused.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    #[serde(alias = "podManifestPath")]
    static_pod_path: Option<PathBuf>,
    container_runtime_endpoint: Option<String>,
    root_dir: Option<PathBuf>,
    #[serde(alias = "podLogDir")]
    pod_logs_dir: Option<PathBuf>,
    hostname_override: Option<String>,
    file_check_frequency: Option<String>,
    runtime_request_timeout: Option<String>,
    sync_frequency: Option<String>,
    resolv_conf: Option<PathBuf>,
    cgroup_root: Option<String>,
    #[serde(rename = "cgroupsPerQOS")]
    cgroups_per_qos: Option<bool>,
    cgroup_driver: Option<String>,
    system_reserved: Option<BTreeMap<String, String>>,
    kube_reserved: Option<BTreeMap<String, String>>,
    enforce_node_allocatable: Option<Vec<String>>,
    seccomp_default: Option<bool>,
    fail_swap_on: Option<bool>,
    /// `{swapBehavior: …}`, read by key.
    memory_swap: Option<serde_json::Value>,
    kubeconfig: Option<PathBuf>,
    rotate_certificates: Option<bool>,
    #[serde(rename = "serverTLSBootstrap")]
    server_tls_bootstrap: Option<bool>,
    node_labels: Option<BTreeMap<String, String>>,
    max_pods: Option<u32>,
    allowed_unsafe_sysctls: Option<Vec<String>>,
    #[serde(rename = "nodeIP")]
    node_ip: Option<String>,
    node_status_update_frequency: Option<String>,
    /// kubelet: `map[string]string`, `{"memory.available": "100Mi"}`.
    eviction_hard: Option<BTreeMap<String, String>>,
    eviction_pressure_transition_period: Option<String>,
    shutdown_grace_period: Option<String>,
    shutdown_grace_period_critical_pods: Option<String>,
    #[serde(rename = "staticPodURL", alias = "manifestURL")]
    static_pod_url: Option<String>,
    /// kubelet: `map[string][]string`.
    #[serde(rename = "staticPodURLHeader")]
    static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    address: Option<String>,
    port: Option<u16>,
    tls_cert_file: Option<PathBuf>,
    tls_private_key_file: Option<PathBuf>,
    /// Read by key ([`yaml_at`]): seven derived structs cost the ARMv6 binary ~10 KB.
    authentication: Option<serde_json::Value>,
    authorization: Option<serde_json::Value>,
    container_log_max_size: Option<String>,
    container_log_max_files: Option<usize>,
    #[serde(rename = "imageGCHighThresholdPercent")]
    image_gc_high_threshold_percent: Option<u8>,
    #[serde(rename = "imageGCLowThresholdPercent")]
    image_gc_low_threshold_percent: Option<u8>,
    #[serde(rename = "imageMinimumGCAge")]
    image_minimum_gc_age: Option<String>,
    pod_infra_container_image: Option<String>,
    image_archive_dir: Option<PathBuf>,
    device_plugin_dir: Option<PathBuf>,
    image_mirror_address: Option<String>,
    pre_pull_images: Option<Vec<String>>,
}

/// `--root-dir X`, `--kubeconfig X` (or `--flag=X`) and then a board command: that
/// command's own command line (verb first, the flags after it).
/// The board's own commands (`picolet validate|get|describe|logs`, answered by `cli`).
pub const CLI_VERBS: [&str; 5] = ["validate", "get", "describe", "logs", "node-shutdown"];

fn cli_after_shared_flags(args: &[String]) -> Option<Vec<String>> {
    const SHARED: [&str; 2] = ["--root-dir", "--kubeconfig"];
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.split_once('=') {
            Some((f, _)) if SHARED.contains(&f) => i += 1,
            None if SHARED.contains(&arg.as_str()) => i += 2,
            _ => break,
        }
    }
    let verb = args.get(i)?;
    if i == 0 || !CLI_VERBS.contains(&verb.as_str()) {
        return None;
    }
    let mut cli = vec![verb.clone()];
    cli.extend(args[i + 1..].iter().cloned());
    cli.extend(args[..i].iter().cloned());
    Some(cli)
}

/// Parses `args` (without the program name).
pub fn parse(args: &[String]) -> Result<Command, OptionsError> {
    let Some(first) = args.first() else {
        return Ok(Command::Help);
    };
    // `picolet --root-dir X get pods`: the board commands after the flags they share with
    // `run` (the command line a user has in mind from `picolet --root-dir X run`).
    if let Some(cli) = cli_after_shared_flags(args) {
        return Ok(Command::Cli(cli));
    }
    let (kind, rest) = match first.as_str() {
        "--version" | "-V" | "version" => return Ok(Command::Version),
        "--help" | "-h" | "help" => return Ok(Command::Help),
        "run" => ("run", &args[1..]),
        "check" => ("check", &args[1..]),
        "kubeconfig" => ("kubeconfig", &args[1..]),
        "validate" | "get" | "describe" | "logs" | "node-shutdown" => {
            return Ok(Command::Cli(args.to_vec()));
        }
        // `picolet --pod-manifest-path …` reads like the kubelet: treat as `run`.
        s if s.starts_with("--") => ("run", args),
        other => return Err(OptionsError::UnknownCommand(other.to_string())),
    };
    let flags = split_flags(rest)?;
    if flags.iter().any(|(f, _)| f == "--help" || f == "-h") {
        return Ok(Command::Help);
    }
    let mut opts = Options::default();
    if let Some((_, Some(path))) = flags.iter().find(|(f, _)| f == "--config") {
        apply_config_file(&mut opts, path)?;
    }
    for (flag, value) in &flags {
        let raw_value = value;
        let value = || {
            value
                .clone()
                .ok_or_else(|| OptionsError::MissingValue(flag.clone()))
        };
        match flag.as_str() {
            "--config" => {
                value()?;
            }
            "--pod-manifest-path" => opts.pod_manifest_path = value()?.into(),
            "--container-runtime-endpoint" => opts.container_runtime_endpoint = value()?,
            "--root-dir" => opts.root_dir = value()?.into(),
            "--pod-log-dir" | "--pod-logs-dir" => opts.pod_log_dir = value()?.into(),
            "--hostname-override" => opts.hostname_override = Some(value()?),
            "--file-check-frequency" => opts.file_check_frequency = duration_flag(flag, &value()?)?,
            "--runtime-request-timeout" => {
                opts.runtime_request_timeout = duration_flag(flag, &value()?)?
            }
            "--sync-frequency" => opts.sync_frequency = duration_flag(flag, &value()?)?,
            "--resolv-conf" => opts.resolv_conf = value()?.into(),
            "--cni-cache-dir" => opts.cni_cache_dir = value()?.into(),
            "--watchdog-device" => {
                let v = value()?;
                opts.watchdog_device = (!v.is_empty()).then(|| PathBuf::from(v));
            }
            "--allowed-unsafe-sysctls" => {
                opts.allowed_unsafe_sysctls = value()?
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
            }
            "--cgroup-root" => opts.cgroup_root = value()?,
            "--cgroup-parent" => {
                log::warn!("--cgroup-parent is deprecated: use --cgroup-root (the kubelet's name)");
                opts.cgroup_root = value()?;
            }
            "--cgroups-per-qos" => opts.cgroups_per_qos = bool_flag(flag, raw_value.as_deref())?,
            "--cgroup-driver" => {
                let v = value()?;
                opts.cgroup_driver =
                    crate::cm::CgroupDriver::parse(&v).ok_or_else(|| OptionsError::BadValue {
                        flag: flag.clone(),
                        reason: format!("{v:?} is not cgroupfs or systemd"),
                    })?;
            }
            "--system-reserved" | "--kube-reserved" => {
                let v = value()?;
                let r =
                    parse_reserved(&parse_labels(&v).map_err(|reason| OptionsError::BadValue {
                        flag: flag.clone(),
                        reason,
                    })?)
                    .map_err(|reason| OptionsError::BadValue {
                        flag: flag.clone(),
                        reason,
                    })?;
                if flag == "--system-reserved" {
                    opts.system_reserved = r;
                } else {
                    opts.kube_reserved = r;
                }
            }
            "--enforce-node-allocatable" => {
                let v = raw_value.clone().unwrap_or_default();
                let list: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
                opts.enforce_node_allocatable =
                    parse_enforce(&list).map_err(|reason| OptionsError::BadValue {
                        flag: flag.clone(),
                        reason,
                    })?;
            }
            "--seccomp-default" => {
                opts.seccomp_default = match raw_value.as_deref() {
                    None | Some("true") => true,
                    Some("false") => false,
                    Some(v) => {
                        return Err(OptionsError::BadValue {
                            flag: flag.clone(),
                            reason: format!("{v:?} is not true or false"),
                        });
                    }
                }
            }
            "--fail-swap-on" => opts.fail_swap_on = bool_flag(flag, raw_value.as_deref())?,
            "--minimum-container-ttl-duration" => {
                opts.minimum_container_ttl_duration = duration_flag(flag, &value()?)?
            }
            "--maximum-dead-containers-per-container" => {
                let v = value()?;
                let n: i64 = v.parse().map_err(|_| OptionsError::BadValue {
                    flag: flag.clone(),
                    reason: format!("{v:?} is not a number (-1: no limit)"),
                })?;
                opts.maximum_dead_containers_per_container = usize::try_from(n).ok();
            }
            "--eviction-hard" => {
                let v = value()?;
                opts.eviction_hard = crate::eviction::parse_thresholds(&v)
                    .and_then(|t| crate::eviction::check_unique(&t).map(|()| t))
                    .map_err(|e| OptionsError::BadValue {
                        flag: flag.clone(),
                        reason: e.to_string(),
                    })?;
            }
            "--eviction-pressure-transition-period" => {
                opts.eviction_pressure_transition_period = duration_flag(flag, &value()?)?
            }
            "--container-log-max-size" => {
                opts.container_log_max_size =
                    size_value(&value()?).map_err(|reason| OptionsError::BadValue {
                        flag: flag.clone(),
                        reason,
                    })?
            }
            "--container-log-max-files" => {
                opts.container_log_max_files = number_value(flag, &value()?)?
            }
            "--image-gc-high-threshold" => {
                opts.image_gc_high_threshold = number_value(flag, &value()?)?
            }
            "--image-gc-low-threshold" => {
                opts.image_gc_low_threshold = number_value(flag, &value()?)?
            }
            "--minimum-image-ttl-duration" => {
                opts.minimum_image_ttl_duration = duration_flag(flag, &value()?)?
            }
            "--pod-infra-container-image" => opts.pod_infra_container_image = value()?,
            "--image-archive-dir" => opts.image_archive_dir = Some(value()?.into()),
            "--device-plugin-dir" => opts.device_plugin_dir = Some(value()?.into()),
            "--image-mirror-address" => opts.image_mirror_address = value()?,
            "--kubeconfig" => opts.kubeconfig = Some(value()?.into()),
            "--bootstrap-kubeconfig" => opts.bootstrap_kubeconfig = Some(value()?.into()),
            "--rotate-certificates" => {
                opts.rotate_certificates = bool_flag(flag, raw_value.as_deref())?
            }
            "--rotate-server-certificates" => {
                opts.rotate_server_certificates = bool_flag(flag, raw_value.as_deref())?
            }
            "--node-labels" => {
                let labels = parse_labels(&value()?).map_err(|reason| OptionsError::BadValue {
                    flag: flag.clone(),
                    reason,
                })?;
                opts.node_labels.extend(labels);
            }
            "--max-pods" => {
                let v = value()?;
                opts.max_pods = v.parse().map_err(|_| OptionsError::BadValue {
                    flag: flag.clone(),
                    reason: format!("{v:?} is not a number of pods"),
                })?;
            }
            "--node-ip" => {
                let v = value()?;
                opts.node_ip = Some(v.parse().map_err(|_| OptionsError::BadValue {
                    flag: flag.clone(),
                    reason: format!("{v:?} is not an IP address"),
                })?);
            }
            "--node-status-update-frequency" => {
                opts.node_status_update_frequency = duration_flag(flag, &value()?)?
            }
            "--manifest-url" => opts.manifest_url = Some(value()?),
            "--manifest-url-header" => {
                // kubelet: 'a:hello,b:again' — several headers in one flag value, and
                // the flag may be repeated.
                for part in value()?.split(',').filter(|p| !p.trim().is_empty()) {
                    let (k, v) = part.split_once(':').ok_or_else(|| OptionsError::BadValue {
                        flag: flag.clone(),
                        reason: format!("{part:?} is not Name:Value"),
                    })?;
                    opts.manifest_url_headers
                        .push((k.trim().to_string(), v.trim().to_string()));
                }
            }
            "--address" => {
                let v = value()?;
                opts.address = v.parse().map_err(|_| OptionsError::BadValue {
                    flag: flag.clone(),
                    reason: format!("{v:?} is not an IP address"),
                })?;
            }
            "--port" => {
                let v = value()?;
                opts.port = v.parse().map_err(|_| OptionsError::BadValue {
                    flag: flag.clone(),
                    reason: format!("{v:?} is not a port number"),
                })?;
            }
            "--cert-dir" => opts.cert_dir = Some(value()?.into()),
            "--tls-cert-file" => opts.tls_cert_file = Some(value()?.into()),
            "--tls-private-key-file" => opts.tls_private_key_file = Some(value()?.into()),
            "--client-ca-file" => opts.client_ca_file = Some(value()?.into()),
            "--anonymous-auth" => opts.anonymous_auth = bool_flag(flag, raw_value.as_deref())?,
            "--authentication-token-webhook" => {
                opts.authentication_token_webhook = bool_flag(flag, raw_value.as_deref())?
            }
            "--authentication-token-webhook-cache-ttl" => {
                opts.authentication_token_webhook_cache_ttl = duration_flag(flag, &value()?)?
            }
            "--authorization-mode" => {
                opts.authorization_webhook =
                    authorization_mode(&value()?).map_err(|reason| OptionsError::BadValue {
                        flag: flag.clone(),
                        reason,
                    })?
            }
            "--authorization-webhook-cache-authorized-ttl" => {
                opts.authorization_webhook_cache_authorized_ttl = duration_flag(flag, &value()?)?
            }
            "--authorization-webhook-cache-unauthorized-ttl" => {
                opts.authorization_webhook_cache_unauthorized_ttl = duration_flag(flag, &value()?)?
            }
            other => return Err(OptionsError::UnknownFlag(other.to_string())),
        }
    }
    // kubelet: "no client provided, cannot use webhook authentication/authorization".
    if (opts.authentication_token_webhook || opts.authorization_webhook)
        && opts.kubeconfig.is_none()
    {
        return Err(OptionsError::BadValue {
            flag: if opts.authorization_webhook {
                "--authorization-mode".into()
            } else {
                "--authentication-token-webhook".into()
            },
            reason: "the webhooks ask the apiserver: --kubeconfig is needed".into(),
        });
    }
    if opts.tls_cert_file.is_some() != opts.tls_private_key_file.is_some() {
        return Err(OptionsError::BadValue {
            flag: "--tls-cert-file".into(),
            reason: "--tls-cert-file and --tls-private-key-file go together".into(),
        });
    }
    check_log_and_image_gc(&opts)?;
    check_certificates(&opts)?;
    check_node_labels(&opts.node_labels).map_err(|reason| OptionsError::BadValue {
        flag: "--node-labels".into(),
        reason,
    })?;
    // The systemd driver needs the pod and QoS slices made (and limited) through systemd's
    // D-Bus API; picolet has no D-Bus client (see README, "Pod cgroups"). Without
    // `--cgroups-per-qos` the runtime places the pods itself and the driver only names them.
    if opts.cgroup_driver == crate::cm::CgroupDriver::Systemd && opts.cgroups_per_qos {
        return Err(OptionsError::BadValue {
            flag: "--cgroup-driver".into(),
            reason: "systemd is not supported with --cgroups-per-qos (picolet does not talk to \
                     systemd over D-Bus, so it could neither make nor limit the pod slices): \
                     use --cgroup-driver=cgroupfs with the runtime's cgroupfs driver \
                     (containerd: SystemdCgroup = false; CRI-O: cgroup_manager = \"cgroupfs\"), \
                     or add --cgroups-per-qos=false to leave pod cgroups to the runtime"
                .into(),
        });
    }
    // Periods and deadlines of zero make no sense (a zero period would spin).
    for (name, d) in [
        ("--file-check-frequency", opts.file_check_frequency),
        ("--sync-frequency", opts.sync_frequency),
        ("--runtime-request-timeout", opts.runtime_request_timeout),
        (
            "--node-status-update-frequency",
            opts.node_status_update_frequency,
        ),
    ] {
        if d.is_zero() {
            return Err(OptionsError::BadValue {
                flag: name.to_string(),
                reason: "must be more than 0".into(),
            });
        }
    }
    Ok(match kind {
        "check" => Command::Check(opts),
        "kubeconfig" => Command::Kubeconfig(opts),
        _ => Command::Run(opts),
    })
}

/// The certificate flags that need others (kubelet: the bootstrap and the managers need a
/// client of the cluster; picolet refuses at start rather than ignoring a flag).
fn check_certificates(opts: &Options) -> Result<(), OptionsError> {
    let refuse = |flag: &str, reason: &str| {
        Err(OptionsError::BadValue {
            flag: flag.into(),
            reason: reason.into(),
        })
    };
    if opts.bootstrap_kubeconfig.is_some() && opts.kubeconfig.is_none() {
        return refuse(
            "--bootstrap-kubeconfig",
            "needs --kubeconfig: the path where the bootstrapped kubeconfig is written",
        );
    }
    if opts.rotate_certificates && opts.kubeconfig.is_none() {
        return refuse(
            "--rotate-certificates",
            "needs --kubeconfig (a client certificate to renew)",
        );
    }
    if opts.rotate_server_certificates {
        if opts.kubeconfig.is_none() {
            return refuse(
                "--rotate-server-certificates",
                "needs --kubeconfig (the serving certificate is asked of the cluster)",
            );
        }
        if opts.tls_cert_file.is_some() {
            // kubelet: serverTLSBootstrap wins silently over tlsCertFile; picolet says so.
            return refuse(
                "--rotate-server-certificates",
                "and --tls-cert-file both name the serving certificate: use one",
            );
        }
        if opts.port == 0 {
            return refuse(
                "--rotate-server-certificates",
                "needs the node API (--port is 0)",
            );
        }
    }
    Ok(())
}

/// `--flag=value`, `--flag value`, and bare `--flag` (value None) when followed by another
/// flag or nothing.
fn split_flags(args: &[String]) -> Result<Vec<(String, Option<String>)>, OptionsError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if !a.starts_with('-') {
            return Err(OptionsError::UnknownFlag(a.clone()));
        }
        if let Some((f, v)) = a.split_once('=') {
            out.push((f.to_string(), Some(v.to_string())));
            i += 1;
        } else if i + 1 < args.len() && !args[i + 1].starts_with("--") {
            out.push((a.clone(), Some(args[i + 1].clone())));
            i += 2;
        } else {
            out.push((a.clone(), None));
            i += 1;
        }
    }
    Ok(out)
}

fn apply_config_file(opts: &mut Options, path: &str) -> Result<(), OptionsError> {
    let text = std::fs::read_to_string(path).map_err(|source| OptionsError::ConfigRead {
        path: path.to_string(),
        source,
    })?;
    // One decoder for every typed input (api::decode): the YAML as a JSON value, then the
    // value decoder, so ConfigFile's Deserialize exists once, not again for serde_yaml_ng.
    let parse_error = |e: &dyn std::fmt::Display| OptionsError::ConfigParse {
        path: path.to_string(),
        message: e.to_string(),
    };
    let doc = if text.trim().is_empty() {
        serde_json::Value::Null
    } else {
        crate::api::yaml_value(&text).map_err(|e| parse_error(&e))?
    };
    let cfg: ConfigFile = crate::api::from_yaml_value(&doc).map_err(|e| parse_error(&e))?;
    if let serde_json::Value::Object(map) = &doc {
        for key in map.keys() {
            if !KNOWN_CONFIG_KEYS.contains(&key.as_str()) {
                log::warn!("config file {path}: unknown key {key:?} ignored");
            }
        }
    }
    let dur = |field: &str, v: &str| {
        parse_duration(v).ok_or_else(|| OptionsError::ConfigParse {
            path: path.to_string(),
            message: format!("{field}: invalid duration {v:?} (use e.g. 20s, 1m, 1m30s)"),
        })
    };
    if let Some(v) = cfg.static_pod_path {
        opts.pod_manifest_path = v;
    }
    if let Some(v) = cfg.container_runtime_endpoint {
        opts.container_runtime_endpoint = v;
    }
    if let Some(v) = cfg.root_dir {
        opts.root_dir = v;
    }
    if let Some(v) = cfg.pod_logs_dir {
        opts.pod_log_dir = v;
    }
    if let Some(v) = cfg.hostname_override {
        opts.hostname_override = Some(v);
    }
    if let Some(v) = cfg.file_check_frequency {
        opts.file_check_frequency = dur("fileCheckFrequency", &v)?;
    }
    if let Some(v) = cfg.runtime_request_timeout {
        opts.runtime_request_timeout = dur("runtimeRequestTimeout", &v)?;
    }
    if let Some(v) = cfg.sync_frequency {
        opts.sync_frequency = dur("syncFrequency", &v)?;
    }
    if let Some(v) = cfg.resolv_conf {
        opts.resolv_conf = v;
    }
    if let Some(v) = cfg.cgroup_root {
        opts.cgroup_root = v;
    }
    let bad = |message: String| OptionsError::ConfigParse {
        path: path.to_string(),
        message,
    };
    if let Some(v) = cfg.cgroups_per_qos {
        opts.cgroups_per_qos = v;
    }
    if let Some(v) = cfg.cgroup_driver {
        opts.cgroup_driver = crate::cm::CgroupDriver::parse(&v)
            .ok_or_else(|| bad(format!("cgroupDriver: {v:?} is not cgroupfs or systemd")))?;
    }
    if let Some(v) = cfg.system_reserved {
        opts.system_reserved =
            parse_reserved(&v).map_err(|e| bad(format!("systemReserved: {e}")))?;
    }
    if let Some(v) = cfg.kube_reserved {
        opts.kube_reserved = parse_reserved(&v).map_err(|e| bad(format!("kubeReserved: {e}")))?;
    }
    if let Some(v) = cfg.enforce_node_allocatable {
        opts.enforce_node_allocatable =
            parse_enforce(&v).map_err(|e| bad(format!("enforceNodeAllocatable: {e}")))?;
    }
    if let Some(v) = cfg.seccomp_default {
        opts.seccomp_default = v;
    }
    if let Some(v) = cfg.fail_swap_on {
        opts.fail_swap_on = v;
    }
    // kubelet: ValidateKubeletConfiguration's memorySwap.swapBehavior.
    if let Some(v) = cfg.memory_swap.as_ref().and_then(|m| m.get("swapBehavior")) {
        opts.swap_behavior = match v.as_str() {
            Some("" | "NoSwap") => crate::qos::SwapBehavior::NoSwap,
            Some("LimitedSwap") => crate::qos::SwapBehavior::LimitedSwap,
            other => {
                let v = other.map_or_else(|| "(not a string)".to_string(), |s| format!("{s:?}"));
                return Err(bad(format!(
                    "memorySwap.swapBehavior {v} must be one of: \"\", \"LimitedSwap\" or \"NoSwap\""
                )));
            }
        };
    }
    if let Some(v) = cfg.kubeconfig {
        opts.kubeconfig = Some(v);
    }
    if let Some(v) = cfg.node_labels {
        opts.node_labels = v;
    }
    if let Some(v) = cfg.max_pods {
        opts.max_pods = v;
    }
    if let Some(v) = cfg.allowed_unsafe_sysctls {
        opts.allowed_unsafe_sysctls = v;
    }
    if let Some(v) = cfg.node_ip {
        opts.node_ip = Some(v.parse().map_err(|_| OptionsError::ConfigParse {
            path: path.to_string(),
            message: format!("nodeIP: {v:?} is not an IP address"),
        })?);
    }
    if let Some(v) = cfg.node_status_update_frequency {
        opts.node_status_update_frequency = dur("nodeStatusUpdateFrequency", &v)?;
    }
    if let Some(v) = cfg.eviction_hard {
        opts.eviction_hard =
            crate::eviction::thresholds_from_map(&v).map_err(|e| OptionsError::ConfigParse {
                path: path.to_string(),
                message: format!("evictionHard: {e}"),
            })?;
    }
    if let Some(v) = cfg.eviction_pressure_transition_period {
        opts.eviction_pressure_transition_period = dur("evictionPressureTransitionPeriod", &v)?;
    }
    if let Some(v) = cfg.shutdown_grace_period {
        opts.shutdown_grace_period = dur("shutdownGracePeriod", &v)?;
    }
    if let Some(v) = cfg.shutdown_grace_period_critical_pods {
        opts.shutdown_grace_period_critical_pods = dur("shutdownGracePeriodCriticalPods", &v)?;
    }
    // kubelet: the KubeletConfiguration's validation of the two periods.
    if opts.shutdown_grace_period_critical_pods > opts.shutdown_grace_period {
        return Err(OptionsError::ConfigParse {
            path: path.to_string(),
            message: format!(
                "shutdownGracePeriodCriticalPods ({}s) must be <= shutdownGracePeriod ({}s)",
                opts.shutdown_grace_period_critical_pods.as_secs(),
                opts.shutdown_grace_period.as_secs()
            ),
        });
    }
    if let Some(v) = cfg.static_pod_url {
        opts.manifest_url = Some(v);
    }
    if let Some(v) = cfg.address {
        opts.address = v.parse().map_err(|_| OptionsError::ConfigParse {
            path: path.to_string(),
            message: format!("address: {v:?} is not an IP address"),
        })?;
    }
    if let Some(v) = cfg.port {
        opts.port = v;
    }
    if let Some(v) = cfg.tls_cert_file {
        opts.tls_cert_file = Some(v);
    }
    if let Some(v) = cfg.rotate_certificates {
        opts.rotate_certificates = v;
    }
    if let Some(v) = cfg.server_tls_bootstrap {
        opts.rotate_server_certificates = v;
    }
    if let Some(v) = cfg.tls_private_key_file {
        opts.tls_private_key_file = Some(v);
    }
    // Only the keys given: the kubelet's config-file defaults (webhooks on) would close
    // a standalone board's API, so picolet keeps its flag defaults (a deliberate difference).
    let auth = (cfg.authentication, cfg.authorization);
    let yaml_bool = |key: &str| match yaml_at(&auth, key) {
        None => Ok(None),
        Some(serde_json::Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(format!("{key}: not true or false"))),
    };
    let yaml_str = |key: &str| match yaml_at(&auth, key) {
        None => Ok(None),
        Some(serde_json::Value::String(v)) => Ok(Some(v.clone())),
        Some(_) => Err(bad(format!("{key}: not a string"))),
    };
    if let Some(v) = yaml_str("authentication.x509.clientCAFile")? {
        opts.client_ca_file = Some(v.into());
    }
    if let Some(v) = yaml_bool("authentication.anonymous.enabled")? {
        opts.anonymous_auth = v;
    }
    if let Some(v) = yaml_bool("authentication.webhook.enabled")? {
        opts.authentication_token_webhook = v;
    }
    for (key, field) in [
        (
            "authentication.webhook.cacheTTL",
            &mut opts.authentication_token_webhook_cache_ttl,
        ),
        (
            "authorization.webhook.cacheAuthorizedTTL",
            &mut opts.authorization_webhook_cache_authorized_ttl,
        ),
        (
            "authorization.webhook.cacheUnauthorizedTTL",
            &mut opts.authorization_webhook_cache_unauthorized_ttl,
        ),
    ] {
        if let Some(v) = yaml_str(key)? {
            *field = dur(key, &v)?;
        }
    }
    if let Some(v) = yaml_str("authorization.mode")? {
        opts.authorization_webhook =
            authorization_mode(&v).map_err(|e| bad(format!("authorization.mode: {e}")))?;
    }
    if let Some(v) = cfg.container_log_max_size {
        opts.container_log_max_size =
            size_value(&v).map_err(|reason| OptionsError::ConfigParse {
                path: path.to_string(),
                message: format!("containerLogMaxSize: {reason}"),
            })?;
    }
    if let Some(v) = cfg.container_log_max_files {
        opts.container_log_max_files = v;
    }
    if let Some(v) = cfg.image_gc_high_threshold_percent {
        opts.image_gc_high_threshold = v;
    }
    if let Some(v) = cfg.image_gc_low_threshold_percent {
        opts.image_gc_low_threshold = v;
    }
    if let Some(v) = cfg.image_minimum_gc_age {
        opts.minimum_image_ttl_duration = dur("imageMinimumGCAge", &v)?;
    }
    if let Some(v) = cfg.pod_infra_container_image {
        opts.pod_infra_container_image = v;
    }
    if let Some(v) = cfg.image_archive_dir {
        opts.image_archive_dir = Some(v);
    }
    if let Some(v) = cfg.device_plugin_dir {
        opts.device_plugin_dir = Some(v);
    }
    if let Some(v) = cfg.image_mirror_address {
        opts.image_mirror_address = v;
    }
    if let Some(v) = cfg.pre_pull_images {
        opts.pre_pull_images = v;
    }
    if let Some(h) = cfg.static_pod_url_header {
        for (k, values) in h {
            for v in values {
                opts.manifest_url_headers.push((k.clone(), v));
            }
        }
    }
    Ok(())
}

/// The value at a dotted `key` (`authentication.webhook.enabled`) of the config file's
/// `authentication:` / `authorization:` blocks.
fn yaml_at<'a>(
    blocks: &'a (Option<serde_json::Value>, Option<serde_json::Value>),
    key: &str,
) -> Option<&'a serde_json::Value> {
    let mut parts = key.split('.');
    let mut v = match parts.next()? {
        "authentication" => blocks.0.as_ref()?,
        _ => blocks.1.as_ref()?,
    };
    for p in parts {
        v = v.get(p)?;
    }
    Some(v)
}

/// `--authorization-mode`: `Webhook` (true) or `AlwaysAllow` (false).
fn authorization_mode(v: &str) -> Result<bool, String> {
    match v {
        "Webhook" => Ok(true),
        "AlwaysAllow" => Ok(false),
        _ => Err(format!("{v:?} is not AlwaysAllow or Webhook")),
    }
}

/// `true`/`false`, or a bare flag (true).
fn bool_flag(flag: &str, v: Option<&str>) -> Result<bool, OptionsError> {
    match v {
        None | Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(v) => Err(OptionsError::BadValue {
            flag: flag.to_string(),
            reason: format!("{v:?} is not true or false"),
        }),
    }
}

/// kubelet `--system-reserved`/`--kube-reserved`: `cpu` and `memory` quantities
/// (`ephemeral-storage` and `pid` are accepted and not used: picolet reserves no disk or
/// pids).
pub fn parse_reserved(m: &BTreeMap<String, String>) -> Result<crate::cm::Reserved, String> {
    let mut r = crate::cm::Reserved::default();
    for (k, v) in m {
        let (scale, slot) = match k.as_str() {
            "cpu" => (3, &mut r.cpu_milli),
            "memory" => (0, &mut r.memory_bytes),
            "ephemeral-storage" | "pid" => continue,
            other => {
                return Err(format!(
                    "{other:?} is not a reservable resource (cpu, memory, ephemeral-storage, pid)"
                ));
            }
        };
        *slot = crate::api::parse_quantity(v, scale)
            .ok_or_else(|| format!("{k}: {v:?} is not a quantity"))?;
    }
    Ok(r)
}

/// kubelet `--enforce-node-allocatable`: `pods`, or `none`/empty. `system-reserved` and
/// `kube-reserved` need their cgroups (`--system-reserved-cgroup`), which picolet does not
/// manage: refused.
fn parse_enforce(list: &[String]) -> Result<bool, String> {
    let mut pods = false;
    for v in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        match v {
            "pods" => pods = true,
            "none" => {}
            "system-reserved"
            | "kube-reserved"
            | "system-reserved-compressible"
            | "kube-reserved-compressible" => {
                return Err(format!(
                    "{v:?} is not supported by picolet (it manages no system or kube cgroup); use pods or none"
                ));
            }
            other => return Err(format!("{other:?} is not pods or none")),
        }
    }
    Ok(pods)
}

/// `k=v,k2=v2` (kubelet `--node-labels`).
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?} is not key=value"))?;
        let k = k.trim();
        if k.is_empty() || k.len() > 316 || k.contains(char::is_whitespace) {
            return Err(format!("{k:?} is not a valid label key"));
        }
        out.insert(k.to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// The `kubernetes.io` and `k8s.io` labels a node may set on itself (kubelet:
/// `KubeletLabels` of k8s.io/kubelet's well_known_labels.go; NodeRestriction lets a node set
/// these and the namespaces below, nothing else of those two domains).
const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];
/// kubelet: `kubeletLabelNamespaces`.
const KUBELET_LABEL_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// kubelet: `ValidateKubeletFlags`' check of `--node-labels` — a label of the
/// `kubernetes.io` or `k8s.io` domain (including `node-role.kubernetes.io/…` and
/// `node-restriction.kubernetes.io/…`) must be one of [`KUBELET_LABELS`] or in one of
/// [`KUBELET_LABEL_NAMESPACES`]: NodeRestriction refuses any other on the node's own Node, so
/// the kubelet refuses them at start, in every mode. Others label the node from outside
/// (`kubectl label node`).
pub fn check_node_labels(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let in_domain = |d: &str, domain: &str| d == domain || d.ends_with(&format!(".{domain}"));
    let bad: Vec<&str> = labels
        .keys()
        .map(String::as_str)
        .filter(|k| {
            let Some((domain, _)) = k.split_once('/') else {
                return false;
            };
            let ours = in_domain(domain, "kubernetes.io") || in_domain(domain, "k8s.io");
            ours && !KUBELET_LABELS.contains(k)
                && !KUBELET_LABEL_NAMESPACES
                    .iter()
                    .any(|ns| in_domain(domain, ns))
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(format!(
        "unknown 'kubernetes.io' or 'k8s.io' labels {bad:?}: a node may set on itself only {} \
         and labels under {} (NodeRestriction refuses others; set them with `kubectl label \
         node` instead)",
        KUBELET_LABELS.join(", "),
        KUBELET_LABEL_NAMESPACES.join(", ")
    ))
}

const KNOWN_CONFIG_KEYS: &[&str] = &[
    "evictionHard",
    "evictionPressureTransitionPeriod",
    "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
    "apiVersion",
    "kind",
    "staticPodPath",
    "podManifestPath",
    "containerRuntimeEndpoint",
    "rootDir",
    "podLogsDir",
    "podLogDir",
    "hostnameOverride",
    "fileCheckFrequency",
    "runtimeRequestTimeout",
    "syncFrequency",
    "resolvConf",
    "cgroupRoot",
    "cgroupsPerQOS",
    "cgroupDriver",
    "systemReserved",
    "kubeReserved",
    "enforceNodeAllocatable",
    "kubeconfig",
    "rotateCertificates",
    "serverTLSBootstrap",
    "nodeLabels",
    "maxPods",
    "nodeIP",
    "nodeStatusUpdateFrequency",
    "staticPodURL",
    "manifestURL",
    "staticPodURLHeader",
    "seccompDefault",
    "failSwapOn",
    "memorySwap",
    "address",
    "port",
    "tlsCertFile",
    "tlsPrivateKeyFile",
    "authentication",
    "authorization",
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "imageMinimumGCAge",
    "podInfraContainerImage",
    "imageArchiveDir",
    "devicePluginDir",
    "imageMirrorAddress",
    "prePullImages",
];

/// A byte size as a Kubernetes quantity (`10Mi`, `500Ki`, `1G`).
fn size_value(v: &str) -> Result<u64, String> {
    crate::api::parse_quantity(v, 0)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| format!("{v:?} is not a size (use e.g. 10Mi, 500Ki)"))
}

fn number_value<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, OptionsError> {
    v.parse().map_err(|_| OptionsError::BadValue {
        flag: flag.to_string(),
        reason: format!("{v:?} is not a valid number here"),
    })
}

/// kubelet's validation of the log rotation and image GC settings (flags or config file).
fn check_log_and_image_gc(opts: &Options) -> Result<(), OptionsError> {
    let bad = |flag: &str, reason: String| OptionsError::BadValue {
        flag: flag.to_string(),
        reason,
    };
    if opts.container_log_max_size == 0 {
        return Err(bad(
            "--container-log-max-size",
            "must be more than 0".into(),
        ));
    }
    if opts.container_log_max_files < 2 {
        return Err(bad(
            "--container-log-max-files",
            format!("{} must be at least 2", opts.container_log_max_files),
        ));
    }
    let policy = crate::images::ImageGcPolicy {
        high_threshold_percent: opts.image_gc_high_threshold,
        low_threshold_percent: opts.image_gc_low_threshold,
        ..Default::default()
    };
    policy
        .validate()
        .map_err(|reason| bad("--image-gc-high-threshold", reason.to_string()))
}

fn duration_flag(flag: &str, v: &str) -> Result<Duration, OptionsError> {
    parse_duration(v).ok_or_else(|| OptionsError::BadValue {
        flag: flag.to_string(),
        reason: format!("invalid duration {v:?} (use e.g. 20s, 1m, 1m30s, 500ms)"),
    })
}

/// Go-style durations as the kubelet takes them: `20s`, `1m30s`, `500ms`, `2h`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * unit;
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn build_features_name_each_feature_compiled_in_and_the_log_level() {
        let b = build_features();
        let (features, level) = b.split_once("; log: ").expect(&b);
        let names: Vec<&str> = features
            .strip_prefix("features: ")
            .expect(&b)
            .split(' ')
            .collect();
        assert_eq!(
            names.contains(&"apiserver"),
            cfg!(feature = "apiserver"),
            "{b}"
        );
        assert_eq!(
            names.contains(&"image-mirror"),
            cfg!(feature = "image-mirror"),
            "{b}"
        );
        assert_eq!(
            names.contains(&"device-plugins"),
            cfg!(feature = "device-plugins"),
            "{b}"
        );
        assert_eq!(
            names.contains(&"in-place-resize"),
            cfg!(feature = "in-place-resize"),
            "{b}"
        );
        // A test build compiles every level in.
        assert_eq!(level, "trace", "{b}");
    }

    #[test]
    fn commands() {
        assert_eq!(parse(&args("--version")).unwrap(), Command::Version);
        assert_eq!(parse(&[]).unwrap(), Command::Help);
        assert_eq!(
            parse(&args("run")).unwrap(),
            Command::Run(Options::default())
        );
        assert!(matches!(parse(&args("check")).unwrap(), Command::Check(_)));
        assert!(matches!(
            parse(&args("frobnicate")),
            Err(OptionsError::UnknownCommand(_))
        ));
        // The board commands after the flags they share with run.
        assert_eq!(
            parse(&args("--root-dir /x get pods -A")).unwrap(),
            Command::Cli(args("get pods -A --root-dir /x"))
        );
        assert_eq!(
            parse(&args("--kubeconfig=/k --root-dir /x logs web")).unwrap(),
            Command::Cli(args("logs web --kubeconfig=/k --root-dir /x"))
        );
        // Not a board command: run's flags as before.
        assert!(matches!(
            parse(&args("--root-dir /x --pod-manifest-path /m")).unwrap(),
            Command::Run(_)
        ));
    }

    #[test]
    fn flags_both_forms_and_errors() {
        let Command::Run(o) = parse(&args(
            "run --pod-manifest-path /m --container-runtime-endpoint=unix:///x.sock \
             --hostname-override Pi --file-check-frequency 1m30s",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(o.pod_manifest_path, PathBuf::from("/m"));
        assert_eq!(o.container_runtime_endpoint, "unix:///x.sock");
        assert_eq!(o.hostname_override.as_deref(), Some("Pi"));
        assert_eq!(o.file_check_frequency, Duration::from_secs(90));
        assert!(matches!(
            parse(&args("run --bogus 1")),
            Err(OptionsError::UnknownFlag(_))
        ));
        assert!(matches!(
            parse(&args("run --root-dir")),
            Err(OptionsError::MissingValue(_))
        ));
        assert!(matches!(
            parse(&args("run --sync-frequency soon")),
            Err(OptionsError::BadValue { .. })
        ));
        for zero in [
            "--file-check-frequency 0",
            "--sync-frequency 0s",
            "--runtime-request-timeout 0",
            "--node-status-update-frequency 0ms",
        ] {
            assert!(
                matches!(
                    parse(&args(&format!("run {zero}"))),
                    Err(OptionsError::BadValue { .. })
                ),
                "{zero}"
            );
        }
        // kubelet style: no subcommand
        assert!(matches!(
            parse(&args("--pod-manifest-path /m")).unwrap(),
            Command::Run(_)
        ));
    }

    #[test]
    fn the_node_apis_authentication_and_authorization_as_the_kubelets() {
        let Command::Run(o) = parse(&args("run")).unwrap() else {
            panic!()
        };
        // picolet's defaults: today's all-or-nothing (no anonymous, no webhooks).
        assert!(!o.anonymous_auth && !o.authentication_token_webhook && !o.authorization_webhook);
        assert_eq!(
            o.authentication_token_webhook_cache_ttl,
            Duration::from_secs(120)
        );
        let Command::Run(o) = parse(&args(
            "run --kubeconfig /k --anonymous-auth=true --authentication-token-webhook \
             --authentication-token-webhook-cache-ttl 1m --authorization-mode Webhook \
             --authorization-webhook-cache-authorized-ttl 10s \
             --authorization-webhook-cache-unauthorized-ttl 1s",
        ))
        .unwrap() else {
            panic!()
        };
        assert!(o.anonymous_auth && o.authentication_token_webhook && o.authorization_webhook);
        assert_eq!(
            o.authentication_token_webhook_cache_ttl,
            Duration::from_secs(60)
        );
        assert_eq!(
            o.authorization_webhook_cache_authorized_ttl,
            Duration::from_secs(10)
        );
        assert_eq!(
            o.authorization_webhook_cache_unauthorized_ttl,
            Duration::from_secs(1)
        );
        let err = parse(&args("run --authorization-mode Webhook")).unwrap_err();
        assert!(err.to_string().contains("--kubeconfig"), "{err}");
        let err = parse(&args("run --kubeconfig /k --authorization-mode RBAC")).unwrap_err();
        assert!(err.to_string().contains("AlwaysAllow"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "kubeconfig: /k\nauthentication:\n  x509: {clientCAFile: /ca.crt}\n  \
             anonymous: {enabled: false}\n  webhook: {enabled: true, cacheTTL: 30s}\n\
             authorization:\n  mode: Webhook\n  webhook: {cacheAuthorizedTTL: 1m, cacheUnauthorizedTTL: 2s}\n",
        )
        .unwrap();
        let p = path.display().to_string();
        let Command::Run(o) = parse(&args(&format!("run --config {p}"))).unwrap() else {
            panic!()
        };
        assert_eq!(o.client_ca_file, Some(PathBuf::from("/ca.crt")));
        assert!(o.authentication_token_webhook && o.authorization_webhook && !o.anonymous_auth);
        assert_eq!(
            o.authentication_token_webhook_cache_ttl,
            Duration::from_secs(30)
        );
        assert_eq!(
            o.authorization_webhook_cache_authorized_ttl,
            Duration::from_secs(60)
        );
        assert_eq!(
            o.authorization_webhook_cache_unauthorized_ttl,
            Duration::from_secs(2)
        );
        std::fs::write(&path, "authorization: {mode: Node}\n").unwrap();
        let err = parse(&args(&format!("run --config {p}"))).unwrap_err();
        assert!(err.to_string().contains("authorization.mode"), "{err}");
    }

    #[test]
    fn config_file_then_flags_win() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "staticPodPath: /from/file\npodLogsDir: /logs\nfileCheckFrequency: 5s\nunknownKey: 1\n",
        )
        .unwrap();
        let p = path.display().to_string();
        let Command::Run(o) = parse(&args(&format!(
            "run --config {p} --pod-manifest-path /flag"
        )))
        .unwrap() else {
            panic!()
        };
        assert_eq!(o.pod_manifest_path, PathBuf::from("/flag"));
        assert_eq!(o.pod_log_dir, PathBuf::from("/logs"));
        assert_eq!(o.file_check_frequency, Duration::from_secs(5));

        std::fs::write(&path, "fileCheckFrequency: often\n").unwrap();
        let err = parse(&args(&format!("run --config {p}"))).unwrap_err();
        assert!(err.to_string().contains("fileCheckFrequency"), "{err}");
    }

    /// kubelet: `failSwapOn` (flag and key; picolet's default false), `memorySwap` (key
    /// only) with the kubelet's validation message.
    #[test]
    fn swap_settings() {
        use crate::qos::SwapBehavior;
        let Command::Run(o) = parse(&args("run")).unwrap() else {
            panic!()
        };
        assert_eq!(
            (o.fail_swap_on, o.swap_behavior),
            (false, SwapBehavior::NoSwap)
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        let p = path.display().to_string();
        std::fs::write(
            &path,
            "failSwapOn: true\nmemorySwap: {swapBehavior: LimitedSwap}\n",
        )
        .unwrap();
        let Command::Run(o) = parse(&args(&format!("run --config {p}"))).unwrap() else {
            panic!()
        };
        assert_eq!(
            (o.fail_swap_on, o.swap_behavior),
            (true, SwapBehavior::LimitedSwap)
        );
        let Command::Run(o) =
            parse(&args(&format!("run --config {p} --fail-swap-on=false"))).unwrap()
        else {
            panic!()
        };
        assert!(!o.fail_swap_on);
        for (yaml, want) in [
            (
                "memorySwap: {swapBehavior: Unlimited}\n",
                "memorySwap.swapBehavior \"Unlimited\" must be one of: \"\", \"LimitedSwap\" or \"NoSwap\"",
            ),
            (
                "memorySwap: {swapBehavior: [1]}\n",
                "memorySwap.swapBehavior (not a string) must be one of",
            ),
            ("failSwapOn: perhaps\n", "failSwapOn"),
        ] {
            std::fs::write(&path, yaml).unwrap();
            let err = parse(&args(&format!("run --config {p}")))
                .unwrap_err()
                .to_string();
            assert!(err.contains(want) && err.contains(&p), "{yaml}: {err}");
        }
        assert!(parse(&args("run --fail-swap-on=maybe")).is_err());
    }

    #[test]
    fn cgroup_and_allocatable_flags() {
        let Command::Run(o) = parse(&args(
            "run --cgroups-per-qos=false --cgroup-root /edge --cgroup-driver systemd \
             --system-reserved cpu=250m,memory=128Mi --kube-reserved memory=64Mi,pid=100 \
             --enforce-node-allocatable=none",
        ))
        .unwrap() else {
            panic!()
        };
        assert!(!o.cgroups_per_qos && !o.enforce_node_allocatable);
        assert_eq!(o.cgroup_root, "/edge");
        assert_eq!(o.cgroup_driver, crate::cm::CgroupDriver::Systemd);
        assert_eq!(o.system_reserved.cpu_milli, 250);
        assert_eq!(o.system_reserved.memory_bytes, 128 << 20);
        assert_eq!(o.kube_reserved.memory_bytes, 64 << 20);
        // The old spelling still sets the root.
        let Command::Run(o) = parse(&args("run --cgroup-parent /old")).unwrap() else {
            panic!()
        };
        assert_eq!(o.cgroup_root, "/old");
        assert!(o.cgroups_per_qos && o.enforce_node_allocatable);
        for bad in [
            "--cgroup-driver systemdd",
            "--system-reserved cpu=lots",
            "--kube-reserved gpu=1",
            "--enforce-node-allocatable pods,system-reserved",
            "--cgroups-per-qos=maybe",
            // Pod slices would need systemd's D-Bus API: refused, with the way out.
            "--cgroup-driver systemd",
            "--cgroup-driver=systemd --cgroups-per-qos=true",
        ] {
            let err = parse(&args(&format!("run {bad}"))).unwrap_err();
            let flag = bad.split([' ', '=']).next().unwrap();
            assert!(err.to_string().contains(flag), "{bad}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "cgroupsPerQOS: false\ncgroupRoot: /r\ncgroupDriver: systemd\n\
             systemReserved: {cpu: 500m, memory: 1Gi}\nkubeReserved: {memory: 100Mi}\n\
             enforceNodeAllocatable: []\n",
        )
        .unwrap();
        let Command::Run(o) = parse(&args(&format!("run --config {}", path.display()))).unwrap()
        else {
            panic!()
        };
        assert!(!o.cgroups_per_qos && !o.enforce_node_allocatable);
        assert_eq!(o.cgroup_root, "/r");
        assert_eq!(o.system_reserved.memory_bytes, 1 << 30);
        assert_eq!(o.kube_reserved.memory_bytes, 100 << 20);
        std::fs::write(&path, "systemReserved: {memory: much}\n").unwrap();
        let err = parse(&args(&format!("run --config {}", path.display()))).unwrap_err();
        assert!(err.to_string().contains("systemReserved: memory"), "{err}");
        std::fs::write(&path, "cgroupDriver: systemd\n").unwrap();
        let err = parse(&args(&format!("run --config {}", path.display()))).unwrap_err();
        assert!(err.to_string().contains("--cgroups-per-qos=false"), "{err}");
    }

    #[test]
    fn packaged_config_file_holds_the_defaults() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/packaging/systemd/picolet.yaml"
        );
        let got = parse(&args(&format!("run --config {path}"))).unwrap();
        // The defaults, but for the image mirror the packages turn on.
        let want = Options {
            image_mirror_address: IMAGE_MIRROR_ADDRESS.into(),
            ..Options::default()
        };
        assert_eq!(got, Command::Run(want));
    }

    /// The device plugin directory's flag and config key (issue 40).
    #[test]
    fn device_plugin_dir_flag_and_key() {
        let Command::Run(o) = parse(&args("run")).unwrap() else {
            panic!("run")
        };
        assert_eq!(o.device_plugin_dir, None);
        let Command::Run(o) = parse(&args("run --device-plugin-dir /tmp/dp")).unwrap() else {
            panic!("run")
        };
        assert_eq!(o.device_plugin_dir, Some(PathBuf::from("/tmp/dp")));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, "devicePluginDir: \"\"\n").unwrap();
        let Command::Run(o) = parse(&args(&format!("run --config {}", path.display()))).unwrap()
        else {
            panic!("run")
        };
        assert_eq!(o.device_plugin_dir, Some(PathBuf::new()));
    }

    /// The image mirror's flags and config keys (issue 39).
    #[test]
    fn image_mirror_flags_and_keys() {
        let Command::Run(o) = parse(&args("run")).unwrap() else {
            panic!("run")
        };
        assert_eq!(
            (o.image_mirror_address.as_str(), &o.image_archive_dir),
            ("", &None)
        );
        let Command::Run(o) = parse(&args(
            "run --image-mirror-address 127.0.0.1:10261 --image-archive-dir /mnt/usb/images",
        ))
        .unwrap() else {
            panic!("run")
        };
        assert_eq!(o.image_mirror_address, "127.0.0.1:10261");
        assert_eq!(o.image_archive_dir, Some(PathBuf::from("/mnt/usb/images")));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "imageMirrorAddress: 127.0.0.1:5000\nimageArchiveDir: /srv/images\nprePullImages: [a:1, b:2]\n",
        )
        .unwrap();
        let Command::Run(o) = parse(&args(&format!("run --config {}", path.display()))).unwrap()
        else {
            panic!("run")
        };
        assert_eq!(o.image_mirror_address, "127.0.0.1:5000");
        assert_eq!(o.image_archive_dir, Some(PathBuf::from("/srv/images")));
        assert_eq!(
            o.pre_pull_images,
            vec!["a:1".to_string(), "b:2".to_string()]
        );
    }

    #[test]
    fn cluster_flags() {
        let Command::Run(o) = parse(&args(
            "run --kubeconfig /etc/picolet/kubeconfig --node-labels a=b,zone=x --node-labels c=d \
             --max-pods 20 --node-ip 192.0.2.5 --node-status-update-frequency 5s \
             --manifest-url http://h/pods --manifest-url-header X-A:1,X-B:2 \
             --manifest-url-header Authorization:Bearer",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(o.kubeconfig, Some(PathBuf::from("/etc/picolet/kubeconfig")));
        assert_eq!(o.node_labels.len(), 3);
        assert_eq!(o.node_labels["zone"], "x");
        assert_eq!(o.max_pods, 20);
        assert_eq!(o.node_ip, Some("192.0.2.5".parse().unwrap()));
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(5));
        assert_eq!(o.manifest_url.as_deref(), Some("http://h/pods"));
        assert_eq!(
            o.manifest_url_headers,
            vec![
                ("X-A".to_string(), "1".to_string()),
                ("X-B".into(), "2".into()),
                ("Authorization".into(), "Bearer".into())
            ]
        );
        for bad in [
            "run --node-labels novalue",
            "run --max-pods many",
            "run --node-ip nowhere",
            "run --manifest-url-header noseparator",
        ] {
            assert!(
                matches!(parse(&args(bad)), Err(OptionsError::BadValue { .. })),
                "{bad}"
            );
        }

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "kubeconfig: /k\nmaxPods: 30\nnodeLabels: {role: edge}\nstaticPodURL: http://u\n\
             staticPodURLHeader: {X-Token: [a, b]}\nnodeStatusUpdateFrequency: 20s\n",
        )
        .unwrap();
        let Command::Run(o) = parse(&args(&format!("run --config {}", path.display()))).unwrap()
        else {
            panic!()
        };
        assert_eq!(o.kubeconfig, Some(PathBuf::from("/k")));
        assert_eq!(o.max_pods, 30);
        assert_eq!(o.node_labels["role"], "edge");
        assert_eq!(o.manifest_url.as_deref(), Some("http://u"));
        assert_eq!(o.manifest_url_headers.len(), 2);
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(20));
    }

    #[test]
    fn eviction_flags_and_config() {
        let run = |s: &str| match parse(&args(s)) {
            Ok(Command::Run(o)) => o,
            other => panic!("{s}: {other:?}"),
        };
        let o = run("run");
        assert_eq!(o.eviction_hard.len(), 4, "the kubelet's defaults");
        assert_eq!(
            o.eviction_pressure_transition_period,
            Duration::from_secs(300)
        );
        let o = run(
            "run --eviction-hard memory.available<1Gi,pid.available<10% --eviction-pressure-transition-period 30s",
        );
        assert_eq!(o.eviction_hard.len(), 2);
        assert_eq!(
            o.eviction_pressure_transition_period,
            Duration::from_secs(30)
        );
        assert!(run("run --eviction-hard=").eviction_hard.is_empty());
        for bad in [
            "run --eviction-hard memory.free<1Gi",
            "run --eviction-hard memory.available<1Gi,memory.available<2Gi",
        ] {
            assert!(
                matches!(parse(&args(bad)), Err(OptionsError::BadValue { .. })),
                "{bad}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "evictionHard: {memory.available: 200Mi}\nevictionPressureTransitionPeriod: 1m\n",
        )
        .unwrap();
        let o = run(&format!("run --config {}", path.display()));
        assert_eq!(o.eviction_hard.len(), 1);
        assert_eq!(
            o.eviction_pressure_transition_period,
            Duration::from_secs(60)
        );
        std::fs::write(&path, "evictionHard: {nodefs.available: lots}\n").unwrap();
        let e = parse(&args(&format!("run --config {}", path.display()))).unwrap_err();
        assert!(e.to_string().contains("evictionHard"), "{e}");
    }

    #[test]
    fn shutdown_grace_periods_from_the_config_file() {
        let run = |s: &str| match parse(&args(s)) {
            Ok(Command::Run(o)) => o,
            other => panic!("{s}: {other:?}"),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        let o = run("run");
        assert_eq!(
            o.shutdown_grace_period,
            Duration::from_secs(30),
            "on by default (the kubelet's is 0)"
        );
        assert_eq!(
            o.shutdown_grace_period_critical_pods,
            Duration::from_secs(10)
        );
        std::fs::write(
            &path,
            "shutdownGracePeriod: 2m\nshutdownGracePeriodCriticalPods: 0s\n",
        )
        .unwrap();
        let o = run(&format!("run --config {}", path.display()));
        assert_eq!(o.shutdown_grace_period, Duration::from_secs(120));
        assert_eq!(o.shutdown_grace_period_critical_pods, Duration::ZERO);
        std::fs::write(
            &path,
            "shutdownGracePeriod: 5s\nshutdownGracePeriodCriticalPods: 10s\n",
        )
        .unwrap();
        let e = parse(&args(&format!("run --config {}", path.display()))).unwrap_err();
        assert!(
            e.to_string().contains(
                "shutdownGracePeriodCriticalPods (10s) must be <= shutdownGracePeriod (5s)"
            ),
            "{e}"
        );
    }

    #[test]
    fn container_gc_flags() {
        let Command::Run(o) = parse(&args(
            "run --minimum-container-ttl-duration 10m --maximum-dead-containers-per-container 3",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(o.minimum_container_ttl_duration, Duration::from_secs(600));
        assert_eq!(o.maximum_dead_containers_per_container, Some(3));
        let Command::Run(o) =
            parse(&args("run --maximum-dead-containers-per-container -1")).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            o.maximum_dead_containers_per_container, None,
            "-1: no limit"
        );
        assert!(matches!(
            parse(&args("run --maximum-dead-containers-per-container some")),
            Err(OptionsError::BadValue { .. })
        ));
    }

    #[test]
    fn log_rotation_and_image_gc_flags() {
        let Command::Run(o) = parse(&args("run")).unwrap() else {
            panic!()
        };
        assert_eq!(
            (o.container_log_max_size, o.container_log_max_files),
            (10 * 1024 * 1024, 5)
        );
        assert_eq!(
            (o.image_gc_high_threshold, o.image_gc_low_threshold),
            (85, 80)
        );
        assert_eq!(o.minimum_image_ttl_duration, Duration::from_secs(120));
        let Command::Run(o) = parse(&args(
            "run --container-log-max-size 1Mi --container-log-max-files 3 \
             --image-gc-high-threshold 1 --image-gc-low-threshold 0 \
             --minimum-image-ttl-duration 0s --pod-infra-container-image localhost/pause:edge",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(o.container_log_max_size, 1024 * 1024);
        assert_eq!(o.container_log_max_files, 3);
        assert_eq!(
            (o.image_gc_high_threshold, o.image_gc_low_threshold),
            (1, 0)
        );
        assert_eq!(o.minimum_image_ttl_duration, Duration::ZERO);
        assert_eq!(o.pod_infra_container_image, "localhost/pause:edge");
        for bad in [
            "run --container-log-max-size ten",
            "run --container-log-max-size 0",
            "run --container-log-max-files 1",
            "run --image-gc-high-threshold 101",
            "run --image-gc-high-threshold 50 --image-gc-low-threshold 60",
            "run --image-gc-low-threshold -1",
        ] {
            assert!(
                matches!(parse(&args(bad)), Err(OptionsError::BadValue { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn log_rotation_and_image_gc_config_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "containerLogMaxSize: 5Mi\ncontainerLogMaxFiles: 2\nimageGCHighThresholdPercent: 90\n\
             imageGCLowThresholdPercent: 70\nimageMinimumGCAge: 5m\n",
        )
        .unwrap();
        let Command::Run(o) = parse(&args(&format!("run --config {}", path.display()))).unwrap()
        else {
            panic!()
        };
        assert_eq!(o.container_log_max_size, 5 * 1024 * 1024);
        assert_eq!(o.container_log_max_files, 2);
        assert_eq!(
            (o.image_gc_high_threshold, o.image_gc_low_threshold),
            (90, 70)
        );
        assert_eq!(o.minimum_image_ttl_duration, Duration::from_secs(300));
        std::fs::write(&path, "containerLogMaxSize: lots\n").unwrap();
        let err = parse(&args(&format!("run --config {}", path.display()))).unwrap_err();
        assert!(err.to_string().contains("containerLogMaxSize"), "{err}");
    }

    #[test]
    fn durations() {
        for (s, want) in [
            ("20s", Some(20.0)),
            ("1m30s", Some(90.0)),
            ("500ms", Some(0.5)),
            ("2h", Some(7200.0)),
            ("0", Some(0.0)),
            ("1.5s", Some(1.5)),
            ("", None),
            ("10", None),
            ("s", None),
            ("3d", None),
        ] {
            assert_eq!(parse_duration(s).map(|d| d.as_secs_f64()), want, "{s}");
        }
    }

    /// The bootstrap and rotation flags and keys, and the combinations refused at start.
    #[test]
    fn certificate_flags_and_keys() {
        let Command::Run(o) = parse(&args(
            "run --kubeconfig /k --bootstrap-kubeconfig /b --rotate-certificates \
             --rotate-server-certificates=true --cert-dir /c",
        ))
        .unwrap() else {
            panic!()
        };
        assert_eq!(o.bootstrap_kubeconfig, Some(PathBuf::from("/b")));
        assert!(o.rotate_certificates && o.rotate_server_certificates);
        assert_eq!(o.cert_dir, Some(PathBuf::from("/c")));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        std::fs::write(
            &path,
            "kubeconfig: /k\nrotateCertificates: true\nserverTLSBootstrap: true\n",
        )
        .unwrap();
        let Command::Run(o) = parse(&args(&format!("run --config {}", path.display()))).unwrap()
        else {
            panic!()
        };
        assert!(o.rotate_certificates && o.rotate_server_certificates);
        // (command line, the flag the error names, what it says)
        for (line, flag, says) in [
            (
                "run --bootstrap-kubeconfig /b",
                "--bootstrap-kubeconfig",
                "needs --kubeconfig",
            ),
            (
                "run --rotate-certificates",
                "--rotate-certificates",
                "needs --kubeconfig",
            ),
            (
                "run --rotate-server-certificates",
                "--rotate-server-certificates",
                "needs --kubeconfig",
            ),
            (
                "run --kubeconfig /k --rotate-server-certificates --tls-cert-file /a \
                 --tls-private-key-file /b",
                "--rotate-server-certificates",
                "--tls-cert-file",
            ),
            (
                "run --kubeconfig /k --rotate-server-certificates --port 0",
                "--rotate-server-certificates",
                "--port is 0",
            ),
        ] {
            let err = parse(&args(line)).unwrap_err().to_string();
            assert!(err.contains(flag) && err.contains(says), "{line}: {err}");
        }
    }

    #[test]
    fn node_labels_a_node_may_not_set_on_itself_are_refused_at_start() {
        for (labels, ok) in [
            ("example.com/site=depot-7,zone=x", true),
            (
                "kubernetes.io/arch=arm64,topology.kubernetes.io/zone=a",
                true,
            ),
            (
                "node.kubernetes.io/exclude-from-external-load-balancers=",
                true,
            ),
            ("kubelet.kubernetes.io/x=1,sub.node.kubernetes.io/y=2", true),
            ("node-role.kubernetes.io/worker=", false),
            ("node-restriction.kubernetes.io/pool=a", false),
            ("kubernetes.io/role=edge", false),
            ("k8s.io/x=1", false),
            ("example.k8s.io/x=1", false),
            ("notkubernetes.io/x=1", true),
        ] {
            let r = parse(&args(&format!("run --node-labels {labels}")));
            match r {
                Ok(_) => assert!(ok, "{labels} accepted"),
                Err(e) => {
                    assert!(!ok, "{labels} refused: {e}");
                    let e = e.to_string();
                    assert!(
                        e.contains("--node-labels") && e.contains("kubectl label"),
                        "{e}"
                    );
                }
            }
        }
    }

    /// The config file through the value decoder (api::decode) reads as serde_yaml_ng's
    /// typed decoding did: numbers and booleans where strings are wanted are their text,
    /// tags dropped, YAML 1.2 (`yes` is a string), unknown keys ignored, an empty or
    /// comments-only file is no setting.
    #[test]
    fn config_file_reads_as_serde_yaml_ng_did() {
        let texts = [
            "staticPodPath: /p\nport: 0x2800\nmaxPods: 20\ncgroupsPerQOS: false\n",
            "systemReserved: {cpu: 1, memory: 1Gi}\nnodeLabels: {rack: 12, edge: true, name: yes}\n",
            "hostnameOverride: 123\nallowedUnsafeSysctls: [net.core.somaxconn, 1]\nunknown: .nan\n",
            "staticPodURLHeader: {X-A: [1, b]}\nenforceNodeAllocatable: !tag [pods]\n",
            "podLogDir: /l\nmanifestURL: http://x\nimageGCHighThresholdPercent: 90\n",
            "# nothing\n",
            "---\n",
            "port: -1\n",
            "port: '80'\n",
            "maxPods: 1e3\n",
            "cgroupsPerQOS: yes\n",
            "systemReserved: [cpu]\n",
            "a: 1\n---\nb: 2\n",
        ];
        for text in texts {
            let old: Result<ConfigFile, _> = serde_yaml_ng::from_str(text);
            let new: Result<ConfigFile, _> = crate::api::from_yaml(text);
            match (old, new) {
                (Ok(old), Ok(new)) => assert_eq!(format!("{old:?}"), format!("{new:?}"), "{text}"),
                (Err(_), Err(_)) => {}
                (old, new) => panic!("{text}: {old:?} then, {new:?} now"),
            }
        }
    }

    /// A value of the wrong type in the config file: the error names the file and the
    /// field path.
    #[test]
    fn malformed_config_file_names_the_file_and_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        let p = path.display().to_string();
        for (text, want) in [
            (
                "port: [80]\n",
                "port: invalid type: sequence, expected u16".to_string(),
            ),
            (
                "staticPodURLHeader: {X-A: [a, [b]]}\n",
                "staticPodURLHeader.X-A[1]: invalid type: sequence, expected a string".to_string(),
            ),
            (
                "authentication: {anonymous: {enabled: maybe}}\n",
                "authentication.anonymous.enabled: not true or false".to_string(),
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = parse(&args(&format!("run --config {p}"))).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("config file {p}: {want}"),
                "{text}"
            );
        }
        std::fs::write(&path, "port: [\n").unwrap();
        let err = parse(&args(&format!("run --config {p}")))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("config file {p}: ")) && err.contains("line"),
            "{err}"
        );
    }
}
