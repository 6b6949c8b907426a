//! Stopping (kubelet: `killPodWithSyncResult`, `killContainer`): grace periods, preStop,
//! StopContainer, and the pod-level cleanup after termination.

use std::time::Duration;

use futures_util::future::join_all;

use crate::api;
use crate::clock::Clock;
use crate::cri::{ContainerInfo, ContainerState, PodRuntimeStatus, Runtime, SandboxState};
use crate::kuberuntime::hooks;
use crate::kuberuntime::labels;
use crate::kuberuntime::plan::{self, ContainerToKill, KillReason};
use crate::recorder::{self, Recorder};
use crate::volume::mounts;

use super::*;

/// The grace period for stopping one container (kubelet: `setTerminationGracePeriod`):
/// the override, else the pod's deletion grace period, else a failed probe's own
/// `terminationGracePeriodSeconds`, else `spec.terminationGracePeriodSeconds` (default
/// 30). Without a pod spec (after an agent restart) the container's annotations say it.
pub(super) fn grace_period(
    pod: Option<&api::Pod>,
    spec: Option<&api::Container>,
    running: Option<&ContainerInfo>,
    reason: KillReason,
    grace_override: Option<i64>,
) -> i64 {
    if let Some(g) = grace_override {
        return g;
    }
    if let (Some(pod), Some(spec)) = (pod, spec) {
        if let Some(g) = pod.metadata.deletion_grace_period_seconds {
            return g;
        }
        let probe = match reason {
            KillReason::LivenessProbe => spec.liveness_probe.as_ref(),
            KillReason::StartupProbe => spec.startup_probe.as_ref(),
            KillReason::Unknown | KillReason::UnknownState => None,
        };
        if let Some(g) = probe.and_then(|p| p.termination_grace_period_seconds) {
            return g;
        }
        return pod
            .spec
            .termination_grace_period_seconds
            .unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS);
    }
    if let Some(c) = running {
        let a = labels::container_annotation_info(c);
        if let Some(g) = a
            .pod_deletion_grace_period
            .or(a.pod_termination_grace_period)
        {
            return g;
        }
    }
    DEFAULT_GRACE_PERIOD_SECONDS
}

pub(super) fn container_spec<'a>(pod: &'a api::Pod, name: &str) -> Option<&'a api::Container> {
    pod.spec
        .containers
        .iter()
        .chain(&pod.spec.init_containers)
        .chain(&pod.spec.ephemeral_containers)
        .find(|c| c.name == name)
}

/// A container's preStop hook and what running it needs.
pub(super) struct PreStop<'a> {
    handler: &'a api::LifecycleHandler,
    /// The spec (or, after a picolet restart, its name and ports from the annotations).
    container: std::borrow::Cow<'a, api::Container>,
    pod_ip: &'a str,
}

/// The container's preStop hook, from the spec or else from the container's annotations
/// (kubelet: `restoreSpecsFromContainerLabels`).
pub(super) fn pre_stop_of<'a>(
    spec: Option<&'a api::Container>,
    annotations: Option<&'a labels::ContainerAnnotationInfo>,
    name: &str,
    pod_ip: &'a str,
) -> Option<PreStop<'a>> {
    if let Some(s) = spec {
        let handler = s.lifecycle.as_ref()?.pre_stop.as_ref()?;
        return Some(PreStop {
            handler,
            container: std::borrow::Cow::Borrowed(s),
            pod_ip,
        });
    }
    let a = annotations?;
    Some(PreStop {
        handler: a.pre_stop.as_ref()?,
        container: std::borrow::Cow::Owned(api::Container {
            name: name.to_string(),
            ports: a.ports.clone(),
            ..Default::default()
        }),
        pod_ip,
    })
}

/// The pod IP hooks are sent to: the newest ready sandbox's, else the node's (host network).
pub(super) fn hook_ip<'a>(status: &'a PodRuntimeStatus, host_ip: &'a str) -> &'a str {
    status
        .sandboxes
        .first()
        .filter(|s| s.state == SandboxState::Ready)
        .and_then(|s| s.ip.as_deref())
        .filter(|ip| !ip.is_empty())
        .unwrap_or(host_ip)
}

/// Where a kill records its events: the recorder and the pod (none after a picolet
/// restart, when only the runtime's view is left).
#[derive(Clone, Copy)]
pub(super) struct KillEvents<'a> {
    recorder: &'a Recorder,
    pod: &'a api::Pod,
}

/// kubelet: `executePreStopHook` — run the hook, bounded by the grace period; returns the
/// whole seconds it took. A failure is logged and recorded (FailedPreStopHook) and the stop
/// goes on.
pub(super) async fn run_pre_stop<R: Runtime>(
    rt: &R,
    pod_name: &str,
    id: &str,
    name: &str,
    grace: i64,
    hook: &PreStop<'_>,
    events: Option<KillEvents<'_>>,
) -> i64 {
    let bound = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
    let started = tokio::time::Instant::now();
    log::info!("pod {pod_name}: container {name:?}: running the preStop hook (grace {grace}s)");
    let run = hooks::run(
        rt,
        &hook.container,
        id,
        hook.handler,
        hook.pod_ip,
        Some(bound),
    );
    match tokio::time::timeout(bound, run).await {
        Ok(Ok(())) => log::info!(
            "pod {pod_name}: container {name:?}: preStop hook done after {:?}",
            started.elapsed()
        ),
        Ok(Err(e)) => {
            log::warn!(
                "pod {pod_name}: container {name:?}: preStop hook failed (FailedPreStopHook): {e}"
            );
            // kubelet: the hook's output stays out of the event (it may hold secrets).
            if let Some(ev) = events {
                ev.recorder.warning(
                    ev.pod,
                    Some(&recorder::container_field_path(ev.pod, name)),
                    recorder::FAILED_PRE_STOP_HOOK,
                    "PreStopHook failed",
                );
            }
        }
        Err(_) => log::warn!(
            "pod {pod_name}: container {name:?}: preStop hook did not finish within the grace period of {grace}s"
        ),
    }
    i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX)
}

/// Stop one container: the preStop hook if any and the grace period is > 0, then
/// `StopContainer(id, max(grace - hook time, 2))`; NotFound is fine (kubelet:
/// `killContainer`).
#[allow(clippy::too_many_arguments)]
pub(super) async fn stop_one<R: Runtime>(
    rt: &R,
    pod_name: &str,
    id: &str,
    name: &str,
    grace: i64,
    pre_stop: Option<PreStop<'_>>,
    events: Option<KillEvents<'_>>,
    message: &str,
) -> Result<(), SyncError> {
    // kubelet: killContainer — events.KillingContainer before the preStop hook; the
    // message is the kill's reason, else "Stopping container <name>".
    if let Some(ev) = events {
        let message = if message.is_empty() {
            format!("Stopping container {name}")
        } else {
            message.to_string()
        };
        ev.recorder.normal(
            ev.pod,
            Some(&recorder::container_field_path(ev.pod, name)),
            recorder::KILLING_CONTAINER,
            message,
        );
    }
    let mut grace = grace;
    if let Some(hook) = pre_stop.as_ref().filter(|_| grace > 0) {
        // Boxed: only a container with a hook pays for the hook's future (an exec or an
        // HTTP GET), not every stop of a mass delete.
        grace -= Box::pin(run_pre_stop(rt, pod_name, id, name, grace, hook, events)).await;
    }
    let timeout = grace.max(MIN_STOP_TIMEOUT_SECONDS);
    log::info!("pod {pod_name}: stopping container {name:?} ({id}) with grace period {timeout}s");
    match rt.stop_container(id, timeout).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(source) => Err(SyncError::StopContainer {
            id: id.to_string(),
            name: name.to_string(),
            source,
        }),
    }
}

pub(super) async fn kill_container<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    id: &str,
    k: &ContainerToKill,
) -> Result<(), SyncError> {
    let spec = container_spec(pod, &k.name);
    let grace = grace_period(Some(pod), spec, None, k.reason, None);
    let pre_stop = pre_stop_of(spec, None, &k.name, hook_ip(status, &env.node.host_ip));
    let events = KillEvents {
        recorder: &env.managers.recorder,
        pod,
    };
    stop_one(
        &env.runtime,
        &pod.full_name(),
        id,
        &k.name,
        grace,
        pre_stop,
        Some(events),
        &k.message,
    )
    .await
}

/// Stop every running container of the pod concurrently, then every sandbox (kubelet:
/// `killPodWithSyncResult`). `pod` is `None` after an agent restart: grace periods then
/// come from the containers' annotations. Sandboxes are stopped even when a container
/// stop failed, and all of them (not only ready ones): stopping an already not-ready
/// sandbox releases network resources the runtime may still hold (as upstream does).
/// Removal is left to cleanup / GC.
pub(crate) async fn kill_pod<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: Option<&api::Pod>,
    status: &PodRuntimeStatus,
    grace_override: Option<i64>,
) -> Result<(), SyncError> {
    let pod_name = match pod {
        Some(p) => p.full_name(),
        None => format!("{}/{} ({})", status.namespace, status.name, status.uid),
    };
    let k = PodKill {
        env,
        pod,
        pod_name: &pod_name,
        pod_ip: hook_ip(status, &env.node.host_ip),
        grace_override,
    };
    // Step 1: the running containers, the sidecars apart in their stop order.
    let (regular, sidecars) = running_in_stop_order(pod, status);
    // Step 2: stop the regular containers concurrently, while the sidecars' preStop hooks
    // run.
    let started = tokio::time::Instant::now();
    let stops = regular
        .iter()
        .map(|(c, annotations)| stop_regular(&k, c, annotations.as_ref()));
    let sidecar_hooks = sidecars.iter().map(|(c, _)| sidecar_pre_stop(&k, c));
    let (results, graces) =
        futures_util::future::join(join_all(stops), join_all(sidecar_hooks)).await;
    let mut errors: Vec<SyncError> = results.into_iter().filter_map(Result::err).collect();
    // Step 3: the sidecars, one after the other, each with what is left of its grace period.
    for ((c, _), grace) in sidecars.iter().zip(graces) {
        let waited = i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX);
        let grace = grace.saturating_sub(waited);
        if let Err(e) = stop_sidecar(&k, c, grace).await {
            errors.push(e);
        }
    }
    // Step 4: every sandbox.
    stop_sandboxes(env, status, &mut errors).await;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SyncError::Steps {
            step: "kill",
            pod: pod_name,
            errors,
        })
    }
}

/// What every container stop of one `kill_pod` shares.
struct PodKill<'a, R: Runtime, C: Clock> {
    env: &'a SyncEnv<R, C>,
    /// `None` after a picolet restart: only the runtime's view is left.
    pod: Option<&'a api::Pod>,
    pod_name: &'a str,
    /// Where hooks are sent (`hook_ip`).
    pod_ip: &'a str,
    grace_override: Option<i64>,
}

impl<'a, R: Runtime, C: Clock> PodKill<'a, R, C> {
    /// Where the stops record their events (nowhere without the pod).
    fn events(&self) -> Option<KillEvents<'a>> {
        let recorder = &self.env.managers.recorder;
        self.pod.map(|pod| KillEvents { recorder, pod })
    }

    /// The container's spec (with the pod) and its grace period.
    fn spec_and_grace(&self, c: &ContainerInfo) -> (Option<&'a api::Container>, i64) {
        let spec = self
            .pod
            .and_then(|p| container_spec(p, labels::container_name(c)));
        let reason = KillReason::Unknown;
        let grace = grace_period(self.pod, spec, Some(c), reason, self.grace_override);
        (spec, grace)
    }
}

/// A running container and, without the pod, its annotations (where its hook is).
type Running<'a> = (&'a ContainerInfo, Option<labels::ContainerAnnotationInfo>);

/// The running containers in two groups: the regular ones, and the sidecars in the order
/// they stop (kubelet: `terminationOrdering`). Restartable init containers (sidecars) are
/// stopped only after every regular container has exited, the last-declared sidecar
/// first, so that the regular containers' preStop hooks can still reach them; their own
/// preStop hooks run at once with the others'. Without the pod (after a picolet restart)
/// no order is known: everything stops at once.
fn running_in_stop_order<'a>(
    pod: Option<&api::Pod>,
    status: &'a PodRuntimeStatus,
) -> (Vec<Running<'a>>, Vec<Running<'a>>) {
    // Without the pod (after a picolet restart) the annotations have the hook; with it they
    // are not parsed (a mass delete kills hundreds of containers at once).
    let running: Vec<Running<'a>> = status
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| {
            (
                c,
                pod.is_none().then(|| labels::container_annotation_info(c)),
            )
        })
        .collect();
    let sidecar_index = |c: &ContainerInfo| {
        let name = labels::container_name(c);
        pod?.spec
            .init_containers
            .iter()
            .position(|s| s.name == name && plan::is_restartable_init_container(s))
    };
    let (mut sidecars, regular): (Vec<_>, Vec<_>) = running
        .into_iter()
        .partition(|(c, _)| sidecar_index(c).is_some());
    sidecars.sort_by_key(|(c, _)| std::cmp::Reverse(sidecar_index(c)));
    (regular, sidecars)
}

/// Step 2 for a regular container (or any, without the pod): its preStop hook, then
/// `StopContainer`.
async fn stop_regular<R: Runtime, C: Clock>(
    k: &PodKill<'_, R, C>,
    c: &ContainerInfo,
    annotations: Option<&labels::ContainerAnnotationInfo>,
) -> Result<(), SyncError> {
    let name = labels::container_name(c);
    let (spec, grace) = k.spec_and_grace(c);
    let pre_stop = pre_stop_of(spec, annotations, name, k.pod_ip);
    let (rt, events) = (&k.env.runtime, k.events());
    stop_one(rt, k.pod_name, &c.id, name, grace, pre_stop, events, "").await
}

/// Step 2 for a sidecar: only its preStop hook, now; returns its grace period (the stop
/// comes in Step 3).
async fn sidecar_pre_stop<R: Runtime, C: Clock>(k: &PodKill<'_, R, C>, c: &ContainerInfo) -> i64 {
    let name = labels::container_name(c);
    let (spec, grace) = k.spec_and_grace(c);
    let pre_stop = pre_stop_of(spec, None, name, k.pod_ip);
    if let Some(hook) = pre_stop.as_ref().filter(|_| grace > 0) {
        let (rt, events) = (&k.env.runtime, k.events());
        Box::pin(run_pre_stop(
            rt, k.pod_name, &c.id, name, grace, hook, events,
        ))
        .await;
    }
    grace
}

/// Step 3 for a sidecar: `StopContainer` with what is left of its grace period.
async fn stop_sidecar<R: Runtime, C: Clock>(
    k: &PodKill<'_, R, C>,
    c: &ContainerInfo,
    grace: i64,
) -> Result<(), SyncError> {
    let events = k.events();
    let name = labels::container_name(c);
    stop_one(
        &k.env.runtime,
        k.pod_name,
        &c.id,
        name,
        grace,
        None,
        events,
        "",
    )
    .await
}

/// Step 4: `StopPodSandbox` for every sandbox of the pod; NotFound is fine.
async fn stop_sandboxes<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    status: &PodRuntimeStatus,
    errors: &mut Vec<SyncError>,
) {
    for s in &status.sandboxes {
        match env.runtime.stop_pod_sandbox(&s.id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(source) => errors.push(SyncError::StopSandbox {
                id: s.id.clone(),
                source,
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Cleanup

/// After a pod finished (kubelet: `SyncTerminatedPod`): remove `<root_dir>/pods/<uid>`
/// (emptyDirs, termination logs) on the blocking pool. Dead containers, sandboxes and logs
/// are left to container GC (`gc.rs`), as upstream: the status of a finished pod that is
/// still wanted survives a picolet restart. Refuses, changing nothing, while a container
/// runs or a sandbox is ready — kill first.
pub(crate) async fn cleanup_pod<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    status: &PodRuntimeStatus,
    uid: &str,
) -> Result<(), SyncError> {
    let alive: Vec<String> = status
        .containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| c.id.clone())
        .chain(
            status
                .sandboxes
                .iter()
                .filter(|s| s.state == SandboxState::Ready)
                .map(|s| s.id.clone()),
        )
        .collect();
    if !alive.is_empty() {
        return Err(SyncError::StillRunning {
            uid: uid.to_string(),
            ids: alive,
        });
    }
    env.resized.forget(uid);
    // kubelet: the volume manager unmounts (NodeUnpublishVolume) the csi volumes once the
    // containers stopped; the pod is not cleaned up, and stays not finished, until every one
    // is unpublished and nothing is mounted on its target any more (retried by the worker).
    crate::volume::csi::unpublish_pod_volumes(&env.paths.root_dir, uid, &env.managers.csi)
        .await
        .map_err(|source| SyncError::Unpublish {
            uid: uid.to_string(),
            source,
        })?;
    // The tmpfs of Memory emptyDirs are unmounted first; nothing else is left mounted
    // inside the pod directory by picolet (the csi volumes are gone: see above), so a
    // recursive removal only deletes picolet's own files (remove_dir_all does not follow
    // symlinks). On an SD card this takes a while: off
    // the event loop's thread.
    let dir = mounts::pod_dir(&env.paths.root_dir, uid);
    let removal = {
        let dir = dir.clone();
        let root = env.paths.root_dir.clone();
        let uid = uid.to_string();
        let tmpfs = std::sync::Arc::clone(&env.managers.tmpfs);
        tokio::task::spawn_blocking(move || {
            mounts::unmount_pod_volumes(&root, &uid, tmpfs.as_ref())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            std::fs::remove_dir_all(&dir)
        })
        .await
    };
    match removal {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(Err(source)) => Err(SyncError::RemoveDir { path: dir, source }),
        Err(join) => Err(SyncError::RemoveDir {
            path: dir,
            source: std::io::Error::other(join.to_string()),
        }),
    }
}
