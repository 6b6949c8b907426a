//! The probe manager (kubelet: `pkg/kubelet/prober/`: `prober_manager.go`, `worker.go`,
//! `prober.go`, `results/`).
//!
//! Owns: one worker per probe — a `spawn_local` task on the agent's one thread, ticking
//! every `periodSeconds` — and the results they publish, by container ID ([`Results`], the
//! kubelet's liveness, readiness and startup results managers). The decisions of a worker
//! are the pure [`worker::WorkerState`]; the probes themselves are CRI `ExecSync` (through
//! the [`Runtime`]) or the network handlers of [`crate::probe`], made from picolet's own
//! network namespace to the pod IP (the node's for host-network pods).
//!
//! In and out: the agent starts a pod's workers when its pod worker is created
//! ([`Prober::add_pod`]) and stops them when the pod goes ([`Prober::remove_pod`]); after
//! each status it records, it hands the status to the workers ([`ProbeHandle::observe`]);
//! a termination marks the pod ([`ProbeHandle::terminating`]). When a published result
//! changes, the pod's UID goes out on the prober's channel and the loop syncs the pod: the
//! plan reads liveness/startup failures ([`ProbeHandle::verdicts`]), the status the
//! readiness and startup results ([`ProbeHandle::status_results`]).
//!
//! Deliberate difference: the workers and the agent share the results and the status view
//! through one `Rc<RefCell<_>>` ([`ProbeHandle`]), as upstream's workers share the results
//! managers and the status manager. Every borrow is short and never held across an `.await`.
//!
//! Cost: a worker's tick reads the shared view without allocating; only the probe itself
//! (an `ExecSync` call, a TCP connection, an HTTP request) costs anything.

pub(crate) mod worker;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::api::{self, Pod, PodStatus};
use crate::clock::{self, Clock, UnixNanos};
use crate::cri::{ContainerState, CriError, PodRuntimeStatus, Runtime};
use crate::kuberuntime::plan::ProbeVerdicts;
use crate::metrics::ProbeResultLabel;
use crate::probe::{self, Verdict};
use crate::recorder::{self, Recorder};
use crate::status;

use worker::{Observation, Params, Publish, RunOutcome, Step, WorkerState};

/// `User-Agent` of HTTP probes (kubelet: `kube-probe/<major>.<minor>`; picolet follows the
/// v1.34 API).
pub(crate) const PROBE_USER_AGENT: &str = "kube-probe/1.34";
/// kubelet: `maxProbeRetries` — a probe that errors is retried at once this many times.
const MAX_PROBE_RETRIES: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Liveness,
    Readiness,
    Startup,
}

impl Kind {
    pub(crate) const ALL: [Kind; 3] = [Kind::Liveness, Kind::Readiness, Kind::Startup];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Liveness => "liveness",
            Kind::Readiness => "readiness",
            Kind::Startup => "startup",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// kubelet: `probeType.String()` — the word its events begin with.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
            Kind::Startup => "Startup",
        }
    }

    /// The container's probe of this kind.
    pub(crate) fn of(self, c: &api::Container) -> Option<&api::Probe> {
        match self {
            Kind::Liveness => c.liveness_probe.as_deref(),
            Kind::Readiness => c.readiness_probe.as_deref(),
            Kind::Startup => c.startup_probe.as_deref(),
        }
    }
}

/// kubelet: `results.Result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeResult {
    Success,
    Failure,
    Unknown,
}

/// kubelet: the results managers — the published result of each probe, by container ID.
#[derive(Debug, Default)]
pub(crate) struct Results {
    by_container: HashMap<String, [Option<ProbeResult>; 3]>,
}

impl Results {
    pub(crate) fn get(&self, container_id: &str, kind: Kind) -> Option<ProbeResult> {
        self.by_container.get(container_id)?[kind.index()]
    }

    /// Whether the result changed.
    pub(crate) fn set(&mut self, container_id: &str, kind: Kind, result: ProbeResult) -> bool {
        let slot = match self.by_container.get_mut(container_id) {
            Some(entry) => &mut entry[kind.index()],
            None => {
                let entry = self
                    .by_container
                    .entry(container_id.to_string())
                    .or_default();
                &mut entry[kind.index()]
            }
        };
        let changed = *slot != Some(result);
        *slot = Some(result);
        changed
    }

    pub(crate) fn remove(&mut self, container_id: &str, kind: Kind) {
        if let Some(entry) = self.by_container.get_mut(container_id) {
            entry[kind.index()] = None;
            if entry.iter().all(Option::is_none) {
                self.by_container.remove(container_id);
            }
        }
    }
}

/// What the workers of one pod see of it: its last recorded status, reduced.
#[derive(Debug, Default)]
struct PodView {
    terminal: bool,
    terminating: bool,
    pod_ip: String,
    containers: Vec<ContainerView>,
}

#[derive(Debug)]
struct ContainerView {
    name: String,
    /// The bare runtime ID (no `containerd://`).
    id: String,
    running_since: Option<UnixNanos>,
    /// The exit code, once the instance terminated.
    exit_code: Option<i32>,
}

#[derive(Debug, Default)]
struct ProbeState {
    results: Results,
    pods: HashMap<String, PodView>,
}

/// The state shared by the workers and the agent (see the module comment).
#[derive(Debug, Clone, Default)]
pub(crate) struct ProbeHandle(Rc<RefCell<ProbeState>>);

impl ProbeHandle {
    /// The agent recorded a status for the pod: the workers see it from their next tick
    /// (kubelet: workers read the status manager).
    pub(crate) fn observe(&self, pod: &Pod, st: &PodStatus) {
        let mut state = self.0.borrow_mut();
        let Some(view) = state.pods.get_mut(pod.uid()) else {
            // No workers for this pod (no probes, or not started): nothing to keep.
            return;
        };
        view.terminal = st.phase.is_some_and(|p| p.is_terminal());
        view.pod_ip = st.pod_ip.clone().unwrap_or_default();
        // A host-network pod is probed on the node: without a known node IP, on loopback.
        if view.pod_ip.is_empty() && pod.spec.host_network {
            view.pod_ip = "127.0.0.1".into();
        }
        view.containers.clear();
        for cs in st
            .init_container_statuses
            .iter()
            .chain(&st.container_statuses)
        {
            let id = cs
                .container_id
                .as_deref()
                .map(|c| c.split_once("://").map_or(c, |(_, id)| id))
                .unwrap_or_default();
            view.containers.push(ContainerView {
                name: cs.name.clone(),
                id: id.to_string(),
                running_since: cs.state.running.as_ref().map(|r| {
                    r.started_at
                        .as_deref()
                        .and_then(clock::parse_rfc3339)
                        .unwrap_or(0)
                }),
                exit_code: cs.state.terminated.as_ref().map(|t| t.exit_code),
            });
        }
    }

    /// The pod is being terminated: liveness and startup stop (kubelet:
    /// `StopLivenessAndStartup`).
    pub(crate) fn terminating(&self, uid: &str) {
        if let Some(view) = self.0.borrow_mut().pods.get_mut(uid) {
            view.terminating = true;
        }
    }

    /// The plan's probe input for the pod's instances (kubelet: `livenessManager`,
    /// `startupManager` in `computePodActions`).
    pub(crate) fn verdicts(&self, observed: &PodRuntimeStatus) -> ProbeVerdicts {
        let state = self.0.borrow();
        let mut v = ProbeVerdicts::default();
        for c in observed
            .containers
            .iter()
            .filter(|c| c.state == ContainerState::Running)
        {
            if state.results.get(&c.id, Kind::Liveness) == Some(ProbeResult::Failure) {
                v.liveness.insert(c.id.clone());
            }
            match state.results.get(&c.id, Kind::Startup) {
                Some(ProbeResult::Failure) => {
                    v.startup.insert(c.id.clone());
                }
                Some(ProbeResult::Success) => {
                    v.started.insert(c.id.clone());
                }
                _ => {}
            }
        }
        v
    }

    /// The status's probe input for the pod's instances.
    pub(crate) fn status_results(&self, observed: &PodRuntimeStatus) -> status::ProbeResults {
        let state = self.0.borrow();
        let mut r = status::ProbeResults::default();
        for c in &observed.containers {
            if let Some(s) = state.results.get(&c.id, Kind::Startup) {
                r.startup.insert(c.id.clone(), s == ProbeResult::Success);
            }
            if let Some(s) = state.results.get(&c.id, Kind::Readiness) {
                r.readiness.insert(c.id.clone(), s == ProbeResult::Success);
            }
        }
        r
    }
}

/// kubelet: `prober_manager` — starts and stops the workers.
pub(crate) struct Prober<R: Runtime, C: Clock> {
    runtime: R,
    clock: C,
    handle: ProbeHandle,
    tx: mpsc::UnboundedSender<String>,
    /// The workers of each pod, by UID: one token stops them all.
    pods: HashMap<String, CancellationToken>,
    started: tokio::time::Instant,
    shutdown: CancellationToken,
    /// Where the workers record `Unhealthy` and `ProbeWarning` events.
    recorder: Option<Recorder>,
    /// `prober_probe_total` (None: not counted, tests).
    metrics: Option<Rc<crate::metrics::AgentMetrics>>,
}

impl<R: Runtime, C: Clock> Prober<R, C> {
    /// A prober and the channel on which it names pods whose results changed.
    pub(crate) fn new(
        runtime: R,
        clock: C,
        shutdown: CancellationToken,
    ) -> (Self, mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let prober = Prober {
            runtime,
            clock,
            handle: ProbeHandle::default(),
            tx,
            pods: HashMap::new(),
            started: tokio::time::Instant::now(),
            shutdown,
            recorder: None,
            metrics: None,
        };
        (prober, rx)
    }

    /// The workers count their results (kubelet: `prober_probe_total`) here.
    pub(crate) fn with_metrics(mut self, metrics: Rc<crate::metrics::AgentMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The workers record their events (kubelet: `prober.recorder`) here.
    pub(crate) fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    pub(crate) fn handle(&self) -> ProbeHandle {
        self.handle.clone()
    }

    /// Start a worker for every probe of the pod's regular containers and sidecars
    /// (kubelet: `AddPod`). A pod already known is left alone.
    pub(crate) fn add_pod(&mut self, pod: &Arc<Pod>) {
        let uid = pod.uid();
        if self.pods.contains_key(uid) {
            return;
        }
        let probed: Vec<(usize, bool, Kind)> = pod
            .spec
            .init_containers
            .iter()
            .enumerate()
            .filter(|(_, c)| crate::kuberuntime::plan::is_restartable_init_container(c))
            .map(|(i, c)| (i, true, c))
            .chain(
                pod.spec
                    .containers
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i, false, c)),
            )
            .flat_map(|(i, init, c)| {
                Kind::ALL
                    .into_iter()
                    .filter(move |k| k.of(c).is_some())
                    .map(move |k| (i, init, k))
            })
            .collect();
        if probed.is_empty() {
            return;
        }
        let token = self.shutdown.child_token();
        let startup_done = Rc::new(Notify::new());
        self.handle
            .0
            .borrow_mut()
            .pods
            .insert(uid.to_string(), PodView::default());
        for (index, init, kind) in probed {
            let ctx = WorkerCtx {
                runtime: self.runtime.clone(),
                clock: self.clock.clone(),
                handle: self.handle.clone(),
                tx: self.tx.clone(),
                pod: Arc::clone(pod),
                index,
                init,
                kind,
                prober_started: self.started,
                recorder: self.recorder.clone(),
                metrics: self.metrics.clone(),
                startup_done: Rc::clone(&startup_done),
            };
            crate::local_tasks::spawn_local(run_worker(ctx, token.clone()));
        }
        self.pods.insert(uid.to_string(), token);
    }

    /// Stop the pod's workers (kubelet: `RemovePod`); each removes its results.
    pub(crate) fn remove_pod(&mut self, uid: &str) {
        if let Some(token) = self.pods.remove(uid) {
            token.cancel();
            self.handle.0.borrow_mut().pods.remove(uid);
        }
    }

    /// Gives back the table space a burst of pods left (see [`crate::mem_trim`]).
    pub(crate) fn compact(&mut self) {
        use crate::mem_trim::ShrinkSparse;
        self.pods.shrink_sparse();
        let mut state = self.handle.0.borrow_mut();
        state.pods.shrink_sparse();
        state.results.by_container.shrink_sparse();
    }
}

struct WorkerCtx<R: Runtime, C: Clock> {
    runtime: R,
    clock: C,
    handle: ProbeHandle,
    tx: mpsc::UnboundedSender<String>,
    pod: Arc<Pod>,
    /// Index into `spec.initContainers` (`init`) or `spec.containers`.
    index: usize,
    init: bool,
    kind: Kind,
    prober_started: tokio::time::Instant,
    recorder: Option<Recorder>,
    metrics: Option<Rc<crate::metrics::AgentMetrics>>,
    /// One per pod: a startup probe of it succeeded (its readiness workers probe now).
    startup_done: Rc<Notify>,
}

impl<R: Runtime, C: Clock> WorkerCtx<R, C> {
    fn container(&self) -> &api::Container {
        let list = if self.init {
            &self.pod.spec.init_containers
        } else {
            &self.pod.spec.containers
        };
        &list[self.index]
    }

    fn probe(&self) -> Option<&api::Probe> {
        self.kind.of(self.container())
    }

    /// A Warning event about the probed container (kubelet: `recordContainerEvent`).
    fn event(&self, reason: &str, message: String) {
        if let Some(r) = &self.recorder {
            let fp = recorder::container_field_path(&self.pod, &self.container().name);
            r.warning(&self.pod, Some(&fp), reason, message);
        }
    }

    /// The tick's observation, from the shared view (no allocation), and the pod IP.
    fn tick(&self, state: &mut WorkerState, publish: &mut Vec<Publish>) -> (Step, String) {
        let shared = self.handle.0.borrow();
        let Some(view) = shared.pods.get(self.pod.uid()) else {
            return (Step::Stop, String::new());
        };
        let c = self.container();
        let cv = view.containers.iter().find(|v| v.name == c.name);
        let id = cv.map_or("", |v| v.id.as_str());
        let exit_code = cv.and_then(|v| v.exit_code);
        let started = c.startup_probe.is_none()
            || shared.results.get(id, Kind::Startup) == Some(ProbeResult::Success);
        let obs = Observation {
            pod_terminal: view.terminal,
            terminating: view.terminating,
            container_id: id,
            running_since: cv.and_then(|v| v.running_since),
            terminated: exit_code.is_some(),
            // kubelet (ContainerRestartRules): the container's own decision for its exit
            // code; a sidecar's `Always` restarts it.
            restart_never: exit_code
                .is_some_and(|code| !api::container_should_restart(c, &self.pod.spec, code)),
            started,
        };
        let step = state.before(&obs, self.clock.now(), publish);
        let ip = if step == Step::Probe {
            view.pod_ip.clone()
        } else {
            String::new()
        };
        (step, ip)
    }

    /// Apply what the worker publishes; the loop hears of a change.
    fn publish(&self, publish: &mut Vec<Publish>) {
        let mut changed = false;
        let mut started = false;
        {
            let mut shared = self.handle.0.borrow_mut();
            for p in publish.drain(..) {
                match p {
                    Publish::Remove(id) => shared.results.remove(&id, self.kind),
                    Publish::Set(id, r) => {
                        let now = shared.results.set(&id, self.kind, r);
                        started |= now && self.kind == Kind::Startup && r == ProbeResult::Success;
                        changed |= now;
                    }
                }
            }
        }
        if started {
            // kubelet: `UpdatePodStatus` triggers a manual run of a readiness probe that has
            // no success yet, so a container is ready as soon as it has started, not a
            // readiness period later.
            self.startup_done.notify_waiters();
        }
        if changed {
            // The loop may be gone at shutdown: nothing to tell then.
            let _ = self.tx.send(self.pod.uid().to_string());
        }
    }
}

/// kubelet: `worker.run` — tick every period until stopped, then remove the results.
async fn run_worker<R: Runtime, C: Clock>(ctx: WorkerCtx<R, C>, cancel: CancellationToken) {
    let Some(spec) = ctx.probe() else { return };
    let params = Params::of(spec, ctx.kind);
    let period = Duration::from_secs(u64::try_from(params.period_seconds).unwrap_or(10));
    let mut state = WorkerState::new(ctx.kind, params);
    // kubelet: the worker's `proberResults*MetricLabels`, made once.
    let counts = ctx.metrics.as_ref().map(|m| {
        let meta = &ctx.pod.metadata;
        m.probe(
            ctx.kind.title(),
            &ctx.container().name,
            &meta.name,
            &meta.namespace,
            &meta.uid,
        )
    });
    // kubelet: right after a (re)start, the workers begin at a random point of their
    // period so that the probes of many pods do not all fire at once. Deterministic here.
    if ctx.prober_started.elapsed() < period {
        let delay = jitter(ctx.pod.uid(), &ctx.container().name, ctx.kind, period);
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
            _ = ctx.startup_done.notified(), if ctx.kind == Kind::Readiness => {}
        }
    }
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut publish = Vec::with_capacity(2);
    let mut erroring = false;
    let mut logged: Option<(String, ProbeResult)> = None;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
            _ = ctx.startup_done.notified(), if ctx.kind == Kind::Readiness => {}
        }
        let (step, pod_ip) = ctx.tick(&mut state, &mut publish);
        ctx.publish(&mut publish);
        match step {
            Step::Stop => break,
            Step::Wait => continue,
            Step::Probe => {}
        }
        let timeout = Duration::from_secs(u64::try_from(params.timeout_seconds).unwrap_or(1));
        // Boxed: the request's state (up to ~3 KiB for gRPC) lives only while it runs, so
        // an idle worker task stays small.
        let run = Box::pin(run_with_retries(
            &ctx,
            state.container_id(),
            &pod_ip,
            timeout,
        ));
        let verdict = tokio::select! {
            _ = cancel.cancelled() => break,
            v = run => v,
        };
        let (outcome, message) = match verdict {
            Verdict::Success(warning) => {
                if let Some(w) = warning {
                    log::debug!("{}: {w}", describe(&ctx));
                    // kubelet: prober.probe — events.ContainerProbeWarning.
                    ctx.event(
                        recorder::PROBE_WARNING,
                        format!("{} probe warning: {w}", ctx.kind.title()),
                    );
                }
                (RunOutcome::Success, String::new())
            }
            Verdict::Failure(m) => {
                // kubelet: prober.probe — events.ContainerUnhealthy at every failed run.
                ctx.event(
                    recorder::UNHEALTHY,
                    format!("{} probe failed: {m}", ctx.kind.title()),
                );
                (RunOutcome::Failure, m)
            }
            Verdict::Error(m) => {
                if !erroring {
                    log::warn!("{} errored: {m}", describe(&ctx));
                }
                erroring = true;
                ctx.event(
                    recorder::UNHEALTHY,
                    format!(
                        "{} probe errored and resulted in unknown state: {m}",
                        ctx.kind.title()
                    ),
                );
                (RunOutcome::Error, m)
            }
        };
        if outcome != RunOutcome::Error {
            erroring = false;
        }
        // kubelet: `doProbe` counts every run by its result (an errored one: unknown).
        if let Some(c) = &counts {
            c.count(match outcome {
                RunOutcome::Success => ProbeResultLabel::Successful,
                RunOutcome::Failure => ProbeResultLabel::Failed,
                RunOutcome::Error => ProbeResultLabel::Unknown,
            });
        }
        let Some(result) = state.after(outcome) else {
            continue;
        };
        publish.push(Publish::Set(state.container_id().to_string(), result));
        // One line per transition of this instance (the initial result is not one).
        if logged.as_ref() != Some(&(state.container_id().to_string(), result)) {
            log_transition(&ctx, &state, result, &message);
            logged = Some((state.container_id().to_string(), result));
        }
        ctx.publish(&mut publish);
    }
    let id = state.container_id();
    if !id.is_empty() {
        ctx.handle.0.borrow_mut().results.remove(id, ctx.kind);
    }
}

fn describe<R: Runtime, C: Clock>(ctx: &WorkerCtx<R, C>) -> String {
    format!(
        "pod {}: container {:?}: {} probe",
        ctx.pod.full_name(),
        ctx.container().name,
        ctx.kind.as_str()
    )
}

/// One WARN per transition to Failure, one INFO per transition of readiness or startup to
/// Success.
fn log_transition<R: Runtime, C: Clock>(
    ctx: &WorkerCtx<R, C>,
    state: &WorkerState,
    result: ProbeResult,
    message: &str,
) {
    let what = describe(ctx);
    match (result, ctx.kind) {
        (ProbeResult::Failure, Kind::Readiness) => log::warn!(
            "{what} failed {} times: {message}; not ready",
            state.params.failure_threshold
        ),
        (ProbeResult::Failure, _) => log::warn!(
            "{what} failed {} times: {message}; the container will be restarted",
            state.params.failure_threshold
        ),
        // Liveness starts as Success and holds after a failure: its success is no news.
        (ProbeResult::Success, Kind::Liveness) => {}
        (ProbeResult::Success, _) => log::info!("{what} succeeded"),
        (ProbeResult::Unknown, _) => {}
    }
}

/// kubelet: `runProbeWithRetries` — an error (not a failure) is retried at once.
async fn run_with_retries<R: Runtime, C: Clock>(
    ctx: &WorkerCtx<R, C>,
    container_id: &str,
    pod_ip: &str,
    timeout: Duration,
) -> Verdict {
    let mut verdict = Verdict::Error("probe not run".into());
    for _ in 0..MAX_PROBE_RETRIES {
        verdict = run_probe(ctx, container_id, pod_ip, timeout).await;
        if !matches!(verdict, Verdict::Error(_)) {
            break;
        }
    }
    verdict
}

/// kubelet: `prober.runProbe` — the probe's one handler.
async fn run_probe<R: Runtime, C: Clock>(
    ctx: &WorkerCtx<R, C>,
    container_id: &str,
    pod_ip: &str,
    timeout: Duration,
) -> Verdict {
    let Some(p) = ctx.probe() else {
        return Verdict::Error("no probe".into());
    };
    let container = ctx.container();
    if let Some(exec) = &p.exec {
        return exec_probe(&ctx.runtime, container_id, &exec.command, timeout).await;
    }
    if let Some(h) = &p.http_get {
        let headers = probe::headers(&h.http_headers);
        let target = match probe::http_target(h, container, pod_ip, &headers) {
            Ok(t) => t,
            Err(e) => return Verdict::Error(e.to_string()),
        };
        return probe::http_probe(&target, PROBE_USER_AGENT, timeout).await;
    }
    if let Some(t) = &p.tcp_socket {
        let port = match probe::resolve_port(&t.port, container) {
            Ok(p) => p,
            Err(e) => return Verdict::Error(e.to_string()),
        };
        let host = t
            .host
            .as_deref()
            .filter(|h| !h.is_empty())
            .unwrap_or(pod_ip);
        return probe::tcp_probe(host, port, timeout).await;
    }
    if let Some(g) = &p.grpc {
        let Ok(port) = u16::try_from(g.port) else {
            return Verdict::Error(format!("invalid gRPC port {}", g.port));
        };
        let service = g.service.as_deref().unwrap_or_default();
        return probe::grpc_probe(pod_ip, port, service, timeout).await;
    }
    Verdict::Error("the probe has no handler (exec, httpGet, tcpSocket or grpc)".into())
}

/// kubelet: the exec prober over CRI `ExecSync` — exit 0 succeeds; a timeout fails.
pub(crate) async fn exec_probe<R: Runtime>(
    runtime: &R,
    container_id: &str,
    command: &[String],
    timeout: Duration,
) -> Verdict {
    match runtime.exec_sync(container_id, command, timeout).await {
        Ok(r) if r.exit_code == 0 => Verdict::Success(None),
        Ok(r) => {
            let first = probe::first_output_line(&r.stdout, &r.stderr);
            if first.is_empty() {
                Verdict::Failure(format!("command exited {}", r.exit_code))
            } else {
                Verdict::Failure(format!("command exited {}: {first}", r.exit_code))
            }
        }
        Err(CriError::Timeout { .. }) => {
            Verdict::Failure(format!("command timed out after {}s", timeout.as_secs()))
        }
        Err(e) => Verdict::Error(e.to_string()),
    }
}

/// A fixed point inside the period, from the probe's identity.
fn jitter(uid: &str, container: &str, kind: Kind, period: Duration) -> Duration {
    let mut h = crate::kuberuntime::labels::Fnv1a::new();
    h.write(uid.as_bytes());
    h.write(container.as_bytes());
    h.write(kind.as_str().as_bytes());
    let millis = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
    Duration::from_millis(h.finish() % millis)
}
