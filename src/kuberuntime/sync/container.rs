//! Starting a container (kubelet: `startContainer`: its image, config, CreateContainer,
//! StartContainer, postStart) and what a dead one leaves: its termination message, restart
//! counts from its log directory, init containers pruned.

use std::path::Path;

use crate::api;
use crate::clock::Clock;
use crate::cri::{
    ContainerConfig, ContainerInfo, ContainerState, CriError, ImageUser, PodRuntimeStatus, Runtime,
    SandboxConfig,
};
use crate::kuberuntime::backoff::PodBackoffs;
use crate::kuberuntime::container_mounts;
use crate::kuberuntime::cri_config;
use crate::kuberuntime::hooks;
use crate::kuberuntime::labels;
use crate::kuberuntime::plan::{self, ContainerToKill, KillReason};
use crate::recorder;
use crate::volume::mounts;

use super::*;

pub(super) struct StartContext<'a> {
    pub(super) pod: &'a api::Pod,
    pub(super) status: &'a PodRuntimeStatus,
    pub(super) sandbox_id: String,
    pub(super) sandbox_config: &'a SandboxConfig,
    pub(super) pod_ip: String,
}

/// Whether the runtime mounts image volumes (CRI `Mount.image`): containerd from 2.1,
/// CRI-O from 1.31 (kubelet-behaviour §25). An older one would ignore the field and bind an
/// empty host path, so picolet refuses the container with this message instead. A runtime
/// picolet does not know, or a version it cannot read, is let through (its own error then).
pub(super) fn image_volumes_supported(
    runtime_name: &str,
    runtime_version: &str,
) -> Result<(), ImageVolumeError> {
    let need = match runtime_name {
        "containerd" => (2, 1),
        "cri-o" => (1, 31),
        _ => return Ok(()),
    };
    let v = runtime_version.trim_start_matches('v');
    let mut parts = v.split(|ch: char| !ch.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) if (major, minor) < need => Err(ImageVolumeError::TooOld {
            runtime_name: runtime_name.to_string(),
            runtime_version: runtime_version.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Why a container with image volumes is refused before it is created.
#[derive(Debug)]
pub(super) enum ImageVolumeError {
    /// The runtime is a version that does not mount image volumes.
    TooOld {
        runtime_name: String,
        runtime_version: String,
    },
    /// The runtime's `Version` call failed.
    Version(CriError),
}

impl std::fmt::Display for ImageVolumeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImageVolumeError::TooOld {
                runtime_name,
                runtime_version,
            } => write!(
                f,
                "image volumes need containerd >= 2.1 or CRI-O >= 1.31; the runtime is {runtime_name} {runtime_version}"
            ),
            ImageVolumeError::Version(e) => {
                write!(f, "image volumes: cannot tell the runtime's version: {e}")
            }
        }
    }
}

impl std::error::Error for ImageVolumeError {}

async fn image_volume_support<R: Runtime>(runtime: &R) -> Result<(), ImageVolumeError> {
    match runtime.version().await {
        Ok(v) => image_volumes_supported(&v.runtime_name, &v.runtime_version),
        Err(e) => Err(ImageVolumeError::Version(e)),
    }
}

pub(super) fn waiting(reason: WaitingReason, message: impl Into<String>) -> StartOutcome {
    StartOutcome::Waiting {
        reason,
        message: message.into(),
    }
}

/// kubelet: `SyncPod`'s `start` closure + `startContainer`: back-off check → image →
/// config → CreateContainer → StartContainer; a start that failed is recorded as the
/// container's `Failed` event (`Error: …`), as upstream's `startContainer` does.
pub(super) async fn start_container<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    backoff: &mut PodBackoffs,
    result: &mut PodSyncResult,
) -> StartOutcome {
    let field_path = recorder::container_field_path(cx.pod, &c.name);
    let outcome = try_start_container(env, cx, c, &field_path, backoff, result).await;
    if let StartOutcome::Waiting { reason, message } = &outcome {
        // kubelet: startContainer — events.FailedToCreateContainer / FailedToStartContainer
        // with "Error: <err>"; the image errors are the reasons themselves (ErrImagePull).
        let message = match reason {
            WaitingReason::ErrImagePull
            | WaitingReason::ImagePullBackOff
            | WaitingReason::ErrImageNeverPull
            | WaitingReason::InvalidImageName
            | WaitingReason::ImageInspectError => Some(format!("Error: {reason}")),
            WaitingReason::CreateContainerConfigError
            | WaitingReason::CreateContainerError
            | WaitingReason::RunContainerError => Some(format!("Error: {message}")),
            WaitingReason::ContainerCreating
            | WaitingReason::CrashLoopBackOff
            | WaitingReason::PostStartHookError => None,
        };
        if let Some(m) = message {
            env.managers
                .recorder
                .warning(cx.pod, Some(&field_path), recorder::FAILED, m);
        }
    }
    outcome
}

/// kubelet: `startContainer`, in its steps (after `SyncPod`'s back-off check): pull the
/// image, create the container, start it, run its postStart hook. Each failure is the
/// container's waiting reason and message; nothing is retried here.
pub(super) async fn try_start_container<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    field_path: &str,
    backoff: &mut PodBackoffs,
    result: &mut PodSyncResult,
) -> StartOutcome {
    let pod_name = cx.pod.full_name();
    // kubelet: SyncPod's doBackOff — a container in crash-loop back-off waits.
    if let Some(outcome) = crash_loop_back_off(env, cx, c, field_path, backoff, result, &pod_name) {
        return outcome;
    }
    // Step 1: pull the image (and those of the image volumes the container mounts).
    let images = match pull_images(env, cx, c, field_path, backoff, result, &pod_name).await {
        Ok(images) => images,
        Err(outcome) => return outcome,
    };
    // Step 2: create the container.
    let (id, restart_count) = match create(env, cx, c, field_path, images, &pod_name).await {
        Ok(created) => created,
        Err(outcome) => return outcome,
    };
    // Step 3: start the container.
    if let Err(e) = env.runtime.start_container(&id).await {
        log::warn!("pod {pod_name}: start container {:?} ({id}): {e}", c.name);
        return waiting(WaitingReason::RunContainerError, e.to_string());
    }
    log::info!(
        "pod {pod_name}: started container {:?} ({id}, restart {restart_count})",
        c.name
    );
    // kubelet: startContainer — events.StartedContainer.
    env.managers.recorder.normal(
        cx.pod,
        Some(field_path),
        recorder::STARTED_CONTAINER,
        format!("Started container {}", c.name),
    );
    // Step 4: execute the postStart hook.
    if let Err(outcome) = post_start(env, cx, c, &id, field_path, &pod_name).await {
        return outcome;
    }
    StartOutcome::Started { id, restart_count }
}

/// kubelet: `doBackOff` — a container whose last instance failed waits out its crash-loop
/// back-off (BackOff event, once per sync attempt; the sync is requeued when it ends).
fn crash_loop_back_off<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    field_path: &str,
    backoff: &mut PodBackoffs,
    result: &mut PodSyncResult,
    pod_name: &str,
) -> Option<StartOutcome> {
    let pod = cx.pod;
    let w = plan::should_back_off(&mut backoff.crash_loop, pod, c, cx.status, env.clock.now())?;
    log::debug!("pod {pod_name}: {}", w.message);
    // kubelet: doBackOff — events.BackOffStartContainer, once per sync attempt.
    env.managers.recorder.warning(
        pod,
        Some(field_path),
        recorder::BACK_OFF,
        format!(
            "Back-off restarting failed container {} in pod {}_{}({})",
            c.name, pod.metadata.name, pod.metadata.namespace, pod.metadata.uid
        ),
    );
    result.note_requeue(w.remaining);
    Some(waiting(WaitingReason::CrashLoopBackOff, w.message))
}

/// What Step 1 found: the container's image and its user, and the image volumes' images.
struct Images {
    image_ref: String,
    /// `None`: not read (after a pull); read later only if it decides.
    image_user: Option<ImageUser>,
    /// (volume name, image reference) of each image volume the container mounts.
    volumes: Vec<(String, String)>,
}

/// Step 1 (kubelet: `EnsureImageExists`): the container's image, then (kubelet:
/// getImageVolumes) the images of the image volumes this container mounts, pulled as
/// containers' are (pull policy, the pod's pull secrets, back-off), before it is created.
/// One loop, one await of `ensure_image` (binary size: its state machine is not inlined
/// twice).
async fn pull_images<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    field_path: &str,
    backoff: &mut PodBackoffs,
    result: &mut PodSyncResult,
    pod_name: &str,
) -> Result<Images, StartOutcome> {
    let wanted_volumes = mounts::image_volumes(cx.pod, c);
    if !wanted_volumes.is_empty()
        && let Err(e) = image_volume_support(&env.runtime).await
    {
        log::warn!("pod {pod_name}: container {:?}: {e}", c.name);
        return Err(waiting(
            WaitingReason::CreateContainerConfigError,
            e.to_string(),
        ));
    }
    let mut image_volumes: Vec<(String, String)> = Vec::with_capacity(wanted_volumes.len());
    let mut container_image = None;
    let wanted = std::iter::once((None, c.image.as_str(), cri_config::pull_policy(c))).chain(
        wanted_volumes
            .into_iter()
            .map(|(volume, reference, policy)| (Some(volume), reference, policy)),
    );
    for (volume, image, policy) in wanted {
        let pull_backoff = &mut backoff.image_pull;
        match ensure_image(env, cx, image, policy, field_path, pull_backoff, result).await {
            Ok(found) => match volume {
                None => container_image = Some(found),
                Some(volume) => image_volumes.push((volume.to_string(), found.0)),
            },
            Err(StartOutcome::Waiting { reason, message }) if volume.is_some() => {
                let volume = volume.unwrap_or_default();
                return Err(waiting(
                    reason,
                    format!("image volume {volume:?}: {message}"),
                ));
            }
            Err(outcome) => return Err(outcome),
        }
    }
    let Some((image_ref, image_user)) = container_image else {
        return Err(waiting(WaitingReason::ImageInspectError, "no image"));
    };
    Ok(Images {
        image_ref,
        image_user,
        volumes: image_volumes,
    })
}

/// Step 2 (kubelet: `startContainer` — generateContainerConfig, CreateContainer): the
/// restart count, the CRI config with its environment, mounts, devices and namespaces,
/// then `CreateContainer` and the Created event. Returns the new ID and restart count.
async fn create<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    field_path: &str,
    images: Images,
    pod_name: &str,
) -> Result<(String, u32), StartOutcome> {
    let Images {
        image_ref,
        image_user,
        volumes,
    } = images;
    let image_user = image_user_of(env, cx.pod, c, &image_ref, image_user).await?;
    // Restart count: the newest instance's + 1; with no instance left (removed, or the
    // runtime lost its state in a reboot) continue after the newest log file.
    let log_dir = cri_config::pod_log_directory(&env.paths.pod_log_dir, cx.pod).join(&c.name);
    let restart_count = match plan::newest_container(cx.status, &c.name) {
        Some(s) => labels::restart_count(s).saturating_add(1),
        None => restart_count_from_log_dir(&log_dir),
    };
    let cfg = container_config_for(
        env,
        cx,
        c,
        &volumes,
        &image_user,
        restart_count,
        &log_dir,
        pod_name,
    )
    .await?;
    let id = match env
        .runtime
        .create_container(&cx.sandbox_id, &cfg, cx.sandbox_config)
        .await
    {
        Ok(id) => id,
        Err(e) => {
            log::warn!("pod {pod_name}: create container {:?}: {e}", c.name);
            return Err(waiting(WaitingReason::CreateContainerError, e.to_string()));
        }
    };
    // kubelet: startContainer — events.CreatedContainer ("Created container: web" since v1.32).
    env.managers.recorder.normal(
        cx.pod,
        Some(field_path),
        recorder::CREATED_CONTAINER,
        format!("Created container: {}", c.name),
    );
    Ok((id, restart_count))
}

/// kubelet: getImageUser, for verifyRunAsNonRoot — read only when it decides (runAsNonRoot
/// without a runAsUser), and again only after a pull.
async fn image_user_of<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    c: &api::Container,
    image_ref: &str,
    known: Option<ImageUser>,
) -> Result<ImageUser, StartOutcome> {
    match known {
        Some(user) => Ok(user),
        None if cri_config::needs_image_user(pod, c) => {
            match env.runtime.image_status(image_ref).await {
                Ok(Some(img)) => Ok(img.user),
                Ok(None) => Ok(ImageUser::Unset),
                Err(e) => Err(waiting(
                    WaitingReason::CreateContainerConfigError,
                    format!("failed to get image user of {:?}: {e}", c.image),
                )),
            }
        }
        None => Ok(ImageUser::Unset),
    }
}

/// The container's CRI config (kubelet: `generateContainerConfig`): its environment, then
/// its mounts (subPathExpr expands against the environment), the ephemeral container's
/// target, the device manager's devices, the pod's user namespace.
#[allow(clippy::too_many_arguments)]
async fn container_config_for<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    image_volumes: &[(String, String)],
    image_user: &ImageUser,
    restart_count: u32,
    log_dir: &Path,
    pod_name: &str,
) -> Result<ContainerConfig, StartOutcome> {
    let pod = cx.pod;
    let seccomp_root = env.paths.root_dir.join("seccomp");
    let node = env.node_params(&seccomp_root);
    let envs = container_envs(cx, c, node, pod_name)?;
    let mount_list = container_mount_list(
        env,
        cx,
        c,
        &envs,
        image_volumes,
        restart_count,
        log_dir,
        pod_name,
    )?;
    let target = target_container_id(cx, c)?;
    // kubelet: GenerateRunContainerOptions → the device manager's run options: the
    // container's devices (the same ones at every restart), their mounts first.
    #[cfg(feature = "device-plugins")]
    let devices = match &env.managers.devices {
        Some(handle) => {
            let requests = crate::cm::devicemanager::container_requests(c);
            match handle.container_devices(pod.uid(), &c.name, requests).await {
                Ok(d) => d,
                Err(e) => {
                    return Err(waiting(
                        WaitingReason::CreateContainerConfigError,
                        e.to_string(),
                    ));
                }
            }
        }
        None => Default::default(),
    };
    #[cfg(feature = "device-plugins")]
    let mount_list = device_mounts(&devices, mount_list);
    let mut cfg = match cri_config::container_config(
        pod,
        c,
        restart_count,
        &cx.pod_ip,
        mount_list,
        node,
        image_user,
    ) {
        Ok(cfg) => cfg,
        Err(e) => {
            log::warn!("pod {pod_name}: container {:?}: {e}", c.name);
            return Err(waiting(
                WaitingReason::CreateContainerConfigError,
                e.to_string(),
            ));
        }
    };
    #[cfg(feature = "device-plugins")]
    apply_devices(&mut cfg, devices);
    // kubelet: NamespacesForPod — the containers carry the pod's user namespace too.
    cfg.security.namespace_options.userns = cx.sandbox_config.namespace_options.userns;
    // kubelet: generateLinuxContainerConfig — the target's PID namespace (CRI TARGET) when
    // the container would have its own.
    if let Some(id) = target
        && cfg.security.namespace_options.pid == crate::cri::NamespaceMode::Container
    {
        cfg.security.pid_target = id.to_string();
    }
    Ok(cfg)
}

/// The container's environment (kubelet: makeEnvironmentVariables). envFrom keys an env
/// entry cannot carry (printable ASCII without '=') are skipped with a WARN (kubelet ≤
/// 1.33: an InvalidEnvironmentVariableNames event for the classic rule; 1.37 takes every
/// key, and validation already refuses such prefixes and keys).
fn container_envs(
    cx: &StartContext<'_>,
    c: &api::Container,
    node: cri_config::NodeParams<'_>,
    pod_name: &str,
) -> Result<Vec<(String, String)>, StartOutcome> {
    if let Ok(from) = cri_config::env_from(cx.pod, c, node) {
        for (kind, object, keys) in from.skipped {
            log::warn!(
                "pod {pod_name}: container {:?}: keys [{}] from the EnvFrom {} {object} were skipped since they are considered invalid environment variable names",
                c.name,
                keys.join(", "),
                kind.resource()
            );
        }
    }
    cri_config::container_env(cx.pod, c, &cx.pod_ip, node).map_err(|e| {
        // Often a ConfigMap or Secret not there yet: the pod worker's WARN says it once.
        log::debug!("pod {pod_name}: container {:?}: {e}", c.name);
        waiting(WaitingReason::CreateContainerConfigError, e.to_string())
    })
}

/// The container's mounts (kubelet: makeMounts): its volumes, the managed /etc/hosts, the
/// termination-message file, and its log directory made.
#[allow(clippy::too_many_arguments)]
fn container_mount_list<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    envs: &[(String, String)],
    image_volumes: &[(String, String)],
    restart_count: u32,
    log_dir: &Path,
    pod_name: &str,
) -> Result<Vec<crate::cri::Mount>, StartOutcome> {
    let pod = cx.pod;
    let config_error = |e: String| waiting(WaitingReason::CreateContainerConfigError, e);
    let mut mount_list = mounts::prepare_mounts(
        &env.paths.root_dir,
        pod,
        c,
        envs,
        image_volumes,
        env.managers.tmpfs.as_ref(),
        env.node.memory_capacity,
    )
    .map_err(|e| {
        log::warn!("pod {pod_name}: container {:?}: {e}", c.name);
        config_error(e.to_string())
    })?;
    // kubelet: makeMounts adds the managed /etc/hosts.
    match container_mounts::etc_hosts_mount(
        &env.paths.root_dir,
        pod,
        c,
        &cx.pod_ip,
        Path::new(container_mounts::NODE_HOSTS_FILE),
    ) {
        Ok(Some(m)) => mount_list.push(m),
        Ok(None) => {}
        Err(e) => {
            log::warn!("pod {pod_name}: container {:?}: /etc/hosts: {e}", c.name);
            return Err(config_error(e.to_string()));
        }
    }
    // One file per container instance, named after its restart count, so that the
    // message can be found again from the runtime's view alone (after a picolet restart too).
    let file_id = container_mounts::termination_log_file_id(restart_count);
    match container_mounts::termination_log_mount(&env.paths.root_dir, pod, c, &file_id) {
        Ok(m) => mount_list.push(m),
        Err(e) => log::warn!(
            "pod {pod_name}: container {:?}: termination log: {e}",
            c.name
        ),
    }
    if let Err(e) = mounts::ensure_dir(log_dir, 0o755) {
        return Err(config_error(format!(
            "create container log directory for container {} failed: {e}",
            c.name
        )));
    }
    Ok(mount_list)
}

/// kubelet: startSpec.getTargetID — an ephemeral container's target, by name, any state.
fn target_container_id<'a>(
    cx: &StartContext<'a>,
    c: &api::Container,
) -> Result<Option<&'a str>, StartOutcome> {
    let Some(t) = c.target_container_name.as_deref().filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    match plan::newest_container(cx.status, t) {
        Some(found) => Ok(Some(found.id.as_str())),
        None => Err(waiting(
            WaitingReason::CreateContainerConfigError,
            format!("unable to find target container {t}"),
        )),
    }
}

/// Step 4 (kubelet: `startContainer` runs the postStart hook right after the start): a
/// failure kills the container (FailedPostStartHook) and the start counts as failed.
async fn post_start<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    c: &api::Container,
    id: &str,
    field_path: &str,
    pod_name: &str,
) -> Result<(), StartOutcome> {
    let Some(h) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
        return Ok(());
    };
    if let Err(e) = hooks::run(&env.runtime, c, id, h, &cx.pod_ip, None).await {
        let message = format!("PostStartHook failed: {e}");
        log::warn!(
            "pod {pod_name}: container {:?}: postStart hook failed: {e}; killing the container (FailedPostStartHook)",
            c.name
        );
        // kubelet: the hook's output stays out of the event (it may hold secrets).
        env.managers.recorder.warning(
            cx.pod,
            Some(field_path),
            recorder::FAILED_POST_START_HOOK,
            "PostStartHook failed",
        );
        let kill = ContainerToKill {
            name: c.name.clone(),
            message: "FailedPostStartHook".into(),
            reason: KillReason::Unknown,
        };
        if let Err(e) = kill_container(env, cx.pod, cx.status, id, &kill).await {
            log::warn!("pod {pod_name}: {e}");
        }
        return Err(waiting(WaitingReason::PostStartHookError, message));
    }
    log::info!(
        "pod {pod_name}: container {:?}: postStart hook done",
        c.name
    );
    Ok(())
}

/// kubelet: `getTerminationMessage` / `readLastStringFromContainerLogs` — an exited
/// container without a runtime message gets the content of its termination-message file
/// (at most 4 KiB), or, with `terminationMessagePolicy: FallbackToLogsOnError` and a
/// failure, the tail of its log (80 lines, at most 2 KiB). Small local reads; nothing is
/// read for running containers.
pub(crate) fn fill_termination_messages(
    root_dir: &Path,
    pod: &api::Pod,
    status: &mut PodRuntimeStatus,
) {
    const MAX_MESSAGE: u64 = 4 * 1024;
    const MAX_LOG_TAIL: usize = 2 * 1024;
    const LOG_LINES: usize = 80;
    for c in status
        .containers
        .iter_mut()
        .filter(|c| c.state == ContainerState::Exited && c.message.is_empty())
    {
        let Some(spec) = pod
            .spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .chain(&pod.spec.ephemeral_containers)
            .find(|s| s.name == c.name)
        else {
            continue;
        };
        let file = mounts::pod_dir(root_dir, &pod.metadata.uid)
            .join("containers")
            .join(&c.name)
            .join(container_mounts::termination_log_file_id(
                labels::restart_count(c),
            ));
        let mut text = String::new();
        if let Ok(f) = std::fs::File::open(&file) {
            use std::io::Read as _;
            let mut buf = Vec::new();
            let _ = f.take(MAX_MESSAGE).read_to_end(&mut buf);
            text = String::from_utf8_lossy(&buf).into_owned();
        }
        let fallback = spec.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
        if text.is_empty() && fallback && c.exit_code != 0 && !c.log_path.is_empty() {
            text = log_tail(Path::new(&c.log_path), LOG_LINES, MAX_LOG_TAIL);
        }
        c.message = text;
    }
}

/// The message part of the last `lines` CRI log lines (`<time> <stream> <tag> <text>`),
/// at most `max` bytes from the end. A partial line (tag `P`: the output did not end in a
/// newline there) goes on without one, as the kubelet's log reader joins them
/// (`kuberuntime/logs`: only a full line, `F`, ends with a newline).
pub(super) fn log_tail(path: &Path, lines: usize, max: usize) -> String {
    let Ok(content) = std::fs::read_to_string(path) else {
        return String::new();
    };
    let all: Vec<&str> = content.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut out = String::new();
    for line in &all[start..] {
        let mut fields = line.splitn(4, ' ');
        let tag = fields.nth(2).unwrap_or("F");
        out.push_str(fields.next().unwrap_or(""));
        if !tag.split(':').any(|t| t == "P") {
            out.push('\n');
        }
    }
    if out.len() > max {
        let mut cut = out.len() - max;
        while !out.is_char_boundary(cut) {
            cut += 1;
        }
        out = out[cut..].to_string();
    }
    out
}

/// The next restart count after the newest `<n>.log` (rotated `<n>.log.*` included) in a
/// container's log directory; 0 when there is none (kubelet: `calcRestartCountByLogDir`).
pub(super) fn restart_count_from_log_dir(dir: &Path) -> u32 {
    let Ok(entries) = crate::dir_listing::read_dir(dir) else {
        return 0;
    };
    entries
        .into_iter()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (n, rest) = name.split_once('.')?;
            if !rest.starts_with("log") || (rest.len() > 3 && !rest[3..].starts_with('.')) {
                return None;
            }
            n.parse::<u32>().ok()?.checked_add(1)
        })
        .max()
        .unwrap_or(0)
}

/// Remove every instance of the pod's init containers (after the sandbox was killed for
/// re-creation: initialisation starts over) (kubelet: `purgeInitContainers`).
pub(super) async fn purge_init_containers<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
) {
    for c in &status.containers {
        let name = labels::container_name(c);
        if pod.spec.init_containers.iter().any(|i| i.name == name) {
            remove_container_logged(env, pod, c).await;
        }
    }
}

/// Keep only the newest exited instance of each init container (kubelet:
/// `pruneInitContainersBeforeStart`).
/// Returns whether it removed any.
pub(super) async fn prune_init_containers<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
) -> bool {
    let mut removed = false;
    for init in &pod.spec.init_containers {
        let dead = status.containers.iter().filter(|c| {
            labels::container_name(c) == init.name
                && matches!(c.state, ContainerState::Exited | ContainerState::Unknown)
        });
        for c in dead.skip(1) {
            remove_container_logged(env, pod, c).await;
            removed = true;
        }
    }
    removed
}

pub(super) async fn remove_container_logged<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    c: &ContainerInfo,
) {
    match env.runtime.remove_container(&c.id).await {
        Ok(()) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => log::warn!(
            "pod {}: remove container {:?} ({}): {e}",
            pod.full_name(),
            labels::container_name(c),
            c.id
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Kill

/// kubelet: the device manager's mounts come before the container's own (`opts.Mounts`).
#[cfg(feature = "device-plugins")]
fn device_mounts(
    devices: &crate::cm::devicemanager::ContainerDevices,
    mounts: Vec<crate::cri::Mount>,
) -> Vec<crate::cri::Mount> {
    if devices.mounts.is_empty() {
        return mounts;
    }
    let mut out: Vec<crate::cri::Mount> = devices
        .mounts
        .iter()
        .map(|m| crate::cri::Mount {
            container_path: m.container_path.clone(),
            host_path: m.host_path.clone(),
            readonly: m.read_only,
            ..Default::default()
        })
        .collect();
    out.extend(mounts);
    out
}

/// kubelet: `generateContainerConfig` with the device manager's options — its environment
/// before the container's own (a name the container sets is the container's), its
/// annotations added, the devices and the CDI device names.
#[cfg(feature = "device-plugins")]
fn apply_devices(
    cfg: &mut crate::cri::ContainerConfig,
    d: crate::cm::devicemanager::ContainerDevices,
) {
    if d.is_empty() {
        return;
    }
    let own = std::mem::take(&mut cfg.envs);
    let mut envs: Vec<(String, String)> = d
        .envs
        .into_iter()
        .filter(|(k, _)| !own.iter().any(|(n, _)| n == k))
        .collect();
    envs.extend(own);
    cfg.envs = envs;
    cfg.annotations.extend(d.annotations);
    cfg.devices = d
        .devices
        .into_iter()
        .map(|x| crate::cri::Device {
            container_path: x.container_path,
            host_path: x.host_path,
            permissions: x.permissions,
        })
        .collect();
    cfg.cdi_devices = d.cdi_devices;
}
