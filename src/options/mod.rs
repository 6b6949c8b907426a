//! Command line and config file.
//!
//! Owns: parsing `picolet run|check|version [flags]` and the optional YAML config file into
//! one `Options` value. Flag names are the kubelet's where one exists; the config file uses
//! the kubelet's `KubeletConfiguration` field names where one exists (`staticPodPath`,
//! `containerRuntimeEndpoint`, `podLogsDir`, `fileCheckFrequency`, …). Flags win over the
//! file, the file wins over defaults.
//!
//! Every setting is one entry of the table in [`flags`]: its flag, its config key, its
//! default, its `--help` text and how its value is read ([`value`]). The command line, the
//! config file, `--help` and `Options::default()` all come from there.
//!
//! Must never: touch the system (no I/O besides reading the config file).
//! A hand-written parser instead of clap: a table of flags does not earn ~300 KiB of binary.

mod flags;
mod value;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use value::Kind;
#[cfg(test)]
use value::parse_duration;
pub(crate) use value::{ValueError, parse_labels, parse_reserved};

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

impl OptionsError {
    fn bad(flag: &str, reason: String) -> Self {
        OptionsError::BadValue {
            flag: flag.to_string(),
            reason,
        }
    }
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
#[cfg(test)]
pub(crate) const IMAGE_MIRROR_ADDRESS: &str = "127.0.0.1:10261";

impl Default for Options {
    /// The table's defaults ([`flags`]) over every field's empty value.
    fn default() -> Self {
        let mut o = Options::empty();
        for f in flags::all().filter(|f| !f.default.is_empty()) {
            // Every default reads (a test checks it): nothing to report here.
            let _ = f.kind.set_text(&mut o, f.default);
        }
        o
    }
}

impl Options {
    /// Every field empty (zero, false, none): what a setting is before the table's default.
    /// A new field gets its empty value here and its default in [`flags`].
    fn empty() -> Self {
        Options {
            pod_manifest_path: PathBuf::new(),
            container_runtime_endpoint: String::new(),
            root_dir: PathBuf::new(),
            pod_log_dir: PathBuf::new(),
            hostname_override: None,
            file_check_frequency: Duration::ZERO,
            runtime_request_timeout: Duration::ZERO,
            sync_frequency: Duration::ZERO,
            resolv_conf: PathBuf::new(),
            allowed_unsafe_sysctls: Vec::new(),
            watchdog_device: None,
            cni_cache_dir: PathBuf::new(),
            cgroups_per_qos: false,
            cgroup_root: String::new(),
            cgroup_driver: crate::cm::CgroupDriver::default(),
            system_reserved: crate::cm::Reserved::default(),
            kube_reserved: crate::cm::Reserved::default(),
            enforce_node_allocatable: false,
            seccomp_default: false,
            fail_swap_on: false,
            swap_behavior: crate::qos::SwapBehavior::default(),
            minimum_container_ttl_duration: Duration::ZERO,
            maximum_dead_containers_per_container: None,
            eviction_hard: Vec::new(),
            eviction_pressure_transition_period: Duration::ZERO,
            shutdown_grace_period: Duration::ZERO,
            shutdown_grace_period_critical_pods: Duration::ZERO,
            container_log_max_size: 0,
            container_log_max_files: 0,
            image_gc_high_threshold: 0,
            image_gc_low_threshold: 0,
            minimum_image_ttl_duration: Duration::ZERO,
            pod_infra_container_image: String::new(),
            image_archive_dir: None,
            device_plugin_dir: None,
            image_mirror_address: String::new(),
            pre_pull_images: Vec::new(),
            kubeconfig: None,
            bootstrap_kubeconfig: None,
            rotate_certificates: false,
            rotate_server_certificates: false,
            node_labels: BTreeMap::new(),
            max_pods: 0,
            node_ip: None,
            node_status_update_frequency: Duration::ZERO,
            manifest_url: None,
            manifest_url_headers: Vec::new(),
            address: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            port: 0,
            cert_dir: None,
            tls_cert_file: None,
            tls_private_key_file: None,
            client_ca_file: None,
            anonymous_auth: false,
            authentication_token_webhook: false,
            authentication_token_webhook_cache_ttl: Duration::ZERO,
            authorization_webhook: false,
            authorization_webhook_cache_authorized_ttl: Duration::ZERO,
            authorization_webhook_cache_unauthorized_ttl: Duration::ZERO,
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

/// `--help`'s usage part, before the flags.
const HELP_USAGE: &str = "\
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
";

/// The column where a flag's help text starts.
const HELP_COLUMN: usize = 40;

/// `picolet --help`: the usage, then each group of the table's flags.
pub fn help() -> String {
    let mut out = String::from(HELP_USAGE);
    for group in flags::GROUPS.iter().filter(|g| !g.heading.is_empty()) {
        out.push('\n');
        out.push_str(group.heading);
        out.push('\n');
        for flag in group.flags.iter().filter(|f| !f.help.is_empty()) {
            help_entry(&mut out, flag);
        }
        out.push_str(group.footer);
    }
    out.push_str("\nLogging: RUST_LOG=debug|info|warn (default info).\n");
    out
}

/// One flag of `--help`: `--name VALUE`, its text from [`HELP_COLUMN`] (on the next line
/// when the name is too long), and `[default]` unless the text says it.
fn help_entry(out: &mut String, flag: &flags::Flag) {
    let new_line = |out: &mut String| {
        out.push('\n');
        out.push_str(&" ".repeat(HELP_COLUMN));
    };
    let start = out.len();
    out.push_str("    ");
    out.push_str(flag.name);
    if !flag.value.starts_with('[') {
        out.push(' ');
    }
    out.push_str(flag.value);
    let width = out.len() - start;
    if width + 2 <= HELP_COLUMN {
        out.push_str(&" ".repeat(HELP_COLUMN - width));
    } else {
        new_line(out);
    }
    for (i, line) in flag.help.lines().enumerate() {
        if i > 0 {
            new_line(out);
        }
        out.push_str(line);
    }
    if !flag.default.is_empty() && !flag.help.contains('[') {
        let line_len = out.len() - out.rfind('\n').map_or(0, |i| i + 1);
        if line_len + flag.default.len() + 3 > 100 {
            new_line(out);
        } else {
            out.push(' ');
        }
        out.push('[');
        out.push_str(flag.default);
        out.push(']');
    }
    out.push('\n');
}

/// `--root-dir X`, `--kubeconfig X` (or `--flag=X`) and then a board command: that
/// command's own command line (verb first, the flags after it).
/// The board's own commands (`picolet validate|get|describe|logs`, answered by `cli`).
pub(crate) const CLI_VERBS: [&str; 5] = ["validate", "get", "describe", "logs", "node-shutdown"];

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

/// What the first words of the command line ask for.
enum Verb<'a> {
    Help,
    Version,
    /// A board command's own command line (`cli`).
    Cli(Vec<String>),
    /// `run`, `check` or `kubeconfig`, and the flags after it.
    Flags(&'static str, &'a [String]),
}

/// The command word, or a board command, or kubelet-style flags only (`run`).
fn verb(args: &[String]) -> Result<Verb<'_>, OptionsError> {
    let Some(first) = args.first() else {
        return Ok(Verb::Help);
    };
    // `picolet --root-dir X get pods`: the board commands after the flags they share with
    // `run` (the command line a user has in mind from `picolet --root-dir X run`).
    if let Some(cli) = cli_after_shared_flags(args) {
        return Ok(Verb::Cli(cli));
    }
    Ok(match first.as_str() {
        "--version" | "-V" | "version" => Verb::Version,
        "--help" | "-h" | "help" => Verb::Help,
        "run" => Verb::Flags("run", &args[1..]),
        "check" => Verb::Flags("check", &args[1..]),
        "kubeconfig" => Verb::Flags("kubeconfig", &args[1..]),
        "validate" | "get" | "describe" | "logs" | "node-shutdown" => Verb::Cli(args.to_vec()),
        // `picolet --pod-manifest-path …` reads like the kubelet: treat as `run`.
        s if s.starts_with("--") => Verb::Flags("run", args),
        other => return Err(OptionsError::UnknownCommand(other.to_string())),
    })
}

/// Parses `args` (without the program name).
pub fn parse(args: &[String]) -> Result<Command, OptionsError> {
    // Step 1: the command.
    let (kind, rest) = match verb(args)? {
        Verb::Help => return Ok(Command::Help),
        Verb::Version => return Ok(Command::Version),
        Verb::Cli(cli) => return Ok(Command::Cli(cli)),
        Verb::Flags(kind, rest) => (kind, rest),
    };
    // Step 2: the flags, as (name, value); `--help` anywhere wins.
    let flags = split_flags(rest)?;
    if flags.iter().any(|(f, _)| f == "--help" || f == "-h") {
        return Ok(Command::Help);
    }
    // Step 3: the defaults, the config file over them, the flags over both.
    let mut opts = Options::default();
    if let Some((_, Some(path))) = flags.iter().find(|(f, _)| f == "--config") {
        apply_config_file(&mut opts, path)?;
    }
    for (flag, value) in &flags {
        set_flag(&mut opts, flag, value.as_deref())?;
    }
    // Step 4: the settings that need one another.
    check_together(&opts)?;
    Ok(match kind {
        "check" => Command::Check(opts),
        "kubeconfig" => Command::Kubeconfig(opts),
        _ => Command::Run(opts),
    })
}

/// One flag of the command line, through its entry of the table.
fn set_flag(opts: &mut Options, flag: &str, value: Option<&str>) -> Result<(), OptionsError> {
    let entry = flags::by_name(flag).ok_or_else(|| OptionsError::UnknownFlag(flag.to_string()))?;
    let value = match (value, &entry.kind) {
        (Some(v), _) => v,
        // A bare bool flag is true (`--fail-swap-on`); a bare list is empty
        // (`--enforce-node-allocatable` alone: none).
        (None, Kind::Bool(_)) => "true",
        (None, Kind::ListWith(_)) => "",
        (None, _) => return Err(OptionsError::MissingValue(flag.to_string())),
    };
    entry
        .kind
        .set_text(opts, value)
        .map_err(|e| OptionsError::bad(flag, e.to_string()))
}

/// The checks across settings, after the config file and the flags.
fn check_together(opts: &Options) -> Result<(), OptionsError> {
    // kubelet: "no client provided, cannot use webhook authentication/authorization".
    if (opts.authentication_token_webhook || opts.authorization_webhook)
        && opts.kubeconfig.is_none()
    {
        let flag = if opts.authorization_webhook {
            "--authorization-mode"
        } else {
            "--authentication-token-webhook"
        };
        return Err(OptionsError::bad(
            flag,
            "the webhooks ask the apiserver: --kubeconfig is needed".into(),
        ));
    }
    if opts.tls_cert_file.is_some() != opts.tls_private_key_file.is_some() {
        return Err(OptionsError::bad(
            "--tls-cert-file",
            "--tls-cert-file and --tls-private-key-file go together".into(),
        ));
    }
    check_log_and_image_gc(opts)?;
    check_certificates(opts)?;
    check_node_labels(&opts.node_labels)
        .map_err(|e| OptionsError::bad("--node-labels", e.to_string()))?;
    // The systemd driver needs the pod and QoS slices made (and limited) through systemd's
    // D-Bus API; picolet has no D-Bus client (see README, "Pod cgroups"). Without
    // `--cgroups-per-qos` the runtime places the pods itself and the driver only names them.
    if opts.cgroup_driver == crate::cm::CgroupDriver::Systemd && opts.cgroups_per_qos {
        return Err(OptionsError::bad(
            "--cgroup-driver",
            "systemd is not supported with --cgroups-per-qos (picolet does not talk to \
             systemd over D-Bus, so it could neither make nor limit the pod slices): \
             use --cgroup-driver=cgroupfs with the runtime's cgroupfs driver \
             (containerd: SystemdCgroup = false; CRI-O: cgroup_manager = \"cgroupfs\"), \
             or add --cgroups-per-qos=false to leave pod cgroups to the runtime"
                .into(),
        ));
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
            return Err(OptionsError::bad(name, "must be more than 0".into()));
        }
    }
    Ok(())
}

/// The certificate flags that need others (kubelet: the bootstrap and the managers need a
/// client of the cluster; picolet refuses at start rather than ignoring a flag).
fn check_certificates(opts: &Options) -> Result<(), OptionsError> {
    let refuse = |flag: &str, reason: &str| Err(OptionsError::bad(flag, reason.into()));
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

/// The config file over `opts`: each key of the table that the file has, in the table's
/// order.
fn apply_config_file(opts: &mut Options, path: &str) -> Result<(), OptionsError> {
    let bad = |message: String| OptionsError::ConfigParse {
        path: path.to_string(),
        message,
    };
    let doc = read_config_file(path)?;
    warn_unknown_keys(path, &doc);
    for flag in flags::all().filter(|f| !f.key.is_empty()) {
        if let Some((key, value)) = config_value(&doc, flag) {
            flag.kind
                .set_yaml(opts, key, value)
                .map_err(|e| bad(e.in_key(key)))?;
        }
    }
    // kubelet: the KubeletConfiguration's validation of the two periods.
    if opts.shutdown_grace_period_critical_pods > opts.shutdown_grace_period {
        return Err(bad(format!(
            "shutdownGracePeriodCriticalPods ({}s) must be <= shutdownGracePeriod ({}s)",
            opts.shutdown_grace_period_critical_pods.as_secs(),
            opts.shutdown_grace_period.as_secs()
        )));
    }
    Ok(())
}

/// The config file as a JSON value: a map of settings, or null when empty.
fn read_config_file(path: &str) -> Result<serde_json::Value, OptionsError> {
    let text = std::fs::read_to_string(path).map_err(|source| OptionsError::ConfigRead {
        path: path.to_string(),
        source,
    })?;
    let bad = |message: String| OptionsError::ConfigParse {
        path: path.to_string(),
        message,
    };
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Null);
    }
    // One decoder for every typed input (api::decode): the YAML as a JSON value, then the
    // value decoder per key.
    let doc = crate::api::yaml_value(&text).map_err(|e| bad(e.to_string()))?;
    match doc {
        serde_json::Value::Object(_) | serde_json::Value::Null => Ok(doc),
        _ => Err(bad("invalid type: expected a map of settings".to_string())),
    }
}

/// Unknown keys are logged and ignored, so a kubelet config can be reused.
fn warn_unknown_keys(path: &str, doc: &serde_json::Value) {
    let serde_json::Value::Object(map) = doc else {
        return;
    };
    let known = |key: &str| {
        key == "apiVersion"
            || key == "kind"
            || flags::all().any(|f| {
                std::iter::once(&f.key)
                    .chain(f.aliases)
                    .any(|k| k.split('.').next() == Some(key))
            })
    };
    for key in map.keys().filter(|k| !known(k)) {
        log::warn!("config file {path}: unknown key {key:?} ignored");
    }
}

/// The file's value of an entry (its key, else an older spelling), null being unset.
fn config_value<'a>(
    doc: &'a serde_json::Value,
    flag: &'static flags::Flag,
) -> Option<(&'static str, &'a serde_json::Value)> {
    let keys = std::iter::once(&flag.key).chain(flag.aliases.iter());
    keys.filter(|k| !k.starts_with("--")).find_map(|key| {
        let v = key.split('.').try_fold(doc, |v, part| v.get(part))?;
        (!v.is_null()).then_some((*key, v))
    })
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
pub(crate) fn check_node_labels(labels: &BTreeMap<String, String>) -> Result<(), ValueError> {
    let in_domain = |d: &str, domain: &str| d == domain || d.ends_with(&format!(".{domain}"));
    let bad: Vec<String> = labels
        .keys()
        .filter(|k| {
            let Some((domain, _)) = k.split_once('/') else {
                return false;
            };
            let ours = in_domain(domain, "kubernetes.io") || in_domain(domain, "k8s.io");
            ours && !KUBELET_LABELS.contains(&k.as_str())
                && !KUBELET_LABEL_NAMESPACES
                    .iter()
                    .any(|ns| in_domain(domain, ns))
        })
        .cloned()
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(ValueError::ForbiddenLabels(bad))
}

/// kubelet's validation of the log rotation and image GC settings (flags or config file).
fn check_log_and_image_gc(opts: &Options) -> Result<(), OptionsError> {
    if opts.container_log_max_size == 0 {
        return Err(OptionsError::bad(
            "--container-log-max-size",
            "must be more than 0".into(),
        ));
    }
    if opts.container_log_max_files < 2 {
        return Err(OptionsError::bad(
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
        .map_err(|reason| OptionsError::bad("--image-gc-high-threshold", reason.to_string()))
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
                "memorySwap.swapBehavior: \"Unlimited\" must be one of: \"\", \"LimitedSwap\" or \"NoSwap\"",
            ),
            (
                "memorySwap: {swapBehavior: [1]}\n",
                "memorySwap.swapBehavior: not a string",
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

    /// The device plugin directory's flag and config key.
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

    /// The image mirror's flags and config keys.
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        let read = |text: &str| {
            std::fs::write(&path, text).unwrap();
            match parse(&args(&format!("run --config {}", path.display()))) {
                Ok(Command::Run(o)) => Ok(o),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e.to_string()),
            }
        };
        let o =
            read("staticPodPath: /p\nport: 0x2800\nmaxPods: 20\ncgroupsPerQOS: false\n").unwrap();
        assert_eq!(o.pod_manifest_path, PathBuf::from("/p"));
        assert_eq!((o.port, o.max_pods, o.cgroups_per_qos), (0x2800, 20, false));
        let o = read(
            "systemReserved: {cpu: 1, memory: 1Gi}\nnodeLabels: {rack: 12, edge: true, name: yes}\n",
        )
        .unwrap();
        assert_eq!(o.system_reserved.cpu_milli, 1000);
        let labels: Vec<(&str, &str)> = o
            .node_labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(labels, [("edge", "true"), ("name", "yes"), ("rack", "12")]);
        let o = read(
            "hostnameOverride: 123\nallowedUnsafeSysctls: [net.core.somaxconn, 1]\nunknown: .nan\n",
        )
        .unwrap();
        assert_eq!(o.hostname_override.as_deref(), Some("123"));
        assert_eq!(o.allowed_unsafe_sysctls, ["net.core.somaxconn", "1"]);
        let o = read("staticPodURLHeader: {X-A: [1, b]}\nenforceNodeAllocatable: !tag [pods]\n")
            .unwrap();
        assert_eq!(
            o.manifest_url_headers,
            [
                ("X-A".to_string(), "1".to_string()),
                ("X-A".to_string(), "b".to_string())
            ]
        );
        assert!(o.enforce_node_allocatable);
        let o = read("podLogDir: /l\nmanifestURL: http://x\nimageGCHighThresholdPercent: 90\n")
            .unwrap();
        assert_eq!(o.pod_log_dir, PathBuf::from("/l"));
        assert_eq!(o.manifest_url.as_deref(), Some("http://x"));
        assert_eq!(o.image_gc_high_threshold, 90);
        for empty in ["# nothing\n", "---\n"] {
            assert_eq!(read(empty).unwrap(), Options::default(), "{empty}");
        }
        for bad in [
            "port: -1\n",
            "port: '80'\n",
            "maxPods: 1e3\n",
            "cgroupsPerQOS: yes\n",
            "systemReserved: [cpu]\n",
            "a: 1\n---\nb: 2\n",
            "[1, 2]\n",
        ] {
            assert!(read(bad).is_err(), "{bad}");
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

    /// The defaults as `impl Default` wrote them before the table held them.
    fn old_defaults() -> Options {
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

    #[test]
    fn the_tables_defaults_are_the_old_ones() {
        assert_eq!(Options::default(), old_defaults());
        assert_eq!(
            Options::default().eviction_pressure_transition_period,
            crate::eviction::DEFAULT_PRESSURE_TRANSITION_PERIOD
        );
        for f in flags::all().filter(|f| !f.default.is_empty()) {
            let mut o = Options::empty();
            assert_eq!(
                f.kind.set_text(&mut o, f.default),
                Ok(()),
                "{} {}",
                f.name,
                f.key
            );
        }
    }

    /// A value of each entry's kind, as on the command line.
    fn sample(f: &flags::Flag) -> &'static str {
        match &f.kind {
            Kind::Bool(_) => "true",
            Kind::Duration(_) => "3s",
            Kind::U8(_) | Kind::U16(_) | Kind::U32(_) | Kind::Usize(_) => "7",
            Kind::Size(_) => "1Mi",
            Kind::Ip(_) | Kind::OptIp(_) => "10.0.0.1",
            Kind::List(_) => "a,b",
            Kind::ListWith(_) => "pods",
            Kind::Map(_) => "cpu=1",
            Kind::EvictionHard => "memory.available<1Mi",
            Kind::UrlHeaders => "A:1",
            Kind::Text(_) => match (f.name, f.key) {
                (_, "memorySwap.swapBehavior") => "LimitedSwap",
                ("--authorization-mode", _) => "Webhook",
                ("--cgroup-driver", _) => "systemd",
                ("--maximum-dead-containers-per-container", _) => "3",
                _ => "/x",
            },
            _ => "/x",
        }
    }

    /// The same value as the config file writes it (JSON is YAML).
    fn yaml_sample(f: &flags::Flag) -> serde_json::Value {
        use serde_json::json;
        match &f.kind {
            Kind::Bool(_) => json!(true),
            Kind::U8(_) | Kind::U16(_) | Kind::U32(_) | Kind::Usize(_) => json!(7),
            Kind::List(_) => json!(["a", "b"]),
            Kind::ListWith(_) => json!(["pods"]),
            Kind::Map(_) => json!({"cpu": "1"}),
            Kind::EvictionHard => json!({"memory.available": "1Mi"}),
            Kind::UrlHeaders => json!({"A": ["1"]}),
            _ => json!(sample(f)),
        }
    }

    #[test]
    fn every_flag_reads_from_the_command_line() {
        for f in flags::all().filter(|f| !f.name.is_empty()) {
            if matches!(f.kind, Kind::Config) {
                continue;
            }
            let mut o = Options::empty();
            set_flag(&mut o, f.name, Some(sample(f))).unwrap_or_else(|e| panic!("{}: {e}", f.name));
            assert_ne!(
                o,
                Options::empty(),
                "{} {} changes nothing",
                f.name,
                sample(f)
            );
            for alias in f.aliases.iter().filter(|a| a.starts_with("--")) {
                let mut a = Options::empty();
                set_flag(&mut a, alias, Some(sample(f))).unwrap();
                assert_eq!(a, o, "{alias}");
            }
        }
        assert!(matches!(
            set_flag(&mut Options::empty(), "--nope", Some("1")),
            Err(OptionsError::UnknownFlag(_))
        ));
    }

    #[test]
    fn every_key_reads_from_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.yaml");
        // Empty, but for a grace period the critical pods' share fits in.
        let empty = Options {
            shutdown_grace_period: Duration::MAX,
            ..Options::empty()
        };
        for f in flags::all().filter(|f| !f.key.is_empty()) {
            let keys =
                std::iter::once(&f.key).chain(f.aliases.iter().filter(|a| !a.starts_with("--")));
            for key in keys {
                let mut doc = yaml_sample(f);
                for part in key.rsplit('.') {
                    doc = serde_json::json!({ part: doc });
                }
                std::fs::write(&path, doc.to_string()).unwrap();
                let mut o = empty.clone();
                apply_config_file(&mut o, &path.display().to_string())
                    .unwrap_or_else(|e| panic!("{key}: {e}"));
                let mut want = empty.clone();
                f.kind.set_text(&mut want, sample(f)).unwrap();
                assert_eq!(o, want, "{key}");
                assert_ne!(o, empty, "{key} changes nothing");
            }
        }
    }

    #[test]
    fn no_two_entries_share_a_name_or_a_key() {
        let mut seen = std::collections::BTreeSet::new();
        for f in flags::all() {
            for name in std::iter::once(&f.name)
                .chain(std::iter::once(&f.key))
                .chain(f.aliases)
            {
                assert!(name.is_empty() || seen.insert(*name), "{name} twice");
            }
            assert!(!f.name.is_empty() || !f.key.is_empty());
            assert!(f.name.is_empty() || f.name.starts_with("--"), "{}", f.name);
        }
    }

    #[test]
    fn help_lists_every_flag_once() {
        let help = help();
        for f in flags::all().filter(|f| !f.name.is_empty() && !f.help.is_empty()) {
            let sep = if f.value.starts_with('[') { "" } else { " " };
            let at = format!("    {}{sep}{}", f.name, f.value);
            let lines = help.lines().filter(|l| l.starts_with(&at)).count();
            assert_eq!(lines, 1, "{}\n{help}", f.name);
        }
        // Every line but the usage's long ones and a long default fits a wide terminal.
        for line in help.lines().skip(8) {
            let default_only = line.trim_start().starts_with('[');
            assert!(default_only || line.chars().count() <= 104, "{line}");
        }
    }
}
