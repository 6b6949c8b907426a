//! The table of settings: one entry per flag (and per config-file-only key).
//!
//! Each [`Flag`] names the command-line flag, the config file's key (the kubelet's
//! `KubeletConfiguration` field where there is one), the default, the `--help` text and how
//! the value is read and where it is stored ([`Kind`]). The command line, the config file,
//! `--help` and `Options::default()` all come from this table, as the kubelet's
//! `options.go` registers a flag in one line: adding a setting is a field of `Options` and
//! one entry here.
//!
//! The entries are `&'static` data with plain `fn` pointers (a field accessor, or a reader
//! for a value that sets more than one thing): no generic code per entry.

pub(super) use super::value::Kind;

/// One setting.
pub(super) struct Flag {
    /// `--name` on the command line; "" for a setting of the config file only.
    pub name: &'static str,
    /// The config file's key (dotted for a nested one, `authentication.webhook.enabled`);
    /// "" for a flag the config file does not have.
    pub key: &'static str,
    /// Other spellings still read: flags (`--…`) and config keys.
    pub aliases: &'static [&'static str],
    /// The value's placeholder in `--help` (`DIR`, `DURATION`; `[=true|false]` for a bool).
    pub value: &'static str,
    /// The default, written as on the command line; "" for none (the field's empty value).
    pub default: &'static str,
    /// `--help`'s text, a line per `\n`; "" keeps the flag out of `--help`. ` [default]` is
    /// added at its end unless the text says the default itself (it holds a `[`).
    pub help: &'static str,
    /// How the value is read and where it goes.
    pub kind: Kind,
}

/// A titled part of `--help`.
pub(super) struct Group {
    pub heading: &'static str,
    pub flags: &'static [Flag],
    /// Lines printed after the group's flags.
    pub footer: &'static str,
}

/// Every setting, in `--help`'s order.
pub(super) static GROUPS: [Group; 4] = [
    Group {
        heading: "FLAGS (kubelet names):",
        flags: NODE,
        footer: "",
    },
    Group {
        heading: "Cluster mode (builds with the `apiserver` feature):",
        flags: CLUSTER,
        footer: "",
    },
    Group {
        heading: "The node API (builds with the `apiserver` feature; kubectl works against it):",
        flags: NODE_API,
        footer: "    (picolet writes ROOT-DIR/kubeconfig, mode 0600; `picolet kubeconfig` prints it)\n",
    },
    // Keys of the config file only, as the kubelet's: not in `--help`.
    Group {
        heading: "",
        flags: FILE_ONLY,
        footer: "",
    },
];

/// Every entry of the table.
pub(super) fn all() -> impl Iterator<Item = &'static Flag> {
    GROUPS.iter().flat_map(|g| g.flags.iter())
}

/// The entry of a command-line flag (its name or an older spelling).
pub(super) fn by_name(flag: &str) -> Option<&'static Flag> {
    all().find(|f| !f.name.is_empty() && (f.name == flag || f.aliases.contains(&flag)))
}

static NODE: &[Flag] = &[
    Flag {
        name: "--config",
        key: "",
        aliases: &[],
        value: "FILE",
        default: "",
        help: "YAML config file (KubeletConfiguration field names)",
        kind: Kind::Config,
    },
    Flag {
        name: "--pod-manifest-path",
        key: "staticPodPath",
        aliases: &["podManifestPath"],
        value: "DIR",
        default: "/etc/kubernetes/manifests",
        help: "static pod directory",
        kind: Kind::Path(|o| &mut o.pod_manifest_path),
    },
    Flag {
        name: "--container-runtime-endpoint",
        key: "containerRuntimeEndpoint",
        aliases: &[],
        value: "URL",
        default: "unix:///run/containerd/containerd.sock",
        help: "CRI socket",
        kind: Kind::Str(|o| &mut o.container_runtime_endpoint),
    },
    Flag {
        name: "--root-dir",
        key: "rootDir",
        aliases: &[],
        value: "DIR",
        default: "/var/lib/picolet",
        help: "state directory",
        kind: Kind::Path(|o| &mut o.root_dir),
    },
    Flag {
        name: "--pod-log-dir",
        key: "podLogsDir",
        aliases: &["--pod-logs-dir", "podLogDir"],
        value: "DIR",
        default: "/var/log/pods",
        help: "container logs",
        kind: Kind::Path(|o| &mut o.pod_log_dir),
    },
    Flag {
        name: "--hostname-override",
        key: "hostnameOverride",
        aliases: &[],
        value: "NAME",
        default: "",
        help: "node name [the hostname, lower-cased]",
        kind: Kind::OptStr(|o| &mut o.hostname_override),
    },
    Flag {
        name: "--file-check-frequency",
        key: "fileCheckFrequency",
        aliases: &[],
        value: "DURATION",
        default: "20s",
        help: "manifest directory re-list period",
        kind: Kind::Duration(|o| &mut o.file_check_frequency),
    },
    Flag {
        name: "--runtime-request-timeout",
        key: "runtimeRequestTimeout",
        aliases: &[],
        value: "DURATION",
        default: "2m",
        help: "CRI call deadline",
        kind: Kind::Duration(|o| &mut o.runtime_request_timeout),
    },
    Flag {
        name: "--sync-frequency",
        key: "syncFrequency",
        aliases: &[],
        value: "DURATION",
        default: "1m",
        help: "periodic pod resync",
        kind: Kind::Duration(|o| &mut o.sync_frequency),
    },
    Flag {
        name: "--resolv-conf",
        key: "resolvConf",
        aliases: &[],
        value: "FILE",
        default: "/etc/resolv.conf",
        help: "resolver for dnsPolicy Default",
        kind: Kind::Path(|o| &mut o.resolv_conf),
    },
    Flag {
        name: "--allowed-unsafe-sysctls",
        key: "allowedUnsafeSysctls",
        aliases: &[],
        value: "LIST",
        default: "",
        help: "sysctls (or prefixes, net.core.*) pods may set beyond the\n\
               safe ones; others are refused: SysctlForbidden [none]",
        kind: Kind::List(|o| &mut o.allowed_unsafe_sysctls),
    },
    Flag {
        name: "--watchdog-device",
        key: "",
        aliases: &[],
        value: "PATH",
        default: "",
        help: "a hardware watchdog (/dev/watchdog) petted from the\n\
               event loop; only where nothing else owns it [none]",
        kind: Kind::Text(super::value::set_watchdog_device),
    },
    Flag {
        name: "--cni-cache-dir",
        key: "",
        aliases: &[],
        value: "DIR",
        // kuberuntime::cni_cache::DEFAULT_CACHE_DIR (options sits below kuberuntime).
        default: "/var/lib/cni",
        help: "the runtime's CNI cache: its empty files (a power\n\
               cut's) removed at the first start in a boot;\n\
               empty: never",
        kind: Kind::Path(|o| &mut o.cni_cache_dir),
    },
    Flag {
        name: "--cgroups-per-qos",
        key: "cgroupsPerQOS",
        aliases: &[],
        value: "[=true|false]",
        default: "true",
        help: "pod cgroups ROOT/kubepods[/burstable|/besteffort]/pod<uid>\n\
               with the pods' limits [true]",
        kind: Kind::Bool(|o| &mut o.cgroups_per_qos),
    },
    Flag {
        name: "--cgroup-root",
        key: "cgroupRoot",
        aliases: &[],
        value: "PATH",
        default: "",
        help: "where kubepods goes; without --cgroups-per-qos the\n\
               sandboxes' cgroup parent [/; runtime default]",
        kind: Kind::Str(|o| &mut o.cgroup_root),
    },
    // The old spelling of --cgroup-root: its own entry, as it warns when used.
    Flag {
        name: "--cgroup-parent",
        key: "",
        aliases: &[],
        value: "PATH",
        default: "",
        help: "",
        kind: Kind::Text(super::value::set_cgroup_parent),
    },
    Flag {
        name: "--cgroup-driver",
        key: "cgroupDriver",
        aliases: &[],
        value: "cgroupfs|systemd",
        default: "cgroupfs",
        help: "as the runtime's; systemd only with\n\
               --cgroups-per-qos=false (see README)",
        kind: Kind::Text(super::value::set_cgroup_driver),
    },
    Flag {
        name: "--system-reserved",
        key: "systemReserved",
        aliases: &[],
        value: "cpu=..,memory=..",
        default: "",
        help: "taken from the node's allocatable [none]",
        kind: Kind::Map(|o, m| {
            o.system_reserved = super::parse_reserved(&m)?;
            Ok(())
        }),
    },
    Flag {
        name: "--kube-reserved",
        key: "kubeReserved",
        aliases: &[],
        value: "cpu=..,memory=..",
        default: "",
        help: "likewise [none]",
        kind: Kind::Map(|o, m| {
            o.kube_reserved = super::parse_reserved(&m)?;
            Ok(())
        }),
    },
    Flag {
        name: "--enforce-node-allocatable",
        key: "enforceNodeAllocatable",
        aliases: &[],
        value: "pods|none",
        default: "pods",
        help: "pods: kubepods limited to capacity - reserved",
        kind: Kind::ListWith(|o, list| {
            o.enforce_node_allocatable = super::value::parse_enforce(&list)?;
            Ok(())
        }),
    },
    Flag {
        name: "--seccomp-default",
        key: "seccompDefault",
        aliases: &[],
        value: "[=true|false]",
        default: "false",
        help: "RuntimeDefault seccomp for containers that set no\n\
               seccompProfile [false: Unconfined, as the kubelet]",
        kind: Kind::Bool(|o| &mut o.seccomp_default),
    },
    Flag {
        name: "--fail-swap-on",
        key: "failSwapOn",
        aliases: &[],
        value: "[=true|false]",
        default: "false",
        help: "refuse to start when the node has swap [false]\n\
               (config memorySwap.swapBehavior: NoSwap|LimitedSwap)",
        kind: Kind::Bool(|o| &mut o.fail_swap_on),
    },
    Flag {
        name: "--node-ip",
        key: "nodeIP",
        aliases: &[],
        value: "IP",
        default: "",
        help: "the node's IP: pods' hostIP, host-network pods' podIP,\n\
               the Node's InternalIP [the default route's address;\n\
               cluster mode: the address reaching the apiserver]",
        kind: Kind::OptIp(|o| &mut o.node_ip),
    },
    Flag {
        name: "--minimum-container-ttl-duration",
        key: "",
        aliases: &[],
        value: "D",
        default: "0",
        help: "container GC spares dead containers younger than D",
        kind: Kind::Duration(|o| &mut o.minimum_container_ttl_duration),
    },
    Flag {
        name: "--container-log-max-size",
        key: "containerLogMaxSize",
        aliases: &[],
        value: "Q",
        default: "10Mi",
        help: "rotate a container's log at Q bytes (e.g. 10Mi)",
        kind: Kind::Size(|o| &mut o.container_log_max_size),
    },
    Flag {
        name: "--container-log-max-files",
        key: "containerLogMaxFiles",
        aliases: &[],
        value: "N",
        default: "5",
        help: "log files kept per container, live one included",
        kind: Kind::Usize(|o| &mut o.container_log_max_files),
    },
    Flag {
        name: "--image-gc-high-threshold",
        key: "imageGCHighThresholdPercent",
        aliases: &[],
        value: "P",
        default: "85",
        help: "image GC starts at P % disk use; 100: never",
        kind: Kind::U8(|o| &mut o.image_gc_high_threshold),
    },
    Flag {
        name: "--image-gc-low-threshold",
        key: "imageGCLowThresholdPercent",
        aliases: &[],
        value: "P",
        default: "80",
        help: "image GC frees down to P %",
        kind: Kind::U8(|o| &mut o.image_gc_low_threshold),
    },
    Flag {
        name: "--minimum-image-ttl-duration",
        key: "imageMinimumGCAge",
        aliases: &[],
        value: "D",
        default: "2m",
        help: "image GC spares images first seen less than D ago",
        kind: Kind::Duration(|o| &mut o.minimum_image_ttl_duration),
    },
    Flag {
        name: "--pod-infra-container-image",
        key: "podInfraContainerImage",
        aliases: &[],
        value: "IMG",
        default: crate::images::DEFAULT_SANDBOX_IMAGE,
        help: "the runtime's sandbox image: never removed, any tag",
        kind: Kind::Str(|o| &mut o.pod_infra_container_image),
    },
    Flag {
        name: "--image-archive-dir",
        key: "imageArchiveDir",
        aliases: &[],
        value: "DIR",
        default: "",
        help: "image archives (docker save, OCI) the image mirror\n\
               serves to the runtime [ROOT-DIR/images]",
        kind: Kind::OptPath(|o| &mut o.image_archive_dir),
    },
    Flag {
        name: "--device-plugin-dir",
        key: "devicePluginDir",
        aliases: &[],
        value: "DIR",
        default: "",
        help: "device plugins register on DIR/kubelet.sock; empty:\n\
               none [/var/lib/kubelet/device-plugins]",
        kind: Kind::OptPath(|o| &mut o.device_plugin_dir),
    },
    Flag {
        name: "--image-mirror-address",
        key: "imageMirrorAddress",
        aliases: &[],
        value: "HOST:PORT",
        default: "",
        help: "serve the archives to the runtime here (the\n\
               packages: 127.0.0.1:10261) [none: no mirror]",
        kind: Kind::Str(|o| &mut o.image_mirror_address),
    },
    Flag {
        name: "--maximum-dead-containers-per-container",
        key: "",
        aliases: &[],
        value: "N",
        default: "1",
        help: "dead instances kept per container of a wanted pod;\n\
               -1: no limit",
        kind: Kind::Text(super::value::set_maximum_dead_containers),
    },
    Flag {
        name: "--eviction-hard",
        key: "evictionHard",
        aliases: &[],
        value: "SIGNAL<Q,...",
        default: crate::eviction::DEFAULT_EVICTION_HARD,
        help: "hard eviction thresholds; empty: none",
        kind: Kind::EvictionHard,
    },
    Flag {
        name: "--eviction-pressure-transition-period",
        key: "evictionPressureTransitionPeriod",
        aliases: &[],
        value: "D",
        // eviction::DEFAULT_PRESSURE_TRANSITION_PERIOD (a test checks they agree).
        default: "5m",
        help: "how long a pressure condition outlasts its signal",
        kind: Kind::Duration(|o| &mut o.eviction_pressure_transition_period),
    },
];

static CLUSTER: &[Flag] = &[
    Flag {
        name: "--kubeconfig",
        key: "kubeconfig",
        aliases: &[],
        value: "FILE",
        default: "",
        help: "join the cluster of this kubeconfig: Node, Lease, API\n\
               pods (kept running offline), status, mirror pods",
        kind: Kind::OptPath(|o| &mut o.kubeconfig),
    },
    Flag {
        name: "--bootstrap-kubeconfig",
        key: "",
        aliases: &[],
        value: "FILE",
        default: "",
        help: "join with a bootstrap token: when --kubeconfig has no\n\
               valid client certificate, get one by CSR, write it to\n\
               CERT-DIR and write --kubeconfig to use it",
        kind: Kind::OptPath(|o| &mut o.bootstrap_kubeconfig),
    },
    Flag {
        name: "--rotate-certificates",
        key: "rotateCertificates",
        aliases: &[],
        value: "[=true|false]",
        default: "",
        help: "renew the client certificate by CSR (70-90 % of its life)",
        kind: Kind::Bool(|o| &mut o.rotate_certificates),
    },
    Flag {
        name: "--rotate-server-certificates",
        key: "serverTLSBootstrap",
        aliases: &[],
        value: "[=true|false]",
        default: "",
        help: "the node API's certificate by CSR (kubelet-serving\n\
               signer; an operator approves it), renewed likewise",
        kind: Kind::Bool(|o| &mut o.rotate_server_certificates),
    },
    Flag {
        name: "--node-labels",
        key: "nodeLabels",
        aliases: &[],
        value: "k=v,...",
        default: "",
        help: "extra Node labels",
        kind: Kind::Map(|o, labels| {
            o.node_labels.extend(labels);
            Ok(())
        }),
    },
    Flag {
        name: "--max-pods",
        key: "maxPods",
        aliases: &[],
        value: "N",
        default: "110",
        help: "the Node's pod capacity",
        kind: Kind::U32(|o| &mut o.max_pods),
    },
    Flag {
        name: "--node-status-update-frequency",
        key: "nodeStatusUpdateFrequency",
        aliases: &[],
        value: "DUR",
        default: "10s",
        help: "node status period",
        kind: Kind::Duration(|o| &mut o.node_status_update_frequency),
    },
    Flag {
        name: "--manifest-url",
        key: "staticPodURL",
        aliases: &["manifestURL"],
        value: "URL",
        default: "",
        help: "also run the Pod or PodList served at URL (GET every 20s)",
        kind: Kind::OptStr(|o| &mut o.manifest_url),
    },
    Flag {
        name: "--manifest-url-header",
        key: "staticPodURLHeader",
        aliases: &[],
        value: "'Name:Value'",
        default: "",
        help: "header for --manifest-url (repeatable)",
        kind: Kind::UrlHeaders,
    },
];

static NODE_API: &[Flag] = &[
    Flag {
        name: "--address",
        key: "address",
        aliases: &[],
        value: "IP",
        default: "127.0.0.1",
        help: "listen address",
        kind: Kind::Ip(|o| &mut o.address),
    },
    Flag {
        name: "--port",
        key: "port",
        aliases: &[],
        value: "N",
        default: "10250",
        help: "HTTPS port; 0: no node API",
        kind: Kind::U16(|o| &mut o.port),
    },
    Flag {
        name: "--cert-dir",
        key: "",
        aliases: &[],
        value: "DIR",
        default: "",
        help: "certificates (self-signed or by CSR) and token [ROOT-DIR/pki]",
        kind: Kind::OptPath(|o| &mut o.cert_dir),
    },
    Flag {
        name: "--tls-cert-file",
        key: "tlsCertFile",
        aliases: &[],
        value: "FILE",
        default: "",
        help: "serving certificate chain (PEM) instead of a self-signed one",
        kind: Kind::OptPath(|o| &mut o.tls_cert_file),
    },
    Flag {
        name: "--tls-private-key-file",
        key: "tlsPrivateKeyFile",
        aliases: &[],
        value: "FILE",
        default: "",
        help: "its key",
        kind: Kind::OptPath(|o| &mut o.tls_private_key_file),
    },
    Flag {
        name: "--client-ca-file",
        key: "authentication.x509.clientCAFile",
        aliases: &[],
        value: "FILE",
        default: "",
        help: "also admit client certificates this CA signed\n\
               (the apiserver's kubelet-client certificate)",
        kind: Kind::OptPath(|o| &mut o.client_ca_file),
    },
    // Only the keys given: the kubelet's config-file defaults (webhooks on) would close
    // a standalone board's API, so picolet keeps its flag defaults (a deliberate difference).
    Flag {
        name: "--anonymous-auth",
        key: "authentication.anonymous.enabled",
        aliases: &[],
        value: "[=BOOL]",
        default: "false",
        help: "no credentials = system:anonymous",
        kind: Kind::Bool(|o| &mut o.anonymous_auth),
    },
    Flag {
        name: "--authentication-token-webhook",
        key: "authentication.webhook.enabled",
        aliases: &[],
        value: "[=BOOL]",
        default: "false",
        help: "check bearer tokens with TokenReview",
        kind: Kind::Bool(|o| &mut o.authentication_token_webhook),
    },
    Flag {
        name: "--authentication-token-webhook-cache-ttl",
        key: "authentication.webhook.cacheTTL",
        aliases: &[],
        value: "D",
        default: "2m",
        help: "how long a TokenReview answer is kept",
        kind: Kind::Duration(|o| &mut o.authentication_token_webhook_cache_ttl),
    },
    Flag {
        name: "--authorization-mode",
        key: "authorization.mode",
        aliases: &[],
        value: "MODE",
        default: "AlwaysAllow",
        help: "AlwaysAllow or Webhook (SubjectAccessReview)",
        kind: Kind::Text(super::value::set_authorization_mode),
    },
    Flag {
        name: "--authorization-webhook-cache-authorized-ttl",
        key: "authorization.webhook.cacheAuthorizedTTL",
        aliases: &[],
        value: "D",
        default: "5m",
        help: "how long an allowing SubjectAccessReview is kept",
        kind: Kind::Duration(|o| &mut o.authorization_webhook_cache_authorized_ttl),
    },
    Flag {
        name: "--authorization-webhook-cache-unauthorized-ttl",
        key: "authorization.webhook.cacheUnauthorizedTTL",
        aliases: &[],
        value: "D",
        default: "30s",
        help: "how long a denying SubjectAccessReview is kept",
        kind: Kind::Duration(|o| &mut o.authorization_webhook_cache_unauthorized_ttl),
    },
];

static FILE_ONLY: &[Flag] = &[
    // kubelet: ValidateKubeletConfiguration's memorySwap.swapBehavior.
    Flag {
        name: "",
        key: "memorySwap.swapBehavior",
        aliases: &[],
        value: "",
        default: "",
        help: "",
        kind: Kind::Text(super::value::set_swap_behavior),
    },
    // picolet's defaults are 30s and 10s (the kubelet's: 0, off): a shutdown only happens
    // when the system's hook asks for one, so it is on.
    Flag {
        name: "",
        key: "shutdownGracePeriod",
        aliases: &[],
        value: "",
        default: "30s",
        help: "",
        kind: Kind::Duration(|o| &mut o.shutdown_grace_period),
    },
    Flag {
        name: "",
        key: "shutdownGracePeriodCriticalPods",
        aliases: &[],
        value: "",
        default: "10s",
        help: "",
        kind: Kind::Duration(|o| &mut o.shutdown_grace_period_critical_pods),
    },
    Flag {
        name: "",
        key: "prePullImages",
        aliases: &[],
        value: "",
        default: "",
        help: "",
        kind: Kind::List(|o| &mut o.pre_pull_images),
    },
];
