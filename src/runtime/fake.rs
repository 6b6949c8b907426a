//! An in-memory `Runtime` for unit tests.
//!
//! Owns: a small model of what containerd does with sandboxes, containers and images —
//! enough for `sync.rs` tests — plus a log of every call in order and hooks to steer it:
//! inject errors per method, mark images present, make a container exit with a code, set
//! the IP a sandbox reports, delay `StopContainer`.
//!
//! Behaviour mirrored from containerd's CRI plugin: stopping a sandbox stops its
//! containers; removing a sandbox removes its containers; creating a container needs a
//! ready sandbox and a present image; host-network sandboxes report no IP. List calls
//! return list-level fields only (no times, exit code or reason), as CRI does.
//!
//! Container events (`container_events`, evented PLEG) are off by default: the call answers
//! `Unimplemented`, as containerd 1.6 does. [`FakeRuntime::serve_events`] turns them on;
//! then every open stream gets the events containerd 1.7 sends (CREATED/STARTED for a new
//! sandbox and container, STOPPED when one exits or is stopped, DELETED when removed; a
//! removed sandbox's DELETED carries no sandbox), each with the sandbox and all its
//! containers after the change. [`FakeRuntime::break_event_streams`] ends them with an error.
//!
//! Stats: `list_container_stats` lists every container, with figures
//! ([`FakeRuntime::set_usage`]) for running ones only, as containerd 1.6 does;
//! `list_pod_sandbox_stats` answers `Unimplemented` unless [`FakeRuntime::serve_pod_stats`]
//! turned it on (then each ready sandbox carries its containers' sum).
//!
//! Must never: be used outside tests and test tooling (it is plain, cheap `Rc<RefCell<…>>`
//! state; no borrow is held across an `.await`).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use crate::clock::{Clock, UnixNanos};
use crate::runtime::{
    ContainerConfig, ContainerEvent, ContainerEventKind, ContainerEvents, ContainerInfo,
    ContainerState, CriError, ExecResult, ImageInfo, ListFilter, NamespaceMode, Runtime,
    RuntimeHealth, RuntimeVersion, Sandbox, SandboxConfig, SandboxState, StreamOptions,
};

/// A `Runtime` method, for error injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Version,
    Status,
    RunPodSandbox,
    StopPodSandbox,
    RemovePodSandbox,
    PodSandboxStatus,
    ListPodSandboxes,
    CreateContainer,
    StartContainer,
    StopContainer,
    RemoveContainer,
    ListContainers,
    ContainerStatus,
    ExecSync,
    ImageStatus,
    PullImage,
    GetContainerEvents,
    ListContainerStats,
    ListPodSandboxStats,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Version => "Version",
            Method::Status => "Status",
            Method::RunPodSandbox => "RunPodSandbox",
            Method::StopPodSandbox => "StopPodSandbox",
            Method::RemovePodSandbox => "RemovePodSandbox",
            Method::PodSandboxStatus => "PodSandboxStatus",
            Method::ListPodSandboxes => "ListPodSandbox",
            Method::CreateContainer => "CreateContainer",
            Method::StartContainer => "StartContainer",
            Method::StopContainer => "StopContainer",
            Method::RemoveContainer => "RemoveContainer",
            Method::ListContainers => "ListContainers",
            Method::ContainerStatus => "ContainerStatus",
            Method::ExecSync => "ExecSync",
            Method::ImageStatus => "ImageStatus",
            Method::PullImage => "PullImage",
            Method::GetContainerEvents => "GetContainerEvents",
            Method::ListContainerStats => "ListContainerStats",
            Method::ListPodSandboxStats => "ListPodSandboxStats",
        }
    }
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Version,
    Status,
    RunPodSandbox {
        name: String,
        attempt: u32,
    },
    StopPodSandbox(String),
    RemovePodSandbox(String),
    PodSandboxStatus(String),
    ListPodSandboxes,
    CreateContainer {
        sandbox_id: String,
        name: String,
        attempt: u32,
    },
    StartContainer(String),
    StopContainer {
        id: String,
        timeout: i64,
    },
    RemoveContainer(String),
    ListContainers,
    ContainerStatus(String),
    ExecSync(String),
    ImageStatus(String),
    PullImage(String),
    GetContainerEvents,
    ListContainerStats,
    ListPodSandboxStats,
}

impl Call {
    /// Calls that change runtime state (not lists, status reads or version).
    pub fn is_mutation(&self) -> bool {
        !matches!(
            self,
            Call::Version
                | Call::Status
                | Call::PodSandboxStatus(_)
                | Call::ListPodSandboxes
                | Call::ListContainers
                | Call::ContainerStatus(_)
                | Call::ImageStatus(_)
                | Call::ExecSync(_)
                | Call::GetContainerEvents
                | Call::ListContainerStats
                | Call::ListPodSandboxStats
        )
    }
}

struct FakeSandbox {
    info: Sandbox,
    config: SandboxConfig,
}

struct FakeContainer {
    info: ContainerInfo,
    config: ContainerConfig,
}

struct State {
    now: Rc<dyn Fn() -> UnixNanos>,
    last_created: UnixNanos,
    next_id: u64,
    next_ip: u8,
    sandboxes: BTreeMap<String, FakeSandbox>,
    containers: BTreeMap<String, FakeContainer>,
    /// Keyed by image name with a default `:latest` tag.
    images: BTreeMap<String, ImageInfo>,
    calls: Vec<Call>,
    fail_once: HashMap<Method, VecDeque<CriError>>,
    fail_always: HashMap<Method, CriError>,
    /// Overrides the IP reported by new pod-network sandboxes (`Some("")` = no IP).
    sandbox_ip: Option<String>,
    stop_delay: Duration,
    /// How long an unfiltered list call (the relister's) takes.
    unfiltered_list_delay: Duration,
    stop_exit_code: i32,
    health: RuntimeHealth,
    /// Every pull: the image and the username of the credentials it carried.
    pull_auths: Vec<(String, Option<String>)>,
    exec_results: HashMap<String, (i32, String)>,
    exec_commands: Vec<(String, Vec<String>)>,
    /// Whether `container_events` opens a stream (else `Unimplemented`).
    serve_events: bool,
    event_streams: Vec<EventSender>,
    /// Unfiltered `list_pod_sandboxes` calls (the relister's) so far.
    relists: usize,
    /// What `exec`, `attach` and `port_forward` answer (`None`: `Unimplemented`).
    stream_url: Option<String>,
    /// Every streaming call: ("Exec" | "Attach" | "PortForward", container or sandbox ID).
    stream_calls: Vec<(&'static str, String)>,
    /// Per container id or name: (cumulative CPU ns, working set bytes) reported by the
    /// stats calls (absent: zero).
    usage: HashMap<String, (u64, u64)>,
    /// Whether `list_pod_sandbox_stats` answers (else `Unimplemented`).
    serve_pod_stats: bool,
}

type EventSender = tokio::sync::mpsc::UnboundedSender<Result<ContainerEvent, CriError>>;

/// The in-memory runtime. Clones share state.
#[derive(Clone)]
pub struct FakeRuntime {
    state: Rc<RefCell<State>>,
}

impl std::fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.borrow();
        f.debug_struct("FakeRuntime")
            .field("sandboxes", &s.sandboxes.len())
            .field("containers", &s.containers.len())
            .field("calls", &s.calls.len())
            .finish()
    }
}

fn normalize_image(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains(':') || image.contains('@') {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

fn not_found(method: Method, what: &str) -> CriError {
    CriError::NotFound {
        method: method.name(),
        message: format!("{what} not found"),
    }
}

impl FakeRuntime {
    /// A fake whose timestamps come from `clock` (use `TokioClock` with paused time).
    pub fn new(clock: impl Clock) -> Self {
        FakeRuntime {
            state: Rc::new(RefCell::new(State {
                now: Rc::new(move || clock.now()),
                last_created: 0,
                next_id: 0,
                next_ip: 2,
                sandboxes: BTreeMap::new(),
                containers: BTreeMap::new(),
                images: BTreeMap::new(),
                calls: Vec::new(),
                fail_once: HashMap::new(),
                fail_always: HashMap::new(),
                sandbox_ip: None,
                stop_delay: Duration::ZERO,
                unfiltered_list_delay: Duration::ZERO,
                stop_exit_code: 143,
                health: RuntimeHealth {
                    runtime_ready: true,
                    network_ready: true,
                    message: String::new(),
                },
                pull_auths: Vec::new(),
                exec_results: HashMap::new(),
                exec_commands: Vec::new(),
                serve_events: false,
                event_streams: Vec::new(),
                relists: 0,
                stream_url: None,
                stream_calls: Vec::new(),
                usage: HashMap::new(),
                serve_pod_stats: false,
            })),
        }
    }

    // ----- hooks -----------------------------------------------------------------------

    /// The next call of `method` fails with `err` (queued: several calls fail in turn).
    pub fn fail_once(&self, method: Method, err: CriError) {
        self.state
            .borrow_mut()
            .fail_once
            .entry(method)
            .or_default()
            .push_back(err);
    }

    /// Every call of `method` fails with `err` until `clear_failures`.
    pub fn fail_always(&self, method: Method, err: CriError) {
        self.state.borrow_mut().fail_always.insert(method, err);
    }

    pub fn clear_failures(&self) {
        let mut s = self.state.borrow_mut();
        s.fail_once.clear();
        s.fail_always.clear();
    }

    /// A generic RPC error for `method`.
    pub fn rpc_error(method: Method, message: &str) -> CriError {
        CriError::Rpc {
            method: method.name(),
            code: "Unknown".into(),
            message: message.into(),
        }
    }

    /// Mark an image present (as if pulled).
    pub fn add_image(&self, image: &str) {
        let key = normalize_image(image);
        self.state.borrow_mut().images.insert(
            key.clone(),
            ImageInfo {
                id: format!("sha256:{:016x}", fnv(&key)),
                repo_tags: vec![key],
                size: 1024,
            },
        );
    }

    pub fn has_image(&self, image: &str) -> bool {
        self.state
            .borrow()
            .images
            .contains_key(&normalize_image(image))
    }

    /// The IP new pod-network sandboxes report (`""` = none). Default: 10.88.0.N.
    pub fn set_sandbox_ip(&self, ip: &str) {
        self.state.borrow_mut().sandbox_ip = Some(ip.to_string());
    }

    /// Change an existing sandbox's state (e.g. the pause process died).
    pub fn set_sandbox_state(&self, id: &str, state: SandboxState) {
        let mut s = self.state.borrow_mut();
        if let Some(sb) = s.sandboxes.get_mut(id) {
            sb.info.state = state;
            let kind = match state {
                SandboxState::Ready => ContainerEventKind::Started,
                SandboxState::NotReady => ContainerEventKind::Stopped,
            };
            s.emit(id, kind, id);
        }
    }

    /// What `ExecSync` answers in a container, by container ID or name (default: exit 0);
    /// an exit code of -1 makes the call time out after the requested timeout.
    pub fn set_exec_result(&self, id_or_name: &str, exit_code: i32, output: &str) {
        self.state
            .borrow_mut()
            .exec_results
            .insert(id_or_name.to_string(), (exit_code, output.to_string()));
    }

    /// What `exec`, `attach` and `port_forward` answer from now on (the default:
    /// `Unimplemented`).
    pub fn set_stream_url(&self, url: &str) {
        self.state.borrow_mut().stream_url = Some(url.to_string());
    }

    /// Every `exec`, `attach` and `port_forward` so far: (CRI method, container or sandbox).
    pub fn stream_calls(&self) -> Vec<(&'static str, String)> {
        self.state.borrow().stream_calls.clone()
    }

    fn stream(&self, method: &'static str, id: &str, running: bool) -> Result<String, CriError> {
        let mut s = self.state.borrow_mut();
        let Some(url) = s.stream_url.clone() else {
            return Err(CriError::Unimplemented {
                method,
                message: "not implemented".into(),
            });
        };
        if !running {
            return Err(CriError::Rpc {
                method,
                code: "FailedPrecondition".into(),
                message: format!("{id} is not running"),
            });
        }
        s.stream_calls.push((method, id.to_string()));
        Ok(url)
    }

    fn container_running(&self, id: &str) -> bool {
        let s = self.state.borrow();
        s.containers
            .get(id)
            .is_some_and(|c| c.info.state == ContainerState::Running)
    }

    /// Every `ExecSync` so far: (container name, command).
    pub fn exec_commands(&self) -> Vec<(String, Vec<String>)> {
        self.state.borrow().exec_commands.clone()
    }

    /// Make a container exit with `code` now (reason `Completed` / `Error`).
    pub fn exit_container(&self, id: &str, code: i32) {
        let mut s = self.state.borrow_mut();
        let now = (s.now)();
        if let Some(c) = s.containers.get_mut(id) {
            if exit(&mut c.info, code, now) {
                let sandbox_id = c.info.sandbox_id.clone();
                s.emit(id, ContainerEventKind::Stopped, &sandbox_id);
            }
        }
    }

    /// `true`: `container_events` opens a stream (a runtime with evented PLEG support);
    /// `false` (the default): it answers `Unimplemented`, as containerd 1.6 does.
    pub fn serve_events(&self, on: bool) {
        self.state.borrow_mut().serve_events = on;
    }

    /// Ends every open event stream with an error (a stream that broke).
    pub fn break_event_streams(&self) {
        for tx in self.state.borrow_mut().event_streams.drain(..) {
            let _ = tx.send(Err(CriError::Rpc {
                method: Method::GetContainerEvents.name(),
                code: "Internal".into(),
                message: "the event stream broke".into(),
            }));
        }
    }

    /// How many event streams are open.
    pub fn event_streams(&self) -> usize {
        let mut s = self.state.borrow_mut();
        s.event_streams.retain(|tx| !tx.is_closed());
        s.event_streams.len()
    }

    /// How many unfiltered sandbox lists (relists) were made so far.
    pub fn relists(&self) -> usize {
        self.state.borrow().relists
    }

    /// How long a container takes to exit after SIGTERM; a `StopContainer` timeout shorter
    /// than that kills it at the timeout (exit 137).
    pub fn set_stop_delay(&self, d: Duration) {
        self.state.borrow_mut().stop_delay = d;
    }

    /// How long list calls without a filter (the relister's) take; a long one is a runtime
    /// whose full lists hang while per-pod calls still answer.
    pub fn set_unfiltered_list_delay(&self, d: Duration) {
        self.state.borrow_mut().unfiltered_list_delay = d;
    }

    async fn unfiltered_list_wait(&self, filter: &ListFilter) {
        let d = self.state.borrow().unfiltered_list_delay;
        if filter == &ListFilter::default() && !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }

    pub fn set_health(&self, health: RuntimeHealth) {
        self.state.borrow_mut().health = health;
    }

    // ----- inspection ------------------------------------------------------------------

    pub fn calls(&self) -> Vec<Call> {
        self.state.borrow().calls.clone()
    }

    /// Every pull so far: the image and the username of the credentials sent with it.
    pub fn pull_auths(&self) -> Vec<(String, Option<String>)> {
        self.state.borrow().pull_auths.clone()
    }

    /// The calls so far, clearing the log.
    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut self.state.borrow_mut().calls)
    }

    /// The state-changing calls so far, clearing the log.
    pub fn take_mutations(&self) -> Vec<Call> {
        self.take_calls()
            .into_iter()
            .filter(Call::is_mutation)
            .collect()
    }

    pub fn sandbox_config(&self, id: &str) -> Option<SandboxConfig> {
        self.state
            .borrow()
            .sandboxes
            .get(id)
            .map(|s| s.config.clone())
    }

    pub fn container_config(&self, id: &str) -> Option<ContainerConfig> {
        self.state
            .borrow()
            .containers
            .get(id)
            .map(|c| c.config.clone())
    }

    /// Full status of every sandbox, oldest first.
    pub fn sandboxes(&self) -> Vec<Sandbox> {
        let mut v: Vec<Sandbox> = self
            .state
            .borrow()
            .sandboxes
            .values()
            .map(|s| s.info.clone())
            .collect();
        v.sort_by_key(|s| s.created_at);
        v
    }

    /// Full status of every container, oldest first.
    pub fn containers(&self) -> Vec<ContainerInfo> {
        let mut v: Vec<ContainerInfo> = self
            .state
            .borrow()
            .containers
            .values()
            .map(|c| c.info.clone())
            .collect();
        v.sort_by_key(|c| c.created_at);
        v
    }

    /// What the stats calls report for a container (by id or name): cumulative CPU time
    /// and working set.
    pub fn set_usage(&self, id_or_name: &str, cpu_core_nanos: u64, working_set_bytes: u64) {
        self.state
            .borrow_mut()
            .usage
            .insert(id_or_name.to_string(), (cpu_core_nanos, working_set_bytes));
    }

    /// Whether `list_pod_sandbox_stats` answers (off: `Unimplemented`, the fallback path).
    pub fn serve_pod_stats(&self, on: bool) {
        self.state.borrow_mut().serve_pod_stats = on;
    }

    /// IDs of running containers with this name.
    pub fn running(&self, name: &str) -> Vec<String> {
        self.containers()
            .into_iter()
            .filter(|c| c.name == name && c.state == ContainerState::Running)
            .map(|c| c.id)
            .collect()
    }

    // ----- internals -------------------------------------------------------------------

    /// Record the call and return an injected error, if any.
    fn enter(&self, method: Method, call: Call) -> Result<(), CriError> {
        let mut s = self.state.borrow_mut();
        s.calls.push(call);
        if let Some(err) = s.fail_once.get_mut(&method).and_then(VecDeque::pop_front) {
            return Err(err);
        }
        match s.fail_always.get(&method) {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }
}

impl State {
    fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }

    /// Sends one event to every open stream, with the sandbox and its containers as they
    /// are now (containerd: `generateAndSendContainerEvent`).
    fn emit(&mut self, container_id: &str, kind: ContainerEventKind, sandbox_id: &str) {
        self.event_streams.retain(|tx| !tx.is_closed());
        if self.event_streams.is_empty() {
            return;
        }
        let sandbox = self.sandboxes.get(sandbox_id).map(|sb| {
            let mut info = sb.info.clone();
            if info.state != SandboxState::Ready {
                info.ip = None;
            }
            info
        });
        let event = ContainerEvent {
            container_id: container_id.to_string(),
            kind,
            created_at: (self.now)(),
            sandbox,
            containers: self
                .containers
                .values()
                .filter(|c| c.info.sandbox_id == sandbox_id)
                .map(|c| c.info.clone())
                .collect(),
        };
        for tx in &self.event_streams {
            let _ = tx.send(Ok(event.clone()));
        }
    }

    /// Strictly increasing creation stamps, so "newest first" is never a tie.
    fn created_now(&mut self) -> UnixNanos {
        let now = (self.now)().max(self.last_created + 1);
        self.last_created = now;
        now
    }
}

/// Running or Created --exit--> Exited; whether it changed.
fn exit(c: &mut ContainerInfo, code: i32, now: UnixNanos) -> bool {
    if matches!(c.state, ContainerState::Running | ContainerState::Created) {
        c.state = ContainerState::Exited;
        c.exit_code = code;
        c.finished_at = now;
        c.reason = if code == 0 { "Completed" } else { "Error" }.into();
        true
    } else {
        false
    }
}

impl State {
    /// `ContainerStats` of every container matching `filter`, stamped now; as containerd
    /// 1.6 does, exited containers are listed without figures.
    fn container_stats(&self, filter: &ListFilter) -> Vec<crate::runtime::ContainerStats> {
        let now = (self.now)();
        self.containers
            .values()
            .filter(|c| matches_labels(&filter.labels, &c.info.labels))
            .filter(|c| {
                filter
                    .sandbox_id
                    .as_ref()
                    .is_none_or(|id| *id == c.info.sandbox_id)
            })
            .map(|c| {
                let (cpu, ws) = self
                    .usage
                    .get(&c.info.id)
                    .or_else(|| self.usage.get(&c.info.name))
                    .copied()
                    .unwrap_or_default();
                let running = c.info.state == ContainerState::Running;
                crate::runtime::ContainerStats {
                    id: c.info.id.clone(),
                    name: c.info.name.clone(),
                    attempt: c.info.attempt,
                    labels: c.info.labels.clone(),
                    cpu: running.then_some(crate::runtime::CpuUsage {
                        timestamp: now,
                        usage_core_nano_seconds: Some(cpu),
                        usage_nano_cores: None,
                    }),
                    memory: running.then_some(crate::runtime::MemoryUsage {
                        timestamp: now,
                        working_set_bytes: Some(ws),
                        usage_bytes: Some(ws),
                        ..Default::default()
                    }),
                }
            })
            .collect()
    }
}

fn fnv(s: &str) -> u64 {
    let mut h = crate::runtime::labels::Fnv1a::new();
    h.write(s.as_bytes());
    h.finish()
}

fn matches_labels(want: &BTreeMap<String, String>, have: &BTreeMap<String, String>) -> bool {
    want.iter().all(|(k, v)| have.get(k) == Some(v))
}

/// What a CRI list call returns: no times beyond creation, no exit details.
fn list_view(c: &ContainerInfo) -> ContainerInfo {
    ContainerInfo {
        started_at: 0,
        finished_at: 0,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        log_path: String::new(),
        ..c.clone()
    }
}

impl Runtime for FakeRuntime {
    async fn version(&self) -> Result<RuntimeVersion, CriError> {
        self.enter(Method::Version, Call::Version)?;
        Ok(RuntimeVersion {
            runtime_name: "fake".into(),
            runtime_version: "0.0.0".into(),
            runtime_api_version: "v1".into(),
        })
    }

    async fn status(&self) -> Result<RuntimeHealth, CriError> {
        self.enter(Method::Status, Call::Status)?;
        Ok(self.state.borrow().health.clone())
    }

    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, CriError> {
        self.enter(
            Method::RunPodSandbox,
            Call::RunPodSandbox {
                name: config.name.clone(),
                attempt: config.attempt,
            },
        )?;
        let mut s = self.state.borrow_mut();
        let id = s.new_id("s");
        let created_at = s.created_now();
        let host = config.namespace_options.network == NamespaceMode::Node;
        let ip = if host {
            None
        } else {
            match &s.sandbox_ip {
                Some(ip) if ip.is_empty() => None,
                Some(ip) => Some(ip.clone()),
                None => {
                    let n = s.next_ip;
                    s.next_ip = s.next_ip.wrapping_add(1).max(2);
                    Some(format!("10.88.0.{n}"))
                }
            }
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
            network: Some(config.namespace_options.network),
        };
        s.sandboxes.insert(
            id.clone(),
            FakeSandbox {
                info,
                config: config.clone(),
            },
        );
        s.emit(&id, ContainerEventKind::Created, &id);
        s.emit(&id, ContainerEventKind::Started, &id);
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        self.enter(Method::StopPodSandbox, Call::StopPodSandbox(id.into()))?;
        let mut s = self.state.borrow_mut();
        let now = (s.now)();
        let exit_code = s.stop_exit_code;
        let was_ready = match s.sandboxes.get_mut(id) {
            Some(sb) => std::mem::replace(&mut sb.info.state, SandboxState::NotReady),
            None => return Err(not_found(Method::StopPodSandbox, id)),
        } == SandboxState::Ready;
        // containerd stops the sandbox's containers first
        let mut stopped = Vec::new();
        for c in s
            .containers
            .values_mut()
            .filter(|c| c.info.sandbox_id == id)
        {
            if exit(&mut c.info, exit_code, now) {
                stopped.push(c.info.id.clone());
            }
        }
        for c in stopped {
            s.emit(&c, ContainerEventKind::Stopped, id);
        }
        if was_ready {
            s.emit(id, ContainerEventKind::Stopped, id);
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        self.enter(Method::RemovePodSandbox, Call::RemovePodSandbox(id.into()))?;
        let mut s = self.state.borrow_mut();
        if !s.sandboxes.contains_key(id) {
            return Err(not_found(Method::RemovePodSandbox, id));
        }
        let gone: Vec<String> = s
            .containers
            .values()
            .filter(|c| c.info.sandbox_id == id)
            .map(|c| c.info.id.clone())
            .collect();
        for c in gone {
            s.containers.remove(&c);
            s.emit(&c, ContainerEventKind::Deleted, id);
        }
        s.sandboxes.remove(id);
        s.emit(id, ContainerEventKind::Deleted, id);
        Ok(())
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<Sandbox, CriError> {
        self.enter(Method::PodSandboxStatus, Call::PodSandboxStatus(id.into()))?;
        let s = self.state.borrow();
        let sb = s
            .sandboxes
            .get(id)
            .ok_or_else(|| not_found(Method::PodSandboxStatus, id))?;
        let mut info = sb.info.clone();
        if info.state != SandboxState::Ready {
            info.ip = None; // a stopped sandbox has no network
        }
        Ok(info)
    }

    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> Result<Vec<Sandbox>, CriError> {
        self.enter(Method::ListPodSandboxes, Call::ListPodSandboxes)?;
        if filter == &ListFilter::default() {
            self.state.borrow_mut().relists += 1;
        }
        self.unfiltered_list_wait(filter).await;
        let s = self.state.borrow();
        Ok(s.sandboxes
            .values()
            .filter(|sb| matches_labels(&filter.labels, &sb.info.labels))
            .filter(|sb| {
                filter
                    .sandbox_id
                    .as_ref()
                    .is_none_or(|id| *id == sb.info.id)
            })
            .map(|sb| Sandbox {
                ip: None,
                network: None,
                ..sb.info.clone()
            })
            .collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> Result<String, CriError> {
        self.enter(
            Method::CreateContainer,
            Call::CreateContainer {
                sandbox_id: sandbox_id.into(),
                name: config.name.clone(),
                attempt: config.attempt,
            },
        )?;
        let mut s = self.state.borrow_mut();
        match s.sandboxes.get(sandbox_id) {
            Some(sb) if sb.info.state == SandboxState::Ready => {}
            Some(_) => {
                return Err(FakeRuntime::rpc_error(
                    Method::CreateContainer,
                    "sandbox is not ready",
                ));
            }
            None => return Err(not_found(Method::CreateContainer, sandbox_id)),
        }
        let image = normalize_image(&config.image);
        let Some(img) = s.images.get(&image) else {
            return Err(FakeRuntime::rpc_error(
                Method::CreateContainer,
                &format!("failed to get image {image}: not found"),
            ));
        };
        let image_ref = img.id.clone();
        let id = s.new_id("c");
        let created_at = s.created_now();
        let info = ContainerInfo::created(
            id.clone(),
            sandbox_id.into(),
            config,
            image_ref,
            created_at,
            // As containerd reports it: the sandbox's log directory joined with the path.
            if sandbox.log_directory.is_empty() || config.log_path.is_empty() {
                config.log_path.clone()
            } else {
                std::path::Path::new(&sandbox.log_directory)
                    .join(&config.log_path)
                    .to_string_lossy()
                    .into_owned()
            },
        );
        s.containers.insert(
            id.clone(),
            FakeContainer {
                info,
                config: config.clone(),
            },
        );
        s.emit(&id, ContainerEventKind::Created, sandbox_id);
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> Result<(), CriError> {
        self.enter(Method::StartContainer, Call::StartContainer(id.into()))?;
        let mut s = self.state.borrow_mut();
        let now = (s.now)();
        let c = s
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found(Method::StartContainer, id))?;
        if c.info.state != ContainerState::Created {
            return Err(FakeRuntime::rpc_error(
                Method::StartContainer,
                "container is not in created state",
            ));
        }
        c.info.state = ContainerState::Running;
        c.info.started_at = now;
        let sandbox_id = c.info.sandbox_id.clone();
        s.emit(id, ContainerEventKind::Started, &sandbox_id);
        Ok(())
    }

    async fn stop_container(&self, id: &str, timeout: i64) -> Result<(), CriError> {
        self.enter(
            Method::StopContainer,
            Call::StopContainer {
                id: id.into(),
                timeout,
            },
        )?;
        if !self.state.borrow().containers.contains_key(id) {
            return Err(not_found(Method::StopContainer, id));
        }
        // As a runtime does: SIGTERM, and SIGKILL (exit 137) once `timeout` seconds passed.
        let (delay, code) = {
            let s = self.state.borrow();
            let deadline = Duration::from_secs(timeout.max(0).unsigned_abs());
            if s.stop_delay > deadline {
                (deadline, 137)
            } else {
                (s.stop_delay, s.stop_exit_code)
            }
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut s = self.state.borrow_mut();
        let now = (s.now)();
        if let Some(c) = s.containers.get_mut(id) {
            if exit(&mut c.info, code, now) {
                let sandbox_id = c.info.sandbox_id.clone();
                s.emit(id, ContainerEventKind::Stopped, &sandbox_id);
            }
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<(), CriError> {
        self.enter(Method::RemoveContainer, Call::RemoveContainer(id.into()))?;
        let mut s = self.state.borrow_mut();
        match s.containers.remove(id) {
            Some(c) => {
                s.emit(id, ContainerEventKind::Deleted, &c.info.sandbox_id);
                Ok(())
            }
            None => Err(not_found(Method::RemoveContainer, id)),
        }
    }

    async fn list_containers(&self, filter: &ListFilter) -> Result<Vec<ContainerInfo>, CriError> {
        self.enter(Method::ListContainers, Call::ListContainers)?;
        self.unfiltered_list_wait(filter).await;
        let s = self.state.borrow();
        Ok(s.containers
            .values()
            .filter(|c| matches_labels(&filter.labels, &c.info.labels))
            .filter(|c| {
                filter
                    .sandbox_id
                    .as_ref()
                    .is_none_or(|id| *id == c.info.sandbox_id)
            })
            .map(|c| list_view(&c.info))
            .collect())
    }

    async fn container_status(&self, id: &str) -> Result<ContainerInfo, CriError> {
        self.enter(Method::ContainerStatus, Call::ContainerStatus(id.into()))?;
        self.state
            .borrow()
            .containers
            .get(id)
            .map(|c| c.info.clone())
            .ok_or_else(|| not_found(Method::ContainerStatus, id))
    }

    async fn container_events(&self) -> Result<ContainerEvents, CriError> {
        use futures_util::StreamExt as _;
        self.enter(Method::GetContainerEvents, Call::GetContainerEvents)?;
        let mut s = self.state.borrow_mut();
        if !s.serve_events {
            return Err(CriError::Unimplemented {
                method: Method::GetContainerEvents.name(),
                message: "unknown method GetContainerEvents for service runtime.v1.RuntimeService"
                    .into(),
            });
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        s.event_streams.push(tx);
        Ok(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
        .boxed_local())
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, CriError> {
        self.enter(Method::ExecSync, Call::ExecSync(id.into()))?;
        let answer = {
            let mut s = self.state.borrow_mut();
            let Some(info) = s.containers.get(id).map(|c| c.info.clone()) else {
                return Err(not_found(Method::ExecSync, id));
            };
            if info.state != ContainerState::Running {
                return Err(CriError::Rpc {
                    method: Method::ExecSync.name(),
                    code: "Unknown".into(),
                    message: format!("container {id} is not running"),
                });
            }
            s.exec_commands.push((info.name.clone(), cmd.to_vec()));
            s.exec_results
                .get(id)
                .or_else(|| s.exec_results.get(&info.name))
                .cloned()
                .unwrap_or((0, String::new()))
        };
        if answer.0 == -1 {
            tokio::time::sleep(timeout).await;
            return Err(CriError::Timeout {
                method: Method::ExecSync.name(),
                timeout,
            });
        }
        Ok(ExecResult {
            exit_code: answer.0,
            stdout: answer.1.into_bytes(),
            stderr: Vec::new(),
        })
    }

    async fn exec(
        &self,
        id: &str,
        _cmd: &[String],
        _streams: StreamOptions,
    ) -> Result<String, CriError> {
        self.stream("Exec", id, self.container_running(id))
    }

    async fn attach(&self, id: &str, _streams: StreamOptions) -> Result<String, CriError> {
        self.stream("Attach", id, self.container_running(id))
    }

    async fn port_forward(&self, sandbox_id: &str, _ports: &[i32]) -> Result<String, CriError> {
        let ready = self
            .state
            .borrow()
            .sandboxes
            .get(sandbox_id)
            .is_some_and(|s| s.info.state == SandboxState::Ready);
        self.stream("PortForward", sandbox_id, ready)
    }

    async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, CriError> {
        self.enter(Method::ImageStatus, Call::ImageStatus(image.into()))?;
        Ok(self
            .state
            .borrow()
            .images
            .get(&normalize_image(image))
            .cloned())
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&super::credentials::AuthConfig>,
        _sandbox: &SandboxConfig,
    ) -> Result<String, CriError> {
        self.enter(Method::PullImage, Call::PullImage(image.into()))?;
        self.state
            .borrow_mut()
            .pull_auths
            .push((image.to_string(), auth.map(|a| a.username.clone())));
        self.add_image(image);
        Ok(self
            .state
            .borrow()
            .images
            .get(&normalize_image(image))
            .map(|i| i.id.clone())
            .unwrap_or_default())
    }

    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<crate::runtime::ContainerStats>, CriError> {
        self.enter(Method::ListContainerStats, Call::ListContainerStats)?;
        Ok(self.state.borrow().container_stats(filter))
    }

    /// Each ready sandbox with the sum of its running containers' usage (what a runtime
    /// reads from the pod cgroup).
    async fn list_pod_sandbox_stats(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<crate::runtime::PodSandboxStats>, CriError> {
        self.enter(Method::ListPodSandboxStats, Call::ListPodSandboxStats)?;
        let s = self.state.borrow();
        if !s.serve_pod_stats {
            return Err(CriError::Unimplemented {
                method: Method::ListPodSandboxStats.name(),
                message: "not implemented".into(),
            });
        }
        let now = (s.now)();
        Ok(s.sandboxes
            .values()
            .filter(|sb| sb.info.state == SandboxState::Ready)
            .filter(|sb| matches_labels(&filter.labels, &sb.info.labels))
            .filter(|sb| {
                filter
                    .sandbox_id
                    .as_ref()
                    .is_none_or(|id| *id == sb.info.id)
            })
            .map(|sb| {
                let containers = s.container_stats(&ListFilter {
                    labels: Default::default(),
                    sandbox_id: Some(sb.info.id.clone()),
                });
                let sum = |f: fn(&crate::runtime::ContainerStats) -> Option<u64>| {
                    containers.iter().filter_map(f).sum::<u64>()
                };
                let cpu = sum(|c| c.cpu.and_then(|u| u.usage_core_nano_seconds));
                let ws = sum(|c| c.memory.and_then(|m| m.working_set_bytes));
                crate::runtime::PodSandboxStats {
                    id: sb.info.id.clone(),
                    name: sb.info.name.clone(),
                    namespace: sb.info.namespace.clone(),
                    uid: sb.info.uid.clone(),
                    labels: sb.info.labels.clone(),
                    cpu: Some(crate::runtime::CpuUsage {
                        timestamp: now,
                        usage_core_nano_seconds: Some(cpu),
                        usage_nano_cores: None,
                    }),
                    memory: Some(crate::runtime::MemoryUsage {
                        timestamp: now,
                        working_set_bytes: Some(ws),
                        usage_bytes: Some(ws),
                        ..Default::default()
                    }),
                    containers,
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::TokioClock;

    #[tokio::test(start_paused = true)]
    async fn sandbox_and_container_lifecycle() {
        let rt = FakeRuntime::new(TokioClock::new(1_000));
        let sb = rt
            .run_pod_sandbox(&SandboxConfig {
                name: "p".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let cfg = ContainerConfig {
            name: "c".into(),
            image: "busybox".into(),
            ..Default::default()
        };
        // image missing → create fails like containerd
        assert!(
            rt.create_container(&sb, &cfg, &SandboxConfig::default())
                .await
                .is_err()
        );
        rt.add_image("busybox:latest");
        let c = rt
            .create_container(&sb, &cfg, &SandboxConfig::default())
            .await
            .unwrap();
        rt.start_container(&c).await.unwrap();
        assert_eq!(rt.running("c"), vec![c.clone()]);
        let status = rt.pod_sandbox_status(&sb).await.unwrap();
        assert_eq!(status.ip.as_deref(), Some("10.88.0.2"));
        // list hides status-only fields
        let listed = rt.list_pod_sandboxes(&ListFilter::default()).await.unwrap();
        assert_eq!(listed[0].ip, None);
        rt.exit_container(&c, 3);
        let st = rt.container_status(&c).await.unwrap();
        assert_eq!((st.state, st.exit_code), (ContainerState::Exited, 3));
        let listed = rt.list_containers(&ListFilter::default()).await.unwrap();
        assert_eq!(listed[0].exit_code, 0);
        rt.stop_pod_sandbox(&sb).await.unwrap();
        rt.remove_pod_sandbox(&sb).await.unwrap();
        assert!(rt.containers().is_empty());
        assert!(rt.stop_pod_sandbox(&sb).await.unwrap_err().is_not_found());
    }

    #[tokio::test(start_paused = true)]
    async fn injected_errors() {
        let rt = FakeRuntime::new(TokioClock::new(1_000));
        rt.fail_once(
            Method::Version,
            FakeRuntime::rpc_error(Method::Version, "boom"),
        );
        assert!(rt.version().await.is_err());
        assert!(rt.version().await.is_ok());
        rt.fail_always(
            Method::Status,
            FakeRuntime::rpc_error(Method::Status, "down"),
        );
        assert!(rt.status().await.is_err());
        assert!(rt.status().await.is_err());
        rt.clear_failures();
        assert!(rt.status().await.is_ok());
        assert_eq!(
            rt.take_calls(),
            vec![
                Call::Version,
                Call::Version,
                Call::Status,
                Call::Status,
                Call::Status
            ]
        );
    }
}
