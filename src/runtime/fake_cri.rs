//! A fake CRI runtime: a real tonic gRPC server (CRI v1 `RuntimeService` + `ImageService`)
//! on a unix socket, with in-memory state. Feature `fake-cri` only; never in a release build.
//!
//! Owns: the fake's sandboxes, containers and images, its fault injection, its call log and
//! the server task. It exists to test [`CriRuntime`] end to end (real encoding, real socket,
//! real deadlines), to inject runtime faults into higher layers, and to run picolet against
//! hundreds of pods without containerd.
//!
//! Must never: be used by picolet itself, or block its caller — every knob is a short,
//! synchronous state edit (the state sits behind a `std::sync::Mutex` that is never held
//! across an `.await`).
//!
//! # Use
//!
//! ```ignore
//! let dir = tempfile::tempdir()?;
//! let mut fake = FakeCri::start(dir.path().join("cri.sock")).await?;
//! fake.preload_image("localhost/busybox:edge");
//! let runtime = fake.runtime()?;                       // a CriRuntime dialling the fake
//! // ... drive picolet / the runtime ...
//! assert_eq!(fake.call_count(Method::RunPodSandbox), 1);
//! fake.inject(Method::Status, Fault::fail(Code::Unavailable, "containerd is restarting"));
//! fake.restart().await?;                               // drop every connection, keep state
//! fake.shutdown().await;
//! ```
//!
//! Tests that use it run on real time (`#[tokio::test]`, not `start_paused`): with socket I/O
//! in flight a paused clock auto-advances, and client deadlines would fire spuriously.
//!
//! # Behaviour (modelled on containerd 1.6+)
//!
//! Sandboxes: `RunPodSandbox` → Ready, with an IP from 10.88.0.0/16 unless the network
//! namespace is `Node`. The sandbox name (metadata name, namespace, uid, attempt) stays
//! reserved until the sandbox is removed. `StopPodSandbox`: Ready → NotReady, its running
//! containers exit 137; idempotent; unknown id → `NotFound`. `RemovePodSandbox`: stops it if
//! needed and removes it with its containers; an unknown id is fine (idempotent).
//!
//! Containers: `CreateContainer` needs a Ready sandbox (unknown or not ready → `NotFound`,
//! as containerd 1.6 answers), a present image (else `NotFound`) and a free (name, attempt)
//! in the sandbox (else `Unknown`, "name is reserved").
//! Transitions: Created --Start--> Running --exit/Stop--> Exited. `StartContainer` on
//! anything but Created is `Unknown`. `StopContainer` on a running container exits it with 0
//! ("Completed") at once, or — if it ignores SIGTERM ([`FakeCriHandle::set_ignore_sigterm`])
//! — after the grace `timeout` seconds with 137 ("Error"); on a created or exited one it does
//! nothing. `RemoveContainer` kills and removes; an unknown id is fine. `ContainerStatus` of
//! an unknown id is `NotFound`; its `log_path` is `log_directory` joined with the container's
//! `log_path`, as containerd reports it. `ExecSync` answers exit code 0 with empty output
//! unless told otherwise ([`FakeCriHandle::set_exec_result`]); unknown → `NotFound`, not
//! running → `Unknown`.
//!
//! Images: only images that were preloaded ([`FakeCriHandle::preload_image`], "imported") or
//! pulled are known. Names are normalised like containerd does (`busybox` is
//! `docker.io/library/busybox:latest`). `PullImage` succeeds and adds the image unless the
//! image was made to fail ([`FakeCriHandle::fail_pulls`]). Image ids are `sha256:<64 hex>`.
//!
//! Container events (`GetContainerEvents`, as containerd 1.7 sends them): every open stream
//! gets CREATED and STARTED for a new sandbox (its id as `container_id`) and for a created
//! and a started container, STOPPED for a container that exits or is stopped and for a
//! stopped sandbox, DELETED for a removed container, and DELETED without a sandbox status
//! for a removed sandbox; each carries the sandbox's status and all its containers' after
//! the change. [`FakeCriHandle::break_event_streams`] ends every open stream with an error;
//! `inject(Method::GetContainerEvents, Fault::fail(Code::Unimplemented, …))` makes the fake
//! answer as containerd 1.6 does.
//!
//! Stats: `ListContainerStats` lists every container matching the filter, with CPU and
//! memory figures (set by [`FakeCriHandle::set_usage`], zero otherwise) for running ones
//! only, as containerd 1.6 answers; `ListPodSandboxStats` gives each ready sandbox the sum
//! of its containers' (inject `Unimplemented` for a runtime without it).
//!
//! Every call is first logged ([`FakeCriHandle::calls`]), then waits the configured latency
//! ([`FakeCriHandle::set_latency`]), then applies the first fault injected for its method
//! ([`FakeCriHandle::inject`]) — fail with a status, delay, or never answer. Waits end with
//! `Unavailable` when the server shuts down. Timestamps are wall-clock nanoseconds, strictly
//! increasing across the fake.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::codegen::{BoxFuture, Service, http};
use tonic::{Request, Response, Status};

use super::cri::{self, CriRuntime, MAX_MESSAGE_SIZE, proto};
use super::{
    ContainerConfig, ContainerInfo, ContainerSecurity, ContainerState, CriError, DnsConfig,
    ExecResult, ImageInfo, Mount, MountPropagation, NamespaceMode, NamespaceOptions, PortMapping,
    ProfileKind, Protocol, Resources, Sandbox, SandboxConfig, SandboxState, SecurityProfile,
};
use crate::clock::UnixNanos;
use proto::image_service_server::{ImageService, ImageServiceServer};
use proto::runtime_service_server::{RuntimeService, RuntimeServiceServer};

/// gRPC status codes, for [`Fault::Fail`] and [`FakeCriHandle::fail_pulls`].
pub use tonic::Code;

/// The CRI methods the fake serves.
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
    pub const ALL: [Method; 22] = [
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

/// What an injected fault does to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status instead of doing the call.
    Fail { code: Code, message: String },
    /// Wait this long, then do the call normally.
    Delay(Duration),
    /// Never answer (the call ends only when the client gives up or the server stops).
    Hang,
}

impl Fault {
    pub fn fail(code: Code, message: impl Into<String>) -> Fault {
        Fault::Fail {
            code,
            message: message.into(),
        }
    }
}

/// One logged call: the method and its key argument — the sandbox or container id, the
/// sandbox or container name for the create calls, the image for image calls, empty for
/// calls without one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: Method,
    pub key: String,
}

/// Entry point: `FakeCri::start(path)`.
#[derive(Debug)]
pub struct FakeCri;

impl FakeCri {
    /// Serves a fresh fake (no sandboxes, containers or images; runtime and network ready)
    /// on the unix socket `socket_path` (a stale socket file there is replaced). Must be
    /// called inside a tokio runtime: the server runs as tasks on it.
    pub async fn start(socket_path: impl AsRef<Path>) -> io::Result<FakeCriHandle> {
        let path = socket_path.as_ref().to_path_buf();
        let state = Arc::new(Mutex::new(State::new()));
        let serving = serve(&path, Arc::clone(&state))?;
        Ok(FakeCriHandle {
            path,
            state,
            serving: Some(serving),
        })
    }
}

/// The running fake: inspect and steer its state, inject faults, stop and restart it.
/// Dropping the handle stops the server.
#[derive(Debug)]
pub struct FakeCriHandle {
    path: PathBuf,
    state: Arc<Mutex<State>>,
    serving: Option<Serving>,
}

#[derive(Debug)]
struct Serving {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl FakeCriHandle {
    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// `unix://<socket path>`, for `CriRuntime::connect`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// A client for this fake with the default (kubelet) deadlines.
    pub fn runtime(&self) -> Result<CriRuntime, CriError> {
        CriRuntime::connect(&self.endpoint())
    }

    pub fn is_serving(&self) -> bool {
        self.serving.is_some()
    }

    /// Stops serving, like a runtime that died: every connection is dropped (calls in
    /// flight fail on the client), pending waits end, the socket file is removed. The state
    /// is kept; [`restart`](Self::restart) serves it again. Idempotent.
    pub async fn shutdown(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.stop.cancel();
            let abort = serving.task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), serving.task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        // The listener is gone; a leftover file would only make clients see ECONNREFUSED.
        let _ = std::fs::remove_file(&self.path);
    }

    /// Shuts down (if serving) and serves the same state again on the same socket, like a
    /// containerd restart: sandboxes and containers survive, connections do not.
    pub async fn restart(&mut self) -> io::Result<()> {
        self.shutdown().await;
        self.serving = Some(serve(&self.path, Arc::clone(&self.state))?);
        Ok(())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    // --- faults and latency -------------------------------------------------------------

    /// Applies `fault` to every call of `method` until [`clear_faults`](Self::clear_faults).
    /// Faults stack per method: the oldest one still active applies.
    pub fn inject(&self, method: Method, fault: Fault) {
        self.state()
            .faults
            .entry(method)
            .or_default()
            .push(FaultRule {
                fault,
                remaining: None,
            });
    }

    /// Applies `fault` to the next `times` calls of `method` only.
    pub fn inject_times(&self, method: Method, fault: Fault, times: usize) {
        if times == 0 {
            return;
        }
        self.state()
            .faults
            .entry(method)
            .or_default()
            .push(FaultRule {
                fault,
                remaining: Some(times),
            });
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Every call waits `latency` before it is served (e.g. 5 ms to model containerd in a
    /// benchmark). Zero (the default) disables it.
    pub fn set_latency(&self, latency: Duration) {
        self.state().latency = latency;
    }

    // --- call log -----------------------------------------------------------------------

    /// Every call received so far, oldest first (faulted and hanging calls included).
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// The key arguments of the calls to `method`, oldest first.
    pub fn calls_to(&self, method: Method) -> Vec<String> {
        self.state()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .map(|c| c.key.clone())
            .collect()
    }

    pub fn call_count(&self, method: Method) -> usize {
        self.state()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .count()
    }

    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    // --- runtime conditions -------------------------------------------------------------

    /// The `RuntimeReady` condition reported by `Status` (default true).
    pub fn set_runtime_ready(&self, ready: bool) {
        self.state().runtime_ready = ready;
    }

    /// The `NetworkReady` condition reported by `Status` (default true).
    pub fn set_network_ready(&self, ready: bool) {
        self.state().network_ready = ready;
    }

    // --- images -------------------------------------------------------------------------

    /// Makes `image` present, as `ctr images import` would; returns its id.
    pub fn preload_image(&self, image: &str) -> String {
        self.state().add_image(image)
    }

    pub fn images(&self) -> Vec<ImageInfo> {
        self.state().images.values().cloned().collect()
    }

    /// Makes every `PullImage` of `image` fail with `code` and `message`.
    pub fn fail_pulls(&self, image: &str, code: Code, message: impl Into<String>) {
        self.state()
            .pull_failures
            .insert(normalize_image(image), (code, message.into()));
    }

    /// Lets every image be pulled again.
    pub fn clear_pull_failures(&self) {
        self.state().pull_failures.clear();
    }

    // --- sandboxes and containers -------------------------------------------------------

    /// Every sandbox, with `ip` and `network` filled, in id order.
    pub fn sandboxes(&self) -> Vec<Sandbox> {
        self.state()
            .sandboxes
            .values()
            .map(|s| s.info.clone())
            .collect()
    }

    pub fn sandbox(&self, id: &str) -> Option<Sandbox> {
        self.state().sandboxes.get(id).map(|s| s.info.clone())
    }

    /// The config the sandbox was run with, as the fake decoded it from the wire.
    pub fn sandbox_config(&self, id: &str) -> Option<SandboxConfig> {
        self.state().sandboxes.get(id).map(|s| s.config.clone())
    }

    /// Every container, with status fields filled, in id order.
    pub fn containers(&self) -> Vec<ContainerInfo> {
        self.state()
            .containers
            .values()
            .map(|c| c.info.clone())
            .collect()
    }

    pub fn container(&self, id: &str) -> Option<ContainerInfo> {
        self.state().containers.get(id).map(|c| c.info.clone())
    }

    /// The newest container with this (container) name, in any sandbox.
    pub fn find_container(&self, name: &str) -> Option<ContainerInfo> {
        self.state()
            .containers
            .values()
            .filter(|c| c.info.name == name)
            .max_by_key(|c| c.info.created_at)
            .map(|c| c.info.clone())
    }

    /// The config the container was created with, as the fake decoded it from the wire.
    /// Every pull so far: the image and the username of the credentials sent with it.
    pub fn pull_auths(&self) -> Vec<(String, Option<String>)> {
        self.state().pull_auths.clone()
    }

    pub fn container_config(&self, id: &str) -> Option<ContainerConfig> {
        self.state().containers.get(id).map(|c| c.config.clone())
    }

    /// Makes a running container exit with `exit_code` now (reason "Completed" for 0,
    /// "Error" otherwise). Returns false if there is no such running container.
    pub fn exit_container(&self, id: &str, exit_code: i32) -> bool {
        self.exit_running(id, exit_code, None)
    }

    /// Makes a running container be OOM-killed now: exit code 137, reason "OOMKilled".
    pub fn oom_kill_container(&self, id: &str) -> bool {
        self.exit_running(id, 137, Some("OOMKilled"))
    }

    fn exit_running(&self, id: &str, exit_code: i32, reason: Option<&str>) -> bool {
        let mut st = self.state();
        let now = st.stamp();
        match st.containers.get_mut(id) {
            Some(c) if c.info.state == ContainerState::Running => {
                c.exit(now, exit_code, reason);
                let sandbox_id = c.info.sandbox_id.clone();
                st.emit(id, EventType::ContainerStoppedEvent, &sandbox_id);
                true
            }
            _ => false,
        }
    }

    /// Ends every open `GetContainerEvents` stream with an `Internal` error (a runtime whose
    /// event stream broke); new streams can be opened at once.
    pub fn break_event_streams(&self) {
        let mut st = self.state();
        for tx in st.event_streams.drain(..) {
            let _ = tx.send(Err(Status::internal("fake CRI: the event stream broke")));
        }
    }

    /// How many `GetContainerEvents` streams are open.
    pub fn event_streams(&self) -> usize {
        let mut st = self.state();
        st.event_streams.retain(|tx| !tx.is_closed());
        st.event_streams.len()
    }

    /// `key` is a container id or a container name (applies to every container of that
    /// name, present and future). When set, the container ignores SIGTERM: `StopContainer`
    /// waits the full grace period and the container exits 137.
    pub fn set_ignore_sigterm(&self, key: &str, ignore: bool) {
        let mut st = self.state();
        if ignore {
            st.ignore_sigterm.insert(key.to_string());
        } else {
            st.ignore_sigterm.remove(key);
        }
    }

    /// `key` is a container id or name. `Some(code)`: the container exits with `code` right
    /// after `StartContainer` succeeds (a crashing container). `None` clears it.
    pub fn set_exit_on_start(&self, key: &str, exit_code: Option<i32>) {
        let mut st = self.state();
        match exit_code {
            Some(code) => st.exit_on_start.insert(key.to_string(), code),
            None => st.exit_on_start.remove(key),
        };
    }

    /// `key` is a container id or name: what `ExecSync` answers for it (default: exit 0,
    /// no output). For a slow or hanging exec, inject a fault on [`Method::ExecSync`].
    pub fn set_exec_result(&self, key: &str, result: ExecResult) {
        self.state().exec_results.insert(key.to_string(), result);
    }

    /// What the stats calls report for the container `key` (id or name): cumulative CPU
    /// time and working set (unset: zero).
    pub fn set_usage(&self, key: &str, cpu_core_nanos: u64, working_set_bytes: u64) {
        self.state()
            .usage
            .insert(key.to_string(), (cpu_core_nanos, working_set_bytes));
    }
}

impl Drop for FakeCriHandle {
    fn drop(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.stop.cancel();
            serving.task.abort();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

// ---------------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------------

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicking test thread must not hide the state from the others.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug)]
struct FaultRule {
    fault: Fault,
    remaining: Option<usize>,
}

#[derive(Debug)]
struct SandboxRec {
    info: Sandbox,
    config: SandboxConfig,
}

#[derive(Debug)]
struct ContainerRec {
    info: ContainerInfo,
    config: ContainerConfig,
}

impl ContainerRec {
    // Running --exit--> Exited
    fn exit(&mut self, now: UnixNanos, exit_code: i32, reason: Option<&str>) {
        let default_reason = if exit_code == 0 { "Completed" } else { "Error" };
        self.info.state = ContainerState::Exited;
        self.info.finished_at = now;
        self.info.exit_code = exit_code;
        self.info.reason = reason.unwrap_or(default_reason).to_string();
    }

    fn matches_key(&self, keys: &HashSet<String>) -> bool {
        keys.contains(&self.info.id) || keys.contains(&self.info.name)
    }

    fn lookup<'a, T>(&self, map: &'a HashMap<String, T>) -> Option<&'a T> {
        map.get(&self.info.id).or_else(|| map.get(&self.info.name))
    }
}

#[derive(Debug)]
struct State {
    sandboxes: BTreeMap<String, SandboxRec>,
    containers: BTreeMap<String, ContainerRec>,
    /// By image id.
    images: BTreeMap<String, ImageInfo>,
    /// By normalised image reference.
    pull_failures: HashMap<String, (Code, String)>,
    faults: HashMap<Method, Vec<FaultRule>>,
    calls: Vec<Call>,
    latency: Duration,
    runtime_ready: bool,
    network_ready: bool,
    ignore_sigterm: HashSet<String>,
    exit_on_start: HashMap<String, i32>,
    exec_results: HashMap<String, ExecResult>,
    next_id: u64,
    next_ip: u32,
    last_stamp: UnixNanos,
    /// Every pull: the image and the username of the credentials it carried.
    pull_auths: Vec<(String, Option<String>)>,
    /// The open `GetContainerEvents` streams.
    event_streams: Vec<EventSender>,
    /// By container id or name: (cumulative CPU ns, working set bytes) for the stats calls.
    usage: HashMap<String, (u64, u64)>,
}

type EventItem = Result<proto::ContainerEventResponse, Status>;
type EventSender = tokio::sync::mpsc::UnboundedSender<EventItem>;
use proto::ContainerEventType as EventType;

impl State {
    fn new() -> State {
        State {
            sandboxes: BTreeMap::new(),
            containers: BTreeMap::new(),
            images: BTreeMap::new(),
            pull_failures: HashMap::new(),
            faults: HashMap::new(),
            calls: Vec::new(),
            latency: Duration::ZERO,
            runtime_ready: true,
            network_ready: true,
            ignore_sigterm: HashSet::new(),
            exit_on_start: HashMap::new(),
            exec_results: HashMap::new(),
            next_id: 0,
            next_ip: 0,
            last_stamp: 0,
            pull_auths: Vec::new(),
            event_streams: Vec::new(),
            usage: HashMap::new(),
        }
    }

    /// `ContainerStats` of the containers that pass `keep`, stamped `now`; as containerd
    /// 1.6 does, exited ones are listed without figures.
    fn container_stats(
        &self,
        now: UnixNanos,
        keep: impl Fn(&ContainerRec) -> bool,
    ) -> Vec<proto::ContainerStats> {
        self.containers
            .values()
            .filter(|c| keep(c))
            .map(|c| {
                let (cpu, ws) = c.lookup(&self.usage).copied().unwrap_or_default();
                let running = c.info.state == ContainerState::Running;
                proto::ContainerStats {
                    attributes: Some(proto::ContainerAttributes {
                        id: c.info.id.clone(),
                        metadata: Some(proto::ContainerMetadata {
                            name: c.info.name.clone(),
                            attempt: c.info.attempt,
                        }),
                        labels: c.info.labels.clone(),
                    }),
                    cpu: running.then(|| encode_cpu(now, cpu)),
                    memory: running.then(|| encode_memory(now, ws)),
                }
            })
            .collect()
    }

    /// Sends one event to every open stream: the sandbox's status and all its containers'
    /// as they are now (containerd: `generateAndSendContainerEvent`). No sandbox status
    /// once the sandbox is gone.
    fn emit(&mut self, container_id: &str, kind: EventType, sandbox_id: &str) {
        self.event_streams.retain(|tx| !tx.is_closed());
        if self.event_streams.is_empty() {
            return;
        }
        let created_at = self.stamp();
        let event = proto::ContainerEventResponse {
            container_id: container_id.to_string(),
            container_event_type: kind.into(),
            created_at,
            pod_sandbox_status: self.sandboxes.get(sandbox_id).map(encode_sandbox_status),
            containers_statuses: self
                .containers
                .values()
                .filter(|c| c.info.sandbox_id == sandbox_id)
                .map(encode_container_status)
                .collect(),
        };
        for tx in &self.event_streams {
            let _ = tx.send(Ok(event.clone()));
        }
    }

    /// Wall-clock nanoseconds, strictly increasing so "newest first" orders are total.
    fn stamp(&mut self) -> UnixNanos {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_nanos()).ok())
            .unwrap_or(0);
        self.last_stamp = now.max(self.last_stamp + 1);
        self.last_stamp
    }

    /// 64 hex digits like containerd's ids; the first 12 are a counter, so truncated ids
    /// stay unique.
    fn new_id(&mut self) -> String {
        self.next_id += 1;
        format!("{:012x}{:052x}", self.next_id, 0x0fa4_ec41_u64)
    }

    fn new_ip(&mut self) -> String {
        let n = self.next_ip;
        self.next_ip += 1;
        format!("10.88.{}.{}", (n / 250) % 256, n % 250 + 2)
    }

    fn take_fault(&mut self, method: Method) -> Option<Fault> {
        let rules = self.faults.get_mut(&method)?;
        let first = rules.first_mut()?;
        let fault = first.fault.clone();
        if let Some(n) = first.remaining.as_mut() {
            *n -= 1;
            if *n == 0 {
                rules.remove(0);
            }
        }
        Some(fault)
    }

    fn add_image(&mut self, image: &str) -> String {
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
            },
        );
        id
    }

    /// The id of the image `image` names: an id, or a (normalised) reference.
    fn resolve_image(&self, image: &str) -> Option<String> {
        if self.images.contains_key(image) {
            return Some(image.to_string());
        }
        let name = normalize_image(image);
        self.images
            .values()
            .find(|i| i.repo_tags.contains(&name))
            .map(|i| i.id.clone())
    }

    // Ready --stop--> NotReady; its running containers are killed.
    fn stop_sandbox(&mut self, id: &str) {
        let now = self.stamp();
        let mut killed = Vec::new();
        for c in self.containers.values_mut() {
            if c.info.sandbox_id == id && c.info.state == ContainerState::Running {
                c.exit(now, 137, None);
                killed.push(c.info.id.clone());
            }
        }
        for c in killed {
            self.emit(&c, EventType::ContainerStoppedEvent, id);
        }
        if let Some(s) = self.sandboxes.get_mut(id) {
            if s.info.state == SandboxState::Ready {
                s.info.state = SandboxState::NotReady;
                self.emit(id, EventType::ContainerStoppedEvent, id);
            }
        }
    }
}

/// Docker-style reference normalisation, as containerd's CRI applies it:
/// `busybox` → `docker.io/library/busybox:latest`, `localhost/x:y` stays.
pub fn normalize_image(image: &str) -> String {
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

fn labels_match(labels: &BTreeMap<String, String>, selector: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

// ---------------------------------------------------------------------------------------
// Serving
// ---------------------------------------------------------------------------------------

fn serve(path: &Path, state: Arc<Mutex<State>>) -> io::Result<Serving> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    let stop = CancellationToken::new();
    let service = FakeService {
        state,
        stop: stop.clone(),
    };
    let router = Router {
        runtime: RuntimeServiceServer::new(service.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE),
        images: ImageServiceServer::new(service)
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE),
    };
    let conn_stop = stop.clone();
    let incoming = futures_util::stream::unfold(listener, move |listener| {
        let stop = conn_stop.clone();
        async move {
            let conn = listener
                .accept()
                .await
                .map(|(io, _)| KillableConn::new(io, stop));
            Some((conn, listener))
        }
    });
    let shutdown = stop.clone().cancelled_owned();
    let task = tokio::spawn(async move {
        let server = tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(router, incoming, shutdown);
        if let Err(e) = server.await {
            log::warn!("fake CRI server failed: {e}");
        }
    });
    Ok(Serving { stop, task })
}

/// Dispatches a request to the runtime or the image service by its gRPC path.
#[derive(Clone)]
struct Router {
    runtime: RuntimeServiceServer<FakeService>,
    images: ImageServiceServer<FakeService>,
}

impl Service<http::Request<tonic::body::Body>> for Router {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        if req.uri().path().starts_with("/runtime.v1.ImageService/") {
            self.images.call(req)
        } else {
            self.runtime.call(req)
        }
    }
}

/// A server-side connection that fails all I/O once the server stops, so a shutdown drops
/// every connection at once (as a dying containerd does) instead of draining them.
struct KillableConn {
    io: UnixStream,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
    stopped: bool,
}

impl KillableConn {
    fn new(io: UnixStream, stop: CancellationToken) -> KillableConn {
        KillableConn {
            io,
            stop: Box::pin(stop.cancelled_owned()),
            stopped: false,
        }
    }

    /// Registers for the stop signal and reports whether it came.
    fn check_stopped(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.stopped && self.stop.as_mut().poll(cx).is_ready() {
            self.stopped = true;
        }
        self.stopped
    }
}

fn stopped_error() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "fake CRI server stopped")
}

impl AsyncRead for KillableConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.check_stopped(cx) {
            return Poll::Ready(Err(stopped_error()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.check_stopped(cx) {
            return Poll::Ready(Err(stopped_error()));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.check_stopped(cx) {
            return Poll::Ready(Err(stopped_error()));
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for KillableConn {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

// ---------------------------------------------------------------------------------------
// The gRPC services
// ---------------------------------------------------------------------------------------

#[derive(Clone)]
struct FakeService {
    state: Arc<Mutex<State>>,
    /// Cancelled when this serving generation stops.
    stop: CancellationToken,
}

type Answer<T> = Result<Response<T>, Status>;

fn stopped_status() -> Status {
    Status::unavailable("fake CRI server stopped")
}

/// Where the fake's streaming URLs point (`Exec`, `Attach`, `PortForward`): nothing listens
/// there; the URL names the call and the container or sandbox.
pub const STREAM_BASE: &str = "http://127.0.0.1:10010";

impl FakeService {
    /// containerd: a streaming URL for a running container only.
    fn stream_url(&self, kind: &str, id: &str) -> Result<String, Status> {
        let st = self.state();
        let c = st
            .containers
            .get(id)
            .ok_or_else(|| not_found("container", id))?;
        if c.info.state != ContainerState::Running {
            return Err(Status::failed_precondition(format!(
                "container {id:?} is in {} state",
                container_state_name(c.info.state)
            )));
        }
        Ok(format!("{STREAM_BASE}/{kind}/{id}"))
    }
}

fn not_found(what: &str, id: &str) -> Status {
    // containerd: "an error occurred when try to find container \"…\": not found"
    Status::not_found(format!(
        "an error occurred when try to find {what} {id:?}: not found"
    ))
}

fn container_state_name(state: ContainerState) -> &'static str {
    match state {
        ContainerState::Created => "CONTAINER_CREATED",
        ContainerState::Running => "CONTAINER_RUNNING",
        ContainerState::Exited => "CONTAINER_EXITED",
        ContainerState::Unknown => "CONTAINER_UNKNOWN",
    }
}

impl FakeService {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Logs the call, waits the latency, applies the method's fault.
    async fn gate(&self, method: Method, key: &str) -> Result<(), Status> {
        let (latency, fault) = {
            let mut st = self.state();
            st.calls.push(Call {
                method,
                key: key.to_string(),
            });
            (st.latency, st.take_fault(method))
        };
        if !latency.is_zero() {
            self.sleep(latency).await?;
        }
        match fault {
            None => Ok(()),
            Some(Fault::Fail { code, message }) => Err(Status::new(code, message)),
            Some(Fault::Delay(delay)) => self.sleep(delay).await,
            Some(Fault::Hang) => {
                self.stop.cancelled().await;
                Err(stopped_status())
            }
        }
    }

    /// Sleeps, or fails with `Unavailable` when the server stops first.
    async fn sleep(&self, duration: Duration) -> Result<(), Status> {
        tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            () = self.stop.cancelled() => Err(stopped_status()),
        }
    }
}

#[tonic::async_trait]
impl RuntimeService for FakeService {
    type GetContainerEventsStream =
        Pin<Box<dyn futures_util::Stream<Item = EventItem> + Send + 'static>>;

    async fn get_container_events(
        &self,
        _req: Request<proto::GetEventsRequest>,
    ) -> Answer<Self::GetContainerEventsStream> {
        self.gate(Method::GetContainerEvents, "").await?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.state().event_streams.push(tx);
        let events = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        Ok(Response::new(Box::pin(events)))
    }

    async fn version(
        &self,
        _req: Request<proto::VersionRequest>,
    ) -> Answer<proto::VersionResponse> {
        self.gate(Method::Version, "").await?;
        Ok(Response::new(proto::VersionResponse {
            version: "0.1.0".to_string(),
            runtime_name: "fake-cri".to_string(),
            runtime_version: env!("CARGO_PKG_VERSION").to_string(),
            runtime_api_version: "v1".to_string(),
        }))
    }

    async fn status(&self, _req: Request<proto::StatusRequest>) -> Answer<proto::StatusResponse> {
        self.gate(Method::Status, "").await?;
        let st = self.state();
        let condition = |kind: &str, ok: bool, reason: &str| proto::RuntimeCondition {
            r#type: kind.to_string(),
            status: ok,
            reason: if ok {
                String::new()
            } else {
                reason.to_string()
            },
            message: if ok {
                String::new()
            } else {
                format!("{kind} is false in the fake CRI")
            },
        };
        Ok(Response::new(proto::StatusResponse {
            status: Some(proto::RuntimeStatus {
                conditions: vec![
                    condition("RuntimeReady", st.runtime_ready, "RuntimeNotReady"),
                    condition("NetworkReady", st.network_ready, "NetworkPluginNotReady"),
                ],
            }),
            info: BTreeMap::new(),
        }))
    }

    async fn run_pod_sandbox(
        &self,
        req: Request<proto::RunPodSandboxRequest>,
    ) -> Answer<proto::RunPodSandboxResponse> {
        let req = req.into_inner();
        let mut config = req.config.map(decode_sandbox_config).unwrap_or_default();
        config.runtime_handler = req.runtime_handler;
        self.gate(Method::RunPodSandbox, &config.name).await?;
        if config.name.is_empty() || config.uid.is_empty() {
            return Err(Status::invalid_argument("sandbox metadata is not set"));
        }
        let mut st = self.state();
        let full_name = format!(
            "{}_{}_{}_{}",
            config.name, config.namespace, config.uid, config.attempt
        );
        // containerd: the sandbox name is reserved until RemovePodSandbox.
        if let Some(other) = st.sandboxes.values().find(|s| {
            let i = &s.info;
            (
                i.name.as_str(),
                i.namespace.as_str(),
                i.uid.as_str(),
                i.attempt,
            ) == (
                config.name.as_str(),
                config.namespace.as_str(),
                config.uid.as_str(),
                config.attempt,
            )
        }) {
            return Err(Status::unknown(format!(
                "failed to reserve sandbox name {full_name:?}: name {full_name:?} is reserved for {:?}",
                other.info.id
            )));
        }
        let id = st.new_id();
        let created_at = st.stamp();
        let network = config.namespace_options.network;
        let ip = (network != NamespaceMode::Node).then(|| st.new_ip());
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
        st.sandboxes.insert(id.clone(), SandboxRec { info, config });
        st.emit(&id, EventType::ContainerCreatedEvent, &id);
        st.emit(&id, EventType::ContainerStartedEvent, &id);
        Ok(Response::new(proto::RunPodSandboxResponse {
            pod_sandbox_id: id,
        }))
    }

    async fn stop_pod_sandbox(
        &self,
        req: Request<proto::StopPodSandboxRequest>,
    ) -> Answer<proto::StopPodSandboxResponse> {
        let id = req.into_inner().pod_sandbox_id;
        self.gate(Method::StopPodSandbox, &id).await?;
        let mut st = self.state();
        if !st.sandboxes.contains_key(&id) {
            return Err(not_found("sandbox", &id));
        }
        st.stop_sandbox(&id);
        Ok(Response::new(proto::StopPodSandboxResponse {}))
    }

    async fn remove_pod_sandbox(
        &self,
        req: Request<proto::RemovePodSandboxRequest>,
    ) -> Answer<proto::RemovePodSandboxResponse> {
        let id = req.into_inner().pod_sandbox_id;
        self.gate(Method::RemovePodSandbox, &id).await?;
        let mut st = self.state();
        // CRI: idempotent; a ready sandbox is stopped first, its containers go with it.
        if st.sandboxes.contains_key(&id) {
            st.stop_sandbox(&id);
            let gone: Vec<String> = st
                .containers
                .values()
                .filter(|c| c.info.sandbox_id == id)
                .map(|c| c.info.id.clone())
                .collect();
            for c in gone {
                st.containers.remove(&c);
                st.emit(&c, EventType::ContainerDeletedEvent, &id);
            }
            st.sandboxes.remove(&id);
            st.emit(&id, EventType::ContainerDeletedEvent, &id);
        }
        Ok(Response::new(proto::RemovePodSandboxResponse {}))
    }

    async fn pod_sandbox_status(
        &self,
        req: Request<proto::PodSandboxStatusRequest>,
    ) -> Answer<proto::PodSandboxStatusResponse> {
        let id = req.into_inner().pod_sandbox_id;
        self.gate(Method::PodSandboxStatus, &id).await?;
        let st = self.state();
        let s = st
            .sandboxes
            .get(&id)
            .ok_or_else(|| not_found("sandbox", &id))?;
        Ok(Response::new(proto::PodSandboxStatusResponse {
            status: Some(encode_sandbox_status(s)),
            info: BTreeMap::new(),
        }))
    }

    async fn list_pod_sandbox(
        &self,
        req: Request<proto::ListPodSandboxRequest>,
    ) -> Answer<proto::ListPodSandboxResponse> {
        let filter = req.into_inner().filter.unwrap_or_default();
        self.gate(Method::ListPodSandbox, &filter.id).await?;
        let st = self.state();
        let items = st
            .sandboxes
            .values()
            .filter(|s| filter.id.is_empty() || s.info.id.starts_with(&filter.id))
            .filter(|s| {
                filter
                    .state
                    .as_ref()
                    .is_none_or(|v| v.state == encode_sandbox_state(s.info.state) as i32)
            })
            .filter(|s| labels_match(&s.info.labels, &filter.label_selector))
            .map(encode_pod_sandbox)
            .collect();
        Ok(Response::new(proto::ListPodSandboxResponse { items }))
    }

    async fn create_container(
        &self,
        req: Request<proto::CreateContainerRequest>,
    ) -> Answer<proto::CreateContainerResponse> {
        let req = req.into_inner();
        let config = req.config.map(decode_container_config).unwrap_or_default();
        self.gate(Method::CreateContainer, &config.name).await?;
        if config.name.is_empty() {
            return Err(Status::invalid_argument("container metadata is not set"));
        }
        let mut st = self.state();
        let sandbox_id = req.pod_sandbox_id;
        let sandbox = st
            .sandboxes
            .get(&sandbox_id)
            .ok_or_else(|| not_found("sandbox", &sandbox_id))?;
        if sandbox.info.state != SandboxState::Ready {
            // containerd 1.6 says NotFound: the sandbox's task is gone.
            return Err(Status::not_found(format!(
                "failed to get sandbox container task: no running task found: task {sandbox_id} not found: not found"
            )));
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
        let image_ref = st.resolve_image(&config.image).ok_or_else(|| {
            Status::not_found(format!(
                "failed to resolve image {:?}: not found",
                config.image
            ))
        })?;
        // containerd: (name, attempt) is reserved in the sandbox until RemoveContainer.
        if let Some(other) = st.containers.values().find(|c| {
            c.info.sandbox_id == sandbox_id
                && c.info.name == config.name
                && c.info.attempt == config.attempt
        }) {
            return Err(Status::unknown(format!(
                "failed to reserve container name {full_name:?}: name {full_name:?} is reserved for {:?}",
                other.info.id
            )));
        }
        let id = st.new_id();
        let created_at = st.stamp();
        let log_path = if log_directory.is_empty() || config.log_path.is_empty() {
            config.log_path.clone()
        } else {
            Path::new(&log_directory)
                .join(&config.log_path)
                .display()
                .to_string()
        };
        let info = ContainerInfo::created(
            id.clone(),
            sandbox_id,
            &config,
            image_ref,
            created_at,
            log_path,
        );
        let sandbox_id = info.sandbox_id.clone();
        st.containers
            .insert(id.clone(), ContainerRec { info, config });
        st.emit(&id, EventType::ContainerCreatedEvent, &sandbox_id);
        Ok(Response::new(proto::CreateContainerResponse {
            container_id: id,
        }))
    }

    async fn start_container(
        &self,
        req: Request<proto::StartContainerRequest>,
    ) -> Answer<proto::StartContainerResponse> {
        let id = req.into_inner().container_id;
        self.gate(Method::StartContainer, &id).await?;
        let mut st = self.state();
        let now = st.stamp();
        let State {
            containers,
            exit_on_start,
            ..
        } = &mut *st;
        let c = containers
            .get_mut(&id)
            .ok_or_else(|| not_found("container", &id))?;
        if c.info.state != ContainerState::Created {
            return Err(Status::unknown(format!(
                "failed to set starting state for container {id:?}: container is in {} state",
                container_state_name(c.info.state)
            )));
        }
        // Created --start--> Running
        c.info.state = ContainerState::Running;
        c.info.started_at = now;
        let crashed = c.lookup(exit_on_start).copied();
        if let Some(code) = crashed {
            c.exit(now, code, None);
        }
        let sandbox_id = c.info.sandbox_id.clone();
        st.emit(&id, EventType::ContainerStartedEvent, &sandbox_id);
        if crashed.is_some() {
            st.emit(&id, EventType::ContainerStoppedEvent, &sandbox_id);
        }
        Ok(Response::new(proto::StartContainerResponse {}))
    }

    async fn stop_container(
        &self,
        req: Request<proto::StopContainerRequest>,
    ) -> Answer<proto::StopContainerResponse> {
        let req = req.into_inner();
        let id = req.container_id;
        self.gate(Method::StopContainer, &id).await?;
        let ignores_term = {
            let mut st = self.state();
            let now = st.stamp();
            let State {
                containers,
                ignore_sigterm,
                ..
            } = &mut *st;
            let c = containers
                .get_mut(&id)
                .ok_or_else(|| not_found("container", &id))?;
            if c.info.state != ContainerState::Running {
                // Created or exited: nothing to stop.
                return Ok(Response::new(proto::StopContainerResponse {}));
            }
            let ignores = c.matches_key(ignore_sigterm);
            if !ignores {
                // Running --SIGTERM--> Exited(0)
                c.exit(now, 0, None);
                let sandbox_id = c.info.sandbox_id.clone();
                st.emit(&id, EventType::ContainerStoppedEvent, &sandbox_id);
            }
            ignores
        };
        if ignores_term {
            // SIGTERM is ignored: SIGKILL after the grace period.
            let grace = Duration::from_secs(u64::try_from(req.timeout).unwrap_or(0));
            self.sleep(grace).await?;
            let mut st = self.state();
            let now = st.stamp();
            if let Some(c) = st.containers.get_mut(&id) {
                if c.info.state == ContainerState::Running {
                    // Running --SIGKILL--> Exited(137)
                    c.exit(now, 137, None);
                    let sandbox_id = c.info.sandbox_id.clone();
                    st.emit(&id, EventType::ContainerStoppedEvent, &sandbox_id);
                }
            }
        }
        Ok(Response::new(proto::StopContainerResponse {}))
    }

    async fn remove_container(
        &self,
        req: Request<proto::RemoveContainerRequest>,
    ) -> Answer<proto::RemoveContainerResponse> {
        let id = req.into_inner().container_id;
        self.gate(Method::RemoveContainer, &id).await?;
        // CRI: idempotent; a running container is killed and removed.
        let mut st = self.state();
        if let Some(c) = st.containers.remove(&id) {
            st.emit(&id, EventType::ContainerDeletedEvent, &c.info.sandbox_id);
        }
        Ok(Response::new(proto::RemoveContainerResponse {}))
    }

    async fn list_containers(
        &self,
        req: Request<proto::ListContainersRequest>,
    ) -> Answer<proto::ListContainersResponse> {
        let filter = req.into_inner().filter.unwrap_or_default();
        self.gate(Method::ListContainers, &filter.pod_sandbox_id)
            .await?;
        let st = self.state();
        let containers = st
            .containers
            .values()
            .filter(|c| filter.id.is_empty() || c.info.id.starts_with(&filter.id))
            .filter(|c| {
                filter.pod_sandbox_id.is_empty() || c.info.sandbox_id == filter.pod_sandbox_id
            })
            .filter(|c| {
                filter
                    .state
                    .as_ref()
                    .is_none_or(|v| v.state == encode_container_state(c.info.state) as i32)
            })
            .filter(|c| labels_match(&c.info.labels, &filter.label_selector))
            .map(encode_container)
            .collect();
        Ok(Response::new(proto::ListContainersResponse { containers }))
    }

    async fn container_status(
        &self,
        req: Request<proto::ContainerStatusRequest>,
    ) -> Answer<proto::ContainerStatusResponse> {
        let id = req.into_inner().container_id;
        self.gate(Method::ContainerStatus, &id).await?;
        let st = self.state();
        let c = st
            .containers
            .get(&id)
            .ok_or_else(|| not_found("container", &id))?;
        Ok(Response::new(proto::ContainerStatusResponse {
            status: Some(encode_container_status(c)),
            info: BTreeMap::new(),
        }))
    }

    async fn exec_sync(
        &self,
        req: Request<proto::ExecSyncRequest>,
    ) -> Answer<proto::ExecSyncResponse> {
        let id = req.into_inner().container_id;
        self.gate(Method::ExecSync, &id).await?;
        let st = self.state();
        let c = st
            .containers
            .get(&id)
            .ok_or_else(|| not_found("container", &id))?;
        if c.info.state != ContainerState::Running {
            return Err(Status::unknown(format!(
                "failed to exec in container: container is in {} state",
                container_state_name(c.info.state)
            )));
        }
        let result = c.lookup(&st.exec_results).cloned().unwrap_or(ExecResult {
            exit_code: 0,
            stdout: Vec::new(),
            stderr: Vec::new(),
        });
        Ok(Response::new(proto::ExecSyncResponse {
            stdout: result.stdout,
            stderr: result.stderr,
            exit_code: result.exit_code,
        }))
    }

    async fn exec(&self, req: Request<proto::ExecRequest>) -> Answer<proto::ExecResponse> {
        let req = req.into_inner();
        if req.cmd.is_empty() {
            return Err(Status::invalid_argument("cmd must not be empty"));
        }
        let url = self.stream_url("exec", &req.container_id)?;
        Ok(Response::new(proto::ExecResponse { url }))
    }

    async fn attach(&self, req: Request<proto::AttachRequest>) -> Answer<proto::AttachResponse> {
        let url = self.stream_url("attach", &req.into_inner().container_id)?;
        Ok(Response::new(proto::AttachResponse { url }))
    }

    async fn port_forward(
        &self,
        req: Request<proto::PortForwardRequest>,
    ) -> Answer<proto::PortForwardResponse> {
        let id = req.into_inner().pod_sandbox_id;
        let st = self.state();
        let sb = st
            .sandboxes
            .get(&id)
            .ok_or_else(|| not_found("sandbox", &id))?;
        if sb.info.state != SandboxState::Ready {
            return Err(Status::failed_precondition(format!(
                "sandbox {id:?} is not running"
            )));
        }
        Ok(Response::new(proto::PortForwardResponse {
            url: format!("{STREAM_BASE}/portforward/{id}"),
        }))
    }

    async fn list_container_stats(
        &self,
        req: Request<proto::ListContainerStatsRequest>,
    ) -> Answer<proto::ListContainerStatsResponse> {
        let filter = req.into_inner().filter.unwrap_or_default();
        self.gate(Method::ListContainerStats, &filter.pod_sandbox_id)
            .await?;
        let mut st = self.state();
        let now = st.stamp();
        let stats = st.container_stats(now, |c| {
            (filter.id.is_empty() || c.info.id.starts_with(&filter.id))
                && (filter.pod_sandbox_id.is_empty() || c.info.sandbox_id == filter.pod_sandbox_id)
                && labels_match(&c.info.labels, &filter.label_selector)
        });
        Ok(Response::new(proto::ListContainerStatsResponse { stats }))
    }

    /// Ready sandboxes, each with the sum of its running containers' usage (containerd
    /// reads the pod cgroup).
    async fn list_pod_sandbox_stats(
        &self,
        req: Request<proto::ListPodSandboxStatsRequest>,
    ) -> Answer<proto::ListPodSandboxStatsResponse> {
        let filter = req.into_inner().filter.unwrap_or_default();
        self.gate(Method::ListPodSandboxStats, &filter.id).await?;
        let mut st = self.state();
        let now = st.stamp();
        let stats = st
            .sandboxes
            .values()
            .filter(|sb| sb.info.state == SandboxState::Ready)
            .filter(|sb| filter.id.is_empty() || sb.info.id.starts_with(&filter.id))
            .filter(|sb| labels_match(&sb.info.labels, &filter.label_selector))
            .map(|sb| {
                let containers = st.container_stats(now, |c| c.info.sandbox_id == sb.info.id);
                let value = |v: &Option<proto::UInt64Value>| v.as_ref().map_or(0, |v| v.value);
                let cpu = containers
                    .iter()
                    .filter_map(|c| c.cpu.as_ref())
                    .map(|u| value(&u.usage_core_nano_seconds))
                    .sum();
                let ws = containers
                    .iter()
                    .filter_map(|c| c.memory.as_ref())
                    .map(|m| value(&m.working_set_bytes))
                    .sum();
                proto::PodSandboxStats {
                    attributes: Some(proto::PodSandboxAttributes {
                        id: sb.info.id.clone(),
                        metadata: Some(encode_sandbox_metadata(&sb.info)),
                        labels: sb.info.labels.clone(),
                    }),
                    linux: Some(proto::LinuxPodSandboxStats {
                        cpu: Some(encode_cpu(now, cpu)),
                        memory: Some(encode_memory(now, ws)),
                        containers,
                    }),
                }
            })
            .collect();
        Ok(Response::new(proto::ListPodSandboxStatsResponse { stats }))
    }
}

#[tonic::async_trait]
impl ImageService for FakeService {
    async fn list_images(
        &self,
        req: Request<proto::ListImagesRequest>,
    ) -> Answer<proto::ListImagesResponse> {
        let wanted = req
            .into_inner()
            .filter
            .and_then(|f| f.image)
            .map(|i| i.image)
            .unwrap_or_default();
        self.gate(Method::ListImages, &wanted).await?;
        let st = self.state();
        let only = (!wanted.is_empty()).then(|| st.resolve_image(&wanted));
        let images = st
            .images
            .values()
            .filter(|i| only.as_ref().is_none_or(|id| id.as_deref() == Some(&i.id)))
            .map(encode_image)
            .collect();
        Ok(Response::new(proto::ListImagesResponse { images }))
    }

    async fn image_status(
        &self,
        req: Request<proto::ImageStatusRequest>,
    ) -> Answer<proto::ImageStatusResponse> {
        let image = req.into_inner().image.map(|i| i.image).unwrap_or_default();
        self.gate(Method::ImageStatus, &image).await?;
        let st = self.state();
        let found = st
            .resolve_image(&image)
            .and_then(|id| st.images.get(&id))
            .map(encode_image);
        Ok(Response::new(proto::ImageStatusResponse {
            image: found,
            info: BTreeMap::new(),
        }))
    }

    async fn pull_image(
        &self,
        req: Request<proto::PullImageRequest>,
    ) -> Answer<proto::PullImageResponse> {
        let req = req.into_inner();
        let image = req.image.map(|i| i.image).unwrap_or_default();
        self.gate(Method::PullImage, &image).await?;
        self.state()
            .pull_auths
            .push((image.clone(), req.auth.map(|a| a.username)));
        if image.is_empty() {
            return Err(Status::invalid_argument("no image to pull"));
        }
        let mut st = self.state();
        if let Some((code, message)) = st.pull_failures.get(&normalize_image(&image)) {
            return Err(Status::new(*code, message.clone()));
        }
        let image_ref = st.add_image(&image);
        Ok(Response::new(proto::PullImageResponse { image_ref }))
    }

    async fn remove_image(
        &self,
        req: Request<proto::RemoveImageRequest>,
    ) -> Answer<proto::RemoveImageResponse> {
        let image = req.into_inner().image.map(|i| i.image).unwrap_or_default();
        self.gate(Method::RemoveImage, &image).await?;
        let mut st = self.state();
        if let Some(id) = st.resolve_image(&image) {
            st.images.remove(&id);
        }
        Ok(Response::new(proto::RemoveImageResponse {}))
    }

    async fn image_fs_info(
        &self,
        _req: Request<proto::ImageFsInfoRequest>,
    ) -> Answer<proto::ImageFsInfoResponse> {
        self.gate(Method::ImageFsInfo, "").await?;
        let mut st = self.state();
        let timestamp = st.stamp();
        let used: u64 = st.images.values().map(|i| i.size).sum();
        let count = st.images.len() as u64;
        Ok(Response::new(proto::ImageFsInfoResponse {
            image_filesystems: vec![proto::FilesystemUsage {
                timestamp,
                fs_id: Some(proto::FilesystemIdentifier {
                    mountpoint: "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"
                        .to_string(),
                }),
                used_bytes: Some(proto::UInt64Value { value: used }),
                inodes_used: Some(proto::UInt64Value { value: count * 100 }),
            }],
            container_filesystems: Vec::new(),
        }))
    }
}

// ---------------------------------------------------------------------------------------
// Wire → domain (requests) and domain → wire (answers)
// ---------------------------------------------------------------------------------------

fn decode_namespace_options(o: Option<proto::NamespaceOption>) -> NamespaceOptions {
    let o = o.unwrap_or_default();
    NamespaceOptions {
        network: cri::from_namespace_mode(o.network),
        pid: cri::from_namespace_mode(o.pid),
        ipc: cri::from_namespace_mode(o.ipc),
    }
}

fn decode_sandbox_config(c: proto::PodSandboxConfig) -> SandboxConfig {
    let meta = c.metadata.unwrap_or_default();
    let linux = c.linux.unwrap_or_default();
    let security = linux.security_context.unwrap_or_default();
    SandboxConfig {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        attempt: meta.attempt,
        hostname: c.hostname,
        log_directory: c.log_directory,
        dns: c.dns_config.map(|d| DnsConfig {
            servers: d.servers,
            searches: d.searches,
            options: d.options,
        }),
        port_mappings: c
            .port_mappings
            .into_iter()
            .map(|p| PortMapping {
                protocol: match proto::Protocol::try_from(p.protocol) {
                    Ok(proto::Protocol::Udp) => Protocol::Udp,
                    Ok(proto::Protocol::Sctp) => Protocol::Sctp,
                    Ok(proto::Protocol::Tcp) | Err(_) => Protocol::Tcp,
                },
                container_port: p.container_port,
                host_port: p.host_port,
                host_ip: p.host_ip,
            })
            .collect(),
        labels: c.labels,
        annotations: c.annotations,
        cgroup_parent: linux.cgroup_parent,
        namespace_options: decode_namespace_options(security.namespace_options),
        privileged: security.privileged,
        sysctls: linux.sysctls,
        seccomp: decode_profile(security.seccomp).unwrap_or_default(),
        // Not part of the config: RunPodSandboxRequest's own field, set by the caller.
        runtime_handler: String::new(),
    }
}

fn decode_profile(p: Option<proto::SecurityProfile>) -> Option<SecurityProfile> {
    use proto::security_profile::ProfileType;
    let p = p?;
    Some(SecurityProfile {
        kind: match ProfileType::try_from(p.profile_type) {
            Ok(ProfileType::RuntimeDefault) | Err(_) => ProfileKind::RuntimeDefault,
            Ok(ProfileType::Unconfined) => ProfileKind::Unconfined,
            Ok(ProfileType::Localhost) => ProfileKind::Localhost,
        },
        localhost_ref: p.localhost_ref,
    })
}

fn decode_container_config(c: proto::ContainerConfig) -> ContainerConfig {
    let meta = c.metadata.unwrap_or_default();
    let linux = c.linux.unwrap_or_default();
    let resources = linux.resources.unwrap_or_default();
    let sc = linux.security_context.unwrap_or_default();
    let caps = sc.capabilities.unwrap_or_default();
    ContainerConfig {
        name: meta.name,
        attempt: meta.attempt,
        image: c.image.map(|i| i.image).unwrap_or_default(),
        command: c.command,
        args: c.args,
        working_dir: c.working_dir,
        envs: c.envs.into_iter().map(|kv| (kv.key, kv.value)).collect(),
        mounts: c
            .mounts
            .into_iter()
            .map(|m| Mount {
                container_path: m.container_path,
                host_path: m.host_path,
                readonly: m.readonly,
                propagation: decode_propagation(m.propagation),
            })
            .collect(),
        labels: c.labels,
        annotations: c.annotations,
        log_path: c.log_path,
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        tty: c.tty,
        resources: Resources {
            cpu_period: resources.cpu_period,
            cpu_quota: resources.cpu_quota,
            cpu_shares: resources.cpu_shares,
            memory_limit_in_bytes: resources.memory_limit_in_bytes,
            oom_score_adj: resources.oom_score_adj,
        },
        security: ContainerSecurity {
            privileged: sc.privileged,
            namespace_options: decode_namespace_options(sc.namespace_options),
            run_as_user: sc.run_as_user.map(|v| v.value),
            run_as_group: sc.run_as_group.map(|v| v.value),
            supplemental_groups: sc.supplemental_groups,
            readonly_rootfs: sc.readonly_rootfs,
            no_new_privs: sc.no_new_privs,
            add_capabilities: caps.add_capabilities,
            drop_capabilities: caps.drop_capabilities,
            seccomp: decode_profile(sc.seccomp).unwrap_or_default(),
            apparmor: decode_profile(sc.apparmor),
        },
    }
}

fn decode_propagation(raw: i32) -> MountPropagation {
    match proto::MountPropagation::try_from(raw) {
        Ok(proto::MountPropagation::PropagationHostToContainer) => {
            MountPropagation::HostToContainer
        }
        Ok(proto::MountPropagation::PropagationBidirectional) => MountPropagation::Bidirectional,
        Ok(proto::MountPropagation::PropagationPrivate) | Err(_) => MountPropagation::Private,
    }
}

fn encode_sandbox_state(state: SandboxState) -> proto::PodSandboxState {
    match state {
        SandboxState::Ready => proto::PodSandboxState::SandboxReady,
        SandboxState::NotReady => proto::PodSandboxState::SandboxNotready,
    }
}

fn encode_container_state(state: ContainerState) -> proto::ContainerState {
    match state {
        ContainerState::Created => proto::ContainerState::ContainerCreated,
        ContainerState::Running => proto::ContainerState::ContainerRunning,
        ContainerState::Exited => proto::ContainerState::ContainerExited,
        ContainerState::Unknown => proto::ContainerState::ContainerUnknown,
    }
}

fn encode_cpu(now: UnixNanos, core_nanos: u64) -> proto::CpuUsage {
    proto::CpuUsage {
        timestamp: now,
        usage_core_nano_seconds: Some(proto::UInt64Value { value: core_nanos }),
        usage_nano_cores: None,
    }
}

fn encode_memory(now: UnixNanos, working_set: u64) -> proto::MemoryUsage {
    let v = |value| Some(proto::UInt64Value { value });
    proto::MemoryUsage {
        timestamp: now,
        working_set_bytes: v(working_set),
        usage_bytes: v(working_set),
        ..Default::default()
    }
}

fn encode_sandbox_metadata(s: &Sandbox) -> proto::PodSandboxMetadata {
    proto::PodSandboxMetadata {
        name: s.name.clone(),
        uid: s.uid.clone(),
        namespace: s.namespace.clone(),
        attempt: s.attempt,
    }
}

fn encode_pod_sandbox(s: &SandboxRec) -> proto::PodSandbox {
    proto::PodSandbox {
        id: s.info.id.clone(),
        metadata: Some(encode_sandbox_metadata(&s.info)),
        state: encode_sandbox_state(s.info.state).into(),
        created_at: s.info.created_at,
        labels: s.info.labels.clone(),
        runtime_handler: String::new(),
    }
}

fn encode_sandbox_status(s: &SandboxRec) -> proto::PodSandboxStatus {
    proto::PodSandboxStatus {
        id: s.info.id.clone(),
        metadata: Some(encode_sandbox_metadata(&s.info)),
        state: encode_sandbox_state(s.info.state).into(),
        created_at: s.info.created_at,
        // containerd reports an empty IP for host-network sandboxes.
        network: Some(proto::PodSandboxNetworkStatus {
            ip: s.info.ip.clone().unwrap_or_default(),
            additional_ips: Vec::new(),
        }),
        linux: Some(proto::LinuxPodSandboxStatus {
            namespaces: Some(proto::Namespace {
                options: Some(cri::namespace_option(&s.config.namespace_options)),
            }),
        }),
        labels: s.info.labels.clone(),
        annotations: s.info.annotations.clone(),
        runtime_handler: String::new(),
    }
}

fn encode_container(c: &ContainerRec) -> proto::Container {
    let i = &c.info;
    proto::Container {
        id: i.id.clone(),
        pod_sandbox_id: i.sandbox_id.clone(),
        metadata: Some(proto::ContainerMetadata {
            name: i.name.clone(),
            attempt: i.attempt,
        }),
        image: Some(proto::ImageSpec {
            image: i.image.clone(),
            ..Default::default()
        }),
        image_ref: i.image_ref.clone(),
        state: encode_container_state(i.state).into(),
        created_at: i.created_at,
        labels: i.labels.clone(),
        image_id: i.image_ref.clone(),
    }
}

fn encode_container_status(c: &ContainerRec) -> proto::ContainerStatus {
    let i = &c.info;
    proto::ContainerStatus {
        id: i.id.clone(),
        metadata: Some(proto::ContainerMetadata {
            name: i.name.clone(),
            attempt: i.attempt,
        }),
        state: encode_container_state(i.state).into(),
        created_at: i.created_at,
        started_at: i.started_at,
        finished_at: i.finished_at,
        exit_code: i.exit_code,
        image: Some(proto::ImageSpec {
            image: i.image.clone(),
            ..Default::default()
        }),
        image_ref: i.image_ref.clone(),
        reason: i.reason.clone(),
        message: i.message.clone(),
        labels: i.labels.clone(),
        annotations: i.annotations.clone(),
        mounts: c.config.mounts.iter().map(cri::mount).collect(),
        log_path: i.log_path.clone(),
        image_id: i.image_ref.clone(),
    }
}

fn encode_image(i: &ImageInfo) -> proto::Image {
    proto::Image {
        id: i.id.clone(),
        repo_tags: i.repo_tags.clone(),
        repo_digests: Vec::new(),
        size: i.size,
        uid: None,
        username: String::new(),
        spec: None,
        pinned: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn ids_are_unique_and_containerd_shaped() {
        let mut st = State::new();
        let a = st.new_id();
        let b = st.new_id();
        assert_ne!(a[..12], b[..12]);
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        let img = image_id("docker.io/library/busybox:latest");
        assert_eq!(img.len(), "sha256:".len() + 64);
        assert_eq!(img, image_id("docker.io/library/busybox:latest"));
        assert_ne!(img, image_id("docker.io/library/busybox:1"));
    }

    #[test]
    fn counted_faults_expire_and_stack() {
        let mut st = State::new();
        st.faults
            .entry(Method::Status)
            .or_default()
            .push(FaultRule {
                fault: Fault::Hang,
                remaining: Some(2),
            });
        st.faults
            .entry(Method::Status)
            .or_default()
            .push(FaultRule {
                fault: Fault::Delay(Duration::from_millis(1)),
                remaining: None,
            });
        assert_eq!(st.take_fault(Method::Status), Some(Fault::Hang));
        assert_eq!(st.take_fault(Method::Status), Some(Fault::Hang));
        for _ in 0..3 {
            assert_eq!(
                st.take_fault(Method::Status),
                Some(Fault::Delay(Duration::from_millis(1)))
            );
        }
        assert_eq!(st.take_fault(Method::Version), None);
    }

    #[test]
    fn stamps_strictly_increase() {
        let mut st = State::new();
        let a = st.stamp();
        let b = st.stamp();
        assert!(a > 0 && b > a);
    }
}
