//! A fake CRI runtime: a real tonic gRPC server (CRI v1 `RuntimeService` + `ImageService`)
//! on a unix socket, a thin encoder over the in-memory containerd
//! ([`crate::cri::fake_containerd`]). Feature `fake-cri` only; never in a release build.
//!
//! Owns: the transport — the server task, its socket and connections — the decoding of
//! requests and the encoding of answers, the call log and the transport-level fault
//! injection (errors, latency, delays, hangs, broken event streams, a runtime that dies and
//! comes back). What the runtime does with a call is the model's: see its module doc for
//! the behaviour (sandboxes, containers, images, events, exec, stats). It exists to test
//! [`CriRuntime`] end to end (real encoding, real socket, real deadlines), to inject
//! runtime faults into higher layers, and to run picolet against hundreds of pods without
//! containerd.
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
//! in flight a paused clock auto-advances, and client deadlines would fire spuriously. So
//! the model's clock is the wall clock here, and its IDs look like containerd's (64 hex
//! digits).
//!
//! This front's own choices: a container handles SIGTERM (exits 0 at once) unless it
//! ignores it ([`FakeCriHandle::set_ignore_sigterm`]: killed at the grace timeout, 137);
//! `GetContainerEvents` and `ListPodSandboxStats` are served (inject `Unimplemented` for a
//! containerd 1.6); streaming URLs point at [`STREAM_BASE`]; a sandbox or container without
//! metadata is `InvalidArgument`; `StartContainer` and `ReopenContainerLog` open the
//! container's log file (absolute paths only) as containerd does, so picolet's log manager
//! sees a live file and does not ask again.
//!
//! Every call is first logged ([`FakeCriHandle::calls`]), then waits the configured latency
//! ([`FakeCriHandle::set_latency`]), then applies the first fault injected for its method
//! ([`FakeCriHandle::inject`]) — fail with a status, delay, or never answer — and only then
//! reaches the model. Waits end with `Unavailable` when the server shuts down. The
//! streaming calls (`Exec`, `Attach`, `PortForward`) are neither logged nor faulted.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::codegen::{BoxFuture, Service, http};
use tonic::{Request, Response, Status};

use crate::clock::SystemClock;
use crate::cri::client::{self, CriRuntime, MAX_MESSAGE_SIZE, proto};
use crate::cri::fake_containerd::{
    ContainerFilter, ContainerRec, Event, FakeContainerd, IdStyle, Refusal, SandboxFilter,
    SandboxRec, StreamBroken, Streaming,
};
use crate::cri::{
    ContainerConfig, ContainerEventKind, ContainerInfo, ContainerSecurity, ContainerState,
    ContainerStats, CpuUsage, CriError, DnsConfig, ExecResult, ImageInfo, MemoryUsage, Mount,
    MountPropagation, NamespaceOptions, PodSandboxStats, PortMapping, ProfileKind, Protocol,
    Resources, Sandbox, SandboxConfig, SandboxState, SecurityProfile,
};
use proto::image_service_server::{ImageService, ImageServiceServer};
use proto::runtime_service_server::{RuntimeService, RuntimeServiceServer};

/// gRPC status codes, for [`Fault::Fail`] and [`FakeCriHandle::fail_pulls`].
pub use tonic::Code;

/// The CRI methods the fake serves.
pub use crate::cri::fake_containerd::Method;

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

    /// The model, for the knobs and views below.
    fn with<T>(&self, f: impl FnOnce(&mut FakeContainerd) -> T) -> T {
        f(&mut self.state().model)
    }

    // --- faults and latency -------------------------------------------------------------

    /// Applies `fault` to every call of `method` until [`clear_faults`](Self::clear_faults).
    /// Faults stack per method: the oldest one still active applies.
    pub fn inject(&self, method: Method, fault: Fault) {
        self.state().add_fault(method, fault, None);
    }

    /// Applies `fault` to the next `times` calls of `method` only.
    pub fn inject_times(&self, method: Method, fault: Fault, times: usize) {
        if times > 0 {
            self.state().add_fault(method, fault, Some(times));
        }
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

    /// Whether `StartContainer` and `ReopenContainerLog` open the container's log file, as
    /// containerd does (default on). Off for tests that give log paths they must not write
    /// (e.g. under `/var/log/pods`).
    pub fn set_write_logs(&self, on: bool) {
        self.state().write_logs = on;
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
        self.with(|m| m.health_mut().runtime_ready = ready);
    }

    /// The `NetworkReady` condition reported by `Status` (default true).
    pub fn set_network_ready(&self, ready: bool) {
        self.with(|m| m.health_mut().network_ready = ready);
    }

    // --- images -------------------------------------------------------------------------

    /// Makes `image` present, as `ctr images import` would; returns its id.
    pub fn preload_image(&self, image: &str) -> String {
        self.with(|m| m.add_image(image))
    }

    pub fn images(&self) -> Vec<ImageInfo> {
        self.with(|m| m.images().cloned().collect())
    }

    /// Sets a present image's `USER` (false when absent).
    pub fn set_image_user(&self, image: &str, user: crate::cri::ImageUser) -> bool {
        self.with(|m| m.set_image_user(image, user))
    }

    /// Every accepted `ReopenContainerLog`, by container id.
    pub fn log_reopens(&self) -> Vec<String> {
        self.with(|m| m.log_reopens().to_vec())
    }

    /// Makes every `PullImage` of `image` fail with `code` and `message`.
    pub fn fail_pulls(&self, image: &str, code: Code, message: impl Into<String>) {
        self.with(|m| m.fail_pulls(image, Refusal::new(code, message)));
    }

    /// Lets every image be pulled again.
    pub fn clear_pull_failures(&self) {
        self.with(FakeContainerd::clear_pull_failures);
    }

    /// Every pull so far: the image and the username of the credentials sent with it.
    pub fn pull_auths(&self) -> Vec<(String, Option<String>)> {
        self.with(|m| m.pull_auths().to_vec())
    }

    // --- sandboxes and containers -------------------------------------------------------

    /// Every sandbox, with `ip` and `network` filled, in id order.
    pub fn sandboxes(&self) -> Vec<Sandbox> {
        self.with(|m| m.sandboxes().map(|s| s.info.clone()).collect())
    }

    pub fn sandbox(&self, id: &str) -> Option<Sandbox> {
        self.with(|m| m.sandbox(id).map(|s| s.info.clone()))
    }

    /// The config the sandbox was run with, as the fake decoded it from the wire.
    pub fn sandbox_config(&self, id: &str) -> Option<SandboxConfig> {
        self.with(|m| m.sandbox(id).map(|s| s.config.clone()))
    }

    /// Every container, with status fields filled, in id order.
    pub fn containers(&self) -> Vec<ContainerInfo> {
        self.with(|m| m.containers().map(|c| c.info.clone()).collect())
    }

    pub fn container(&self, id: &str) -> Option<ContainerInfo> {
        self.with(|m| m.container(id).map(|c| c.info.clone()))
    }

    /// The newest container with this (container) name, in any sandbox.
    pub fn find_container(&self, name: &str) -> Option<ContainerInfo> {
        self.with(|m| {
            m.containers()
                .filter(|c| c.info.name == name)
                .max_by_key(|c| c.info.created_at)
                .map(|c| c.info.clone())
        })
    }

    /// The config the container was created with, as the fake decoded it from the wire.
    pub fn container_config(&self, id: &str) -> Option<ContainerConfig> {
        self.with(|m| m.container(id).map(|c| c.config.clone()))
    }

    /// Makes a running container exit with `exit_code` now (reason "Completed" for 0,
    /// "Error" otherwise). Returns false if there is no such running container.
    pub fn exit_container(&self, id: &str, exit_code: i32) -> bool {
        self.with(|m| m.exit_running(id, exit_code, None))
    }

    /// Makes a running container be OOM-killed now: exit code 137, reason "OOMKilled".
    pub fn oom_kill_container(&self, id: &str) -> bool {
        self.with(|m| m.exit_running(id, 137, Some("OOMKilled")))
    }

    /// Ends every open `GetContainerEvents` stream with an `Internal` error (a runtime whose
    /// event stream broke); new streams can be opened at once.
    pub fn break_event_streams(&self) {
        self.with(FakeContainerd::break_event_streams);
    }

    /// How many `GetContainerEvents` streams are open.
    pub fn event_streams(&self) -> usize {
        self.with(FakeContainerd::event_streams)
    }

    /// `key` is a container id or a container name (applies to every container of that
    /// name, present and future). When set, the container ignores SIGTERM: `StopContainer`
    /// waits the full grace period and the container exits 137.
    pub fn set_ignore_sigterm(&self, key: &str, ignore: bool) {
        self.with(|m| m.set_ignore_sigterm(key, ignore));
    }

    /// `key` is a container id or name. `Some(code)`: the container exits with `code` right
    /// after `StartContainer` succeeds (a crashing container). `None` clears it.
    pub fn set_exit_on_start(&self, key: &str, exit_code: Option<i32>) {
        self.with(|m| m.set_exit_on_start(key, exit_code));
    }

    /// `key` is a container id or name: what `ExecSync` answers for it (default: exit 0,
    /// no output). For a slow or hanging exec, inject a fault on [`Method::ExecSync`].
    pub fn set_exec_result(&self, key: &str, result: ExecResult) {
        self.with(|m| m.set_exec_result(key, result));
    }

    /// What the stats calls report for the container `key` (id or name): cumulative CPU
    /// time and working set (unset: zero).
    pub fn set_usage(&self, key: &str, cpu_core_nanos: u64, working_set_bytes: u64) {
        self.with(|m| m.set_usage(key, cpu_core_nanos, working_set_bytes));
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
// State: the model and this front's faults, latency and call log
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
struct State {
    model: FakeContainerd,
    faults: HashMap<Method, Vec<FaultRule>>,
    calls: Vec<Call>,
    latency: Duration,
    /// Open containers' log files (on by default; see [`FakeCriHandle::set_write_logs`]).
    write_logs: bool,
}

impl State {
    fn new() -> State {
        let mut model = FakeContainerd::new(SystemClock, IdStyle::Containerd);
        model.set_streaming(Streaming::PerCall(STREAM_BASE.to_string()));
        State {
            model,
            faults: HashMap::new(),
            calls: Vec::new(),
            latency: Duration::ZERO,
            write_logs: true,
        }
    }

    fn add_fault(&mut self, method: Method, fault: Fault, remaining: Option<usize>) {
        self.faults
            .entry(method)
            .or_default()
            .push(FaultRule { fault, remaining });
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

type EventItem = Result<proto::ContainerEventResponse, Status>;

/// Where the fake's streaming URLs point (`Exec`, `Attach`, `PortForward`): nothing listens
/// there; the URL names the call and the container or sandbox.
pub const STREAM_BASE: &str = "http://127.0.0.1:10010";

/// The runtime's part of a container log, as containerd does at `StartContainer` and
/// `ReopenContainerLog`: its directory made and the file opened for append (created empty).
/// Only absolute paths (a test that gives a relative log path gets no file in the working
/// directory); a failure is the test's business, so it is only logged.
fn open_log(path: &str) {
    let path = Path::new(path);
    if !path.is_absolute() {
        return;
    }
    let opened = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        });
    if let Err(e) = opened {
        log::debug!("fake CRI: open log {}: {e}", path.display());
    }
}

fn refused(r: Refusal) -> Status {
    Status::new(r.code, r.message)
}

impl FakeService {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Runs one operation on the model; a refusal becomes the status containerd sends.
    fn model<T>(
        &self,
        op: impl FnOnce(&mut FakeContainerd) -> Result<T, Refusal>,
    ) -> Result<T, Status> {
        op(&mut self.state().model).map_err(refused)
    }

    /// [`Self::model`] for a call after which containerd has the container's log file open
    /// (`StartContainer`, `ReopenContainerLog`): the model's answer, then the file opened,
    /// unless the front does not write logs.
    fn model_then_open_log(
        &self,
        id: &str,
        op: impl FnOnce(&mut FakeContainerd) -> Result<(), Refusal>,
    ) -> Result<(), Status> {
        let log = {
            let mut state = self.state();
            op(&mut state.model).map_err(refused)?;
            let path = state.model.container_status(id).map_err(refused)?;
            state.write_logs.then(|| path.info.log_path.clone())
        };
        if let Some(log) = log {
            open_log(&log);
        }
        Ok(())
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

fn decode_sandbox_state(raw: i32) -> SandboxState {
    match proto::PodSandboxState::try_from(raw) {
        Ok(proto::PodSandboxState::SandboxReady) => SandboxState::Ready,
        _ => SandboxState::NotReady,
    }
}

fn decode_container_state(raw: i32) -> ContainerState {
    match proto::ContainerState::try_from(raw) {
        Ok(proto::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(proto::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(proto::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

fn decode_sandbox_filter(f: Option<proto::PodSandboxFilter>) -> SandboxFilter {
    let f = f.unwrap_or_default();
    SandboxFilter {
        id: f.id,
        state: f.state.map(|v| decode_sandbox_state(v.state)),
        labels: f.label_selector,
    }
}

fn decode_container_filter(f: Option<proto::ContainerFilter>) -> ContainerFilter {
    let f = f.unwrap_or_default();
    ContainerFilter {
        id: f.id,
        sandbox_id: f.pod_sandbox_id,
        state: f.state.map(|v| decode_container_state(v.state)),
        labels: f.label_selector,
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
        use futures_util::StreamExt as _;
        self.gate(Method::GetContainerEvents, "").await?;
        let rx = self.state().model.subscribe();
        let events = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        })
        .map(|item| match item {
            Ok(event) => Ok(encode_event(&event)),
            Err(StreamBroken) => Err(Status::internal("fake CRI: the event stream broke")),
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
        let health = self.state().model.health().clone();
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
                    condition("RuntimeReady", health.runtime_ready, "RuntimeNotReady"),
                    condition(
                        "NetworkReady",
                        health.network_ready,
                        "NetworkPluginNotReady",
                    ),
                ],
            }),
            info: BTreeMap::new(),
            runtime_handlers: health
                .userns_handlers
                .iter()
                .flatten()
                .map(|name| proto::RuntimeHandler {
                    name: name.clone(),
                    features: Some(proto::RuntimeHandlerFeatures {
                        recursive_read_only_mounts: false,
                        user_namespaces: true,
                    }),
                })
                .collect(),
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
        let pod_sandbox_id = self.model(|m| m.run_pod_sandbox(config))?;
        Ok(Response::new(proto::RunPodSandboxResponse {
            pod_sandbox_id,
        }))
    }

    async fn stop_pod_sandbox(
        &self,
        req: Request<proto::StopPodSandboxRequest>,
    ) -> Answer<proto::StopPodSandboxResponse> {
        let id = req.into_inner().pod_sandbox_id;
        self.gate(Method::StopPodSandbox, &id).await?;
        self.model(|m| m.stop_pod_sandbox(&id))?;
        Ok(Response::new(proto::StopPodSandboxResponse {}))
    }

    async fn remove_pod_sandbox(
        &self,
        req: Request<proto::RemovePodSandboxRequest>,
    ) -> Answer<proto::RemovePodSandboxResponse> {
        let id = req.into_inner().pod_sandbox_id;
        self.gate(Method::RemovePodSandbox, &id).await?;
        self.model(|m| m.remove_pod_sandbox(&id))?;
        Ok(Response::new(proto::RemovePodSandboxResponse {}))
    }

    async fn pod_sandbox_status(
        &self,
        req: Request<proto::PodSandboxStatusRequest>,
    ) -> Answer<proto::PodSandboxStatusResponse> {
        let id = req.into_inner().pod_sandbox_id;
        self.gate(Method::PodSandboxStatus, &id).await?;
        let s = self.model(|m| m.pod_sandbox_status(&id))?;
        Ok(Response::new(proto::PodSandboxStatusResponse {
            status: Some(encode_sandbox_status(&s)),
            info: BTreeMap::new(),
        }))
    }

    async fn list_pod_sandbox(
        &self,
        req: Request<proto::ListPodSandboxRequest>,
    ) -> Answer<proto::ListPodSandboxResponse> {
        let filter = decode_sandbox_filter(req.into_inner().filter);
        self.gate(Method::ListPodSandbox, &filter.id).await?;
        let items = self.state().model.list_pod_sandboxes(&filter);
        Ok(Response::new(proto::ListPodSandboxResponse {
            items: items.iter().map(encode_pod_sandbox).collect(),
        }))
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
        let container_id = self.model(|m| m.create_container(&req.pod_sandbox_id, config))?;
        Ok(Response::new(proto::CreateContainerResponse {
            container_id,
        }))
    }

    async fn start_container(
        &self,
        req: Request<proto::StartContainerRequest>,
    ) -> Answer<proto::StartContainerResponse> {
        let id = req.into_inner().container_id;
        self.gate(Method::StartContainer, &id).await?;
        self.model_then_open_log(&id, |m| m.start_container(&id))?;
        Ok(Response::new(proto::StartContainerResponse {}))
    }

    async fn stop_container(
        &self,
        req: Request<proto::StopContainerRequest>,
    ) -> Answer<proto::StopContainerResponse> {
        let req = req.into_inner();
        let id = req.container_id;
        self.gate(Method::StopContainer, &id).await?;
        if let Some((wait, code)) = self.model(|m| m.stop_container(&id, req.timeout))? {
            // Still running after SIGTERM: it exits (or is killed) once `wait` is over.
            self.sleep(wait).await?;
            self.state().model.exit_running(&id, code, None);
        }
        Ok(Response::new(proto::StopContainerResponse {}))
    }

    async fn remove_container(
        &self,
        req: Request<proto::RemoveContainerRequest>,
    ) -> Answer<proto::RemoveContainerResponse> {
        let id = req.into_inner().container_id;
        self.gate(Method::RemoveContainer, &id).await?;
        self.model(|m| m.remove_container(&id))?;
        Ok(Response::new(proto::RemoveContainerResponse {}))
    }

    async fn list_containers(
        &self,
        req: Request<proto::ListContainersRequest>,
    ) -> Answer<proto::ListContainersResponse> {
        let filter = decode_container_filter(req.into_inner().filter);
        self.gate(Method::ListContainers, &filter.sandbox_id)
            .await?;
        let containers = self.state().model.list_containers(&filter);
        Ok(Response::new(proto::ListContainersResponse {
            containers: containers.iter().map(encode_container).collect(),
        }))
    }

    async fn container_status(
        &self,
        req: Request<proto::ContainerStatusRequest>,
    ) -> Answer<proto::ContainerStatusResponse> {
        let id = req.into_inner().container_id;
        self.gate(Method::ContainerStatus, &id).await?;
        let status = self.model(|m| m.container_status(&id).map(encode_container_status))?;
        Ok(Response::new(proto::ContainerStatusResponse {
            status: Some(status),
            info: BTreeMap::new(),
        }))
    }

    async fn update_container_resources(
        &self,
        req: Request<proto::UpdateContainerResourcesRequest>,
    ) -> Answer<proto::UpdateContainerResourcesResponse> {
        let req = req.into_inner();
        self.gate(Method::UpdateContainerResources, &req.container_id)
            .await?;
        let l = req.linux.unwrap_or_default();
        let r = resources_of(&l);
        self.model(|m| m.update_container_resources(&req.container_id, &r))?;
        Ok(Response::new(proto::UpdateContainerResourcesResponse {}))
    }

    async fn reopen_container_log(
        &self,
        req: Request<proto::ReopenContainerLogRequest>,
    ) -> Answer<proto::ReopenContainerLogResponse> {
        let id = req.into_inner().container_id;
        self.gate(Method::ReopenContainerLog, &id).await?;
        self.model_then_open_log(&id, |m| m.reopen_container_log(&id))?;
        Ok(Response::new(proto::ReopenContainerLogResponse {}))
    }

    async fn exec_sync(
        &self,
        req: Request<proto::ExecSyncRequest>,
    ) -> Answer<proto::ExecSyncResponse> {
        let req = req.into_inner();
        self.gate(Method::ExecSync, &req.container_id).await?;
        let result = self.model(|m| m.exec_sync(&req.container_id, &req.cmd))?;
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
        let url = self.model(|m| m.stream_url("Exec", &req.container_id))?;
        Ok(Response::new(proto::ExecResponse { url }))
    }

    async fn attach(&self, req: Request<proto::AttachRequest>) -> Answer<proto::AttachResponse> {
        let id = req.into_inner().container_id;
        let url = self.model(|m| m.stream_url("Attach", &id))?;
        Ok(Response::new(proto::AttachResponse { url }))
    }

    async fn port_forward(
        &self,
        req: Request<proto::PortForwardRequest>,
    ) -> Answer<proto::PortForwardResponse> {
        let id = req.into_inner().pod_sandbox_id;
        let url = self.model(|m| m.stream_url("PortForward", &id))?;
        Ok(Response::new(proto::PortForwardResponse { url }))
    }

    async fn list_container_stats(
        &self,
        req: Request<proto::ListContainerStatsRequest>,
    ) -> Answer<proto::ListContainerStatsResponse> {
        let f = req.into_inner().filter.unwrap_or_default();
        let filter = ContainerFilter {
            id: f.id,
            sandbox_id: f.pod_sandbox_id,
            state: None,
            labels: f.label_selector,
        };
        self.gate(Method::ListContainerStats, &filter.sandbox_id)
            .await?;
        let stats = self.state().model.container_stats(&filter);
        Ok(Response::new(proto::ListContainerStatsResponse {
            stats: stats.iter().map(encode_container_stats).collect(),
        }))
    }

    async fn list_pod_sandbox_stats(
        &self,
        req: Request<proto::ListPodSandboxStatsRequest>,
    ) -> Answer<proto::ListPodSandboxStatsResponse> {
        let f = req.into_inner().filter.unwrap_or_default();
        let filter = SandboxFilter {
            id: f.id,
            state: None,
            labels: f.label_selector,
        };
        self.gate(Method::ListPodSandboxStats, &filter.id).await?;
        let stats = self.state().model.pod_sandbox_stats(&filter);
        Ok(Response::new(proto::ListPodSandboxStatsResponse {
            stats: stats.iter().map(encode_pod_sandbox_stats).collect(),
        }))
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
        let only = (!wanted.is_empty()).then(|| st.model.resolve_image(&wanted));
        let images = st
            .model
            .images()
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
        let found = self.state().model.image_status(&image).map(encode_image);
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
        let username = req.auth.map(|a| a.username);
        let image_ref = self.model(|m| m.pull_image(&image, username))?;
        Ok(Response::new(proto::PullImageResponse { image_ref }))
    }

    async fn remove_image(
        &self,
        req: Request<proto::RemoveImageRequest>,
    ) -> Answer<proto::RemoveImageResponse> {
        let image = req.into_inner().image.map(|i| i.image).unwrap_or_default();
        self.gate(Method::RemoveImage, &image).await?;
        self.state().model.remove_image(&image);
        Ok(Response::new(proto::RemoveImageResponse {}))
    }

    async fn image_fs_info(
        &self,
        _req: Request<proto::ImageFsInfoRequest>,
    ) -> Answer<proto::ImageFsInfoResponse> {
        self.gate(Method::ImageFsInfo, "").await?;
        let fs = self.state().model.image_fs_info();
        Ok(Response::new(proto::ImageFsInfoResponse {
            image_filesystems: vec![proto::FilesystemUsage {
                timestamp: fs.timestamp,
                fs_id: Some(proto::FilesystemIdentifier {
                    mountpoint: fs.mountpoint,
                }),
                used_bytes: Some(proto::UInt64Value {
                    value: fs.used_bytes,
                }),
                inodes_used: Some(proto::UInt64Value {
                    value: fs.inodes_used,
                }),
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
        network: client::from_namespace_mode(o.network),
        pid: client::from_namespace_mode(o.pid),
        ipc: client::from_namespace_mode(o.ipc),
        userns: o
            .userns_options
            .filter(|u| u.mode == proto::NamespaceMode::Pod as i32)
            .and_then(|u| u.uids.first().copied())
            .map(|m| crate::cri::IdMapping {
                host_id: m.host_id,
                length: m.length,
            }),
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

/// The CRI resources as the domain type (the inverse of the client's `linux_resources`).
fn resources_of(l: &proto::LinuxContainerResources) -> Resources {
    Resources {
        cpu_period: l.cpu_period,
        cpu_quota: l.cpu_quota,
        cpu_shares: l.cpu_shares,
        memory_limit_in_bytes: l.memory_limit_in_bytes,
        oom_score_adj: l.oom_score_adj,
        memory_swap_limit_in_bytes: l.memory_swap_limit_in_bytes,
        swap_max: l
            .unified
            .get("memory.swap.max")
            .and_then(|v| v.parse().ok()),
    }
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
                image_reference: m
                    .image
                    .as_ref()
                    .map(|i| i.user_specified_image.clone())
                    .unwrap_or_default(),
                image: m.image.map(|i| i.image).unwrap_or_default(),
                image_sub_path: m.image_sub_path,
            })
            .collect(),
        devices: c
            .devices
            .into_iter()
            .map(|d| crate::cri::Device {
                container_path: d.container_path,
                host_path: d.host_path,
                permissions: d.permissions,
            })
            .collect(),
        cdi_devices: c.cdi_devices.into_iter().map(|d| d.name).collect(),
        labels: c.labels,
        annotations: c.annotations,
        log_path: c.log_path,
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        tty: c.tty,
        resources: resources_of(&resources),
        security: ContainerSecurity {
            privileged: sc.privileged,
            pid_target: sc
                .namespace_options
                .as_ref()
                .map(|o| o.target_id.clone())
                .unwrap_or_default(),
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

fn encode_u64(value: Option<u64>) -> Option<proto::UInt64Value> {
    value.map(|value| proto::UInt64Value { value })
}

fn encode_cpu(u: &CpuUsage) -> proto::CpuUsage {
    proto::CpuUsage {
        timestamp: u.timestamp,
        usage_core_nano_seconds: encode_u64(u.usage_core_nano_seconds),
        usage_nano_cores: encode_u64(u.usage_nano_cores),
    }
}

fn encode_memory(m: &MemoryUsage) -> proto::MemoryUsage {
    proto::MemoryUsage {
        timestamp: m.timestamp,
        working_set_bytes: encode_u64(m.working_set_bytes),
        usage_bytes: encode_u64(m.usage_bytes),
        available_bytes: encode_u64(m.available_bytes),
        rss_bytes: encode_u64(m.rss_bytes),
        page_faults: encode_u64(m.page_faults),
        major_page_faults: encode_u64(m.major_page_faults),
    }
}

fn encode_container_stats(s: &ContainerStats) -> proto::ContainerStats {
    proto::ContainerStats {
        attributes: Some(proto::ContainerAttributes {
            id: s.id.clone(),
            metadata: Some(proto::ContainerMetadata {
                name: s.name.clone(),
                attempt: s.attempt,
            }),
            labels: s.labels.clone(),
        }),
        cpu: s.cpu.as_ref().map(encode_cpu),
        memory: s.memory.as_ref().map(encode_memory),
    }
}

fn encode_pod_sandbox_stats(s: &PodSandboxStats) -> proto::PodSandboxStats {
    proto::PodSandboxStats {
        attributes: Some(proto::PodSandboxAttributes {
            id: s.id.clone(),
            metadata: Some(proto::PodSandboxMetadata {
                name: s.name.clone(),
                uid: s.uid.clone(),
                namespace: s.namespace.clone(),
                attempt: 0,
            }),
            labels: s.labels.clone(),
        }),
        linux: Some(proto::LinuxPodSandboxStats {
            cpu: s.cpu.as_ref().map(encode_cpu),
            memory: s.memory.as_ref().map(encode_memory),
            containers: s.containers.iter().map(encode_container_stats).collect(),
        }),
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

fn encode_pod_sandbox(s: &Sandbox) -> proto::PodSandbox {
    proto::PodSandbox {
        id: s.id.clone(),
        metadata: Some(encode_sandbox_metadata(s)),
        state: encode_sandbox_state(s.state).into(),
        created_at: s.created_at,
        labels: s.labels.clone(),
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
                options: Some(client::namespace_option(&s.config.namespace_options)),
            }),
        }),
        labels: s.info.labels.clone(),
        annotations: s.info.annotations.clone(),
        runtime_handler: String::new(),
    }
}

fn encode_container(i: &ContainerInfo) -> proto::Container {
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
        mounts: c.config.mounts.iter().map(client::mount).collect(),
        log_path: i.log_path.clone(),
        image_id: i.image_ref.clone(),
    }
}

fn encode_event(e: &Event) -> proto::ContainerEventResponse {
    use proto::ContainerEventType as EventType;
    let kind = match e.kind {
        ContainerEventKind::Created => EventType::ContainerCreatedEvent,
        ContainerEventKind::Started => EventType::ContainerStartedEvent,
        ContainerEventKind::Stopped => EventType::ContainerStoppedEvent,
        ContainerEventKind::Deleted => EventType::ContainerDeletedEvent,
        // The model never sends it; the nearest CRI value.
        ContainerEventKind::Unknown => EventType::ContainerStoppedEvent,
    };
    proto::ContainerEventResponse {
        container_id: e.container_id.clone(),
        container_event_type: kind.into(),
        created_at: e.created_at,
        pod_sandbox_status: e.sandbox.as_ref().map(encode_sandbox_status),
        containers_statuses: e.containers.iter().map(encode_container_status).collect(),
    }
}

fn encode_image(i: &ImageInfo) -> proto::Image {
    proto::Image {
        id: i.id.clone(),
        repo_tags: i.repo_tags.clone(),
        repo_digests: Vec::new(),
        size: i.size,
        uid: match &i.user {
            crate::cri::ImageUser::Uid(u) => Some(proto::Int64Value { value: *u }),
            _ => None,
        },
        username: match &i.user {
            crate::cri::ImageUser::Name(n) => n.clone(),
            _ => String::new(),
        },
        spec: None,
        pinned: i.pinned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_faults_expire_and_stack() {
        let mut st = State::new();
        st.add_fault(Method::Status, Fault::Hang, Some(2));
        st.add_fault(Method::Status, Fault::Delay(Duration::from_millis(1)), None);
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
}
