//! The image a container needs (kubelet: `EnsureImageExists`): pull policy, back-off, the
//! pull secrets' keyring.

use crate::api::{self, PullPolicy};
use crate::clock::{Clock, go_duration, truncate_millis};
use crate::cri::credentials;
use crate::cri::{ImageUser, Runtime};
use crate::kuberuntime::backoff::{self, Backoff};
use crate::kuberuntime::cri_config;
use crate::recorder::{self, Recorder};

use super::*;

/// kubelet: `EnsureImageExists` — pull policy, `Never` without the image, pull back-off
/// per pod + image; for a container's image and an image volume's alike. Returns the
/// image reference, and its user when it was already present (the status read says; after
/// a pull it is not known).
pub(super) async fn ensure_image<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    wanted: &str,
    policy: PullPolicy,
    field_path: &str,
    pull_backoff: &mut Backoff,
    result: &mut PodSyncResult,
) -> Result<(String, Option<ImageUser>), StartOutcome> {
    let (pod, fp) = (cx.pod, Some(field_path));
    // Step 1: the reference with its default tag, and whether the image is present.
    let image = cri_config::image_with_default_tag(wanted).map_err(|e| {
        // kubelet: EnsureImageExists — events.FailedToInspectImage.
        env.managers.recorder.warning(
            pod,
            fp,
            recorder::INSPECT_FAILED,
            format!("Failed to apply default image tag {:?}: {e}", wanted),
        );
        waiting(WaitingReason::InvalidImageName, e.to_string())
    })?;
    let present = env.runtime.image_status(&image).await.map_err(|e| {
        let message = format!("Failed to inspect image {:?}: {e}", wanted);
        env.managers
            .recorder
            .warning(pod, fp, recorder::INSPECT_FAILED, message.clone());
        waiting(WaitingReason::ImageInspectError, message)
    })?;
    // Step 2: the pull policy says whether to pull; if not, the present image is used.
    let pull = match policy {
        PullPolicy::Never => false,
        PullPolicy::Always => true,
        PullPolicy::IfNotPresent => present.is_none(),
    };
    if !pull {
        return use_present(&env.managers.recorder, pod, wanted, fp, present);
    }
    // Step 3: an image whose pull failed lately waits out its back-off.
    let key = backoff::image_pull_key(&pod.metadata.uid, wanted);
    if let Some(remaining) = pull_backoff.remaining_since_update(&key, env.clock.now()) {
        result.note_requeue(remaining);
        let message = format!("Back-off pulling image {:?}", wanted);
        // kubelet: EnsureImageExists — events.BackOffPullImage (type Normal upstream).
        env.managers
            .recorder
            .normal(pod, fp, recorder::BACK_OFF, message.clone());
        return Err(waiting(WaitingReason::ImagePullBackOff, message));
    }
    // Step 4: pull it, with the pod's or the node's registry credentials.
    let pulled = pull_image(env, cx, &image, wanted, field_path).await;
    let now = env.clock.now();
    match pulled {
        Ok(image_ref) => {
            pull_backoff.gc(now);
            Ok((image_ref, None))
        }
        Err(outcome) => {
            pull_backoff.next(&key, now, now);
            result.note_requeue(pull_backoff.get(&key));
            Err(outcome)
        }
    }
}

/// No pull: the present image, with its user (kubelet: events.PulledImage "already
/// present"); none with pull policy `Never` is ErrImageNeverPull.
fn use_present(
    recorder: &Recorder,
    pod: &api::Pod,
    wanted: &str,
    fp: Option<&str>,
    present: Option<crate::cri::ImageInfo>,
) -> Result<(String, Option<ImageUser>), StartOutcome> {
    match present {
        Some(img) => {
            // kubelet: EnsureImageExists — events.PulledImage for a present image.
            recorder.normal(
                pod,
                fp,
                recorder::PULLED_IMAGE,
                format!("Container image {:?} already present on machine", wanted),
            );
            Ok((img.id, Some(img.user)))
        }
        None => {
            let message = format!(
                "Container image {:?} is not present with pull policy of Never",
                wanted
            );
            // kubelet: events.ErrImageNeverPullPolicy.
            recorder.warning(pod, fp, recorder::ERR_IMAGE_NEVER_PULL, message.clone());
            Err(waiting(WaitingReason::ErrImageNeverPull, message))
        }
    }
}

/// `PullImage` with the registry credentials that apply (kubelet: `pullImage` with the
/// pod's imagePullSecrets first, then the node's keyring) and its events: Pulling, then
/// Pulled or Failed. Returns the image reference; the caller keeps the back-off.
async fn pull_image<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    image: &str,
    wanted: &str,
    field_path: &str,
) -> Result<String, StartOutcome> {
    let (pod, fp) = (cx.pod, Some(field_path));
    // kubelet: the docker config keyring, read at each pull (a pull is rare, and an edit of
    // the file applies without a restart). Never logged: only whether credentials went along.
    // kubelet: the pod's imagePullSecrets come first, then the node's keyring.
    let pod_ring = pull_secrets_keyring(env, pod);
    let (keyring, problems) = credentials::Keyring::load(&env.managers.credential_paths);
    for p in problems {
        log::warn!("registry credentials: {p}");
    }
    let (auth, whose) = match pod_ring.lookup(image) {
        Some(a) => (Some(a), " with the pod's imagePullSecrets"),
        None => (
            keyring.lookup(image),
            " with the node's credentials for its registry",
        ),
    };
    log::info!(
        "pod {}: pulling image {:?}{}",
        pod.full_name(),
        wanted,
        if auth.is_some() { whose } else { "" }
    );
    // kubelet: EnsureImageExists — events.PullingImage.
    env.managers.recorder.normal(
        pod,
        fp,
        recorder::PULLING_IMAGE,
        format!("Pulling image {:?}", wanted),
    );
    let pull_started = tokio::time::Instant::now();
    match env.runtime.pull_image(image, auth, cx.sandbox_config).await {
        Ok(image_ref) => {
            // kubelet: events.PulledImage — "in <pull> (<total> including waiting)"; picolet
            // pulls one image at a time per pod and does not queue: both are the pull. The
            // image size upstream appends is not known here.
            let took = go_duration(truncate_millis(pull_started.elapsed()));
            env.managers.recorder.normal(
                pod,
                fp,
                recorder::PULLED_IMAGE,
                format!(
                    "Successfully pulled image {:?} in {took} ({took} including waiting)",
                    wanted
                ),
            );
            Ok(image_ref)
        }
        Err(e) => {
            let msg = e.to_string();
            let paths = &env.managers.credential_paths;
            let hint = credentials_hint(&msg, image, auth.is_some(), paths);
            log::warn!(
                "pod {}: failed to pull image {:?}: {msg}{hint}",
                pod.full_name(),
                wanted
            );
            // kubelet: events.FailedToPullImage.
            env.managers.recorder.warning(
                pod,
                fp,
                recorder::FAILED,
                format!("Failed to pull image {:?}: {msg}", wanted),
            );
            Err(waiting(WaitingReason::ErrImagePull, format!("{msg}{hint}")))
        }
    }
}

/// A registry that wants credentials (the pull's error `msg` says so): where picolet
/// looks for them, appended to the message; "" for other failures.
fn credentials_hint(
    msg: &str,
    image: &str,
    had_auth: bool,
    paths: &[std::path::PathBuf],
) -> String {
    let lower = msg.to_ascii_lowercase();
    if !["401", "unauthorized", "authorization failed", "denied"]
        .iter()
        .any(|w| lower.contains(w))
    {
        return String::new();
    }
    let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    format!(
        " ({} credentials for {}; picolet reads registry credentials from {} and the pod's imagePullSecrets)",
        if had_auth {
            "the registry refused the"
        } else {
            "no"
        },
        credentials::image_location(image),
        files.join(", ")
    )
}

/// The registry credentials of the pod's `imagePullSecrets` (kubelet: `getPullSecretsForPod`):
/// the `.dockerconfigjson` or `.dockercfg` key of each Secret; a missing one is a WARN and the
/// pull goes on without it, as upstream.
pub(super) fn pull_secrets_keyring<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
) -> credentials::Keyring {
    let mut ring = credentials::Keyring::default();
    for s in &pod.spec.image_pull_secrets {
        let key = crate::config_data::ObjectKey::new(
            crate::config_data::Scope::of(pod),
            crate::config_data::Kind::Secret,
            &pod.metadata.namespace,
            &s.name,
        );
        let Some(secret) = env.managers.config.get(&key) else {
            log::warn!(
                "pod {}: unable to retrieve pull secret {}/{}; the image pull may not succeed",
                pod.full_name(),
                pod.metadata.namespace,
                s.name
            );
            continue;
        };
        let data = secret
            .data
            .get(".dockerconfigjson")
            .or_else(|| secret.data.get(".dockercfg"));
        match data.map(|d| credentials::Keyring::parse(d)) {
            Some(Ok(r)) => ring.extend(r),
            Some(Err(e)) => log::warn!(
                "pod {}: pull secret {}/{}: {e}",
                pod.full_name(),
                pod.metadata.namespace,
                s.name
            ),
            None => log::warn!(
                "pod {}: pull secret {}/{} has neither .dockerconfigjson nor .dockercfg",
                pod.full_name(),
                pod.metadata.namespace,
                s.name
            ),
        }
    }
    ring
}
