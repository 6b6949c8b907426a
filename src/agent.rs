//! The one event loop (kubelet: `Kubelet.Run`, `syncLoop`, `HandlePod*`,
//! `HandlePodCleanups`, the generic PLEG). `daemon` builds what it reads and who it tells.
//!
//! Owns: every piece of pod state, on one thread: `PodConfig` (merge), `PodManager`
//! (desired pods), `PodWorkers` (lifecycle), the runtime snapshot of the relister, and
//! the [`PodState`] of the syncs (status manager, back-offs, the pod cache).
//!
//! The loop `select!`s on: shutdown, the syncs' requests and reports ([`SyncRequest`]:
//! answered first, so that a sync's report is applied before its end is seen), source
//! snapshots, worker completions/timers, the
//! PLEG's messages (`pleg`, a task of its own: relists every 1 s, kubelet's PLEG period, or
//! the runtime's container events and a 300 s relist), the housekeeping tick (2 s), the
//! container GC tick (1 min, its pass a task of its own) and the eviction manager's
//! observations (every 10 s from a measuring task of its own; `agent/eviction.rs` acts on
//! them).
//! It never awaits anything else: runtime calls and file-system work happen in tasks
//! (pod work, relister, GC) or on the blocking pool (manifest scans, pod directories).
//!
//! Must never: start a long-running task (the daemon starts them all and hands the loop
//! their receivers in [`Tasks`]; the loop spawns only pod work, GC passes and cleanups),
//! block the loop on a pod's work (pod work runs in `spawn_local` tasks owned by
//! `PodWorkers`), kill a runtime pod before every source delivered its first snapshot
//! (k8s#112814), or stop pods on shutdown (pods outlive picolet, as with the kubelet).
//!
//! In and out are messages of `messages`, on the [`Channels`] the daemon hands
//! [`Agent::new`] (the loop's context, built by the caller and handed to [`run`]): the
//! snapshots of every source on one channel (`file`; in apiserver mode also `api`,
//! `http`), and in apiserver mode a sender of [`PodEvent`]s (statuses, the desired and
//! mirror pods, finished workers) for the status syncer: messages out, no shared state.
//! The loop never imports a source or the apiserver. Mirror pods are kept in the pod
//! manager and never run. `READY=1` waits only for the file source.
//!
//! The syncs (`pod_sync::KubeletSyncer`, in the pod workers' tasks) hold no pod state: a
//! sync asks the loop for its cached view and back-offs when it begins and reports the
//! view after it, which the loop caches and turns into the pod's status (kubelet: the
//! pod workers read the pod cache and write the status manager, both behind locks; here
//! one owner answers messages instead).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod eviction;
mod shutdown;
pub use eviction::EvictionConfig;

use crate::admission::{self, NodeInfo};
use crate::allocation;
use crate::api::Pod;
use crate::clock::{self, Clock};
use crate::config_data::{self, ConfigObjects, ObjectChannels, ObjectsUpdate, Scope};
use crate::cri::{
    ContainerEvent, ContainerState, CriError, PodRuntimeStatus, Runtime, SandboxState,
};
use crate::kuberuntime::gc::{self, GcPolicy};
use crate::kuberuntime::sync::{Managers as SyncManagers, NodeFacts, SyncEnv, SyncPaths};
use crate::manifest::SOURCE_FILE;
use crate::mem_trim::ShrinkSparse;
use crate::messages::{PodEvent, PodEventSender, RunningContainers, SourceUpdate};
use crate::node;
use crate::pleg::{self, PlegMessage};
use crate::pod_config::{PodConfig, PodOp, PodUpdate};
use crate::pod_manager::PodManager;
use crate::pod_manager::is_mirror_pod;
pub(crate) use crate::pod_sync::KubeletSyncer;
pub use crate::pod_sync::TERMINATION_STEPS_IN_FLIGHT;
use crate::pod_sync::{Changed, PodState, SyncRequest};
use crate::pod_workers::{
    Outcome, PodWorkers, UpdatePodOptions, UpdateType, WorkKind, WorkerEvent,
};
use crate::prober::Prober;
use crate::recorder::Recorder;
use crate::volume::mounts::Tmpfs;

/// A burst of at least this many pod syncs at once is followed by a heap trim.
const BURST_TRIM_THRESHOLD: usize = 16;
/// kubelet: housekeepingPeriod.
const HOUSEKEEPING_PERIOD: Duration = Duration::from_secs(2);

/// What the loop reads and who it tells (the daemon builds them).
#[derive(Debug)]
pub(crate) struct Channels {
    /// Every pod source that sends on `updates` (`"file"` first): `sources_ready` waits
    /// for all of them.
    pub sources: Vec<&'static str>,
    /// The snapshots of every source.
    pub updates: mpsc::Receiver<SourceUpdate>,
    /// apiserver mode: where pod events go.
    pub events: Option<PodEventSender>,
    /// apiserver mode: the API objects pods reference.
    pub objects: Option<ObjectChannels>,
    /// Where the loop, the syncs and the prober record the kubelet's events (the daemon
    /// creates it and hands it on to whoever reads it: the event sink, the node's API).
    pub recorder: Recorder,
    /// The pod workers' and the probes' metrics (the node API renders them).
    pub metrics: Rc<crate::metrics::AgentMetrics>,
    /// Where the eviction manager publishes the node's pressure conditions.
    pub pressure: Option<tokio::sync::watch::Sender<crate::eviction::Conditions>>,
    /// The image manager's "remove every unused image", for the eviction manager's
    /// reclaim under disk pressure (`None`: image GC off).
    pub reclaim_images: Option<crate::eviction::ImageReclaim>,
    /// Where the running containers of the runtime view go when they change, for the
    /// container log manager (`None`: no log rotation).
    pub running_containers: Option<tokio::sync::watch::Sender<RunningContainers>>,
    /// Graceful node shutdown: the node API's requests, and where "the node is shutting
    /// down" is published (the node status reads it). `None`: no requests can come.
    pub node_shutdown: Option<mpsc::Receiver<crate::node::shutdown::Request>>,
    pub shutting_down: Option<tokio::sync::watch::Sender<bool>>,
}

/// The long-running tasks beside the loop, which the daemon (the one wiring place) starts,
/// and what the loop keeps of each: the CSI registration watcher, the prober's workers, the
/// cgroup worker, the PLEG and the eviction manager's measuring task.
pub(crate) struct Tasks<R: Runtime, C: Clock> {
    /// The registered CSI drivers, and each new registration's driver name.
    pub csi: crate::volume::csi::Registry,
    pub csi_drivers: mpsc::UnboundedReceiver<String>,
    /// The probe manager, and the UIDs whose probe results changed.
    pub prober: Prober<R, C>,
    pub probe_results: mpsc::UnboundedReceiver<String>,
    /// `--cgroups-per-qos`: the cgroup worker's handle.
    pub pod_cgroups: Option<crate::cm::manager::PodCgroups>,
    /// The PLEG's lists and events, and the bell a sync rings when it changed the runtime.
    pub pleg: mpsc::Receiver<PlegMessage>,
    pub pleg_poke: Rc<tokio::sync::Notify>,
    /// The eviction manager's measurements (`None`: no thresholds).
    pub eviction_observed: Option<mpsc::Receiver<crate::eviction::observe::Observed>>,
    /// The device manager (`None`: no device plugins).
    #[cfg(feature = "device-plugins")]
    pub devices: Option<Devices>,
}

/// What the loop and the syncs keep of the device manager (`cm::devicemanager`): the
/// syncs' handle, the resources' counts (admission), and where the loop publishes the
/// active pods (the devices of the others are freed).
#[cfg(feature = "device-plugins")]
#[derive(Debug)]
pub struct Devices {
    pub handle: crate::cm::devicemanager::manager::Handle,
    pub resources: tokio::sync::watch::Receiver<crate::cm::devicemanager::Resources>,
    pub active: tokio::sync::watch::Sender<crate::cm::devicemanager::manager::ActivePods>,
}

/// What the loop reads besides the runtime and the clock (the daemon builds it from the
/// options, inside its [`crate::daemon::DaemonConfig`]).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub node_name: String,
    pub sync_frequency: Duration,
    pub root_dir: PathBuf,
    pub pod_log_dir: PathBuf,
    pub resolv_conf: PathBuf,
    pub cgroup_parent: String,
    /// Reserved resources: admission checks requests against capacity minus them.
    pub allocatable: crate::cm::NodeAllocatable,
    /// `--seccomp-default`.
    pub seccomp_default: bool,
    /// The node's labels (`node::node_labels`: defaults and `--node-labels`): admission
    /// checks `nodeSelector` against them.
    pub node_labels: std::collections::BTreeMap<String, String>,
    /// `--max-pods`: admission refuses pods beyond it (`OutOfpods`; 0: no limit).
    pub max_pods: u32,
    /// The node's sysctl allowlist (admission).
    pub sysctls: admission::Sysctls,
    /// `--watchdog-device`: a hardware watchdog petted from the loop (`node::HwWatchdog`).
    pub watchdog_device: Option<PathBuf>,
    /// `--minimum-container-ttl-duration`, `--maximum-dead-containers-per-container`.
    pub gc_policy: GcPolicy,
    /// The node's IP: every pod's `status.hostIP`, and the `podIP` of host-network pods
    /// (`--node-ip`, else the default route's source address).
    pub node_ip: Option<std::net::IpAddr>,
    /// `--eviction-hard` and co; `None`: no eviction manager.
    pub eviction: Option<EvictionConfig>,
    /// Graceful node shutdown's priority groups (`node::shutdown::groups`; empty: off).
    pub shutdown_groups: Vec<crate::node::shutdown::Group>,
    /// The node's swap (`node::swap`): containers' swap limits.
    pub swap: crate::qos::NodeSwap,
    /// Memory-backed volumes are mounted `noswap` (the node has swap, the kernel can).
    pub tmpfs_noswap: bool,
}

/// The event loop and its context, built by the caller (the daemon) and handed to [`run`]:
/// the loop's state and the receivers it reads.
pub(crate) struct Agent<R: Runtime, C: Clock> {
    state: Loop<R, C>,
    inputs: Inputs,
    /// `--watchdog-device`, opened when the loop starts.
    watchdog_device: Option<PathBuf>,
}

impl<R: Runtime, C: Clock> Agent<R, C> {
    /// The loop over `runtime` and `clock` with what the daemon built: its configuration,
    /// its channels and the tasks beside it (tests build it the same way, through the
    /// daemon's `run_with_extensions`).
    pub(crate) fn new(
        runtime: R,
        clock: C,
        cfg: AgentConfig,
        channels: Channels,
        tasks: Tasks<R, C>,
    ) -> Self {
        // 1. The API objects: what pods reference goes out, the objects come in.
        let (wanted_tx, objects_rx, services) = match channels.objects {
            Some(ObjectChannels {
                wanted,
                updates,
                services,
            }) => (Some(wanted), Some(updates), services),
            None => (None, None, Default::default()),
        };
        let (to_loop, sync_requests) = mpsc::unbounded_channel::<SyncRequest>();
        // 2. The managers the loop drives (the eviction manager's state comes last).
        let recorder = channels.recorder;
        let managers = Managers {
            prober: tasks
                .prober
                .with_recorder(recorder.clone())
                .with_metrics(Rc::clone(&channels.metrics)),
            config_objects: ConfigObjects::default().with_services(services),
            csi: tasks.csi,
            pod_cgroups: tasks.pod_cgroups,
            tmpfs: Arc::new(crate::volume::mounts::SysTmpfs {
                noswap: cfg.tmpfs_noswap,
            }),
            eviction: None,
            #[cfg(feature = "device-plugins")]
            devices: tasks.devices,
        };
        // 3. The pod state the syncs ask for and report to.
        let pod_state = PodState {
            events: channels.events.clone(),
            probes: managers.prober.handle(),
            node_ip: cfg.node_ip.map(|ip| ip.to_string()),
            root_dir: cfg.root_dir.clone(),
            recorder: Some(recorder.clone()),
            ..PodState::default()
        };
        // 4. The pod syncer the pod workers call.
        let syncer = new_syncer(
            &runtime,
            &clock,
            &cfg,
            &managers,
            &recorder,
            to_loop,
            Rc::clone(&tasks.pleg_poke),
        );
        // 5. The loop's state.
        let mut state = Loop {
            runtime,
            clock,
            pod_config: PodConfig::new(&channels.sources),
            pods: PodManager::default(),
            workers: PodWorkers::new(syncer)
                .with_resync_interval(cfg.sync_frequency)
                .with_metrics(channels.metrics),
            pod_state,
            held: HashSet::new(),
            rejected: HashSet::new(),
            shutdown: None,
            view: RuntimeView::default(),
            startup: Startup::default(),
            cleanup: Cleanup::default(),
            out: Outputs {
                events: channels.events,
                wanted_tx,
                running_tx: channels.running_containers,
                shutting_down: channels.shutting_down,
                recorder,
            },
            managers,
            resizes: Resizes::load(&cfg.root_dir),
            policy: Policy::new(&cfg),
        };
        state.managers.eviction =
            eviction::loop_state(cfg.eviction, channels.pressure, channels.reclaim_images);
        // 6. What the loop reads.
        let inputs = Inputs {
            sync_requests,
            updates: channels.updates,
            objects: objects_rx,
            probe_results: tasks.probe_results,
            csi_drivers: tasks.csi_drivers,
            pleg: tasks.pleg,
            node_shutdown: channels.node_shutdown,
            eviction_observed: tasks.eviction_observed,
        };
        Agent {
            state,
            inputs,
            watchdog_device: cfg.watchdog_device,
        }
    }
}

/// The pod syncer (kubelet: `podSyncer`) over the runtime manager's environment: the
/// node's settings and the managers' handles the syncs use.
fn new_syncer<R: Runtime, C: Clock>(
    runtime: &R,
    clock: &C,
    cfg: &AgentConfig,
    managers: &Managers<R, C>,
    recorder: &Recorder,
    to_loop: mpsc::UnboundedSender<SyncRequest>,
    pleg_poke: Rc<tokio::sync::Notify>,
) -> KubeletSyncer<R, C> {
    let Managers {
        config_objects,
        csi,
        pod_cgroups,
        tmpfs,
        #[cfg(feature = "device-plugins")]
        devices,
        ..
    } = managers;
    let env = SyncEnv::new(
        runtime.clone(),
        clock.clone(),
        SyncPaths {
            root_dir: cfg.root_dir.clone(),
            pod_log_dir: cfg.pod_log_dir.clone(),
            resolv_conf: cfg.resolv_conf.clone(),
        },
        NodeFacts {
            memory_capacity: node::memory_capacity(),
            cpu_capacity_milli: node::cpu_capacity_milli(),
            swap: cfg.swap,
            host_ip: cfg.node_ip.map(|ip| ip.to_string()).unwrap_or_default(),
            seccomp_default: cfg.seccomp_default,
            cgroup_parent: cfg.cgroup_parent.clone(),
            pod_cgroups: pod_cgroups.clone(),
        },
        SyncManagers {
            recorder: recorder.clone(),
            config: config_objects.clone(),
            credential_paths: crate::cri::credentials::default_paths(&cfg.root_dir),
            tmpfs: tmpfs.clone(),
            csi: csi.clone(),
            #[cfg(feature = "device-plugins")]
            devices: devices.as_ref().map(|d| d.handle.clone()),
        },
    );
    KubeletSyncer::new(env, managers.prober.handle(), to_loop, pleg_poke)
}

/// The loop (kubelet: `Kubelet.Run` → `syncLoop`) until `shutdown`. Must be called inside
/// a `LocalSet`.
pub(crate) async fn run<R: Runtime, C: Clock>(agent: Agent<R, C>, shutdown: CancellationToken) {
    let Agent {
        mut state,
        mut inputs,
        watchdog_device,
    } = agent;
    // 1. The loop's own clocks: housekeeping and container GC.
    let mut ticks = Ticks::start();
    // 2. The watchdogs the loop feeds.
    let mut watchdogs = Watchdogs::open(watchdog_device.as_deref());
    // 3. One input at a time until shutdown (kubelet: `syncLoopIteration`).
    while sync_loop_iteration(
        &mut state,
        &mut inputs,
        &mut ticks,
        &mut watchdogs,
        &shutdown,
    )
    .await
    {
        state.notify_ready_once();
    }
    // 4. A clean stop.
    watchdogs.disarm();
    // Pods outlive picolet, as with the kubelet: in-flight work is simply dropped with the
    // LocalSet; the next picolet adopts the pods from their CRI labels.
    log::info!("picolet stopped; pods keep running");
}

/// The receivers the loop reads besides its timers.
struct Inputs {
    /// The syncs' requests and reports ([`SyncRequest`]).
    sync_requests: mpsc::UnboundedReceiver<SyncRequest>,
    /// The snapshots of every source.
    updates: mpsc::Receiver<SourceUpdate>,
    /// apiserver mode: the API objects pods reference.
    objects: Option<mpsc::Receiver<ObjectsUpdate>>,
    /// The UIDs whose probe results changed.
    probe_results: mpsc::UnboundedReceiver<String>,
    /// Each new CSI registration's driver name.
    csi_drivers: mpsc::UnboundedReceiver<String>,
    /// The PLEG's lists and events.
    pleg: mpsc::Receiver<PlegMessage>,
    /// Graceful node shutdown: the node API's requests.
    node_shutdown: Option<mpsc::Receiver<crate::node::shutdown::Request>>,
    /// The eviction manager's measurements.
    eviction_observed: Option<mpsc::Receiver<crate::eviction::observe::Observed>>,
}

/// The loop's periodic passes.
struct Ticks {
    /// kubelet: housekeepingPeriod.
    housekeeping: tokio::time::Interval,
    /// The container GC pass.
    gc: tokio::time::Interval,
}

impl Ticks {
    /// On the wake-up grid (task.rs): at idle, the passes below, the other tasks' and the
    /// pod resyncs share one wake-up.
    fn start() -> Self {
        Ticks {
            housekeeping: crate::local_tasks::interval(HOUSEKEEPING_PERIOD),
            // kubelet: the container GC loop runs every ContainerGCPeriod, the first pass
            // a period after the start.
            gc: crate::local_tasks::interval_at(
                tokio::time::Instant::now() + gc::GC_PERIOD,
                gc::GC_PERIOD,
            ),
        }
    }
}

/// The systemd watchdog and the hardware watchdog, fed from the loop itself: a stuck loop
/// stops the pings.
struct Watchdogs {
    systemd: Option<node::Watchdog>,
    hardware: Option<node::HwWatchdog>,
}

impl Watchdogs {
    /// The systemd watchdog from the environment, and `--watchdog-device` opened; each
    /// says how it is fed.
    fn open(device: Option<&std::path::Path>) -> Self {
        let systemd = match node::Watchdog::from_env() {
            Ok(w) => w,
            Err(e) => {
                log::warn!("systemd watchdog: {e}; pinging on every tick");
                Some(node::Watchdog::every_tick())
            }
        };
        if let Some(w) = &systemd {
            log::info!(
                "systemd watchdog: WATCHDOG=1 from the event loop, timeout {} s",
                w.timeout().as_secs()
            );
        }
        let hardware = device.and_then(|path| match node::HwWatchdog::open(path) {
            Ok(w) => {
                log::info!(
                    "hardware watchdog {}: petted from the event loop every {} s",
                    path.display(),
                    crate::local_tasks::GRID.as_secs()
                );
                Some(w)
            }
            Err(e) => {
                log::warn!("hardware watchdog {}: {e}; not used", path.display());
                None
            }
        });
        Watchdogs { systemd, hardware }
    }

    /// From the loop itself: a stuck loop stops the pings (see `node::Watchdog`) and the
    /// beats (`node::stall`).
    fn feed(&mut self) {
        node::stall::beat();
        if self
            .systemd
            .as_mut()
            .is_some_and(|w| w.due(tokio::time::Instant::now()))
        {
            node::sd_notify("WATCHDOG=1");
        }
        if let Some(w) = self.hardware.as_mut() {
            w.pet();
        }
    }

    /// A clean stop disarms the hardware watchdog (a crash does not: see `node::HwWatchdog`).
    fn disarm(&mut self) {
        if let Some(w) = self.hardware.take() {
            w.disarm();
        }
    }
}

/// One input handled (kubelet: `syncLoopIteration`); `false` at shutdown.
async fn sync_loop_iteration<R: Runtime, C: Clock>(
    state: &mut Loop<R, C>,
    inputs: &mut Inputs,
    ticks: &mut Ticks,
    watchdogs: &mut Watchdogs,
    shutdown: &CancellationToken,
) -> bool {
    tokio::select! {
        biased;
        _ = shutdown.cancelled() => return false,
        // The syncs' requests and reports before anything else: a sync's report is
        // applied before its end (`workers.next()`) is seen.
        Some(req) = inputs.sync_requests.recv() => {
            let now = state.clock.now();
            state.pod_state.answer(req, now);
        }
        // Source updates wait for the first relist: deciding whether a static pod may
        // start needs to know what the runtime already runs (see `start_or_hold`).
        Some(update) = inputs.updates.recv(), if state.view.relisted_once => {
            state.on_source_update(update);
        }
        event = state.workers.next() => state.on_worker_event(event),
        Some(uid) = inputs.probe_results.recv() => state.on_probe_result(&uid),
        Some(driver) = inputs.csi_drivers.recv() => state.on_csi_driver(&driver),
        Some(msg) = inputs.pleg.recv() => match msg {
            PlegMessage::Relisted { started, result } => state.on_relist(started, result),
            PlegMessage::Event { received, event } => state.on_container_event(received, &event),
            PlegMessage::Watching(since) => state.pod_state.watching_since = since,
        },
        Some(update) = recv_opt(&mut inputs.objects) => state.on_objects(Scope::Api, update.objects),
        Some(req) = recv_shutdown(&mut inputs.node_shutdown) => state.on_shutdown_request(req),
        _ = ticks.housekeeping.tick() => {
            state.housekeeping();
            #[cfg(feature = "device-plugins")]
            state.publish_device_pods();
            state.shutdown_step();
            watchdogs.feed();
        }
        _ = ticks.gc.tick() => state.garbage_collect(),
        Some(observed) = eviction::recv(&mut inputs.eviction_observed) => state.on_eviction_observed(observed),
    }
    true
}

/// `rx.recv()`, or pending forever without a receiver.
async fn recv_shutdown(
    rx: &mut Option<mpsc::Receiver<crate::node::shutdown::Request>>,
) -> Option<crate::node::shutdown::Request> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// `rx.recv()`, or pending forever without a receiver.
async fn recv_opt(rx: &mut Option<mpsc::Receiver<ObjectsUpdate>>) -> Option<ObjectsUpdate> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The loop's state, grouped by concern. Only the loop touches it.
struct Loop<R: Runtime, C: Clock> {
    runtime: R,
    clock: C,
    // ---- desired pods and their lifecycle
    pod_config: PodConfig,
    pods: PodManager,
    workers: PodWorkers<KubeletSyncer<R, C>>,
    /// The pods' runtime cache, back-offs and statuses: the loop's alone; the syncs ask
    /// and report by [`SyncRequest`]s.
    pod_state: PodState,
    /// Static pods held back until the runtime no longer runs another UID of their name.
    held: HashSet<String>,
    /// Pods admission rejected: Failed, never started (kubelet: `rejectPod`).
    rejected: HashSet<String>,
    /// Graceful node shutdown: the one under way.
    shutdown: Option<shutdown::ShutdownState>,
    // ---- the rest, one group per concern
    view: RuntimeView,
    startup: Startup,
    cleanup: Cleanup,
    out: Outputs,
    managers: Managers<R, C>,
    resizes: Resizes,
    policy: Policy,
}

/// The relister's (PLEG) view of the runtime.
#[derive(Default)]
struct RuntimeView {
    /// The relister's last view of the runtime, by pod UID.
    runtime_pods: HashMap<String, PodRuntimeStatus>,
    /// `runtime_pods` changed since the running containers were last published: they are
    /// published at the next housekeeping (at most every 2 s, whatever a burst of events).
    running_changed: bool,
    relisted_once: bool,
    relist_failing: bool,
    /// When a worker last stopped each pod: housekeeping trusts only lists taken after it
    /// (the relister's list may have started before the kill and arrived after).
    stopped_at: HashMap<String, tokio::time::Instant>,
}

/// How far the start has come.
#[derive(Default)]
struct Startup {
    /// `READY=1` was sent.
    notified_ready: bool,
    /// The file source delivered its first snapshot.
    file_seen: bool,
    /// The pod directories have been checked for orphans since the start.
    orphan_dirs_checked: bool,
}

/// Cleanup work the loop starts: container GC, orphans, the heap.
#[derive(Default)]
struct Cleanup {
    /// The container GC pass in flight, if any (one at a time).
    gc_task: Option<tokio::task::JoinHandle<()>>,
    /// The most pieces of pod work in flight since the heap was last trimmed.
    burst: usize,
    /// The last check left orphaned directories with csi volumes it could not unpublish
    /// (their driver not registered yet): check again at the next housekeeping.
    orphan_csi_left: Rc<std::cell::Cell<bool>>,
}

/// Who the loop tells.
struct Outputs {
    /// apiserver mode: pod events for the status syncer.
    events: Option<PodEventSender>,
    /// apiserver mode: which API objects the pods reference (the object manager watches them).
    wanted_tx:
        Option<tokio::sync::watch::Sender<std::collections::BTreeSet<config_data::ObjectKey>>>,
    /// The log manager's copy of the running containers in `runtime_pods`.
    running_tx: Option<tokio::sync::watch::Sender<RunningContainers>>,
    /// Where "the node is shutting down" is published.
    shutting_down: Option<tokio::sync::watch::Sender<bool>>,
    /// Admission rejections are recorded here.
    recorder: Recorder,
}

/// The managers the loop drives.
struct Managers<R: Runtime, C: Clock> {
    /// The probe workers of the pods with probes.
    prober: Prober<R, C>,
    /// The ConfigMaps and Secrets pods may reference (the loop is the one writer; syncs
    /// read them through `SyncEnv::config`).
    config_objects: ConfigObjects,
    /// The registered CSI drivers (orphaned csi volumes are unpublished through them).
    csi: crate::volume::csi::Registry,
    /// `--cgroups-per-qos`: retries failed pod cgroup removals.
    pod_cgroups: Option<crate::cm::manager::PodCgroups>,
    /// The mount boundary, for orphaned pod directories.
    tmpfs: Arc<dyn Tmpfs>,
    /// The eviction manager (`None`: no thresholds).
    eviction: Option<eviction::EvictionState>,
    /// The device manager's counts and the active pods' publication (`None`: no plugins).
    #[cfg(feature = "device-plugins")]
    devices: Option<Devices>,
}

/// In-place resize: the allocated cpu and memory of the pods that can resize (kubelet:
/// the allocation manager and its checkpoint); the workers run the allocated pods.
struct Resizes {
    allocations: allocation::Checkpoint,
    /// Resizes deferred for want of room (kubelet: `podsWithPendingResizes`), retried when a
    /// pod goes and at `deferred_retry` (30 s after the first, then every 3 min).
    deferred: std::collections::BTreeSet<String>,
    deferred_retry: Option<tokio::time::Instant>,
}

impl Resizes {
    /// The allocation checkpoint under `root_dir`, when in-place resize is on.
    fn load(root_dir: &std::path::Path) -> Self {
        Resizes {
            allocations: if allocation::ENABLED {
                allocation::Checkpoint::load(&root_dir.join("allocated_pods_state"))
            } else {
                allocation::Checkpoint::default()
            },
            deferred: Default::default(),
            deferred_retry: None,
        }
    }
}

/// What the loop decides by: the node and the settings.
struct Policy {
    /// What admission checks pods against.
    node: NodeInfo,
    /// The node's swap (a resize that changes what a container may swap is Infeasible).
    swap: crate::qos::NodeSwap,
    node_ip: Option<String>,
    /// Graceful node shutdown's plan.
    shutdown_groups: Vec<crate::node::shutdown::Group>,
    gc_policy: GcPolicy,
    pod_log_dir: PathBuf,
    /// `--root-dir`, for orphaned pod directories.
    root_dir: PathBuf,
}

impl Policy {
    /// From the configuration, with the node's allocatable cpu and memory.
    fn new(cfg: &AgentConfig) -> Self {
        let (cpu_allocatable, memory_allocatable) = cfg.allocatable.allocatable(
            node::cpu_capacity_milli(),
            i64::try_from(node::memory_capacity()).unwrap_or(i64::MAX),
        );
        Policy {
            node: NodeInfo {
                node_name: cfg.node_name.clone(),
                labels: cfg.node_labels.clone(),
                cpu_milli: cpu_allocatable,
                memory_bytes: memory_allocatable,
                max_pods: cfg.max_pods,
                sysctls: cfg.sysctls.clone(),
            },
            swap: cfg.swap,
            node_ip: cfg.node_ip.map(|ip| ip.to_string()),
            shutdown_groups: cfg.shutdown_groups.clone(),
            gc_policy: cfg.gc_policy,
            pod_log_dir: cfg.pod_log_dir.clone(),
            root_dir: cfg.root_dir.clone(),
        }
    }
}

impl<R: Runtime, C: Clock> Loop<R, C> {
    /// A source's snapshot: its objects, then its pods (kubelet: `syncLoopIteration`'s
    /// config channel).
    fn on_source_update(&mut self, mut update: SourceUpdate) {
        self.startup.file_seen |= update.source == SOURCE_FILE;
        // Objects first: a pod of the same snapshot finds its ConfigMap.
        if let Some(objects) = update.objects.take() {
            self.on_objects(Scope::Local, objects);
        }
        for u in self.pod_config.merge(update) {
            self.handle(u);
        }
        self.publish_pods();
        #[cfg(feature = "device-plugins")]
        self.publish_device_pods();
    }

    /// READY once the static pods are known: a slow or unreachable apiserver must not
    /// make systemd give up on picolet (k3s#1686).
    fn notify_ready_once(&mut self) {
        if !self.startup.notified_ready && self.view.relisted_once && self.startup.file_seen {
            self.startup.notified_ready = true;
            if self.pod_config.sources_ready() {
                log::info!("all pod sources seen and runtime relisted: ready");
            } else {
                log::info!("static pods seen and runtime relisted: ready (other sources pending)");
            }
            node::sd_notify("READY=1");
        }
    }

    /// apiserver mode: the desired and mirror pods after a change.
    fn publish_pods(&self) {
        if let Some(tx) = &self.out.wanted_tx {
            // kubelet: the Watch strategy's references — a watch per object while a pod
            // on the node references it.
            let wanted: std::collections::BTreeSet<config_data::ObjectKey> = self
                .pods
                .pods()
                .iter()
                .filter(|p| !p.is_static())
                .flat_map(|p| config_data::references(p))
                .collect();
            tx.send_if_modified(|cur| {
                if *cur == wanted {
                    false
                } else {
                    *cur = wanted;
                    true
                }
            });
        }
        if let Some(tx) = &self.out.events {
            tx.send(PodEvent::Pods {
                pods: self.pods.pods(),
                mirrors: self.pods.mirror_pods(),
                sources_ready: self.pod_config.sources_ready(),
            });
        }
    }

    /// A worker stopped a pod: lists older than now may still show it running. Then, in
    /// apiserver mode, a finished worker may let a deleted pod go.
    fn on_worker_event(&mut self, event: WorkerEvent) {
        // After a burst of pod work (a start with many pods, a mass edit), hand the heap
        // the burst needed back to the system once it is over.
        let in_flight = self.workers.in_flight();
        self.cleanup.burst = self.cleanup.burst.max(in_flight);
        if in_flight == 0 && self.cleanup.burst >= BURST_TRIM_THRESHOLD {
            self.cleanup.burst = 0;
            node::release_free_memory();
        }
        if let WorkerEvent::Completed {
            uid,
            work: WorkKind::Terminating | WorkKind::Terminated,
            ..
        } = &event
        {
            self.view
                .stopped_at
                .insert(uid.clone(), tokio::time::Instant::now());
            // kubelet: a terminated pod's room may let a deferred resize through.
            if !self.resizes.deferred.is_empty() {
                self.retry_deferred();
            }
        }
        if let (
            Some(tx),
            WorkerEvent::Completed {
                uid,
                work: WorkKind::Terminated,
                outcome: Outcome::Succeeded { .. },
                ..
            },
        ) = (&self.out.events, event)
        {
            tx.send(PodEvent::Finished { uid });
        }
    }

    /// kubelet: `syncLoopIteration` → `HandlePodAdditions/Updates/Removes/…`.
    fn handle(&mut self, update: PodUpdate) {
        for pod in update.pods {
            let uid = pod.uid().to_string();
            let name = pod.full_name();
            // kubelet: `handleMirrorPod` — a mirror pod is the apiserver's copy of a static
            // pod: remembered, never run.
            if is_mirror_pod(&pod) {
                match update.op {
                    PodOp::Remove => {
                        self.pods.remove(&uid);
                    }
                    _ => self.pods.add_or_update(pod),
                }
                continue;
            }
            match update.op {
                PodOp::Add => {
                    log::info!("pod {name} (uid {uid}) added by source {}", update.source);
                    if !self.view.runtime_pods.contains_key(&uid)
                        && !self.workers.is_known(&uid)
                        && !self.view.stopped_at.contains_key(&uid)
                    {
                        self.pod_state.known_absent.insert(uid.clone());
                    }
                    self.pods.add_or_update(pod.clone());
                    // kubelet: AddPod — admitted at its allocated resources (after a
                    // restart, the checkpoint's), which are then recorded.
                    let allocated = self.allocated(&pod);
                    if self.admit(&allocated) {
                        if allocation::ENABLED
                            && allocation::resizable(&pod)
                            && self.resizes.allocations.get(&uid).is_none()
                        {
                            self.resizes
                                .allocations
                                .set(&uid, Some(allocation::PodAllocation::of(&pod)));
                        }
                        self.start_or_hold(pod.clone());
                        // A resize asked for while picolet was down.
                        if self.handle_resize(&pod) && !self.held.contains(&uid) {
                            self.send_to_workers(UpdateType::Update, pod);
                        }
                    }
                }
                PodOp::Update | PodOp::Delete if self.rejected.contains(&uid) => {
                    self.pods.add_or_update(pod.clone());
                    // Never started; a deletion still goes through a worker so that the
                    // apiserver's pod object is released when it is done.
                    if update.op == PodOp::Delete {
                        self.workers.update_pod(UpdatePodOptions::kill(pod, None));
                    }
                }
                PodOp::Update | PodOp::Delete => {
                    log::info!("pod {name} (uid {uid}) updated by source {}", update.source);
                    self.pods.add_or_update(pod.clone());
                    if !self.held.contains(&uid) {
                        if update.op == PodOp::Update {
                            self.handle_resize(&pod);
                        }
                        self.send_to_workers(UpdateType::Update, pod);
                    }
                }
                PodOp::Remove => {
                    log::info!("pod {name} (uid {uid}) removed by source {}", update.source);
                    self.managers.prober.remove_pod(&uid);
                    self.pod_state.known_absent.remove(&uid);
                    self.pods.remove(&uid);
                    self.held.remove(&uid);
                    self.rejected.remove(&uid);
                    self.workers.update_pod(UpdatePodOptions::kill(pod, None));
                    // kubelet: RemovePod, then the deferred resizes may fit now.
                    self.resizes.allocations.set(&uid, None);
                    if self.resizes.deferred.remove(&uid) || !self.resizes.deferred.is_empty() {
                        self.retry_deferred();
                    }
                }
                PodOp::Reconcile => {
                    let terminal = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase)
                        .is_some_and(|p| p.is_terminal());
                    self.pods.add_or_update(pod.clone());
                    // kubelet: HandlePodReconcile — a terminal pod, or one whose readiness
                    // gates' conditions (set by others) change what Ready must say.
                    let gates = !self.held.contains(&uid)
                        && !self.rejected.contains(&uid)
                        && crate::status::need_to_reconcile_readiness(&pod);
                    if terminal || gates {
                        self.send_to_workers(UpdateType::Sync, pod);
                    }
                }
            }
        }
    }

    /// kubelet: `canAdmitPod` on a pod addition. Logs the field policy's warnings once (one
    /// WARN per pod); a rejected pod is Failed with the reason and never started (kubelet:
    /// `rejectPod`). Admission runs on additions only, as upstream: an update of an admitted
    /// pod is not re-admitted (a static pod's edit is a new UID, so it is).
    fn admit(&mut self, pod: &Arc<Pod>) -> bool {
        // kubelet: filterOutInactivePods — admitted pods whose worker has not finished.
        let active = self.active_pods(pod.uid());
        let active: Vec<&Pod> = active.iter().map(AsRef::as_ref).collect();
        let mut verdict = admission::admit(pod, &self.policy.node, &active);
        #[cfg(feature = "device-plugins")]
        if verdict.rejection.is_none() {
            verdict.rejection = self.devices_admit(pod, &active);
        }
        // kubelet: the shutdown manager's admit handler.
        if let Some(r) = self.shutdown_admit() {
            verdict.rejection = Some(r);
        }
        // kubelet: the eviction manager's admit handler comes before the predicates.
        if verdict
            .rejection
            .as_ref()
            .is_none_or(|r| r.reason != admission::REASON_UNSUPPORTED)
            && let Some(r) = self.eviction_admit(pod)
        {
            verdict.rejection = Some(r);
        }
        let name = pod.full_name();
        if !verdict.warnings.is_empty() {
            let list: Vec<String> = verdict.warnings.iter().map(ToString::to_string).collect();
            log::warn!("pod {name}: picolet does not implement {}", list.join("; "));
        }
        let Some(rejection) = verdict.rejection else {
            return true;
        };
        let uid = pod.uid().to_string();
        log::warn!(
            "pod {name} (uid {uid}) rejected: {}: {}",
            rejection.reason,
            rejection.message
        );
        // kubelet: rejectPod — a Warning with the rejection's reason and message.
        self.out
            .recorder
            .warning(pod, None, rejection.reason, rejection.message.clone());
        self.rejected.insert(uid.clone());
        let status = crate::api::PodStatus {
            phase: Some(crate::api::PodPhase::Failed),
            reason: Some(rejection.reason.to_string()),
            message: Some(format!("Pod was rejected: {}", rejection.message)),
            host_ip: self.policy.node_ip.clone(),
            host_ips: self
                .policy
                .node_ip
                .iter()
                .map(|ip| crate::api::PodIp { ip: ip.clone() })
                .collect(),
            ..Default::default()
        };
        self.pod_state.set_status(pod, status);
        // Something of it already runs (a picolet restart with a newer policy): stop it.
        if self.view.runtime_pods.contains_key(&uid) {
            self.workers
                .update_pod(UpdatePodOptions::kill(Arc::clone(pod), None));
        }
        false
    }

    /// kubelet: filterOutInactivePods — the admitted pods whose worker has not finished
    /// (but `except`), as allocated (kubelet: `getAllocatedPods`).
    fn active_pods(&self, except: &str) -> Vec<Arc<Pod>> {
        self.pods
            .pods()
            .into_iter()
            .filter(|p| {
                let finished = self.workers.is_known(p.uid()) && self.workers.is_finished(p.uid());
                let skip = p.uid() == except
                    || self.rejected.contains(p.uid())
                    || is_mirror_pod(p)
                    || finished;
                !skip
            })
            .map(|p| self.allocated(&p))
            .collect()
    }

    /// The pod as allocated (kubelet: `UpdatePodFromAllocation`): its allocated cpu and
    /// memory in place of the desired ones.
    #[inline(never)]
    fn allocated(&self, pod: &Arc<Pod>) -> Arc<Pod> {
        if !allocation::ENABLED {
            return Arc::clone(pod);
        }
        match self
            .resizes
            .allocations
            .get(pod.uid())
            .and_then(|a| allocation::apply(pod, a))
        {
            Some(p) => Arc::new(p),
            None => Arc::clone(pod),
        }
    }

    /// The pod workers run the allocated pod (kubelet: the pod workers'
    /// `UpdatePodFromAllocation`): a resize takes effect once it is allocated.
    #[inline(never)]
    fn send_to_workers(&mut self, kind: UpdateType, pod: Arc<Pod>) {
        let pod = self.allocated(&pod);
        self.workers.update_pod(UpdatePodOptions::new(kind, pod));
    }

    /// kubelet: `handlePodResourcesResize` — a pod whose desired cpu or memory differs from
    /// its allocation: allocated when it can be (the resize admit handler, then admission
    /// against the other allocated pods), with PodResizeInProgress and a ResizeStarted
    /// event; else PodResizePending (Infeasible, or Deferred and retried) and its event.
    /// Whether it was allocated.
    fn handle_resize(&mut self, pod: &Arc<Pod>) -> bool {
        if !allocation::ENABLED {
            return false;
        }
        let uid = pod.uid();
        let Some(allocated) = self.resizes.allocations.get(uid) else {
            return false;
        };
        let desired = allocation::PodAllocation::of(pod);
        let generation = pod.metadata.generation;
        let now = clock::rfc3339(self.clock.now());
        if desired.same(allocated) {
            // Reverted, or nothing asked.
            self.resizes.deferred.remove(uid);
            if let Some(c) = self.pod_state.resize.get_mut(uid) {
                c.pending = None;
            }
            return false;
        }
        let node = (
            if self.policy.node.cpu_milli > 0 {
                self.policy.node.cpu_milli
            } else {
                i64::MAX
            },
            if self.policy.node.memory_bytes > 0 {
                self.policy.node.memory_bytes
            } else {
                i64::MAX
            },
        );
        let verdict = match allocation::infeasible(pod, allocated, node, &self.policy.swap) {
            Some(m) => Err((allocation::REASON_INFEASIBLE, m)),
            None => {
                let others = self.active_pods(uid);
                let others: Vec<&Pod> = others.iter().map(AsRef::as_ref).collect();
                match admission::admit(pod, &self.policy.node, &others).rejection {
                    Some(r) => Err((r.reason, r.message)),
                    None => Ok(()),
                }
            }
        };
        let c = self.pod_state.resize.entry(uid);
        match verdict {
            Ok(()) => {
                self.resizes.allocations.set(uid, Some(desired));
                self.resizes.deferred.remove(uid);
                c.pending = None;
                c.clear_in_progress();
                c.set_in_progress("", "", generation, now);
                log::info!("pod {}: resize allocated", pod.full_name());
                self.out.recorder.normal(
                    pod,
                    None,
                    "ResizeStarted",
                    allocation::event_message("Pod resize started", pod, generation, ""),
                );
                true
            }
            Err((reason, message)) => {
                let changed = c.set_pending(reason, &message, generation, now);
                let deferred = c.is_deferred();
                if changed {
                    log::info!("pod {}: resize pending: {message}", pod.full_name());
                    let (event, prefix) = if deferred {
                        ("ResizeDeferred", "Pod resize Deferred")
                    } else {
                        ("ResizeInfeasible", "Pod resize Infeasible")
                    };
                    self.out.recorder.warning(
                        pod,
                        None,
                        event,
                        allocation::event_message(prefix, pod, generation, &message),
                    );
                }
                if deferred {
                    if self.resizes.deferred.insert(uid.to_string())
                        && self.resizes.deferred_retry.is_none()
                    {
                        self.resizes.deferred_retry =
                            Some(tokio::time::Instant::now() + std::time::Duration::from_secs(30));
                    }
                } else {
                    self.resizes.deferred.remove(uid);
                }
                false
            }
        }
    }

    /// kubelet: `RetryPendingResizes` — every deferred resize is tried again (UID order);
    /// each allocated or still pending one is synced, so its status says so.
    fn retry_deferred(&mut self) {
        if !allocation::ENABLED {
            return;
        }
        self.resizes.deferred_retry = (!self.resizes.deferred.is_empty())
            .then(|| tokio::time::Instant::now() + std::time::Duration::from_secs(180));
        let uids: Vec<String> = self.resizes.deferred.iter().cloned().collect();
        for uid in uids {
            let Some(pod) = self.pods.get_by_uid(&uid).cloned() else {
                self.resizes.deferred.remove(&uid);
                continue;
            };
            self.handle_resize(&pod);
            if !self.held.contains(&uid) && self.workers.is_known(&uid) {
                self.send_to_workers(UpdateType::Sync, pod);
            }
        }
        if self.resizes.deferred.is_empty() {
            self.resizes.deferred_retry = None;
        }
    }

    /// kubelet: the device manager's admit handler (`allocateResources`): a pod asking
    /// for more devices of a plugin's resource than are healthy and free is rejected with
    /// `UnexpectedAdmissionError`. A resource no plugin registered is not checked (kubelet:
    /// `removeMissingExtendedResources`): the pod runs without it, and a Warning says so.
    #[cfg(feature = "device-plugins")]
    fn devices_admit(&mut self, pod: &Arc<Pod>, active: &[&Pod]) -> Option<admission::Rejection> {
        // kubelet: devicesToAllocate's "Container detected running, nothing to do" — a pod
        // the runtime already runs (picolet restarted) has its devices (the checkpoint's),
        // even before its plugins register again.
        if self.view.runtime_pods.get(pod.uid()).is_some_and(is_live) {
            return None;
        }
        let resources = match &self.managers.devices {
            Some(d) => d.resources.borrow().clone(),
            None => Default::default(),
        };
        match crate::cm::devicemanager::admit(pod, &resources, active) {
            Ok(missing) => {
                for r in missing {
                    let message = format!(
                        "no device plugin has registered {r} on this node: the pod is admitted without it, and its containers get no device of it"
                    );
                    log::warn!("pod {}: {message}", pod.full_name());
                    self.out
                        .recorder
                        .warning(pod, None, "NoDevicePlugin", message);
                }
                None
            }
            Err(e) => Some(admission::Rejection {
                reason: "UnexpectedAdmissionError",
                message: format!("Allocate failed due to {e}, which is unexpected"),
            }),
        }
    }

    /// The pods whose devices stay assigned (kubelet: the device manager's `activePods`):
    /// admitted and not finished; published once every source is seen (a pod of a source
    /// not seen yet must not lose its devices).
    #[cfg(feature = "device-plugins")]
    fn publish_device_pods(&self) {
        let Some(d) = &self.managers.devices else {
            return;
        };
        if !self.pod_config.sources_ready() {
            return;
        }
        let active: std::collections::BTreeSet<String> = self
            .pods
            .pods()
            .into_iter()
            .filter(|p| {
                let uid = p.uid();
                let finished = self.workers.is_known(uid) && self.workers.is_finished(uid);
                !self.rejected.contains(uid) && !is_mirror_pod(p) && !finished
            })
            .map(|p| p.uid().to_string())
            .collect();
        d.active.send_if_modified(|a| {
            let changed = a.as_ref() != Some(&active);
            *a = Some(active);
            changed
        });
    }

    /// Static-pod exclusivity across a picolet restart (kubelet: `allowStaticPodStart`
    /// only knows pods its own workers started). If the runtime still runs another UID
    /// with this pod's full name — its manifest was edited while picolet was down — the new
    /// UID is held until housekeeping has stopped the old one.
    fn start_or_hold(&mut self, pod: Arc<Pod>) {
        let uid = pod.uid().to_string();
        if pod.is_static() && !self.workers.is_known(&uid) {
            if let Some(old) =
                self.live_runtime_uid_named(&pod.metadata.namespace, &pod.metadata.name, &uid)
            {
                if self.held.insert(uid.clone()) {
                    log::info!(
                        "pod {} (uid {uid}) waits: the runtime still runs uid {old} with the same name",
                        pod.full_name()
                    );
                }
                return;
            }
        }
        self.held.remove(&uid);
        // kubelet: HandlePodAdditions → probeManager.AddPod.
        self.managers.prober.add_pod(&pod);
        self.send_to_workers(UpdateType::Create, pod);
    }

    /// kubelet: `syncLoopIteration`'s liveness/readiness/startup cases → `handleProbeSync`:
    /// a probe result of the pod changed, so sync it (a kill for a failed liveness or
    /// startup probe, a new status for readiness).
    /// New local (or API) ConfigMaps and Secrets: every running pod that references a changed
    /// one is synced now, so its volumes are rewritten and a container waiting for a missing
    /// object starts (kubelet: the pod's periodic resync picks up a changed object within
    /// the sync period plus the cache TTL; picolet does not wait).
    fn on_objects(&mut self, scope: Scope, objects: Vec<config_data::Object>) {
        let changed = self.managers.config_objects.replace_scope(scope, objects);
        if changed.is_empty() {
            return;
        }
        for key in &changed {
            log::debug!("config data: {key} changed");
        }
        let affected: Vec<Arc<Pod>> = self
            .pods
            .pods()
            .into_iter()
            .filter(|p| {
                !self.held.contains(p.uid())
                    && self.workers.is_known(p.uid())
                    && config_data::references(p)
                        .iter()
                        .any(|k| changed.contains(k))
            })
            .collect();
        for pod in affected {
            log::info!(
                "pod {}: a ConfigMap or Secret it references changed; syncing",
                pod.full_name()
            );
            self.send_to_workers(UpdateType::Sync, pod);
        }
    }

    /// A CSI driver registered: the pods with an inline volume of it are synced now, so one
    /// waiting for it (FailedMount) starts without its error back-off (kubelet: the volume
    /// manager's reconciler retries every 100 ms).
    fn on_csi_driver(&mut self, driver: &str) {
        let waiting: Vec<Arc<Pod>> = self
            .pods
            .pods()
            .into_iter()
            .filter(|p| {
                !self.held.contains(p.uid())
                    && self.workers.is_known(p.uid())
                    && p.spec
                        .volumes
                        .iter()
                        .any(|v| v.csi.as_ref().is_some_and(|c| c.driver == driver))
            })
            .collect();
        for pod in waiting {
            self.send_to_workers(UpdateType::Sync, pod);
        }
    }

    fn on_probe_result(&mut self, uid: &str) {
        if self.held.contains(uid) || !self.workers.is_known(uid) {
            return;
        }
        if let Some(pod) = self.pods.get_by_uid(uid) {
            let pod = pod.clone();
            self.send_to_workers(UpdateType::Sync, pod);
        }
    }

    /// A live runtime pod of this name that no pod worker owns (a worker that owns one
    /// already makes the new UID wait: pod workers' static-pod exclusivity).
    fn live_runtime_uid_named(&self, namespace: &str, name: &str, except: &str) -> Option<String> {
        self.view
            .runtime_pods
            .values()
            .find(|rp| {
                rp.uid != except
                    && rp.name == name
                    && rp.namespace == namespace
                    && is_live(rp)
                    && !self.workers.is_known(&rp.uid)
            })
            .map(|rp| rp.uid.clone())
    }

    /// kubelet: generic PLEG `relist`, the loop's half: the relister's two CRI list calls
    /// arrive here; a pod whose sandboxes or containers changed (a container exited on its
    /// own, say) gets a sync at once.
    fn on_relist(
        &mut self,
        started: tokio::time::Instant,
        listed: Result<Option<Vec<PodRuntimeStatus>>, CriError>,
    ) {
        let listed = match listed {
            Ok(l) => {
                if self.view.relist_failing {
                    self.view.relist_failing = false;
                    log::info!("relist: the container runtime answers again");
                }
                self.pod_state.relisted_at = Some(started);
                match l {
                    Some(l) => l,
                    // Unchanged since the last list (the idle case): only its time counts.
                    None => {
                        self.view.stopped_at.retain(|_, at| *at >= started);
                        self.recheck(started, &[]);
                        return;
                    }
                }
            }
            Err(e) => {
                // Once per outage, not once a second.
                if !self.view.relist_failing {
                    self.view.relist_failing = true;
                    log::warn!("relist: {e}; retrying every {:?}", pleg::RELIST_PERIOD);
                }
                return;
            }
        };
        let listed: HashMap<String, PodRuntimeStatus> =
            listed.into_iter().map(|rp| (rp.uid.clone(), rp)).collect();
        let mut changed: Vec<String> = listed
            .iter()
            .filter(|(uid, rp)| {
                self.view
                    .runtime_pods
                    .get(*uid)
                    .is_none_or(|old| pleg::fingerprint(old) != pleg::fingerprint(rp))
            })
            .map(|(uid, _)| uid.clone())
            .collect();
        changed.extend(
            self.view
                .runtime_pods
                .keys()
                .filter(|uid| !listed.contains_key(*uid))
                .cloned(),
        );
        self.view.runtime_pods = listed;
        self.view.running_changed = true;
        self.view.stopped_at.retain(|_, at| *at >= started);
        // kubelet: the cache entry carries when the relist observed the runtime. The lists
        // ran somewhere between `started` and now: a sync that read the pod after `started`
        // may still have read it before the change the lists saw, so the change is dated
        // now, not at the relist's start (a container that exited between a sync's read and
        // a slow relist's lists was otherwise never noticed).
        let now = tokio::time::Instant::now();
        self.mark_changed(&changed, started, now);
        self.recheck(started, &changed);
        if !self.view.relisted_once {
            self.view.relisted_once = true;
            log::info!("runtime listed: {} pods", self.view.runtime_pods.len());
            return;
        }
        self.sync_changed(changed);
    }

    /// kubelet: evented PLEG `processCRIEvents`, the loop's half: the event edits the
    /// relister's view of its pod; a pod whose view changed gets a sync at once, as after a
    /// relist. Events before the first relist are left to it.
    fn on_container_event(&mut self, received: tokio::time::Instant, event: &ContainerEvent) {
        if !self.view.relisted_once {
            return;
        }
        let Some((uid, applied)) = pleg::apply_event(&mut self.view.runtime_pods, event) else {
            log::debug!(
                "container event {:?} of {}: no known pod",
                event.kind,
                event.container_id
            );
            return;
        };
        log::debug!(
            "container event {:?} of {} (runtime's stamp {} ns) for pod {uid}: {applied:?}",
            event.kind,
            event.container_id,
            event.created_at
        );
        if applied != pleg::Applied::Unchanged {
            self.view.running_changed = true;
        }
        match applied {
            pleg::Applied::Unchanged => return,
            pleg::Applied::Changed => {
                self.mark_changed(std::slice::from_ref(&uid), received, received);
            }
            // The runtime's view of the pod is unknown: read it afresh.
            pleg::Applied::Unknown => {
                let changed = Changed {
                    at: received,
                    began: received,
                    seen: None,
                };
                self.pod_state.changed.insert(uid.clone(), changed);
            }
        }
        self.sync_changed(vec![uid]);
    }

    /// The pods a sync asked to compare again (see [`PodState::recheck`]) against the view of
    /// the relist that began at `began` (those in `changed` are compared already). A
    /// difference is marked as a change; the sync judges it again if that relist, too,
    /// began before the view was read.
    fn recheck(&mut self, began: tokio::time::Instant, changed: &[String]) {
        let recheck = std::mem::take(&mut self.pod_state.recheck);
        if recheck.is_empty() {
            return;
        }
        let again: Vec<String> = recheck
            .into_iter()
            .filter(|uid| !changed.contains(uid))
            .collect();
        let marked = self.mark_changed(&again, began, tokio::time::Instant::now());
        if !marked.is_empty() && self.view.relisted_once {
            log::debug!("pleg: {} pods changed since their sync", marked.len());
            self.sync_changed(marked);
        }
    }

    /// The pods whose runtime view changed, seen at `at` by a relist that began at `began`:
    /// their cached views are stale unless they already show the change (a change the pod's
    /// last sync made itself). Returns the pods marked.
    fn mark_changed(
        &mut self,
        changed: &[String],
        began: tokio::time::Instant,
        at: tokio::time::Instant,
    ) -> Vec<String> {
        let mut marked = Vec::new();
        let shared = &mut self.pod_state;
        for uid in changed {
            let seen = self.view.runtime_pods.get(uid);
            let cached_agrees = shared.pod_cache.get(uid).is_some_and(|cached| {
                seen.is_some_and(|rp| pleg::fingerprint(rp) == pleg::fingerprint(&cached.status))
            });
            if !cached_agrees {
                let seen = Some(seen.map(pleg::seen_view).unwrap_or_default());
                shared
                    .changed
                    .insert(uid.clone(), Changed { at, began, seen });
                marked.push(uid.clone());
            }
        }
        if !changed.is_empty() {
            let pods = &self.pods;
            let listed = &self.view.runtime_pods;
            shared
                .changed
                .retain(|uid, _| listed.contains_key(uid) || pods.get_by_uid(uid).is_some());
        }
        marked
    }

    /// A sync for every changed pod that is wanted and not held.
    fn sync_changed(&mut self, changed: Vec<String>) {
        for uid in changed {
            if self.held.contains(&uid) {
                continue;
            }
            if let Some(pod) = self.pods.get_by_uid(&uid) {
                log::debug!("pleg: pod {} changed in the runtime", pod.full_name());
                let pod = pod.clone();
                self.send_to_workers(UpdateType::Sync, pod);
            }
        }
    }

    /// Gives back the table space of the per-pod maps a burst of pods left behind (a mass
    /// delete of 500 pods left ~0.9 MB of empty buckets): every housekeeping, cheap when
    /// nothing is sparse (see [`crate::mem_trim`]).
    fn compact(&mut self) {
        self.pods.compact();
        self.workers.compact();
        self.managers.prober.compact();
        self.pod_state.compact();
        self.view.runtime_pods.shrink_sparse();
        self.held.shrink_sparse();
        self.view.stopped_at.shrink_sparse();
        self.rejected.shrink_sparse();
    }

    /// kubelet: `HandlePodCleanups`. Runtime pods nobody wants are killed — only once every
    /// source has been seen (k8s#112814) and the runtime has been listed.
    fn housekeeping(&mut self) {
        self.publish_running();
        if !self.pod_config.sources_ready() || !self.view.relisted_once {
            return;
        }
        // Every 2 s: at idle nothing here allocates (lookups only).
        let pods = &self.pods;
        for uid in self.workers.sync_known_pods(|uid| pods.contains(uid)) {
            self.managers.prober.remove_pod(&uid);
            let shared = &mut self.pod_state;
            shared.backoffs.remove(&uid);
            shared.pod_cache.remove(&uid);
            shared.changed.remove(&uid);
            shared.recheck.remove(&uid);
            // Deleted, or about to start again as a new pod: either way the old status
            // (its startTime, its restart counts) is not the next one's.
            shared.statuses.remove(&uid);
            if self.view.runtime_pods.contains_key(&uid) {
                shared.ended.insert(uid);
            }
        }
        {
            let runtime_pods = &self.view.runtime_pods;
            let shared = &mut self.pod_state;
            if !shared.ended.is_empty() {
                shared.ended.retain(|uid| runtime_pods.contains_key(uid));
            }
        }
        self.compact();
        if self
            .resizes
            .deferred_retry
            .is_some_and(|at| tokio::time::Instant::now() >= at)
        {
            self.retry_deferred();
        }
        // kubelet: RemoveOrphanedPods — allocations of pods no source has any more.
        if allocation::ENABLED {
            let pods = &self.pods;
            self.resizes.allocations.retain(|uid| pods.contains(uid));
        }
        // Desired pods without a worker: held static pods whose predecessor is gone, and
        // pods re-added after their worker finished (never the ones admission rejected).
        let restart = self
            .pods
            .pods_where(|p| !self.workers.is_known(p.uid()) && !self.rejected.contains(p.uid()));
        for pod in restart {
            self.start_or_hold(pod);
        }
        // kubelet: cleanupOrphanedPodCgroups (every housekeeping) — here only the removals
        // that failed when their pod terminated.
        if let Some(cg) = self
            .managers
            .pod_cgroups
            .clone()
            .filter(|cg| cg.has_pending_removals())
        {
            crate::local_tasks::spawn_local(async move { cg.retry_removals().await });
        }
        let orphans: Vec<String> = self
            .view
            .runtime_pods
            .values()
            .filter(|rp| {
                !self.pods.contains(&rp.uid)
                    && !self.workers.is_known(&rp.uid)
                    && is_live(rp)
                    && !self.view.stopped_at.contains_key(&rp.uid)
            })
            .map(|rp| rp.uid.clone())
            .collect();
        if !self.startup.orphan_dirs_checked || self.cleanup.orphan_csi_left.replace(false) {
            self.startup.orphan_dirs_checked = true;
            let desired = self.pods.uids();
            self.remove_orphaned_pod_dirs(&desired);
            self.remove_orphaned_pod_cgroups(&desired);
        }
        for uid in orphans {
            if let Some(rp) = self.view.runtime_pods.get(&uid) {
                log::info!(
                    "housekeeping: runtime pod {}/{} (uid {uid}) is wanted by no source: killing it",
                    rp.namespace,
                    rp.name
                );
            }
            self.workers
                .update_pod(UpdatePodOptions::kill_runtime_pod(uid, Some(1)));
        }
    }
}

impl<R: Runtime, C: Clock> Loop<R, C> {
    /// The running containers of the runtime view, for the log manager, if the view changed
    /// since they were last published (nothing is built at idle).
    fn publish_running(&mut self) {
        if !std::mem::take(&mut self.view.running_changed) {
            return;
        }
        let Some(tx) = &self.out.running_tx else {
            return;
        };
        let mut running: RunningContainers = self
            .view
            .runtime_pods
            .values()
            .flat_map(|rp| &rp.containers)
            .filter(|c| c.state == ContainerState::Running)
            .map(|c| c.id.clone())
            .collect();
        crate::sort::sort(&mut running);
        tx.send_if_modified(|cur| {
            if *cur == running {
                false
            } else {
                *cur = running;
                true
            }
        });
    }

    /// kubelet: `cleanupOrphanedPodDirs` — once after the start, when every source has been
    /// seen: the directory of a pod that no source wants, no worker owns and the runtime
    /// does not hold (picolet stopped between a pod's end and its cleanup) is removed, its
    /// secret and Memory tmpfs unmounted first. The listing is one readdir on the loop; the
    /// removal runs on the blocking pool.
    fn remove_orphaned_pod_dirs(&self, desired: &HashSet<String>) {
        let pods_dir = self.policy.root_dir.join("pods");
        let Ok(entries) = crate::dir_listing::read_dir(&pods_dir) else {
            return;
        };
        let orphans: Vec<String> = entries
            .into_iter()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|uid| {
                !desired.contains(uid)
                    && !self.workers.is_known(uid)
                    && !self.view.runtime_pods.contains_key(uid)
            })
            .collect();
        if orphans.is_empty() {
            return;
        }
        let root = self.policy.root_dir.clone();
        let tmpfs = Arc::clone(&self.managers.tmpfs);
        let csi = self.managers.csi.clone();
        let left = Rc::clone(&self.cleanup.orphan_csi_left);
        // kubelet: an orphan's csi volumes are unpublished before its directory goes; one
        // that cannot be (its driver not registered yet) keeps the directory for the next
        // housekeeping.
        crate::local_tasks::spawn_local(async move {
            let mut removable = Vec::new();
            for uid in orphans {
                match crate::volume::csi::unpublish_pod_volumes(&root, &uid, &csi).await {
                    Ok(()) => removable.push(uid),
                    Err(e) => {
                        log::warn!("housekeeping: orphaned pod {uid}: csi volume: {e}");
                        left.set(true);
                    }
                }
            }
            let _ = tokio::task::spawn_blocking(move || {
                remove_pod_dirs(&root, removable, tmpfs.as_ref())
            })
            .await;
        });
    }
}

/// The removal of orphaned pod directories (on the blocking pool).
fn remove_pod_dirs(root: &std::path::Path, orphans: Vec<String>, tmpfs: &dyn Tmpfs) {
    for uid in orphans {
        let dir = crate::volume::mounts::pod_dir(root, &uid);
        let result = crate::volume::mounts::unmount_pod_volumes(root, &uid, tmpfs)
            .map_err(|e| e.to_string())
            .and_then(|()| std::fs::remove_dir_all(&dir).map_err(|e| e.to_string()));
        match result {
            Ok(()) => log::info!(
                "housekeeping: removed {}: no source wants pod {uid} and the runtime holds nothing of it",
                dir.display()
            ),
            Err(e) => log::warn!("housekeeping: cannot remove {}: {e}", dir.display()),
        }
    }
}

impl<R: Runtime, C: Clock> Loop<R, C> {
    /// kubelet: `cleanupOrphanedPodCgroups` — after the start and every GC period: the
    /// cgroups of pods no source wants and the runtime does not hold (the listing and the
    /// removal run on the blocking pool).
    fn remove_orphaned_pod_cgroups(&self, desired: &HashSet<String>) {
        if let Some(cg) = &self.managers.pod_cgroups {
            let mut keep = desired.clone();
            keep.extend(self.view.runtime_pods.keys().cloned());
            cg.remove_orphans(keep);
        }
    }

    /// kubelet: `containerGC.GarbageCollect`. Plans over the relister's last view and runs
    /// the removals as a local task; a pass still running makes this one a no-op.
    fn garbage_collect(&mut self) {
        self.garbage_collect_with(false);
    }

    /// A container GC pass; `evict_non_deleted` (the eviction manager's reclaim, kubelet:
    /// `DeleteAllUnusedContainers`): the pods whose worker has finished, or that no worker
    /// owns, lose their dead containers and sandboxes too, deleted or not (kubelet:
    /// `ShouldPodRuntimeBeRemoved`). `false`: a pass is still running (or the runtime has
    /// not been listed yet).
    fn garbage_collect_with(&mut self, evict_non_deleted: bool) -> bool {
        if !self.view.relisted_once
            || self
                .cleanup
                .gc_task
                .as_ref()
                .is_some_and(|t| !t.is_finished())
        {
            return false;
        }
        let sources_ready = self.pod_config.sources_ready();
        let desired = self.pods.uids();
        if sources_ready {
            self.remove_orphaned_pod_cgroups(&desired);
        }
        let in_use = |uid: &str| {
            desired.contains(uid) || (self.workers.is_known(uid) && !self.workers.is_finished(uid))
        };
        // kubelet: ShouldPodContentBeRemoved — no source wants it, no worker owns it, and
        // every source has been seen.
        let runtime_removable =
            |uid: &str| !self.workers.is_known(uid) || self.workers.is_finished(uid);
        let removable = |uid: &str| {
            sources_ready && (!in_use(uid) || (evict_non_deleted && runtime_removable(uid)))
        };
        let now = self.clock.now();
        let plan = gc::plan(
            self.view.runtime_pods.values(),
            removable,
            now,
            &self.policy.gc_policy,
        );
        // Pod log directories stay for every UID in use or still in the runtime.
        let keep: HashSet<String> = desired
            .iter()
            .cloned()
            .chain(self.workers.known_uids().into_iter().filter(|u| in_use(u)))
            .chain(
                self.view
                    .runtime_pods
                    .keys()
                    .filter(|u| !plan.emptied.contains(u))
                    .cloned(),
            )
            .collect();
        let runtime = self.runtime.clone();
        let pod_log_dir = self.policy.pod_log_dir.clone();
        self.cleanup.gc_task = Some(crate::local_tasks::spawn_local(async move {
            let report = gc::execute(&runtime, &plan, &pod_log_dir, keep, now, sources_ready).await;
            if report.containers + report.sandboxes + report.log_dirs > 0 {
                log::info!(
                    "container GC: removed {} dead containers, {} sandboxes, {} pod log directories",
                    report.containers,
                    report.sandboxes,
                    report.log_dirs
                );
            }
            for e in &report.errors {
                log::warn!("container GC: {e}");
            }
        }));
        true
    }
}

/// Something of the pod may still run: a ready sandbox or a container not exited.
fn is_live(rp: &PodRuntimeStatus) -> bool {
    rp.sandboxes.iter().any(|s| s.state == SandboxState::Ready)
        || rp
            .containers
            .iter()
            .any(|c| matches!(c.state, ContainerState::Running | ContainerState::Created))
}
