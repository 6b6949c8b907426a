//! Wiring (kubelet: `RunKubelet`, `makePodSourceConfig`): builds a running picolet from
//! [`Options`] — the CRI client, the pod sources, the apiserver-mode tasks, the tasks
//! beside the loop (CSI registration, the prober, the cgroup worker, the PLEG, eviction
//! measuring, image GC, log rotation) and the agent's loop — and the channels between
//! them. Every long-running task of picolet is spawned here.
//!
//! Startup order: the node name and the CRI client (configuration errors fail here, before
//! anything runs); in apiserver mode the HTTP source, the node task, the API source, the
//! status syncer and the event sink; then the runtime's version is logged, the file source
//! starts, and the agent's loop runs until shutdown. Every source sends its snapshots on one
//! channel the loop reads; the loop tells the status syncer about pods through one `messages`
//! mailbox. The node has one event [`Recorder`]: created here (`Extensions::recorder`), the
//! agent records into it, its readers (the event sink) get clones.
//!
//! Must never: hold pod state or decide anything about a pod (the agent does), or be
//! imported by what it builds: the agent, the sources and the apiserver tasks know only
//! the messages of `messages`, never this module or each other.
//!
//! Log lines that moved here from `agent.rs` and `apiserver/mod.rs` keep the target of the
//! module they came from, so picolet's output reads as before.

use std::rc::Rc;

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::agent::{self, AgentConfig, Channels};
use crate::clock::{Clock, SystemClock};
use crate::cri::client::{CriRuntime, CriTimeouts};
use crate::cri::{CriError, Runtime};
use crate::images::{ImageGcPolicy, ImageManager};
use crate::kuberuntime::gc::GcPolicy;
use crate::log_rotation::{LogManager, LogRotatePolicy};
use crate::messages::{PodEventSender, SourceUpdate};
use crate::node::{self, NodeError};
use crate::options::Options;
use crate::recorder::{self, Recorder};
use crate::source::file::{self, FileSource, FileSourceOptions};

/// The log targets of the lines that were the agent's and `apiserver::start`'s.
const AGENT_LOG: &str = "picolet::agent";
#[cfg(feature = "apiserver")]
const APISERVER_LOG: &str = "picolet::kube";

/// Why `picolet run` could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    NodeName(#[from] NodeError),
    #[error("--root-dir: {0}")]
    DataDirs(#[from] crate::volume::mounts::MountError),
    #[error(transparent)]
    Runtime(#[from] CriError),
    /// A start-up check of the node failed: the sysctl allowlist or the swap (the kubelet
    /// refuses to start too).
    #[error(transparent)]
    Check(#[from] StartCheckError),
    #[cfg(feature = "apiserver")]
    #[error(transparent)]
    Api(#[from] crate::kube::ApiError),
    #[cfg(feature = "apiserver")]
    #[error(transparent)]
    LocalApi(#[from] crate::local_api::LocalApiError),
    /// `--bootstrap-kubeconfig`: no client certificate could be had (the error names the
    /// file or the CSR).
    #[cfg(feature = "apiserver")]
    #[error("TLS bootstrap: {0}")]
    Bootstrap(String),
    #[cfg(not(feature = "apiserver"))]
    #[error("--kubeconfig and --manifest-url need a picolet built with the `apiserver` feature")]
    NoApiserverFeature,
    #[cfg(feature = "image-mirror")]
    #[error(transparent)]
    Mirror(#[from] crate::mirror::MirrorError),
    #[cfg(feature = "device-plugins")]
    #[error(transparent)]
    Devices(#[from] crate::cm::devicemanager::manager::ManagerError),
}

/// A node the kubelet refuses to start on.
#[derive(Debug, PartialEq, Eq)]
pub enum StartCheckError {
    /// An `allowedUnsafeSysctls` entry not known to be namespaced (admission's text).
    UnsafeSysctls(crate::admission::SysctlError),
    /// `--fail-swap-on` with swap on.
    SwapOn,
    /// `LimitedSwap` on cgroup v1.
    LimitedSwapNeedsV2,
}

impl std::fmt::Display for StartCheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnsafeSysctls(e) => write!(f, "--allowed-unsafe-sysctls: {e}"),
            Self::SwapOn => f.write_str(
                "running with swap on is not supported, please disable swap or set \
                 --fail-swap-on flag to false",
            ),
            Self::LimitedSwapNeedsV2 => f.write_str(
                "memorySwap.swapBehavior LimitedSwap is only supported with cgroup v2 \
                 (this node runs cgroup v1)",
            ),
        }
    }
}

impl std::error::Error for StartCheckError {}

/// Pod sources besides the file source, and who hears about pods (apiserver mode builds
/// it; the default is a static-pods-only agent).
#[derive(Debug, Default)]
pub struct Extensions {
    /// Names of the extra sources (`"api"`, `"http"`): `sources_ready` waits for them.
    pub sources: Vec<&'static str>,
    /// The snapshot channel the extra sources send on; the file source joins it.
    pub source_channel: Option<(mpsc::Sender<SourceUpdate>, mpsc::Receiver<SourceUpdate>)>,
    /// Where pod events go.
    pub events: Option<PodEventSender>,
    /// The API objects (ConfigMaps, Secrets, tokens) of API pods.
    pub objects: Option<crate::config_data::ObjectChannels>,
    /// The event recorder the agent records into (apiserver mode: the one the event sink
    /// reads); `None`: [`run_with_extensions`] creates one.
    pub recorder: Option<Recorder>,
    /// The pod workers' and the probes' metrics (the node API reads them); `None`:
    /// [`run_with_extensions`] creates them.
    pub metrics: Option<std::rc::Rc<crate::metrics::AgentMetrics>>,
    /// Where the eviction manager publishes the node's pressure conditions (the node
    /// status and the node API subscribe).
    pub pressure: Option<tokio::sync::watch::Sender<crate::eviction::Conditions>>,
    /// Graceful node shutdown: the node API's requests to the loop, and the loop's "the
    /// node is shutting down" (the node status subscribes).
    pub node_shutdown: Option<mpsc::Receiver<crate::node::shutdown::Request>>,
    pub shutting_down: Option<tokio::sync::watch::Sender<bool>>,
    /// The node's apiserver client (apiserver mode): the node API's webhooks use it.
    #[cfg(feature = "apiserver")]
    pub client: Option<crate::kube::Client>,
    /// `--rotate-server-certificates`: the node API's serving certificate slot and the
    /// cluster's CA.
    #[cfg(feature = "apiserver")]
    pub serving: Option<(crate::kube::CertSlot, Vec<u8>)>,
    /// The device manager (`--device-plugin-dir`; `None`: none).
    #[cfg(feature = "device-plugins")]
    pub devices: Option<agent::Devices>,
}

/// The device manager (`--device-plugin-dir`, by default the kubelet's
/// `/var/lib/kubelet/device-plugins`, where plugins look for it; empty: none): its
/// registration server listens before any pod is admitted, so that plugins started with
/// picolet register early.
///
/// Never takes a directory another kubelet or picolet serves (its `kubelet.sock` answers):
/// starting would remove that one's plugin sockets. Then, and when the default directory
/// cannot be made (not root), picolet runs without device plugins and says so; a directory
/// given that cannot be made is an error.
#[cfg(feature = "device-plugins")]
fn start_device_manager(
    opts: &Options,
    shutdown: &CancellationToken,
) -> Result<Option<agent::Devices>, DaemonError> {
    use crate::cm::devicemanager::{DEFAULT_DIR, KUBELET_SOCKET, manager};
    let (dir, given) = match &opts.device_plugin_dir {
        Some(d) if d.as_os_str().is_empty() => return Ok(None),
        Some(d) => (d.clone(), true),
        None => (std::path::PathBuf::from(DEFAULT_DIR), false),
    };
    let socket = dir.join(KUBELET_SOCKET);
    if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
        log::warn!(
            "device plugins: {} answers: another kubelet or picolet serves this directory; running without device plugins (give --device-plugin-dir)",
            socket.display()
        );
        return Ok(None);
    }
    let (active, active_rx) = tokio::sync::watch::channel(None);
    let started = match manager::start(&dir, active_rx, shutdown.child_token()) {
        Ok(s) => s,
        Err(e @ manager::ManagerError::Dir(..)) if !given => {
            log::warn!("{e}; running without device plugins");
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Some(agent::Devices {
        handle: started.handle,
        resources: started.resources,
        active,
    }))
}

/// The image mirror (`--image-mirror-address`, `--image-archive-dir`): listening and the
/// directory read before it returns (a port in use is an error at start, as the node
/// API's), then watched by a task of its own.
#[cfg(feature = "image-mirror")]
async fn start_image_mirror(
    opts: &Options,
    shutdown: &CancellationToken,
) -> Result<(), DaemonError> {
    use crate::mirror::{self, MirrorError};
    if opts.image_mirror_address.is_empty() {
        return Ok(());
    }
    let addr = opts.image_mirror_address.as_str();
    let sock: std::net::SocketAddr = addr
        .parse()
        .map_err(|_| MirrorError::Address(addr.to_string()))?;
    let listen = |source| MirrorError::Listen {
        addr: addr.to_string(),
        source,
    };
    let std_listener = std::net::TcpListener::bind(sock).map_err(listen)?;
    std_listener.set_nonblocking(true).map_err(listen)?;
    let listener = tokio::net::TcpListener::from_std(std_listener).map_err(listen)?;
    // The default directory is made here, so that it is watched from the start (a missing
    // one is looked for every 10 s); a named one is the operator's (a mount, perhaps later).
    let dir = match &opts.image_archive_dir {
        Some(d) => d.clone(),
        None => {
            let d = opts.root_dir.join("images");
            let _ = std::fs::create_dir_all(&d);
            d
        }
    };
    log::info!(
        "image mirror: serving the archives of {} on http://{addr}",
        dir.display()
    );
    let index = Rc::new(std::cell::RefCell::new(mirror::Index::default()));
    // Read once before any pod syncs: a pod of the boot finds its image at its first pull
    // (not after an ImagePullBackOff). The task reads it again once its watch is set.
    if mirror::rescan(&index, &dir).await > 0 {
        crate::node::release_free_memory();
    }
    crate::local_tasks::spawn_local(mirror::keep_current(
        dir,
        Rc::clone(&index),
        shutdown.clone(),
        crate::node::release_free_memory,
    ));
    crate::local_tasks::spawn_local(mirror::server::serve(listener, index, shutdown.clone()));
    Ok(())
}

/// `prePullImages` (picolet's own): each image pulled at start unless present, one after the
/// other beside the pods' own pulls, one log line each. With no credentials: the node's
/// keyring is for the pods' pulls (a private registry's image comes with its pod).
async fn pre_pull<R: crate::cri::Runtime>(runtime: R, images: Vec<String>) {
    for image in images {
        let t0 = std::time::Instant::now();
        let line = match runtime.image_status(&image).await {
            Ok(Some(_)) => "present".to_string(),
            _ => match runtime
                .pull_image(&image, None, &crate::cri::SandboxConfig::default())
                .await
            {
                Ok(r) => format!("pulled ({r}) in {:.1} s", t0.elapsed().as_secs_f64()),
                Err(e) => format!("not pulled: {e}"),
            },
        };
        log::info!("pre-pull: {image}: {line}");
    }
}

/// `picolet run`: the real CRI client and the system clock.
pub async fn run(
    opts: Options,
    shutdown: CancellationToken,
    relist_now: Rc<Notify>,
) -> Result<(), DaemonError> {
    // 1. The node: its name, and the checks the kubelet refuses to start without.
    let node_name = node::node_name(opts.hostname_override.as_deref())?;
    sysctl_allowlist(&opts)?;
    let (swap, noswap) = node_swap(&opts)?;
    log_swap(&swap, noswap);
    // 2. kubelet: setupDataDirs, before anything writes under the root directory.
    crate::volume::mounts::setup_data_dirs(&opts.root_dir)?;
    // 3. What the last boot may have left: the clock, the CNI cache.
    warn_if_clock_unset();
    repair_cni_cache(&opts);
    // 4. kubelet: the instrumented runtime service — every CRI call counted for `/metrics`.
    let runtime_metrics = std::sync::Arc::new(crate::metrics::RuntimeMetrics::default());
    let runtime = cri_runtime(&opts)?.with_metrics(std::sync::Arc::clone(&runtime_metrics));
    let daemon_cfg = daemon_config(&opts, node_name);
    // 5. Every task on one LocalSet.
    let local = tokio::task::LocalSet::new();
    local
        .run_until(run_local(
            opts,
            daemon_cfg,
            runtime,
            runtime_metrics,
            shutdown,
            relist_now,
        ))
        .await
}

/// The node's swap, said once at start, and whether memory-backed volumes may be swapped.
fn log_swap(swap: &crate::qos::NodeSwap, noswap: bool) {
    if swap.capacity > 0 {
        log::info!(
            "swap: {} MiB; memorySwap.swapBehavior {:?}{}",
            swap.capacity >> 20,
            swap.behavior,
            if swap.controller {
                ""
            } else {
                ", but no swap controller: containers' swap is not limited"
            }
        );
        if !noswap {
            // kubelet: the PossibleMemoryBackedVolumesOnDisk warning (an event upstream).
            log::warn!(
                "The tmpfs noswap option is not supported (kernel < 6.4). Memory-backed volumes \
                 (e.g. secrets, emptyDirs, etc.) might be swapped to disk and should no longer \
                 be considered secure."
            );
        }
    }
}

/// picolet: a clock not set yet (no RTC, before NTP) is named once; nothing waits for it
/// but what TLS needs (the apiserver), which retries until it is set.
fn warn_if_clock_unset() {
    let now = SystemClock.now();
    if crate::clock::before_floor(now) {
        log::warn!(
            "the clock reads {}, before this picolet's release: not set yet (a board without \
             a real-time clock)? Static pods start now; the apiserver is retried until the \
             clock is set (NTP)",
            crate::clock::rfc3339(now).unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
        );
    }
}

/// picolet: the empty CNI cache files a power cut leaves, before any pod is synced.
fn repair_cni_cache(opts: &Options) {
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    crate::kuberuntime::cni_cache::repair_after_boot(&opts.root_dir, &boot_id, &opts.cni_cache_dir);
}

/// [`run`] on its `LocalSet`: the node's own services, apiserver mode, the node API, then
/// the agent until shutdown.
async fn run_local(
    opts: Options,
    daemon_cfg: DaemonConfig,
    runtime: CriRuntime,
    runtime_metrics: std::sync::Arc<crate::metrics::RuntimeMetrics>,
    shutdown: CancellationToken,
    relist_now: Rc<Notify>,
) -> Result<(), DaemonError> {
    let cfg = &daemon_cfg.agent;
    // 1. picolet: the image mirror serves before any pod's image is pulled.
    start_image_mirror_if_built(&opts, &shutdown).await?;
    if !opts.pre_pull_images.is_empty() {
        crate::local_tasks::spawn_local(pre_pull(runtime.clone(), opts.pre_pull_images.clone()));
    }
    // 2. The device manager listens before any pod is admitted.
    #[cfg(feature = "device-plugins")]
    let devices = start_device_manager(&opts, &shutdown)?;
    #[cfg(feature = "device-plugins")]
    let device_resources = devices.as_ref().map(|d| d.resources.clone());
    #[cfg(not(feature = "device-plugins"))]
    let device_resources = no_device_manager(&opts);
    // 3. apiserver mode.
    let mut ext = start_cluster(&opts, cfg, &runtime, device_resources.clone(), &shutdown).await?;
    #[cfg(feature = "device-plugins")]
    {
        ext.devices = devices;
    }
    // 4. The node's one event recorder: the agent records into it, the event sink
    // (apiserver mode) and the node's own API read it.
    let recorder = ext
        .recorder
        .get_or_insert_with(|| new_recorder(&cfg.node_name, SystemClock))
        .clone();
    let agent_metrics = ext.metrics.get_or_insert_with(Default::default).clone();
    // 5. The node API.
    #[cfg(feature = "apiserver")]
    if opts.port != 0 {
        let sources = crate::local_api::Sources {
            node_shutdown: None,
            client: ext.client.clone(),
            runtime_metrics: Some(runtime_metrics),
            recorder: Some(recorder),
            agent_metrics: Some(agent_metrics),
            pressure: None,
            devices: device_resources,
        };
        start_node_api(&opts, cfg, &runtime, sources, &mut ext, &shutdown)?;
    }
    #[cfg(not(feature = "apiserver"))]
    let _ = (recorder, runtime_metrics, agent_metrics, device_resources);
    // 6. picolet: a stuck event loop ends the process for the service manager to
    // restart. Started here, when the loop is about to run: the TLS bootstrap above
    // may wait for an operator's approval for as long as it takes.
    crate::node::stall::start_guard();
    // 7. The agent until shutdown.
    run_with_extensions(runtime, SystemClock, daemon_cfg, ext, shutdown, relist_now).await;
    Ok(())
}

/// The image mirror when built in; else a WARN that `imageMirrorAddress` is ignored.
async fn start_image_mirror_if_built(
    opts: &Options,
    shutdown: &CancellationToken,
) -> Result<(), DaemonError> {
    #[cfg(feature = "image-mirror")]
    start_image_mirror(opts, shutdown).await?;
    #[cfg(not(feature = "image-mirror"))]
    {
        let _ = shutdown;
        if !opts.image_mirror_address.is_empty() {
            log::warn!(
                "imageMirrorAddress {:?} ignored: this picolet is built without the image \
                 mirror (cargo feature image-mirror)",
                opts.image_mirror_address
            );
        }
    }
    Ok(())
}

/// Without the device manager: a WARN that `devicePluginDir` is ignored; no resources.
#[cfg(not(feature = "device-plugins"))]
fn no_device_manager(
    opts: &Options,
) -> Option<tokio::sync::watch::Receiver<crate::cm::devicemanager::Resources>> {
    if opts
        .device_plugin_dir
        .as_ref()
        .is_some_and(|d| !d.as_os_str().is_empty())
    {
        log::warn!("devicePluginDir ignored: this picolet is built without the device manager");
    }
    None
}

/// apiserver mode: the TLS bootstrap (kubelet: `LoadClientCert` before anything talks to
/// the cluster), then the cluster's tasks; without the feature, an error if asked for.
async fn start_cluster(
    opts: &Options,
    cfg: &AgentConfig,
    runtime: &CriRuntime,
    device_resources: Option<tokio::sync::watch::Receiver<crate::cm::devicemanager::Resources>>,
    shutdown: &CancellationToken,
) -> Result<Extensions, DaemonError> {
    #[cfg(feature = "apiserver")]
    {
        if let (Some(boot), Some(kubeconfig)) = (&opts.bootstrap_kubeconfig, &opts.kubeconfig) {
            let b = crate::certificate::bootstrap::BootstrapOptions {
                kubeconfig: kubeconfig.clone(),
                bootstrap_kubeconfig: boot.clone(),
                cert_dir: cert_dir(opts),
                node_name: cfg.node_name.clone(),
                poll: std::time::Duration::from_secs(2),
            };
            let now = SystemClock.now() / 1_000_000_000;
            crate::certificate::bootstrap::load_client_cert(&b, now, shutdown)
                .await
                .map_err(|e| DaemonError::Bootstrap(e.to_string()))?;
        }
        Ok(start_apiserver_mode(
            opts,
            cfg,
            runtime.clone(),
            SystemClock,
            device_resources,
            shutdown,
        )?)
    }
    #[cfg(not(feature = "apiserver"))]
    {
        let _ = (cfg, runtime, device_resources, shutdown);
        if opts.kubeconfig.is_some() || opts.manifest_url.is_some() {
            Err(DaemonError::NoApiserverFeature)
        } else {
            Ok(Extensions::default())
        }
    }
}

/// The node's own API (`--port`): it asks the loop for graceful shutdowns, reads the
/// pressure conditions, and hears the pod events beside the status syncer.
#[cfg(feature = "apiserver")]
fn start_node_api(
    opts: &Options,
    cfg: &AgentConfig,
    runtime: &CriRuntime,
    mut sources: crate::local_api::Sources,
    ext: &mut Extensions,
    shutdown: &CancellationToken,
) -> Result<(), DaemonError> {
    let mut api_opts = local_api_options(opts, cfg);
    api_opts.serving = ext.serving.take();
    let (shutdown_tx, shutdown_rx) = mpsc::channel(4);
    ext.node_shutdown = Some(shutdown_rx);
    sources.node_shutdown = Some(shutdown_tx);
    sources.pressure = Some(
        ext.pressure
            .get_or_insert_with(|| tokio::sync::watch::channel(Default::default()).0)
            .subscribe(),
    );
    let tx = crate::local_api::start(&api_opts, runtime.clone(), SystemClock, sources, shutdown)?;
    ext.events = Some(match ext.events.take() {
        Some(syncer) => syncer.join(tx),
        None => tx,
    });
    Ok(())
}

/// The node's one event recorder, stamping with `clock`.
pub fn new_recorder<C: Clock>(node_name: &str, clock: C) -> Recorder {
    Recorder::new(node_name, recorder::DEFAULT_CAPACITY).with_clock(clock)
}

/// What the daemon wires from the options: the loop's [`AgentConfig`], and what the tasks
/// it starts beside the loop read (the file source, the cgroup worker, the log and image
/// managers).
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub agent: AgentConfig,
    /// The static pod directory (the file source's).
    pub pod_manifest_path: std::path::PathBuf,
    /// The file source's re-list period.
    pub file_check_frequency: std::time::Duration,
    /// `--cgroups-per-qos`: the pod cgroups' layout and `kubepods`' limits (None: off).
    pub pod_cgroups: Option<crate::cm::manager::PodCgroupsConfig>,
    /// `--container-log-max-size`, `--container-log-max-files`; `None`: no log rotation.
    pub log_rotation: Option<LogRotatePolicy>,
    /// The image GC settings; `None`: no image GC.
    pub image_gc: Option<ImageGcPolicy>,
}

/// What the loop and the tasks beside it need of `opts`.
fn daemon_config(opts: &Options, node_name: String) -> DaemonConfig {
    DaemonConfig {
        // The static pod UID hashes the manifest path: make it absolute so `picolet run
        // --pod-manifest-path manifests` from another directory adopts the same pods.
        pod_manifest_path: std::path::absolute(&opts.pod_manifest_path)
            .unwrap_or_else(|_| opts.pod_manifest_path.clone()),
        file_check_frequency: opts.file_check_frequency,
        pod_cgroups: pod_cgroups_config(opts),
        log_rotation: Some(LogRotatePolicy {
            max_size: opts.container_log_max_size,
            max_files: opts.container_log_max_files,
        }),
        image_gc: Some(ImageGcPolicy {
            high_threshold_percent: opts.image_gc_high_threshold,
            low_threshold_percent: opts.image_gc_low_threshold,
            min_age: opts.minimum_image_ttl_duration,
            sandbox_image: opts.pod_infra_container_image.clone(),
        })
        .filter(ImageGcPolicy::enabled),
        agent: agent_config(opts, node_name),
    }
}

/// kubelet: `sysctl.NewAllowlist(SafeSysctlAllowlist() + allowedUnsafeSysctls)`, the safe
/// ones for this kernel (`/proc/sys/kernel/osrelease`).
pub(crate) fn sysctl_allowlist(
    opts: &Options,
) -> Result<crate::admission::Sysctls, StartCheckError> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let kernel = crate::admission::kernel_version(&release);
    let mut all: Vec<String> = crate::admission::safe_sysctls(kernel)
        .into_iter()
        .map(String::from)
        .collect();
    all.extend(opts.allowed_unsafe_sysctls.iter().cloned());
    crate::admission::Sysctls::new(&all).map_err(StartCheckError::UnsafeSysctls)
}

/// The node's swap for pods and whether tmpfs mounts get `noswap`, after the kubelet's
/// start-up checks (`NewContainerManager`'s `failSwapOn`; LimitedSwap only on cgroup v2).
pub(crate) fn node_swap(opts: &Options) -> Result<(crate::qos::NodeSwap, bool), StartCheckError> {
    let proc_root = std::path::Path::new("/proc");
    node_swap_at(opts, proc_root, std::path::Path::new("/sys/fs/cgroup"))
}

/// [`node_swap`] over other roots (tests).
fn node_swap_at(
    opts: &Options,
    proc_root: &std::path::Path,
    cgroup_root: &std::path::Path,
) -> Result<(crate::qos::NodeSwap, bool), StartCheckError> {
    let swap = node::swap(opts.swap_behavior, proc_root, cgroup_root);
    if swap.capacity > 0 && opts.fail_swap_on {
        return Err(StartCheckError::SwapOn);
    }
    if swap.behavior == crate::qos::SwapBehavior::LimitedSwap && !swap.unified {
        return Err(StartCheckError::LimitedSwapNeedsV2);
    }
    let release =
        std::fs::read_to_string(proc_root.join("sys/kernel/osrelease")).unwrap_or_default();
    let noswap = swap.capacity > 0
        && crate::admission::kernel_version(&release).is_some_and(|v| v >= (6, 4));
    Ok((swap, noswap))
}

/// What the loop needs of `opts`.
fn agent_config(opts: &Options, node_name: String) -> AgentConfig {
    // `run` refused to start on an error.
    let (swap, tmpfs_noswap) = node_swap(opts).unwrap_or_default();
    AgentConfig {
        node_labels: node::node_labels(&node_name, &opts.node_labels),
        node_name,
        sync_frequency: opts.sync_frequency,
        root_dir: opts.root_dir.clone(),
        pod_log_dir: opts.pod_log_dir.clone(),
        resolv_conf: opts.resolv_conf.clone(),
        cgroup_parent: opts.cgroup_root.clone(),
        allocatable: node_allocatable(opts),
        seccomp_default: opts.seccomp_default,
        max_pods: opts.max_pods,
        sysctls: sysctl_allowlist(opts).unwrap_or_default(),
        watchdog_device: opts.watchdog_device.clone(),
        gc_policy: GcPolicy {
            min_age: opts.minimum_container_ttl_duration,
            max_per_pod_container: opts.maximum_dead_containers_per_container,
        },
        node_ip: opts.node_ip.or_else(node::default_route_ip),
        eviction: Some(crate::agent::EvictionConfig {
            thresholds: opts.eviction_hard.clone(),
            transition_period: opts.eviction_pressure_transition_period,
            sources: crate::eviction::observe::Sources::host(&opts.root_dir, &opts.pod_log_dir),
            statfs: crate::eviction::observe::statfs,
        }),
        shutdown_groups: crate::node::shutdown::groups(
            opts.shutdown_grace_period,
            opts.shutdown_grace_period_critical_pods,
        ),
        swap,
        tmpfs_noswap,
    }
}

/// `--system-reserved` + `--kube-reserved`, and the hard eviction threshold of
/// `memory.available` (`--eviction-hard`; a percentage of the capacity) (kubelet:
/// `GetNodeAllocatableReservation`).
pub(crate) fn node_allocatable(opts: &Options) -> crate::cm::NodeAllocatable {
    let memory_capacity = node::memory_capacity();
    let eviction_hard_memory = opts
        .eviction_hard
        .iter()
        .find(|t| t.signal == crate::eviction::Signal::MemoryAvailable)
        .map_or(0, |t| {
            i64::try_from(t.quantity(memory_capacity)).unwrap_or(i64::MAX)
        });
    crate::cm::NodeAllocatable {
        reserved: crate::cm::Reserved {
            cpu_milli: opts.system_reserved.cpu_milli + opts.kube_reserved.cpu_milli,
            memory_bytes: opts.system_reserved.memory_bytes + opts.kube_reserved.memory_bytes,
        },
        eviction_hard_memory,
    }
}

/// `--cgroups-per-qos` on this host's hierarchy (None: off, or no cgroups to use: an ERROR
/// says why and pods get `--cgroup-root` as before).
fn pod_cgroups_config(opts: &Options) -> Option<crate::cm::manager::PodCgroupsConfig> {
    use crate::cm::{CgroupVersion, Layout, V1_CONTROLLERS};
    if !opts.cgroups_per_qos {
        return None;
    }
    let mount_root = std::path::PathBuf::from("/sys/fs/cgroup");
    let info = match node::detect_cgroups(&mount_root, std::path::Path::new("/proc/cgroups")) {
        Ok(info) => info,
        Err(e) => {
            log::error!("--cgroups-per-qos: no cgroups to manage ({e}); pods get no pod cgroups");
            return None;
        }
    };
    let version = match info.version {
        node::CgroupVersion::V1 => CgroupVersion::V1,
        node::CgroupVersion::V2 => CgroupVersion::V2,
    };
    let layout = Layout {
        version,
        driver: opts.cgroup_driver,
        root: crate::cm::split_root(&opts.cgroup_root),
        v1_controllers: V1_CONTROLLERS.into_iter().filter(|c| info.has(c)).collect(),
    };
    // kubelet: enforceNodeAllocatableCgroups — capacity − reserved with `pods`, else the
    // capacity (shares must not stay at the low default either way).
    let cpu = node::cpu_capacity_milli();
    let memory = i64::try_from(node::memory_capacity()).unwrap_or(i64::MAX);
    let (cpu, memory) = if opts.enforce_node_allocatable {
        node_allocatable(opts).enforced(cpu, memory)
    } else {
        (cpu, memory)
    };
    Some(crate::cm::manager::PodCgroupsConfig {
        layout,
        mount_root,
        kubepods: crate::cm::kubepods_resources(cpu, memory),
    })
}

/// `--cert-dir` (kubelet: `<root-dir>/pki`).
#[cfg(feature = "apiserver")]
pub(crate) fn cert_dir(opts: &Options) -> std::path::PathBuf {
    opts.cert_dir
        .clone()
        .unwrap_or_else(|| opts.root_dir.join("pki"))
}

/// What the node API needs of `opts`.
#[cfg(feature = "apiserver")]
pub(crate) fn local_api_options(
    opts: &Options,
    cfg: &AgentConfig,
) -> crate::local_api::LocalApiOptions {
    crate::local_api::LocalApiOptions {
        node_name: cfg.node_name.clone(),
        address: opts.address,
        port: opts.port,
        cert_dir: cert_dir(opts),
        tls_cert_file: opts.tls_cert_file.clone(),
        tls_private_key_file: opts.tls_private_key_file.clone(),
        client_ca_file: opts.client_ca_file.clone(),
        auth: crate::local_api::auth::AuthConfig {
            anonymous: opts.anonymous_auth,
            token_webhook: opts.authentication_token_webhook,
            token_ttl: opts.authentication_token_webhook_cache_ttl,
            mode: if opts.authorization_webhook {
                crate::local_api::auth::Mode::Webhook
            } else {
                crate::local_api::auth::Mode::AlwaysAllow
            },
            authorized_ttl: opts.authorization_webhook_cache_authorized_ttl,
            unauthorized_ttl: opts.authorization_webhook_cache_unauthorized_ttl,
        },
        kubeconfig_path: opts.root_dir.join("kubeconfig"),
        node_ip: cfg.node_ip,
        pod_log_dir: opts.pod_log_dir.clone(),
        labels: cfg.node_labels.clone(),
        max_pods: opts.max_pods,
        allocatable: cfg.allocatable,
        serving: None,
    }
}

/// The CRI client of `picolet run`: `--container-runtime-endpoint`, and
/// `--runtime-request-timeout` as the deadline of every mutating call (kubelet:
/// `runtimeRequestTimeout`); status and list calls keep their short deadline, image pulls
/// their long one.
pub fn cri_runtime(opts: &Options) -> Result<CriRuntime, CriError> {
    let timeouts = CriTimeouts {
        request: opts.runtime_request_timeout,
        ..CriTimeouts::default()
    };
    Ok(CriRuntime::connect(&opts.container_runtime_endpoint)?.with_timeouts(timeouts))
}

/// The file source and the agent over any `Runtime` and `Clock` (tests use the fake
/// runtime and paused time). Must be called inside a `LocalSet`.
pub async fn run_with<R: Runtime, C: Clock>(
    runtime: R,
    clock: C,
    cfg: DaemonConfig,
    shutdown: CancellationToken,
    relist_now: Rc<Notify>,
) {
    run_with_extensions(
        runtime,
        clock,
        cfg,
        Extensions::default(),
        shutdown,
        relist_now,
    )
    .await
}

/// [`run_with`] plus extra pod sources and a pod-event listener (apiserver mode).
pub async fn run_with_extensions<R: Runtime, C: Clock>(
    runtime: R,
    clock: C,
    cfg: DaemonConfig,
    ext: Extensions,
    shutdown: CancellationToken,
    relist_now: Rc<Notify>,
) {
    let DaemonConfig {
        agent: cfg,
        pod_manifest_path,
        file_check_frequency,
        pod_cgroups,
        log_rotation,
        image_gc,
    } = cfg;
    // 1. What starts, on which runtime.
    log_start(&runtime, &cfg.node_name, &pod_manifest_path).await;
    // 2. The file source, on the one channel every source sends on.
    let recorder = ext
        .recorder
        .unwrap_or_else(|| new_recorder(&cfg.node_name, clock.clone()));
    let (src_tx, src_rx) = ext.source_channel.unwrap_or_else(|| mpsc::channel(16));
    let mut sources = vec![file::SOURCE];
    sources.extend(ext.sources.iter().copied());
    let file_source = FileSource::new(pod_manifest_path, cfg.node_name.clone(), clock.clone())
        .with_options(FileSourceOptions {
            relist_interval: file_check_frequency,
            ..FileSourceOptions::default()
        })
        .with_recorder(recorder.clone());
    crate::local_tasks::spawn_local(file_source.run(src_tx, relist_now, shutdown.child_token()));
    // 3. The container log manager and the image manager: tasks of their own over the
    // runtime, beside the loop (kubelet: `containerLogManager.Start`,
    // `StartGarbageCollection`'s image loop).
    let running_containers =
        log_rotation.map(|policy| start_log_manager(&runtime, &clock, policy, &shutdown));
    let reclaim_images =
        image_gc.map(|policy| start_image_manager(&runtime, &clock, policy, &shutdown));
    // 4. The loop with its channels and the tasks beside it, until shutdown.
    let channels = Channels {
        sources,
        updates: src_rx,
        events: ext.events,
        objects: ext.objects,
        recorder,
        metrics: ext.metrics.unwrap_or_default(),
        pressure: ext.pressure,
        reclaim_images,
        running_containers,
        node_shutdown: ext.node_shutdown,
        shutting_down: ext.shutting_down,
    };
    #[cfg_attr(not(feature = "device-plugins"), allow(unused_mut))]
    let mut tasks = start_tasks(&runtime, &clock, &cfg, pod_cgroups, &shutdown);
    #[cfg(feature = "device-plugins")]
    {
        tasks.devices = ext.devices;
    }
    let agent = agent::Agent::new(runtime, clock, cfg, channels, tasks);
    agent::run(agent, shutdown).await
}

/// The start line, and the runtime's version (or that it is not reachable yet).
async fn log_start<R: Runtime>(runtime: &R, node_name: &str, pod_manifest_path: &std::path::Path) {
    log::info!(
        target: AGENT_LOG,
        "picolet {} ({}) starting: node {}, manifests {}",
        env!("CARGO_PKG_VERSION"),
        crate::options::build_features(),
        node_name,
        pod_manifest_path.display()
    );
    match runtime.version().await {
        Ok(v) => log::info!(
            target: AGENT_LOG,
            "container runtime {} {} (CRI {})",
            v.runtime_name,
            v.runtime_version,
            v.runtime_api_version
        ),
        Err(e) => log::warn!(
            target: AGENT_LOG,
            "container runtime not reachable yet, will keep trying: {e}"
        ),
    }
}

/// The container log manager's task; it learns which containers run from the loop's
/// runtime view, through the returned sender.
fn start_log_manager<R: Runtime, C: Clock>(
    runtime: &R,
    clock: &C,
    policy: LogRotatePolicy,
    shutdown: &CancellationToken,
) -> tokio::sync::watch::Sender<crate::messages::RunningContainers> {
    let (tx, rx) = tokio::sync::watch::channel(Vec::new());
    let logs = LogManager::new(runtime.clone(), clock.clone(), policy, rx);
    crate::local_tasks::spawn_local(logs.run(shutdown.child_token()));
    tx
}

/// The image manager's task (image GC), and the eviction manager's image reclaim, which
/// calls `delete_unused_images` on a clone.
fn start_image_manager<R: Runtime, C: Clock>(
    runtime: &R,
    clock: &C,
    policy: ImageGcPolicy,
    shutdown: &CancellationToken,
) -> crate::eviction::ImageReclaim {
    let images = ImageManager::new(runtime.clone(), clock.clone(), policy);
    crate::local_tasks::spawn_local(images.clone().run(shutdown.child_token()));
    crate::eviction::ImageReclaim(Rc::new(move || {
        let images = images.clone();
        Box::pin(async move {
            match images.delete_unused_images().await {
                // Nothing freed: nothing to say (a board kept over a threshold by its
                // pods would write the line every pass).
                Ok(r) if r.removed.is_empty() => {
                    log::debug!("eviction manager: image reclaim freed nothing")
                }
                Ok(r) => log::info!(
                    "eviction manager: image reclaim freed {} bytes ({} images removed)",
                    r.freed,
                    r.removed.len()
                ),
                Err(e) => log::debug!("eviction manager: image reclaim: {e}"),
            }
        })
    }))
}

/// The tasks beside the loop (see [`agent::Tasks`]), started here so that every
/// long-running task of picolet is spawned in this one file.
fn start_tasks<R: Runtime, C: Clock>(
    runtime: &R,
    clock: &C,
    cfg: &AgentConfig,
    pod_cgroups: Option<crate::cm::manager::PodCgroupsConfig>,
    shutdown: &CancellationToken,
) -> agent::Tasks<R, C> {
    // kubelet: the plugin manager watches <root-dir>/plugins_registry for CSI drivers.
    let csi = crate::volume::csi::Registry::default();
    let (csi_tx, csi_drivers) = tokio::sync::mpsc::unbounded_channel();
    crate::local_tasks::spawn_local(crate::volume::csi::registration::run(
        cfg.root_dir.join(crate::volume::csi::REGISTRY_DIR),
        csi.clone(),
        csi_tx,
        shutdown.child_token(),
    ));
    let (prober, probe_results) =
        crate::prober::Prober::new(runtime.clone(), clock.clone(), shutdown.child_token());
    let pod_cgroups = pod_cgroups.map(crate::cm::manager::PodCgroups::start);
    // The PLEG is a task of its own: the loop gets its lists and events as messages and
    // never waits on the runtime; the syncs ring `pleg_poke` when they changed it.
    let pleg_poke = Rc::new(tokio::sync::Notify::new());
    let pleg = crate::pleg::spawn(
        runtime.clone(),
        shutdown.child_token(),
        Rc::clone(&pleg_poke),
    );
    // The eviction manager's measuring task (none without thresholds: nothing to measure).
    let eviction_observed = cfg
        .eviction
        .as_ref()
        .filter(|e| !e.thresholds.is_empty())
        .map(|e| {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            crate::local_tasks::spawn_local(crate::eviction::observe::run(
                runtime.clone(),
                e.sources.clone(),
                e.statfs,
                e.thresholds.clone(),
                tx,
                shutdown.child_token(),
            ));
            rx
        });
    agent::Tasks {
        csi,
        csi_drivers,
        prober,
        probe_results,
        pod_cgroups,
        pleg,
        pleg_poke,
        eviction_observed,
        #[cfg(feature = "device-plugins")]
        devices: None,
    }
}

/// The certificate managers (`--rotate-certificates`, `--rotate-server-certificates`).
#[cfg(feature = "apiserver")]
#[allow(clippy::too_many_arguments)]
fn start_certificate_rotation<C: Clock>(
    opts: &Options,
    cfg: &AgentConfig,
    config: &crate::kube::ClientConfig,
    client: &crate::kube::Client,
    client_slot: Option<crate::kube::CertSlot>,
    clock: &C,
    shutdown: &CancellationToken,
    ext: &mut Extensions,
) {
    use crate::certificate::rotation::Rotation;
    use crate::certificate::store::{CLIENT_PREFIX, SERVER_PREFIX, Store};
    use crate::certificate::{self as certs, node_subject};
    let dir = cert_dir(opts);
    let poll = std::time::Duration::from_secs(2);
    if let Some(slot) = client_slot {
        let rotation = Rotation {
            client: client.clone(),
            slot,
            store: Store::new(&dir, CLIENT_PREFIX),
            subject: node_subject(&cfg.node_name),
            signer: certs::CLIENT_SIGNER,
            usages: &certs::CLIENT_USAGES,
            renew: Some(client.clone()),
            clock: clock.clone(),
            poll,
        };
        // kubelet: the certificate manager starts from its store (`kubelet-client-current.pem`)
        // and falls back to the kubeconfig's certificate: an earlier rotation survives a
        // restart even when the kubeconfig embeds the first certificate.
        match rotation.load() {
            Ok(true) => log::info!(
                "client certificate: {}",
                rotation.store.current_path().display()
            ),
            Ok(false) => {}
            Err(e) => log::warn!("{e}; keeping the kubeconfig's client certificate"),
        }
        crate::local_tasks::spawn_local(rotation.run(shutdown.child_token()));
    }
    if opts.rotate_server_certificates {
        // kubelet: the SANs come from the Node's addresses (its hostname, its InternalIP).
        let mut subject = node_subject(&cfg.node_name);
        subject.dns_names = vec![cfg.node_name.clone()];
        subject.ips = cfg
            .node_ip
            .or_else(|| crate::node::status::local_ip_towards(&config.server))
            .into_iter()
            .collect();
        let slot = crate::kube::CertSlot::default();
        let rotation = Rotation {
            client: client.clone(),
            slot: slot.clone(),
            store: Store::new(&dir, SERVER_PREFIX),
            subject,
            signer: certs::SERVING_SIGNER,
            usages: &certs::SERVING_USAGES,
            renew: None,
            clock: clock.clone(),
            poll,
        };
        match rotation.load() {
            Ok(true) => log::info!(
                "serving certificate: {}",
                rotation.store.current_path().display()
            ),
            Ok(false) => log::info!(
                "no serving certificate yet: the node API refuses TLS until a \
                 kubernetes.io/kubelet-serving CSR is approved and issued"
            ),
            Err(e) => log::warn!("{e}; asking for a new serving certificate"),
        }
        crate::local_tasks::spawn_local(rotation.run(shutdown.child_token()));
        ext.serving = Some((slot, config.tls.ca_pem.clone().unwrap_or_default()));
    }
}

/// Starts the apiserver-mode tasks `opts` asks for (`--kubeconfig`: node, API source,
/// status syncer; `--manifest-url`: the HTTP source) on the current `LocalSet`, and returns
/// what the agent must add: the source names, their channel, the pod-event sender.
/// Configuration errors (an unreadable kubeconfig, a bad CA) fail here, before anything
/// runs; network errors never do — the tasks retry.
#[cfg(feature = "apiserver")]
pub fn start_apiserver_mode<R: Runtime, C: Clock>(
    opts: &Options,
    cfg: &AgentConfig,
    runtime: R,
    clock: C,
    devices: Option<tokio::sync::watch::Receiver<crate::cm::devicemanager::Resources>>,
    shutdown: &CancellationToken,
) -> Result<Extensions, crate::kube::ApiError> {
    if opts.kubeconfig.is_none() && opts.manifest_url.is_none() {
        return Ok(Extensions::default());
    }
    let (src_tx, src_rx) = mpsc::channel(16);
    let mut ext = Extensions::default();
    // 1. `--manifest-url`: the HTTP source.
    if let Some(url) = &opts.manifest_url {
        start_http_source(opts, cfg, url, &clock, &src_tx, shutdown, &mut ext)?;
    }
    if let Some(path) = &opts.kubeconfig {
        // 2. The client, its certificates rotated.
        let cluster = Cluster::connect(opts, cfg, path, clock, shutdown, &mut ext)?;
        // 3. The Node and its status.
        let uid_rx = cluster.start_node_status(runtime, devices, &mut ext);
        // 4. The API source.
        cluster.start_api_source(&src_tx, &mut ext);
        // 5. The objects pods reference and the services.
        cluster.start_object_managers(&mut ext);
        // 6. The status syncer.
        cluster.start_status_syncer(uid_rx, &mut ext);
        // 7. The event sink.
        cluster.start_event_sink(&mut ext);
    }
    ext.source_channel = Some((src_tx, src_rx));
    Ok(ext)
}

/// `--manifest-url`: the HTTP source's task (kubelet: `config.NewSourceURL`).
#[cfg(feature = "apiserver")]
fn start_http_source<C: Clock>(
    opts: &Options,
    cfg: &AgentConfig,
    url: &str,
    clock: &C,
    src_tx: &mpsc::Sender<SourceUpdate>,
    shutdown: &CancellationToken,
    ext: &mut Extensions,
) -> Result<(), crate::kube::ApiError> {
    use crate::source::http::{self as http_source, HttpSource};
    let source = HttpSource::new(
        crate::kube::HttpClient::for_url(url)?,
        url.to_string(),
        &opts.manifest_url_headers,
        cfg.node_name.clone(),
        clock.clone(),
    )?;
    log::info!(target: APISERVER_LOG, "http source: {url} every 20s");
    crate::local_tasks::spawn_local(source.run(src_tx.clone(), shutdown.child_token()));
    ext.sources.push(http_source::SOURCE);
    Ok(())
}

/// `--kubeconfig`: what the cluster's tasks share — the node's client and settings.
#[cfg(feature = "apiserver")]
struct Cluster<'a, C: Clock> {
    opts: &'a Options,
    cfg: &'a AgentConfig,
    client: crate::kube::Client,
    clock: C,
    shutdown: &'a CancellationToken,
}

#[cfg(feature = "apiserver")]
impl<'a, C: Clock> Cluster<'a, C> {
    /// The apiserver client of the kubeconfig at `path` (kubelet: with rotateCertificates
    /// the transport presents the certificate manager's current certificate, starting with
    /// the kubeconfig's), and the certificate managers.
    fn connect(
        opts: &'a Options,
        cfg: &'a AgentConfig,
        path: &std::path::Path,
        clock: C,
        shutdown: &'a CancellationToken,
        ext: &mut Extensions,
    ) -> Result<Self, crate::kube::ApiError> {
        use crate::kube::{Client, ClientConfig};
        let mut config = ClientConfig::from_kubeconfig(path)?;
        let client_slot = if opts.rotate_certificates {
            let slot = crate::kube::CertSlot::default();
            if let (Some(c), Some(k)) = (&config.tls.client_cert_pem, &config.tls.client_key_pem) {
                slot.set_pem(c, k, &format!("{}: client certificate", path.display()))?;
            }
            config.tls.client_cert_slot = Some(slot.clone());
            Some(slot)
        } else {
            None
        };
        let client = Client::new(&config)?;
        ext.client = Some(client.clone());
        start_certificate_rotation(
            opts,
            cfg,
            &config,
            &client,
            client_slot,
            &clock,
            shutdown,
            ext,
        );
        log::info!(
            target: APISERVER_LOG,
            "apiserver mode: node {} joins {} (kubeconfig {})",
            cfg.node_name,
            client.server(),
            path.display()
        );
        Ok(Cluster {
            opts,
            cfg,
            client,
            clock,
            shutdown,
        })
    }

    /// The node task (the Node object, its status and Lease), fed the eviction manager's
    /// conditions, the shutdown state and the devices; returns where the Node's UID comes.
    fn start_node_status<R: Runtime>(
        &self,
        runtime: R,
        devices: Option<tokio::sync::watch::Receiver<crate::cm::devicemanager::Resources>>,
        ext: &mut Extensions,
    ) -> tokio::sync::watch::Receiver<Option<String>> {
        use crate::node::status::{NodeAgent, NodeOptions};
        let (opts, cfg) = (self.opts, self.cfg);
        let (uid_tx, uid_rx) = tokio::sync::watch::channel(None);
        let mut node_opts = NodeOptions::new(cfg.node_name.clone());
        node_opts.labels = opts.node_labels.clone();
        node_opts.max_pods = opts.max_pods;
        node_opts.kubelet_port = opts.port;
        node_opts.node_ip = opts.node_ip;
        node_opts.status_update_frequency = opts.node_status_update_frequency;
        node_opts.allocatable = cfg.allocatable;
        // The eviction manager's conditions go into the Node's status.
        let (pressure_tx, pressure_rx) = tokio::sync::watch::channel(Default::default());
        ext.pressure = Some(pressure_tx);
        let (shutting_tx, shutting_rx) = tokio::sync::watch::channel(false);
        ext.shutting_down = Some(shutting_tx);
        let node_agent = NodeAgent::new(
            self.client.clone(),
            runtime,
            self.clock.clone(),
            node_opts,
            uid_tx,
        )
        .with_pressure(pressure_rx)
        .with_shutting_down(shutting_rx)
        .with_devices(devices);
        crate::local_tasks::spawn_local(node_agent.run(self.shutdown.child_token()));
        uid_rx
    }

    /// The API source: the node's pods, checkpointed for an offline start.
    fn start_api_source(&self, src_tx: &mpsc::Sender<SourceUpdate>, ext: &mut Extensions) {
        use crate::source::apiserver::{self as api_source, ApiSource};
        let cfg = self.cfg;
        let source = ApiSource::new(
            self.client.clone(),
            cfg.node_name.clone(),
            Some(crate::checkpoint::Checkpoint::new(
                &cfg.root_dir,
                &cfg.node_name,
            )),
        );
        crate::local_tasks::spawn_local(source.run(src_tx.clone(), self.shutdown.child_token()));
        ext.sources.push(api_source::SOURCE);
    }

    /// kubelet: the secret, configMap and token managers, and the service informer (all
    /// namespaces) for the containers' environment.
    fn start_object_managers(&self, ext: &mut Extensions) {
        let (wanted_tx, wanted_rx) = tokio::sync::watch::channel(Default::default());
        let (objects_tx, objects_rx) = mpsc::channel(4);
        let manager = crate::config_data::objects::ObjectManager::new(
            self.client.clone(),
            self.clock.clone(),
            Some(&self.cfg.root_dir),
        );
        crate::local_tasks::spawn_local(manager.run(
            wanted_rx,
            objects_tx,
            self.shutdown.child_token(),
        ));
        let services = crate::config_data::services::Services::followed();
        crate::local_tasks::spawn_local(crate::config_data::services::follow(
            self.client.clone(),
            services.clone(),
            self.shutdown.child_token(),
        ));
        ext.objects = Some(crate::config_data::ObjectChannels {
            wanted: wanted_tx,
            updates: objects_rx,
            services,
        });
    }

    /// The status syncer: the pods' statuses to the apiserver, from the loop's pod events.
    fn start_status_syncer(
        &self,
        uid_rx: tokio::sync::watch::Receiver<Option<String>>,
        ext: &mut Extensions,
    ) {
        use crate::status::status_sync::StatusSyncer;
        let (ev_tx, ev_rx) = crate::messages::pod_events();
        let syncer = StatusSyncer::new(
            self.client.clone(),
            self.cfg.node_name.clone(),
            uid_rx,
            ev_rx,
        );
        crate::local_tasks::spawn_local(syncer.run(self.shutdown.child_token()));
        ext.events = Some(ev_tx);
    }

    /// kubelet: the event broadcaster's sink (eventRecordQPS 50, eventBurst 100), reading
    /// the node's one recorder.
    fn start_event_sink(self, ext: &mut Extensions) {
        let recorder = new_recorder(&self.cfg.node_name, self.clock);
        let sink = crate::recorder::event_sink::EventSink::new(self.client, recorder.clone());
        crate::local_tasks::spawn_local(sink.run(self.shutdown.child_token()));
        ext.recorder = Some(recorder);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubelet: failSwapOn refuses a node with swap; LimitedSwap needs cgroup v2; tmpfs
    /// `noswap` from kernel 6.4 when there is swap.
    #[test]
    fn swap_start_checks() {
        use crate::qos::SwapBehavior;
        let tmp = tempfile::tempdir().unwrap();
        let (proc_root, cg) = (tmp.path().join("proc"), tmp.path().join("cg"));
        std::fs::create_dir_all(proc_root.join("sys/kernel")).unwrap();
        std::fs::create_dir_all(&cg).unwrap();
        let meminfo = |swap_kib: u64| {
            let text = format!("MemTotal: 1000000 kB\nSwapTotal: {swap_kib} kB\n");
            std::fs::write(proc_root.join("meminfo"), text).unwrap();
        };
        let kernel = |v: &str| std::fs::write(proc_root.join("sys/kernel/osrelease"), v).unwrap();
        let mut opts = Options::default();
        meminfo(1024);
        kernel("6.1.0-28-arm64\n");
        let (swap, noswap) = node_swap_at(&opts, &proc_root, &cg).unwrap();
        assert_eq!((swap.capacity, noswap), (1 << 20, false));
        kernel("6.6.31\n");
        assert!(node_swap_at(&opts, &proc_root, &cg).unwrap().1);
        opts.fail_swap_on = true;
        assert_eq!(
            node_swap_at(&opts, &proc_root, &cg)
                .unwrap_err()
                .to_string(),
            "running with swap on is not supported, please disable swap or set --fail-swap-on \
             flag to false"
        );
        meminfo(0);
        let (swap, noswap) = node_swap_at(&opts, &proc_root, &cg).unwrap();
        assert_eq!((swap.capacity, noswap), (0, false));
        opts.swap_behavior = SwapBehavior::LimitedSwap;
        assert!(
            node_swap_at(&opts, &proc_root, &cg)
                .unwrap_err()
                .to_string()
                .contains("LimitedSwap is only supported with cgroup v2")
        );
        std::fs::write(cg.join("cgroup.controllers"), "memory").unwrap();
        assert!(node_swap_at(&opts, &proc_root, &cg).is_ok());
    }
}
