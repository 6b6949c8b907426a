//! An in-memory `Runtime` for unit and agent tests: a front over the in-memory containerd
//! ([`crate::cri::fake_containerd`]), called directly, on the caller's (paused) tokio clock.
//!
//! Owns: a log of every call in order and the hooks to steer calls: inject errors per
//! method, delay the relister's unfiltered lists, turn container events and pod stats on.
//! What the runtime *does* — sandboxes, containers, images, IDs, timestamps, events, exec
//! and stats answers — is the model's; see its module doc. This front's own choices: IDs
//! are `s1`, `c2`, … ([`IdStyle::Counter`]), a container dies of SIGTERM (exit 143), and
//! an `ExecSync` result with exit code -1 times out.
//!
//! Container events (`container_events`, evented PLEG) are off by default: the call answers
//! `Unimplemented`, as containerd 1.6 does. [`FakeRuntime::serve_events`] turns them on;
//! [`FakeRuntime::break_event_streams`] ends the open streams with an error.
//! `list_pod_sandbox_stats` answers `Unimplemented` unless [`FakeRuntime::serve_pod_stats`]
//! turned it on.
//!
//! Must never: be used outside tests and test tooling (it is plain, cheap `Rc<RefCell<…>>`
//! state; no borrow is held across an `.await`).

use std::cell::{RefCell, RefMut};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use crate::clock::Clock;
use crate::cri::fake_containerd::{
    ContainerFilter, FakeContainerd, IdStyle, Refusal, SandboxFilter, StreamBroken, Streaming,
};
use crate::cri::{
    ContainerConfig, ContainerEvent, ContainerEvents, ContainerInfo, ContainerState,
    ContainerStats, CriError, ExecResult, ImageFsUsage, ImageInfo, ListFilter, PodSandboxStats,
    Runtime, RuntimeHealth, RuntimeVersion, Sandbox, SandboxConfig, SandboxState, StreamOptions,
};

/// A CRI method, for error injection.
pub use crate::cri::fake_containerd::Method;

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
    ListImages,
    RemoveImage(String),
    ImageFsInfo,
    UpdateContainerResources(String),
    ReopenContainerLog(String),
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
                | Call::ListImages
                | Call::ImageFsInfo
                | Call::ExecSync(_)
                | Call::GetContainerEvents
                | Call::ListContainerStats
                | Call::ListPodSandboxStats
        )
    }
}

struct State {
    model: FakeContainerd,
    calls: Vec<Call>,
    fail_once: HashMap<Method, VecDeque<CriError>>,
    fail_always: HashMap<Method, CriError>,
    /// How long an unfiltered list call (the relister's) takes.
    unfiltered_list_delay: Duration,
    /// How long `StartContainer` takes (the container is Created meanwhile).
    start_delay: Duration,
    /// Whether `container_events` opens a stream (else `Unimplemented`).
    serve_events: bool,
    /// Whether `list_pod_sandbox_stats` answers (else `Unimplemented`).
    serve_pod_stats: bool,
    /// Unfiltered `list_pod_sandboxes` calls (the relister's) so far.
    relists: usize,
    /// The host process standing for a container or sandbox ([`FakeRuntime::set_process`]).
    processes: HashMap<String, u32>,
    /// `Version`'s runtime name and version.
    version: (String, String),
}

/// The in-memory runtime. Clones share state.
#[derive(Clone)]
pub struct FakeRuntime {
    state: Rc<RefCell<State>>,
}

impl std::fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.borrow();
        f.debug_struct("FakeRuntime")
            .field("model", &s.model)
            .field("calls", &s.calls.len())
            .finish()
    }
}

/// The model's refusal as the CRI client reports it.
fn refused(method: &'static str, r: Refusal) -> CriError {
    crate::cri::client::map_status(
        method,
        Duration::ZERO,
        &tonic::Status::new(r.code, r.message),
    )
}

impl FakeRuntime {
    /// A fake whose timestamps come from `clock` (use `TokioClock` with paused time).
    pub fn new(clock: impl Clock + Send + Sync) -> Self {
        let mut model = FakeContainerd::new(clock, IdStyle::Counter);
        model.set_term_exit_code(143);
        FakeRuntime {
            state: Rc::new(RefCell::new(State {
                model,
                calls: Vec::new(),
                fail_once: HashMap::new(),
                fail_always: HashMap::new(),
                unfiltered_list_delay: Duration::ZERO,
                start_delay: Duration::ZERO,
                serve_events: false,
                serve_pod_stats: false,
                relists: 0,
                processes: HashMap::new(),
                version: ("fake".into(), "0.0.0".into()),
            })),
        }
    }

    fn model(&self) -> RefMut<'_, FakeContainerd> {
        RefMut::map(self.state.borrow_mut(), |s| &mut s.model)
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

    /// What `Version` answers: the runtime's name and version (default `fake` `0.0.0`).
    pub fn set_version(&self, name: &str, version: &str) {
        self.state.borrow_mut().version = (name.into(), version.into());
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
        self.model().add_image(image);
    }

    /// Sets a present image's `USER` (false when absent).
    pub fn set_image_user(&self, image: &str, user: crate::cri::ImageUser) -> bool {
        self.model().set_image_user(image, user)
    }

    /// Sets a present image's size and pin (false when absent).
    pub fn set_image(&self, image: &str, size: u64, pinned: bool) -> bool {
        self.model().set_image(image, size, pinned)
    }

    /// Every image present.
    pub fn images(&self) -> Vec<ImageInfo> {
        self.model().images().cloned().collect()
    }

    /// Every accepted `ReopenContainerLog`, by container id.
    pub fn log_reopens(&self) -> Vec<String> {
        self.model().log_reopens().to_vec()
    }

    pub fn has_image(&self, image: &str) -> bool {
        self.model().resolve_image(image).is_some()
    }

    /// The IP new pod-network sandboxes report (`""` = none). Default: 10.88.0.N.
    pub fn set_sandbox_ip(&self, ip: &str) {
        self.model().set_sandbox_ip(Some(ip.to_string()));
    }

    /// Change an existing sandbox's state (e.g. the pause process died).
    pub fn set_sandbox_state(&self, id: &str, state: SandboxState) {
        self.model().set_sandbox_state(id, state);
    }

    /// What `ExecSync` answers in a container, by container ID or name (default: exit 0);
    /// an exit code of -1 makes the call time out after the requested timeout.
    pub fn set_exec_result(&self, id_or_name: &str, exit_code: i32, output: &str) {
        self.model().set_exec_result(
            id_or_name,
            ExecResult {
                exit_code,
                stdout: output.as_bytes().to_vec(),
                stderr: Vec::new(),
            },
        );
    }

    /// What `exec`, `attach` and `port_forward` answer from now on (the default:
    /// `Unimplemented`).
    pub fn set_stream_url(&self, url: &str) {
        self.model()
            .set_streaming(Streaming::Fixed(url.to_string()));
    }

    /// Every `exec`, `attach` and `port_forward` so far: (CRI method, container or sandbox).
    pub fn stream_calls(&self) -> Vec<(&'static str, String)> {
        self.model().stream_calls().to_vec()
    }

    /// Every `ExecSync` so far: (container name, command).
    pub fn exec_commands(&self) -> Vec<(String, Vec<String>)> {
        self.model().exec_commands().to_vec()
    }

    /// Make a running container exit with `code` now (reason `Completed` / `Error`);
    /// whether there was one.
    pub fn exit_container(&self, id: &str, code: i32) -> bool {
        self.model().exit_running(id, code, None)
    }

    /// A real process (a child of the test) stands for container or sandbox `id`:
    /// `exit_handle` opens it while the model says `id` runs, so the test ends it to make
    /// the "container" exit as the exit watch sees it.
    pub fn set_process(&self, id: &str, pid: u32) {
        self.state
            .borrow_mut()
            .processes
            .insert(id.to_string(), pid);
    }

    /// `true`: `container_events` opens a stream (a runtime with evented PLEG support);
    /// `false` (the default): it answers `Unimplemented`, as containerd 1.6 does.
    pub fn serve_events(&self, on: bool) {
        self.state.borrow_mut().serve_events = on;
    }

    /// Ends every open event stream with an error (a stream that broke).
    pub fn break_event_streams(&self) {
        self.model().break_event_streams();
    }

    /// How many event streams are open.
    pub fn event_streams(&self) -> usize {
        self.model().event_streams()
    }

    /// How many unfiltered sandbox lists (relists) were made so far.
    pub fn relists(&self) -> usize {
        self.state.borrow().relists
    }

    /// How long a container takes to exit after SIGTERM; a `StopContainer` timeout shorter
    /// than that kills it at the timeout (exit 137).
    pub fn set_stop_delay(&self, d: Duration) {
        self.model().set_stop_delay(d);
    }

    /// How long `StartContainer` takes before the container runs (containerd's ~60 ms, or
    /// seconds on a loaded board): a relist meanwhile lists it Created.
    pub fn set_start_delay(&self, d: Duration) {
        self.state.borrow_mut().start_delay = d;
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
        *self.model().health_mut() = health;
    }

    /// What the stats calls report for a container (by id or name): cumulative CPU time
    /// and working set.
    pub fn set_usage(&self, id_or_name: &str, cpu_core_nanos: u64, working_set_bytes: u64) {
        self.model()
            .set_usage(id_or_name, cpu_core_nanos, working_set_bytes);
    }

    /// Whether `list_pod_sandbox_stats` answers (off: `Unimplemented`, the fallback path).
    pub fn serve_pod_stats(&self, on: bool) {
        self.state.borrow_mut().serve_pod_stats = on;
    }

    // ----- inspection ------------------------------------------------------------------

    pub fn calls(&self) -> Vec<Call> {
        self.state.borrow().calls.clone()
    }

    /// Every pull so far: the image and the username of the credentials sent with it.
    pub fn pull_auths(&self) -> Vec<(String, Option<String>)> {
        self.model().pull_auths().to_vec()
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
        self.model().sandbox(id).map(|s| s.config.clone())
    }

    pub fn container_config(&self, id: &str) -> Option<ContainerConfig> {
        self.model().container(id).map(|c| c.config.clone())
    }

    /// Full status of every sandbox, oldest first.
    pub fn sandboxes(&self) -> Vec<Sandbox> {
        let mut v: Vec<Sandbox> = self.model().sandboxes().map(|s| s.info.clone()).collect();
        v.sort_by_key(|s| s.created_at);
        v
    }

    /// Full status of every container, oldest first.
    pub fn containers(&self) -> Vec<ContainerInfo> {
        let mut v: Vec<ContainerInfo> = self.model().containers().map(|c| c.info.clone()).collect();
        v.sort_by_key(|c| c.created_at);
        v
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

    /// Records and gates the call, then asks the model.
    fn call<T>(
        &self,
        method: Method,
        call: Call,
        op: impl FnOnce(&mut FakeContainerd) -> Result<T, Refusal>,
    ) -> Result<T, CriError> {
        self.enter(method, call)?;
        op(&mut self.model()).map_err(|r| refused(method.name(), r))
    }

    fn stream(&self, method: &'static str, id: &str) -> Result<String, CriError> {
        self.model()
            .stream_url(method, id)
            .map_err(|r| refused(method, r))
    }
}

fn sandbox_filter(filter: &ListFilter) -> SandboxFilter {
    SandboxFilter {
        id: filter.sandbox_id.clone().unwrap_or_default(),
        state: None,
        labels: filter.labels.clone(),
    }
}

fn container_filter(filter: &ListFilter) -> ContainerFilter {
    ContainerFilter {
        id: String::new(),
        sandbox_id: filter.sandbox_id.clone().unwrap_or_default(),
        state: None,
        labels: filter.labels.clone(),
    }
}

fn unimplemented(method: Method) -> CriError {
    CriError::Unimplemented {
        method: method.name(),
        message: format!(
            "unknown method {} for service runtime.v1.RuntimeService",
            method.name()
        ),
    }
}

impl Runtime for FakeRuntime {
    async fn version(&self) -> Result<RuntimeVersion, CriError> {
        self.enter(Method::Version, Call::Version)?;
        let (runtime_name, runtime_version) = self.state.borrow().version.clone();
        Ok(RuntimeVersion {
            runtime_name,
            runtime_version,
            runtime_api_version: "v1".into(),
        })
    }

    async fn status(&self) -> Result<RuntimeHealth, CriError> {
        self.call(Method::Status, Call::Status, |m| Ok(m.health().clone()))
    }

    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, CriError> {
        let call = Call::RunPodSandbox {
            name: config.name.clone(),
            attempt: config.attempt,
        };
        self.call(Method::RunPodSandbox, call, |m| {
            m.run_pod_sandbox(config.clone())
        })
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        let call = Call::StopPodSandbox(id.into());
        self.call(Method::StopPodSandbox, call, |m| m.stop_pod_sandbox(id))
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        let call = Call::RemovePodSandbox(id.into());
        self.call(Method::RemovePodSandbox, call, |m| m.remove_pod_sandbox(id))
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<Sandbox, CriError> {
        let call = Call::PodSandboxStatus(id.into());
        self.call(Method::PodSandboxStatus, call, |m| {
            m.pod_sandbox_status(id).map(|s| s.info)
        })
    }

    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> Result<Vec<Sandbox>, CriError> {
        self.enter(Method::ListPodSandbox, Call::ListPodSandboxes)?;
        if filter == &ListFilter::default() {
            self.state.borrow_mut().relists += 1;
        }
        self.unfiltered_list_wait(filter).await;
        Ok(self.model().list_pod_sandboxes(&sandbox_filter(filter)))
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        _sandbox: &SandboxConfig,
    ) -> Result<String, CriError> {
        let call = Call::CreateContainer {
            sandbox_id: sandbox_id.into(),
            name: config.name.clone(),
            attempt: config.attempt,
        };
        self.call(Method::CreateContainer, call, |m| {
            m.create_container(sandbox_id, config.clone())
        })
    }

    async fn start_container(&self, id: &str) -> Result<(), CriError> {
        let d = self.state.borrow().start_delay;
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
        let call = Call::StartContainer(id.into());
        self.call(Method::StartContainer, call, |m| m.start_container(id))
    }

    async fn stop_container(&self, id: &str, timeout: i64) -> Result<(), CriError> {
        let call = Call::StopContainer {
            id: id.into(),
            timeout,
        };
        let wait = self.call(Method::StopContainer, call, |m| {
            m.stop_container(id, timeout)
        })?;
        if let Some((delay, code)) = wait {
            tokio::time::sleep(delay).await;
            self.model().exit_running(id, code, None);
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<(), CriError> {
        let call = Call::RemoveContainer(id.into());
        self.call(Method::RemoveContainer, call, |m| m.remove_container(id))
    }

    async fn list_containers(&self, filter: &ListFilter) -> Result<Vec<ContainerInfo>, CriError> {
        self.enter(Method::ListContainers, Call::ListContainers)?;
        self.unfiltered_list_wait(filter).await;
        Ok(self.model().list_containers(&container_filter(filter)))
    }

    async fn container_status(&self, id: &str) -> Result<ContainerInfo, CriError> {
        let call = Call::ContainerStatus(id.into());
        self.call(Method::ContainerStatus, call, |m| {
            m.container_status(id).map(|c| c.info.clone())
        })
    }

    async fn exit_handle(
        &self,
        id: &str,
        sandbox: bool,
    ) -> Result<crate::cri::process::ExitHandle, CriError> {
        // Read from the model without a recorded call: tests count the status reads the
        // syncs make, and the exit watch is not one of them.
        let running = if sandbox {
            self.model()
                .sandbox(id)
                .is_some_and(|s| s.info.state == SandboxState::Ready)
        } else {
            self.model()
                .container(id)
                .is_some_and(|c| c.info.state == ContainerState::Running)
        };
        let pid = self.state.borrow().processes.get(id).copied();
        Ok(match pid {
            Some(pid) if running => crate::cri::process::open(pid, None),
            _ => crate::cri::process::ExitHandle::Unknown,
        })
    }

    async fn container_events(&self) -> Result<ContainerEvents, CriError> {
        use futures_util::StreamExt as _;
        let method = Method::GetContainerEvents;
        self.enter(method, Call::GetContainerEvents)?;
        if !self.state.borrow().serve_events {
            return Err(unimplemented(method));
        }
        let rx = self.model().subscribe();
        let events = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        Ok(events
            .map(move |item| match item {
                Ok(e) => Ok(ContainerEvent {
                    container_id: e.container_id,
                    kind: e.kind,
                    created_at: e.created_at,
                    sandbox: e.sandbox.map(|s| s.info),
                    containers: e.containers.into_iter().map(|c| c.info).collect(),
                }),
                Err(StreamBroken) => Err(CriError::Rpc {
                    method: method.name(),
                    code: "Internal".into(),
                    message: "the event stream broke".into(),
                }),
            })
            .boxed_local())
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, CriError> {
        let call = Call::ExecSync(id.into());
        let result = self.call(Method::ExecSync, call, |m| m.exec_sync(id, cmd))?;
        if result.exit_code == -1 {
            tokio::time::sleep(timeout).await;
            return Err(CriError::Timeout {
                method: Method::ExecSync.name(),
                timeout,
            });
        }
        Ok(result)
    }

    async fn exec(
        &self,
        id: &str,
        _cmd: &[String],
        _streams: StreamOptions,
    ) -> Result<String, CriError> {
        self.stream("Exec", id)
    }

    async fn attach(&self, id: &str, _streams: StreamOptions) -> Result<String, CriError> {
        self.stream("Attach", id)
    }

    async fn port_forward(&self, sandbox_id: &str, _ports: &[i32]) -> Result<String, CriError> {
        self.stream("PortForward", sandbox_id)
    }

    async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, CriError> {
        let call = Call::ImageStatus(image.into());
        self.call(Method::ImageStatus, call, |m| {
            Ok(m.image_status(image).cloned())
        })
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&crate::cri::credentials::AuthConfig>,
        _sandbox: &SandboxConfig,
    ) -> Result<String, CriError> {
        let call = Call::PullImage(image.into());
        self.call(Method::PullImage, call, |m| {
            m.pull_image(image, auth.map(|a| a.username.clone()))
        })
    }

    async fn list_images(&self) -> Result<Vec<ImageInfo>, CriError> {
        self.call(Method::ListImages, Call::ListImages, |m| {
            Ok(m.images().cloned().collect())
        })
    }

    async fn remove_image(&self, image: &str) -> Result<(), CriError> {
        self.call(Method::RemoveImage, Call::RemoveImage(image.into()), |m| {
            m.remove_image(image);
            Ok(())
        })
    }

    async fn image_fs_info(&self) -> Result<Vec<ImageFsUsage>, CriError> {
        self.call(Method::ImageFsInfo, Call::ImageFsInfo, |m| {
            Ok(vec![m.image_fs_info()])
        })
    }

    async fn update_container_resources(
        &self,
        id: &str,
        resources: &crate::cri::Resources,
    ) -> Result<(), CriError> {
        let call = Call::UpdateContainerResources(id.into());
        self.call(Method::UpdateContainerResources, call, |m| {
            m.update_container_resources(id, resources)
        })
    }

    async fn reopen_container_log(&self, id: &str) -> Result<(), CriError> {
        let call = Call::ReopenContainerLog(id.into());
        self.call(Method::ReopenContainerLog, call, |m| {
            m.reopen_container_log(id)
        })
    }

    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<ContainerStats>, CriError> {
        self.call(Method::ListContainerStats, Call::ListContainerStats, |m| {
            Ok(m.container_stats(&container_filter(filter)))
        })
    }

    async fn list_pod_sandbox_stats(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<PodSandboxStats>, CriError> {
        let method = Method::ListPodSandboxStats;
        self.enter(method, Call::ListPodSandboxStats)?;
        if !self.state.borrow().serve_pod_stats {
            return Err(CriError::Unimplemented {
                method: method.name(),
                message: "not implemented".into(),
            });
        }
        Ok(self.model().pod_sandbox_stats(&sandbox_filter(filter)))
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
