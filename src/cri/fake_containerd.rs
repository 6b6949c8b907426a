//! The in-memory containerd: the one model of the runtime that both test fakes front.
//!
//! Owns: sandboxes, containers and images, their states and IDs, the timestamps (from an
//! injected clock), the `GetContainerEvents` subscribers, exec and stats answers, and the
//! knobs that change how "containerd" behaves (a container that ignores SIGTERM, one that
//! crashes at start, an image that cannot be pulled, the IP new sandboxes get).
//!
//! Fronts: [`crate::cri::fake::FakeRuntime`] calls it directly (a `Runtime` for unit and agent
//! tests on paused tokio time); `crate::cri::fake_cri` (feature `fake-cri`) decodes gRPC
//! requests, calls it and encodes its answers. Each front keeps its own call log and its
//! own fault injection (errors, delays, hangs, broken streams) on top. The model keeps no
//! call log (only the arguments tests read back: pull credentials, exec commands, streaming
//! requests) and refuses a call only where containerd would.
//!
//! Must never: wait or do I/O — every operation is a synchronous state edit that answers
//! at once. Where containerd takes time (a container that exits some time after SIGTERM),
//! the operation says how long and the front waits, on its own clock, before it calls
//! [`FakeContainerd::exit_running`].
//!
//! # Behaviour (modelled on containerd 1.6+)
//!
//! Sandboxes: `run_pod_sandbox` → Ready, with an IP from 10.88.0.0/16 (10.88.0.2 first)
//! unless the network namespace is `Node` or [`FakeContainerd::set_sandbox_ip`] says
//! otherwise. The sandbox name (name, namespace, uid, attempt) stays reserved until the
//! sandbox is removed. `stop_pod_sandbox`: its running containers exit 137, Ready →
//! NotReady; idempotent; unknown id → `NotFound`. `remove_pod_sandbox`: stops it if needed
//! and removes it with its containers; an unknown id is fine. A sandbox that is not ready
//! reports no IP (its network is torn down).
//!
//! Containers: `create_container` needs a Ready sandbox (unknown or not ready →
//! `NotFound`, as containerd 1.6 answers), a present image (else `NotFound`) and a free
//! (name, attempt) in the sandbox (else `Unknown`, "name is reserved"). Its `log_path` is
//! the sandbox's `log_directory` joined with the container's. Created --start--> Running
//! --exit/stop--> Exited. `start_container` on anything but Created is `Unknown`; a
//! container set to crash ([`FakeContainerd::set_exit_on_start`]) exits right after it starts.
//! `stop_container` on a running container: SIGTERM — it exits with the SIGTERM exit code
//! ([`FakeContainerd::set_term_exit_code`], default 0) after the stop delay
//! ([`FakeContainerd::set_stop_delay`], default none), or — if that is longer than the
//! grace `timeout` or the container ignores SIGTERM ([`FakeContainerd::set_ignore_sigterm`])
//! — SIGKILL at the timeout, 137; on a created or exited one it does nothing.
//! `remove_container` removes; an unknown id is fine. `exec_sync` answers exit 0 with no
//! output unless told otherwise; not running → `Unknown`. `reopen_container_log` on a
//! running container is recorded ([`FakeContainerd::log_reopens`]; no file I/O here: the
//! gRPC front opens the file); not running → `Unknown` "container is not running". Streaming (`Exec`, `Attach`,
//! `PortForward`) answers a URL for a running container or a ready sandbox.
//!
//! Images: only images added ("imported") or pulled are known; names are normalised as
//! containerd does (`busybox` is `docker.io/library/busybox:latest`); IDs are
//! `sha256:<64 hex>`, a hash of the name; 4 MiB and not pinned unless
//! [`FakeContainerd::set_image`] says otherwise. `ImageFsInfo`: one file system at
//! [`IMAGE_FS_MOUNTPOINT`] using the images' sizes summed. A pull of an image set to fail
//! ([`FakeContainerd::fail_pulls`]) is refused with the given status.
//!
//! Events (`GetContainerEvents`, as containerd 1.7 sends them): CREATED and STARTED for a
//! new sandbox (its id as `container_id`) and for a created and a started container,
//! STOPPED for a container that exits and for a sandbox that stops, DELETED for a removed
//! container, and DELETED without a sandbox for a removed sandbox; each with the sandbox and
//! all its containers after the change.
//!
//! Stats: every container matching the filter, with figures
//! ([`FakeContainerd::set_usage`], zero otherwise) for running ones only, as containerd 1.6
//! answers; each ready sandbox with the sum of its containers'.
//!
//! IDs: [`IdStyle::Containerd`] (64 hex digits) or [`IdStyle::Counter`] (`s1`, `c2`: one
//! counter for both, which unit tests name in their expectations). Timestamps come from the
//! clock, strictly increasing across the model so that "newest first" is never a tie.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tonic::Code;

use crate::clock::{Clock, UnixNanos};
use crate::cri::{
    ContainerConfig, ContainerEventKind, ContainerInfo, ContainerState, ContainerStats, CpuUsage,
    ExecResult, ImageInfo, MemoryUsage, NamespaceMode, PodSandboxStats, Resources, RuntimeHealth,
    Sandbox, SandboxConfig, SandboxState,
};

/// Where the model says its images live (`ImageFsInfo`).
pub(crate) const IMAGE_FS_MOUNTPOINT: &str =
    "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs";

/// The CRI methods, for the fronts' call logs and fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Version,
    Status,
    RunPodSandbox,
    StopPodSandbox,
    RemovePodSandbox,
    PodSandboxStatus,
    ListPodSandbox,
    CreateContainer,
    StartContainer,
    StopContainer,
    RemoveContainer,
    ListContainers,
    ContainerStatus,
    UpdateContainerResources,
    ReopenContainerLog,
    ExecSync,
    GetContainerEvents,
    ListImages,
    ImageStatus,
    PullImage,
    RemoveImage,
    ImageFsInfo,
    ListContainerStats,
    ListPodSandboxStats,
}

impl Method {
    /// Every method, in declaration order.
    pub const ALL: [Method; 24] = [
        Method::Version,
        Method::Status,
        Method::RunPodSandbox,
        Method::StopPodSandbox,
        Method::RemovePodSandbox,
        Method::PodSandboxStatus,
        Method::ListPodSandbox,
        Method::CreateContainer,
        Method::StartContainer,
        Method::StopContainer,
        Method::RemoveContainer,
        Method::ListContainers,
        Method::ContainerStatus,
        Method::UpdateContainerResources,
        Method::ReopenContainerLog,
        Method::ExecSync,
        Method::GetContainerEvents,
        Method::ListImages,
        Method::ImageStatus,
        Method::PullImage,
        Method::RemoveImage,
        Method::ImageFsInfo,
        Method::ListContainerStats,
        Method::ListPodSandboxStats,
    ];

    /// The CRI method name, as in `CriError`'s `method`.
    pub fn name(self) -> &'static str {
        match self {
            Method::Version => "Version",
            Method::Status => "Status",
            Method::RunPodSandbox => "RunPodSandbox",
            Method::StopPodSandbox => "StopPodSandbox",
            Method::RemovePodSandbox => "RemovePodSandbox",
            Method::PodSandboxStatus => "PodSandboxStatus",
            Method::ListPodSandbox => "ListPodSandbox",
            Method::CreateContainer => "CreateContainer",
            Method::StartContainer => "StartContainer",
            Method::StopContainer => "StopContainer",
            Method::RemoveContainer => "RemoveContainer",
            Method::ListContainers => "ListContainers",
            Method::ContainerStatus => "ContainerStatus",
            Method::UpdateContainerResources => "UpdateContainerResources",
            Method::ReopenContainerLog => "ReopenContainerLog",
            Method::ExecSync => "ExecSync",
            Method::GetContainerEvents => "GetContainerEvents",
            Method::ListImages => "ListImages",
            Method::ImageStatus => "ImageStatus",
            Method::PullImage => "PullImage",
            Method::RemoveImage => "RemoveImage",
            Method::ImageFsInfo => "ImageFsInfo",
            Method::ListContainerStats => "ListContainerStats",
            Method::ListPodSandboxStats => "ListPodSandboxStats",
        }
    }
}

/// What containerd answers instead of doing a call: its gRPC status code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub code: Code,
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

/// An operation's answer.
pub(crate) type Answer<T> = Result<T, Refusal>;

/// How new sandbox and container IDs look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdStyle {
    /// 64 hex digits, as containerd's; the first 12 are a counter, so truncated IDs stay
    /// unique.
    Containerd,
    /// `s1`, `c2`, …: one counter for sandboxes and containers.
    Counter,
}

/// What the streaming calls (`Exec`, `Attach`, `PortForward`) answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Streaming {
    /// `Unimplemented`.
    Off,
    /// This URL, for every call.
    Fixed(String),
    /// `<base>/<exec|attach|portforward>/<id>`.
    PerCall(String),
}

/// A sandbox and the config it was run with.
#[derive(Debug, Clone)]
pub(crate) struct SandboxRec {
    /// Full status (`ip` and `network` filled).
    pub info: Sandbox,
    pub config: SandboxConfig,
}

/// A container and the config it was created with.
#[derive(Debug, Clone)]
pub(crate) struct ContainerRec {
    /// Full status (times, exit code, reason filled).
    pub info: ContainerInfo,
    pub config: ContainerConfig,
}

impl ContainerRec {
    // Running or Created --exit--> Exited
    fn exit(&mut self, now: UnixNanos, exit_code: i32, reason: Option<&str>) {
        let default_reason = if exit_code == 0 { "Completed" } else { "Error" };
        self.info.state = ContainerState::Exited;
        self.info.finished_at = now;
        self.info.exit_code = exit_code;
        self.info.reason = reason.unwrap_or(default_reason).to_string();
    }

    /// The entry for this container in a map keyed by container id or name.
    fn lookup<'a, T>(&self, map: &'a HashMap<String, T>) -> Option<&'a T> {
        map.get(&self.info.id).or_else(|| map.get(&self.info.name))
    }
}

/// One `GetContainerEvents` item: a change, with the sandbox (status view) and all its
/// containers after it.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub container_id: String,
    pub kind: ContainerEventKind,
    pub created_at: UnixNanos,
    /// `None` once the sandbox is removed.
    pub sandbox: Option<SandboxRec>,
    pub containers: Vec<ContainerRec>,
}

/// An event stream ended with an error ([`FakeContainerd::break_event_streams`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamBroken;

/// The receiving end of an event stream.
pub(crate) type Events = mpsc::UnboundedReceiver<Result<Event, StreamBroken>>;

/// Which sandboxes a list or stats call wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SandboxFilter {
    /// An id or a prefix of one (containerd's truncated IDs); empty: any.
    pub id: String,
    pub state: Option<SandboxState>,
    pub labels: BTreeMap<String, String>,
}

/// Which containers a list or stats call wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ContainerFilter {
    /// An id or a prefix of one; empty: any.
    pub id: String,
    /// The sandbox's exact id; empty: any.
    pub sandbox_id: String,
    pub state: Option<ContainerState>,
    pub labels: BTreeMap<String, String>,
}

impl SandboxFilter {
    fn keeps(&self, s: &Sandbox) -> bool {
        s.id.starts_with(&self.id)
            && self.state.is_none_or(|st| st == s.state)
            && labels_match(&s.labels, &self.labels)
    }
}

impl ContainerFilter {
    fn keeps(&self, c: &ContainerInfo) -> bool {
        c.id.starts_with(&self.id)
            && (self.sandbox_id.is_empty() || c.sandbox_id == self.sandbox_id)
            && self.state.is_none_or(|st| st == c.state)
            && labels_match(&c.labels, &self.labels)
    }
}

fn labels_match(labels: &BTreeMap<String, String>, selector: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The model. Plain state: a front puts it behind its own `RefCell` or `Mutex`.
pub(crate) struct FakeContainerd {
    clock: Arc<dyn Fn() -> UnixNanos + Send + Sync>,
    ids: IdStyle,
    next_id: u64,
    next_ip: u32,
    last_stamp: UnixNanos,
    sandboxes: BTreeMap<String, SandboxRec>,
    containers: BTreeMap<String, ContainerRec>,
    /// By image id.
    images: BTreeMap<String, ImageInfo>,
    health: RuntimeHealth,
    /// Overrides the IP of new pod-network sandboxes (`Some("")`: none).
    sandbox_ip: Option<String>,
    term_exit_code: i32,
    stop_delay: Duration,
    /// Container ids or names.
    ignore_sigterm: HashSet<String>,
    /// By container id or name.
    exit_on_start: HashMap<String, i32>,
    /// By container id or name.
    exec_results: HashMap<String, ExecResult>,
    /// By container id or name: (cumulative CPU ns, working set bytes).
    usage: HashMap<String, (u64, u64)>,
    /// By normalised image reference.
    pull_failures: HashMap<String, Refusal>,
    streaming: Streaming,
    /// Every pull: the image and the username of the credentials it carried.
    pull_auths: Vec<(String, Option<String>)>,
    /// Every `exec_sync`: (container name, command).
    exec_commands: Vec<(String, Vec<String>)>,
    /// Every streaming URL handed out: (CRI method, container or sandbox id).
    stream_calls: Vec<(&'static str, String)>,
    /// Every accepted `ReopenContainerLog`, by container id.
    log_reopens: Vec<String>,
    event_streams: Vec<mpsc::UnboundedSender<Result<Event, StreamBroken>>>,
}

impl std::fmt::Debug for FakeContainerd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeContainerd")
            .field("sandboxes", &self.sandboxes.len())
            .field("containers", &self.containers.len())
            .field("images", &self.images.len())
            .finish()
    }
}

fn not_found(what: &str, id: &str) -> Refusal {
    // containerd: "an error occurred when try to find container \"…\": not found"
    Refusal::new(
        Code::NotFound,
        format!("an error occurred when try to find {what} {id:?}: not found"),
    )
}

/// containerd: a sandbox or container name is reserved until the sandbox or container is
/// removed.
fn reserved(what: &str, full_name: &str, holder: &str) -> Refusal {
    Refusal::new(
        Code::Unknown,
        format!(
            "failed to reserve {what} name {full_name:?}: name {full_name:?} is reserved for {holder:?}"
        ),
    )
}

/// containerd's answer to a call the container's state does not allow.
fn wrong_state(doing: &str, c: &ContainerRec) -> Refusal {
    Refusal::new(
        Code::Unknown,
        format!(
            "{doing}: container is in {} state",
            container_state_name(c.info.state)
        ),
    )
}

/// The CRI name of a container state, as containerd's messages spell it.
fn container_state_name(state: ContainerState) -> &'static str {
    match state {
        ContainerState::Created => "CONTAINER_CREATED",
        ContainerState::Running => "CONTAINER_RUNNING",
        ContainerState::Exited => "CONTAINER_EXITED",
        ContainerState::Unknown => "CONTAINER_UNKNOWN",
    }
}

impl FakeContainerd {
    /// An empty containerd (no sandboxes, containers or images; runtime and network ready)
    /// whose timestamps come from `clock` (`TokioClock` with paused time, `SystemClock` for
    /// a server on real time).
    pub(crate) fn new(clock: impl Clock + Send + Sync, ids: IdStyle) -> FakeContainerd {
        FakeContainerd {
            clock: Arc::new(move || clock.now()),
            ids,
            next_id: 0,
            next_ip: 0,
            last_stamp: 0,
            sandboxes: BTreeMap::new(),
            containers: BTreeMap::new(),
            images: BTreeMap::new(),
            health: RuntimeHealth {
                runtime_ready: true,
                network_ready: true,
                message: String::new(),
                userns_handlers: None,
            },
            sandbox_ip: None,
            term_exit_code: 0,
            stop_delay: Duration::ZERO,
            ignore_sigterm: HashSet::new(),
            exit_on_start: HashMap::new(),
            exec_results: HashMap::new(),
            usage: HashMap::new(),
            pull_failures: HashMap::new(),
            streaming: Streaming::Off,
            pull_auths: Vec::new(),
            exec_commands: Vec::new(),
            stream_calls: Vec::new(),
            log_reopens: Vec::new(),
            event_streams: Vec::new(),
        }
    }

    // ----- knobs -----------------------------------------------------------------------

    /// What `Status` reports.
    pub(crate) fn health(&self) -> &RuntimeHealth {
        &self.health
    }

    pub(crate) fn health_mut(&mut self) -> &mut RuntimeHealth {
        &mut self.health
    }

    /// The IP new pod-network sandboxes report (`Some("")`: none; `None`: 10.88.x.y).
    pub(crate) fn set_sandbox_ip(&mut self, ip: Option<String>) {
        self.sandbox_ip = ip;
    }

    /// What a container exits with on SIGTERM (0: its process handles it; 143: it dies
    /// of it).
    pub(crate) fn set_term_exit_code(&mut self, code: i32) {
        self.term_exit_code = code;
    }

    /// How long every container takes to exit after SIGTERM.
    pub(crate) fn set_stop_delay(&mut self, delay: Duration) {
        self.stop_delay = delay;
    }

    /// `key` is a container id or name (every container of that name, present and
    /// future): it ignores SIGTERM, so a stop waits the grace period and kills it (137).
    pub(crate) fn set_ignore_sigterm(&mut self, key: &str, ignore: bool) {
        if ignore {
            self.ignore_sigterm.insert(key.to_string());
        } else {
            self.ignore_sigterm.remove(key);
        }
    }

    /// `key` is a container id or name. `Some(code)`: it exits with `code` right after it
    /// starts (a crashing container). `None` clears it.
    pub(crate) fn set_exit_on_start(&mut self, key: &str, exit_code: Option<i32>) {
        match exit_code {
            Some(code) => self.exit_on_start.insert(key.to_string(), code),
            None => self.exit_on_start.remove(key),
        };
    }

    /// `key` is a container id or name: what `exec_sync` answers in it.
    pub(crate) fn set_exec_result(&mut self, key: &str, result: ExecResult) {
        self.exec_results.insert(key.to_string(), result);
    }

    /// What the stats calls report for the container `key` (id or name).
    pub(crate) fn set_usage(&mut self, key: &str, cpu_core_nanos: u64, working_set_bytes: u64) {
        self.usage
            .insert(key.to_string(), (cpu_core_nanos, working_set_bytes));
    }

    /// Every pull of `image` is refused with `refusal` until [`Self::clear_pull_failures`].
    pub(crate) fn fail_pulls(&mut self, image: &str, refusal: Refusal) {
        self.pull_failures.insert(normalize_image(image), refusal);
    }

    pub(crate) fn clear_pull_failures(&mut self) {
        self.pull_failures.clear();
    }

    pub(crate) fn set_streaming(&mut self, streaming: Streaming) {
        self.streaming = streaming;
    }

    // ----- inspection ------------------------------------------------------------------

    /// Clock nanoseconds, strictly increasing across the model while the clock does not go
    /// back.
    pub(crate) fn stamp(&mut self) -> UnixNanos {
        let now = (self.clock)();
        // Distinct stamps at one paused instant; a wall clock gone back by more than a
        // second stamps back, as containerd's `time.Now()` does (a board without an RTC).
        self.last_stamp = if now <= self.last_stamp && self.last_stamp - now < 1_000_000_000 {
            self.last_stamp + 1
        } else {
            now
        };
        self.last_stamp
    }

    /// Every sandbox, in id order.
    pub(crate) fn sandboxes(&self) -> impl Iterator<Item = &SandboxRec> {
        self.sandboxes.values()
    }

    pub(crate) fn sandbox(&self, id: &str) -> Option<&SandboxRec> {
        self.sandboxes.get(id)
    }

    /// Every container, in id order.
    pub(crate) fn containers(&self) -> impl Iterator<Item = &ContainerRec> {
        self.containers.values()
    }

    pub(crate) fn container(&self, id: &str) -> Option<&ContainerRec> {
        self.containers.get(id)
    }

    /// Every image, in id order.
    pub(crate) fn images(&self) -> impl Iterator<Item = &ImageInfo> {
        self.images.values()
    }

    pub(crate) fn pull_auths(&self) -> &[(String, Option<String>)] {
        &self.pull_auths
    }

    pub(crate) fn exec_commands(&self) -> &[(String, Vec<String>)] {
        &self.exec_commands
    }

    pub(crate) fn stream_calls(&self) -> &[(&'static str, String)] {
        &self.stream_calls
    }

    // ----- events ----------------------------------------------------------------------

    /// Opens an event stream: every change from now on.
    pub(crate) fn subscribe(&mut self) -> Events {
        let (tx, rx) = mpsc::unbounded_channel();
        self.event_streams.push(tx);
        rx
    }

    /// How many event streams are open.
    pub(crate) fn event_streams(&mut self) -> usize {
        self.event_streams.retain(|tx| !tx.is_closed());
        self.event_streams.len()
    }

    /// Ends every open event stream with an error; new ones can be opened at once.
    pub(crate) fn break_event_streams(&mut self) {
        for tx in self.event_streams.drain(..) {
            let _ = tx.send(Err(StreamBroken));
        }
    }

    /// Sends one event to every open stream (containerd: `generateAndSendContainerEvent`).
    fn emit(&mut self, container_id: &str, kind: ContainerEventKind, sandbox_id: &str) {
        self.event_streams.retain(|tx| !tx.is_closed());
        if self.event_streams.is_empty() {
            return;
        }
        let created_at = self.stamp();
        let event = Event {
            container_id: container_id.to_string(),
            kind,
            created_at,
            sandbox: self.sandboxes.get(sandbox_id).map(status_view),
            containers: self
                .containers
                .values()
                .filter(|c| c.info.sandbox_id == sandbox_id)
                .cloned()
                .collect(),
        };
        for tx in &self.event_streams {
            let _ = tx.send(Ok(event.clone()));
        }
    }

    fn find_sandbox(&self, id: &str) -> Answer<&SandboxRec> {
        self.sandboxes
            .get(id)
            .ok_or_else(|| not_found("sandbox", id))
    }

    fn find_container(&self, id: &str) -> Answer<&ContainerRec> {
        self.containers
            .get(id)
            .ok_or_else(|| not_found("container", id))
    }

    fn find_container_mut(&mut self, id: &str) -> Answer<&mut ContainerRec> {
        self.containers
            .get_mut(id)
            .ok_or_else(|| not_found("container", id))
    }

    // ----- sandboxes -------------------------------------------------------------------

    fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        match self.ids {
            IdStyle::Containerd => format!("{:012x}{:052x}", self.next_id, 0x0fa4_ec41_u64),
            IdStyle::Counter => format!("{prefix}{}", self.next_id),
        }
    }

    fn new_ip(&mut self) -> Option<String> {
        match &self.sandbox_ip {
            Some(ip) if ip.is_empty() => None,
            Some(ip) => Some(ip.clone()),
            None => {
                let n = self.next_ip;
                self.next_ip += 1;
                Some(format!("10.88.{}.{}", (n / 250) % 256, n % 250 + 2))
            }
        }
    }

    pub(crate) fn run_pod_sandbox(&mut self, config: SandboxConfig) -> Answer<String> {
        // containerd: the sandbox name is reserved until RemovePodSandbox.
        let key = |c: &SandboxConfig| (c.name.clone(), c.namespace.clone(), c.uid.clone());
        if let Some(other) = self
            .sandboxes
            .values()
            .find(|s| key(&s.config) == key(&config) && s.config.attempt == config.attempt)
        {
            let full_name = format!(
                "{}_{}_{}_{}",
                config.name, config.namespace, config.uid, config.attempt
            );
            return Err(reserved("sandbox", &full_name, &other.info.id));
        }
        let id = self.new_id("s");
        let created_at = self.stamp();
        let network = config.namespace_options.network;
        let ip = if network == NamespaceMode::Node {
            None
        } else {
            self.new_ip()
        };
        let info = Sandbox {
            id: id.clone(),
            name: config.name.clone(),
            namespace: config.namespace.clone(),
            uid: config.uid.clone(),
            attempt: config.attempt,
            state: SandboxState::Ready,
            created_at,
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            ip,
            network: Some(network),
        };
        self.sandboxes
            .insert(id.clone(), SandboxRec { info, config });
        self.emit(&id, ContainerEventKind::Created, &id);
        self.emit(&id, ContainerEventKind::Started, &id);
        Ok(id)
    }

    // Ready --stop--> NotReady; its running containers are killed.
    pub(crate) fn stop_pod_sandbox(&mut self, id: &str) -> Answer<()> {
        if !self.sandboxes.contains_key(id) {
            return Err(not_found("sandbox", id));
        }
        let now = self.stamp();
        let mut killed = Vec::new();
        for c in self.containers.values_mut() {
            if c.info.sandbox_id == id && c.info.state == ContainerState::Running {
                c.exit(now, 137, None);
                killed.push(c.info.id.clone());
            }
        }
        for c in killed {
            self.emit(&c, ContainerEventKind::Stopped, id);
        }
        if let Some(s) = self.sandboxes.get_mut(id) {
            if s.info.state == SandboxState::Ready {
                s.info.state = SandboxState::NotReady;
                self.emit(id, ContainerEventKind::Stopped, id);
            }
        }
        Ok(())
    }

    /// CRI: idempotent; a ready sandbox is stopped first, its containers go with it.
    pub(crate) fn remove_pod_sandbox(&mut self, id: &str) -> Answer<()> {
        if self.sandboxes.contains_key(id) {
            self.stop_pod_sandbox(id)?;
            let gone: Vec<String> = self
                .containers
                .values()
                .filter(|c| c.info.sandbox_id == id)
                .map(|c| c.info.id.clone())
                .collect();
            for c in gone {
                self.containers.remove(&c);
                self.emit(&c, ContainerEventKind::Deleted, id);
            }
            self.sandboxes.remove(id);
            self.emit(id, ContainerEventKind::Deleted, id);
        }
        Ok(())
    }

    /// The sandbox as `PodSandboxStatus` reports it.
    pub(crate) fn pod_sandbox_status(&self, id: &str) -> Answer<SandboxRec> {
        self.sandboxes
            .get(id)
            .map(status_view)
            .ok_or_else(|| not_found("sandbox", id))
    }

    /// The sandboxes as `ListPodSandbox` reports them: no IP, no network mode.
    pub(crate) fn list_pod_sandboxes(&self, filter: &SandboxFilter) -> Vec<Sandbox> {
        self.sandboxes
            .values()
            .filter(|s| filter.keeps(&s.info))
            .map(|s| Sandbox {
                ip: None,
                network: None,
                ..s.info.clone()
            })
            .collect()
    }

    /// Changes a sandbox's state behind picolet's back (the pause process died, or came
    /// back).
    pub(crate) fn set_sandbox_state(&mut self, id: &str, state: SandboxState) {
        if let Some(s) = self.sandboxes.get_mut(id) {
            s.info.state = state;
            let kind = match state {
                SandboxState::Ready => ContainerEventKind::Started,
                SandboxState::NotReady => ContainerEventKind::Stopped,
            };
            self.emit(id, kind, id);
        }
    }

    // ----- containers ------------------------------------------------------------------

    pub(crate) fn create_container(
        &mut self,
        sandbox_id: &str,
        config: ContainerConfig,
    ) -> Answer<String> {
        let sandbox = self.find_sandbox(sandbox_id)?;
        if sandbox.info.state != SandboxState::Ready {
            // containerd 1.6 says NotFound: the sandbox's task is gone.
            return Err(Refusal::new(
                Code::NotFound,
                format!(
                    "failed to get sandbox container task: no running task found: task {sandbox_id} not found: not found"
                ),
            ));
        }
        let full_name = format!(
            "{}_{}_{}_{}_{}",
            config.name,
            sandbox.info.name,
            sandbox.info.namespace,
            sandbox.info.uid,
            config.attempt
        );
        let log_directory = sandbox.config.log_directory.clone();
        let image_ref = self.resolve_image(&config.image).ok_or_else(|| {
            Refusal::new(
                Code::NotFound,
                format!("failed to resolve image {:?}: not found", config.image),
            )
        })?;
        // containerd: (name, attempt) is reserved in the sandbox until RemoveContainer.
        if let Some(other) = self.containers.values().find(|c| {
            c.info.sandbox_id == sandbox_id
                && c.info.name == config.name
                && c.info.attempt == config.attempt
        }) {
            return Err(reserved("container", &full_name, &other.info.id));
        }
        let id = self.new_id("c");
        let created_at = self.stamp();
        // As containerd reports it: the sandbox's log directory joined with the path.
        let log_path = if log_directory.is_empty() || config.log_path.is_empty() {
            config.log_path.clone()
        } else {
            Path::new(&log_directory)
                .join(&config.log_path)
                .display()
                .to_string()
        };
        let info = ContainerInfo {
            id: id.clone(),
            sandbox_id: sandbox_id.to_string(),
            name: config.name.clone(),
            attempt: config.attempt,
            image: config.image.clone(),
            image_ref,
            state: ContainerState::Created,
            created_at,
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            log_path,
            ..ContainerInfo::default()
        };
        self.containers
            .insert(id.clone(), ContainerRec { info, config });
        self.emit(&id, ContainerEventKind::Created, sandbox_id);
        Ok(id)
    }

    pub(crate) fn start_container(&mut self, id: &str) -> Answer<()> {
        let now = self.stamp();
        let c = self.find_container(id)?;
        if c.info.state != ContainerState::Created {
            let doing = format!("failed to set starting state for container {id:?}");
            return Err(wrong_state(&doing, c));
        }
        let crashed = c.lookup(&self.exit_on_start).copied();
        let c = self.find_container_mut(id)?;
        // Created --start--> Running
        c.info.state = ContainerState::Running;
        c.info.started_at = now;
        if let Some(code) = crashed {
            c.exit(now, code, None);
        }
        let sandbox_id = c.info.sandbox_id.clone();
        self.emit(id, ContainerEventKind::Started, &sandbox_id);
        if crashed.is_some() {
            self.emit(id, ContainerEventKind::Stopped, &sandbox_id);
        }
        Ok(())
    }

    /// SIGTERM to a running container. `Ok(None)`: done (it exited, or was not running).
    /// `Ok(Some((wait, code)))`: it is still running; the front waits `wait` (cut short
    /// only by its own shutdown) and then calls [`Self::exit_running`] with `code`.
    pub(crate) fn stop_container(
        &mut self,
        id: &str,
        timeout: i64,
    ) -> Answer<Option<(Duration, i32)>> {
        let c = self.find_container(id)?;
        if c.info.state != ContainerState::Running {
            // Created or exited: nothing to stop.
            return Ok(None);
        }
        let grace = Duration::from_secs(timeout.max(0).unsigned_abs());
        let ignores =
            self.ignore_sigterm.contains(&c.info.id) || self.ignore_sigterm.contains(&c.info.name);
        if ignores || self.stop_delay > grace {
            // Running --SIGKILL at the timeout--> Exited(137)
            return Ok(Some((grace, 137)));
        }
        let code = self.term_exit_code;
        if self.stop_delay.is_zero() {
            // Running --SIGTERM--> Exited
            self.exit_running(id, code, None);
            return Ok(None);
        }
        Ok(Some((self.stop_delay, code)))
    }

    /// Makes a running container exit now with `exit_code` (reason `reason`, or
    /// "Completed" for 0 and "Error" otherwise). Whether there was one.
    pub(crate) fn exit_running(&mut self, id: &str, exit_code: i32, reason: Option<&str>) -> bool {
        let now = self.stamp();
        match self.containers.get_mut(id) {
            Some(c) if c.info.state == ContainerState::Running => {
                c.exit(now, exit_code, reason);
                let sandbox_id = c.info.sandbox_id.clone();
                self.emit(id, ContainerEventKind::Stopped, &sandbox_id);
                true
            }
            _ => false,
        }
    }

    /// CRI: idempotent; a running container is killed and removed.
    pub(crate) fn remove_container(&mut self, id: &str) -> Answer<()> {
        if let Some(c) = self.containers.remove(id) {
            self.emit(id, ContainerEventKind::Deleted, &c.info.sandbox_id);
        }
        Ok(())
    }

    /// The containers as `ListContainers` reports them: no times beyond creation, no exit
    /// details, no log path.
    pub(crate) fn list_containers(&self, filter: &ContainerFilter) -> Vec<ContainerInfo> {
        self.containers
            .values()
            .filter(|c| filter.keeps(&c.info))
            .map(|c| ContainerInfo {
                started_at: 0,
                finished_at: 0,
                exit_code: 0,
                reason: String::new(),
                message: String::new(),
                log_path: String::new(),
                ..c.info.clone()
            })
            .collect()
    }

    pub(crate) fn container_status(&self, id: &str) -> Answer<&ContainerRec> {
        self.find_container(id)
    }

    /// `UpdateContainerResources`: a created or running container takes the new cpu and
    /// memory (its config's; the oom score stays); containerd refuses an exited one.
    pub(crate) fn update_container_resources(&mut self, id: &str, r: &Resources) -> Answer<()> {
        let c = self.find_container_mut(id)?;
        if c.info.state == ContainerState::Exited {
            return Err(Refusal::new(
                Code::Unknown,
                format!("container {id} is in CONTAINER_EXITED state"),
            ));
        }
        let cur = &mut c.config.resources;
        (cur.cpu_period, cur.cpu_quota, cur.cpu_shares) = (r.cpu_period, r.cpu_quota, r.cpu_shares);
        cur.memory_limit_in_bytes = r.memory_limit_in_bytes;
        Ok(())
    }

    /// `ReopenContainerLog`: containerd refuses a container that is not running ("container
    /// is not running", `Unknown`). The model does no I/O: it records the reopen (the test
    /// plays the runtime's part on the file, if it needs one).
    pub(crate) fn reopen_container_log(&mut self, id: &str) -> Answer<()> {
        let c = self.find_container(id)?;
        if c.info.state != ContainerState::Running {
            return Err(Refusal::new(Code::Unknown, "container is not running"));
        }
        self.log_reopens.push(id.to_string());
        Ok(())
    }

    /// Every accepted `ReopenContainerLog`, by container id, in order.
    pub(crate) fn log_reopens(&self) -> &[String] {
        &self.log_reopens
    }

    /// `ExecSync`: the result set for the container (default exit 0, no output).
    pub(crate) fn exec_sync(&mut self, id: &str, cmd: &[String]) -> Answer<ExecResult> {
        let c = self.find_container(id)?;
        if c.info.state != ContainerState::Running {
            return Err(wrong_state("failed to exec in container", c));
        }
        let result = c.lookup(&self.exec_results).cloned().unwrap_or(ExecResult {
            exit_code: 0,
            stdout: Vec::new(),
            stderr: Vec::new(),
        });
        let name = c.info.name.clone();
        self.exec_commands.push((name, cmd.to_vec()));
        Ok(result)
    }

    /// The streaming URL for `method` ("Exec", "Attach": a running container;
    /// "PortForward": a ready sandbox).
    pub(crate) fn stream_url(&mut self, method: &'static str, id: &str) -> Answer<String> {
        let base = match &self.streaming {
            Streaming::Off => return Err(Refusal::new(Code::Unimplemented, "not implemented")),
            Streaming::Fixed(url) => url.clone(),
            Streaming::PerCall(base) => format!("{base}/{}/{id}", method.to_lowercase()),
        };
        if method == "PortForward" {
            let s = self.find_sandbox(id)?;
            if s.info.state != SandboxState::Ready {
                return Err(Refusal::new(
                    Code::FailedPrecondition,
                    format!("sandbox {id:?} is not running"),
                ));
            }
        } else {
            let c = self.find_container(id)?;
            if c.info.state != ContainerState::Running {
                return Err(Refusal::new(
                    Code::FailedPrecondition,
                    format!(
                        "container {id:?} is in {} state",
                        container_state_name(c.info.state)
                    ),
                ));
            }
        }
        self.stream_calls.push((method, id.to_string()));
        Ok(base)
    }

    // ----- images ----------------------------------------------------------------------

    /// Makes `image` present, as `ctr images import` would; its id.
    pub(crate) fn add_image(&mut self, image: &str) -> String {
        if let Some(id) = self.resolve_image(image) {
            return id;
        }
        let name = normalize_image(image);
        let id = image_id(&name);
        self.images.insert(
            id.clone(),
            ImageInfo {
                id: id.clone(),
                repo_tags: vec![name],
                size: 4 * 1024 * 1024,
                pinned: false,
                user: Default::default(),
            },
        );
        id
    }

    /// Sets the `USER` of a present image (its uid, or a name); false if it is absent.
    pub(crate) fn set_image_user(&mut self, image: &str, user: crate::cri::ImageUser) -> bool {
        let Some(id) = self.resolve_image(image) else {
            return false;
        };
        self.images.get_mut(&id).map(|i| i.user = user).is_some()
    }

    /// The id of the image `image` names: an id, or a (normalised) reference.
    pub(crate) fn resolve_image(&self, image: &str) -> Option<String> {
        if self.images.contains_key(image) {
            return Some(image.to_string());
        }
        let name = normalize_image(image);
        self.images
            .values()
            .find(|i| i.repo_tags.contains(&name))
            .map(|i| i.id.clone())
    }

    /// `ImageStatus`: `None` when the image is not present.
    pub(crate) fn image_status(&self, image: &str) -> Option<&ImageInfo> {
        self.resolve_image(image)
            .and_then(|id| self.images.get(&id))
    }

    /// `PullImage` with the username of the credentials it carried; the image's id.
    pub(crate) fn pull_image(&mut self, image: &str, username: Option<String>) -> Answer<String> {
        self.pull_auths.push((image.to_string(), username));
        if image.is_empty() {
            return Err(Refusal::new(Code::InvalidArgument, "no image to pull"));
        }
        if let Some(refusal) = self.pull_failures.get(&normalize_image(image)) {
            return Err(refusal.clone());
        }
        Ok(self.add_image(image))
    }

    pub(crate) fn remove_image(&mut self, image: &str) {
        if let Some(id) = self.resolve_image(image) {
            self.images.remove(&id);
        }
    }

    /// Sets a present image's size and whether it is pinned (containerd pins its sandbox
    /// image); false when the image is absent.
    pub(crate) fn set_image(&mut self, image: &str, size: u64, pinned: bool) -> bool {
        let Some(info) = self
            .resolve_image(image)
            .and_then(|id| self.images.get_mut(&id))
        else {
            return false;
        };
        info.size = size;
        info.pinned = pinned;
        true
    }

    /// `ImageFsInfo`, stamped now: the images' sizes summed on containerd's overlayfs
    /// snapshotter directory.
    pub(crate) fn image_fs_info(&mut self) -> crate::cri::ImageFsUsage {
        let timestamp = self.stamp();
        crate::cri::ImageFsUsage {
            timestamp,
            mountpoint: IMAGE_FS_MOUNTPOINT.to_string(),
            used_bytes: self.images.values().map(|i| i.size).sum(),
            inodes_used: self.images.len() as u64 * 100,
        }
    }

    // ----- stats -----------------------------------------------------------------------

    /// `ListContainerStats`, stamped now.
    pub(crate) fn container_stats(&mut self, filter: &ContainerFilter) -> Vec<ContainerStats> {
        let now = self.stamp();
        self.stats_of(now, filter)
    }

    fn stats_of(&self, now: UnixNanos, filter: &ContainerFilter) -> Vec<ContainerStats> {
        self.containers
            .values()
            .filter(|c| filter.keeps(&c.info))
            .map(|c| {
                let (cpu, ws) = c.lookup(&self.usage).copied().unwrap_or_default();
                let running = c.info.state == ContainerState::Running;
                ContainerStats {
                    id: c.info.id.clone(),
                    name: c.info.name.clone(),
                    attempt: c.info.attempt,
                    labels: c.info.labels.clone(),
                    cpu: running.then_some(cpu_usage(now, cpu)),
                    memory: running.then_some(memory_usage(now, ws)),
                }
            })
            .collect()
    }

    /// `ListPodSandboxStats`: each ready sandbox with the sum of its running containers'
    /// usage (what containerd reads from the pod cgroup), stamped now.
    pub(crate) fn pod_sandbox_stats(&mut self, filter: &SandboxFilter) -> Vec<PodSandboxStats> {
        let now = self.stamp();
        self.sandboxes
            .values()
            .filter(|s| s.info.state == SandboxState::Ready && filter.keeps(&s.info))
            .map(|s| {
                let containers = self.stats_of(
                    now,
                    &ContainerFilter {
                        sandbox_id: s.info.id.clone(),
                        ..ContainerFilter::default()
                    },
                );
                let sum = |f: fn(&ContainerStats) -> Option<u64>| {
                    containers.iter().filter_map(f).sum::<u64>()
                };
                let cpu = sum(|c| c.cpu.and_then(|u| u.usage_core_nano_seconds));
                let ws = sum(|c| c.memory.and_then(|m| m.working_set_bytes));
                PodSandboxStats {
                    id: s.info.id.clone(),
                    name: s.info.name.clone(),
                    namespace: s.info.namespace.clone(),
                    uid: s.info.uid.clone(),
                    labels: s.info.labels.clone(),
                    cpu: Some(cpu_usage(now, cpu)),
                    memory: Some(memory_usage(now, ws)),
                    containers,
                }
            })
            .collect()
    }
}

/// A sandbox as its status reports it: no IP once it is not ready.
fn status_view(s: &SandboxRec) -> SandboxRec {
    let mut s = s.clone();
    if s.info.state != SandboxState::Ready {
        s.info.ip = None;
    }
    s
}

fn cpu_usage(now: UnixNanos, core_nanos: u64) -> CpuUsage {
    CpuUsage {
        timestamp: now,
        usage_core_nano_seconds: Some(core_nanos),
        usage_nano_cores: None,
    }
}

fn memory_usage(now: UnixNanos, working_set: u64) -> MemoryUsage {
    MemoryUsage {
        timestamp: now,
        working_set_bytes: Some(working_set),
        usage_bytes: Some(working_set),
        ..MemoryUsage::default()
    }
}

/// Docker-style reference normalisation, as containerd's CRI applies it:
/// `busybox` → `docker.io/library/busybox:latest`, `localhost/x:y` stays.
pub(crate) fn normalize_image(image: &str) -> String {
    if image.starts_with("sha256:") {
        return image.to_string();
    }
    let has_domain = image.split_once('/').is_some_and(|(first, _)| {
        first.contains('.') || first.contains(':') || first == "localhost"
    });
    let mut name = if has_domain {
        image.to_string()
    } else if image.contains('/') {
        format!("docker.io/{image}")
    } else {
        format!("docker.io/library/{image}")
    };
    let last = name.rsplit('/').next().unwrap_or_default();
    if !name.contains('@') && !last.contains(':') {
        name.push_str(":latest");
    }
    name
}

/// A stable fake digest for a normalised name (FNV-1a, widened to 64 hex digits).
fn image_id(name: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let parts = [
        hash,
        hash.rotate_left(16),
        hash.rotate_left(32),
        hash.rotate_left(48),
    ];
    format!(
        "sha256:{:016x}{:016x}{:016x}{:016x}",
        parts[0], parts[1], parts[2], parts[3]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;

    fn model(ids: IdStyle) -> FakeContainerd {
        FakeContainerd::new(SystemClock, ids)
    }

    fn sandbox(name: &str) -> SandboxConfig {
        SandboxConfig {
            name: name.into(),
            namespace: "default".into(),
            uid: format!("uid-{name}"),
            ..SandboxConfig::default()
        }
    }

    #[test]
    fn image_names_normalise_like_containerd() {
        for (given, want) in [
            ("busybox", "docker.io/library/busybox:latest"),
            ("busybox:1.36", "docker.io/library/busybox:1.36"),
            ("library/busybox", "docker.io/library/busybox:latest"),
            ("quay.io/x/y", "quay.io/x/y:latest"),
            ("localhost/busybox:edge", "localhost/busybox:edge"),
            ("localhost:5000/a/b", "localhost:5000/a/b:latest"),
            ("registry.local:5000/a:v1", "registry.local:5000/a:v1"),
            ("x/y@sha256:abc", "docker.io/x/y@sha256:abc"),
            ("sha256:abc", "sha256:abc"),
        ] {
            assert_eq!(normalize_image(given), want, "{given}");
        }
    }

    #[test]
    fn ids_are_unique_and_shaped_as_asked() {
        let mut m = model(IdStyle::Containerd);
        let a = m.new_id("s");
        let b = m.new_id("c");
        assert_ne!(a[..12], b[..12]);
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        let mut m = model(IdStyle::Counter);
        assert_eq!((m.new_id("s"), m.new_id("c")), ("s1".into(), "c2".into()));
        let img = image_id("docker.io/library/busybox:latest");
        assert_eq!(img.len(), "sha256:".len() + 64);
        assert_eq!(img, image_id("docker.io/library/busybox:latest"));
        assert_ne!(img, image_id("docker.io/library/busybox:1"));
    }

    #[test]
    fn stamps_strictly_increase() {
        let mut m = model(IdStyle::Counter);
        let a = m.stamp();
        let b = m.stamp();
        assert!(a > 0 && b > a);
    }

    #[test]
    fn names_are_reserved_until_removed() {
        let mut m = model(IdStyle::Counter);
        let s = m.run_pod_sandbox(sandbox("p")).unwrap();
        let again = m.run_pod_sandbox(sandbox("p")).unwrap_err();
        assert_eq!(again.code, Code::Unknown);
        m.add_image("busybox");
        let c = ContainerConfig {
            name: "app".into(),
            image: "busybox:latest".into(),
            ..ContainerConfig::default()
        };
        m.create_container(&s, c.clone()).unwrap();
        assert_eq!(
            m.create_container(&s, c.clone()).unwrap_err().code,
            Code::Unknown
        );
        m.remove_pod_sandbox(&s).unwrap();
        assert!(m.containers().next().is_none());
        m.run_pod_sandbox(sandbox("p")).unwrap();
    }

    #[test]
    fn stop_sends_sigterm_then_sigkill_at_the_timeout() {
        let mut m = model(IdStyle::Counter);
        let s = m.run_pod_sandbox(sandbox("p")).unwrap();
        m.add_image("busybox");
        let start = |m: &mut FakeContainerd, name: &str| {
            let cfg = ContainerConfig {
                name: name.into(),
                image: "busybox".into(),
                ..ContainerConfig::default()
            };
            let id = m.create_container(&s, cfg).unwrap();
            m.start_container(&id).unwrap();
            id
        };
        let quick = start(&mut m, "quick");
        assert_eq!(m.stop_container(&quick, 30), Ok(None));
        assert_eq!(m.container(&quick).unwrap().info.exit_code, 0);
        m.set_stop_delay(Duration::from_secs(5));
        m.set_term_exit_code(143);
        let slow = start(&mut m, "slow");
        assert_eq!(
            m.stop_container(&slow, 30),
            Ok(Some((Duration::from_secs(5), 143)))
        );
        assert_eq!(
            m.stop_container(&slow, 2),
            Ok(Some((Duration::from_secs(2), 137)))
        );
        m.set_stop_delay(Duration::ZERO);
        m.set_ignore_sigterm("deaf", true);
        let deaf = start(&mut m, "deaf");
        assert_eq!(
            m.stop_container(&deaf, 3),
            Ok(Some((Duration::from_secs(3), 137)))
        );
        assert!(m.exit_running(&deaf, 137, None));
        assert!(!m.exit_running(&deaf, 137, None), "already exited");
        assert_eq!(m.stop_container(&deaf, 3), Ok(None));
    }

    #[test]
    fn events_carry_the_sandbox_after_the_change() {
        let mut m = model(IdStyle::Counter);
        let mut events = m.subscribe();
        let s = m.run_pod_sandbox(sandbox("p")).unwrap();
        m.stop_pod_sandbox(&s).unwrap();
        m.remove_pod_sandbox(&s).unwrap();
        let mut seen = Vec::new();
        while let Ok(Ok(e)) = events.try_recv() {
            seen.push((e.kind, e.sandbox.map(|s| (s.info.state, s.info.ip))));
        }
        let ready = Some((SandboxState::Ready, Some("10.88.0.2".to_string())));
        assert_eq!(
            seen,
            vec![
                (ContainerEventKind::Created, ready.clone()),
                (ContainerEventKind::Started, ready),
                (
                    ContainerEventKind::Stopped,
                    Some((SandboxState::NotReady, None))
                ),
                (ContainerEventKind::Deleted, None),
            ]
        );
        m.break_event_streams();
        assert_eq!(m.event_streams(), 0);
    }
}
