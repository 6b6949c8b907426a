//! The image a container needs (kubelet: `EnsureImageExists`): pull policy, back-off, the
//! pull secrets' keyring.

use std::time::Duration;

use crate::api::{self, PullPolicy};
use crate::clock::Clock;
use crate::cri::credentials;
use crate::cri::{ImageUser, Runtime};
use crate::kuberuntime::backoff::{self, Backoff};
use crate::kuberuntime::cri_config;
use crate::recorder;

use super::*;

/// kubelet: `EnsureImageExists` — pull policy, `Never` without the image, pull back-off
/// per pod + image; for a container's image and an image volume's alike. Returns the image reference, and its user when it was already present
/// (the status read says; after a pull it is not known).
pub(super) async fn ensure_image<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    cx: &StartContext<'_>,
    wanted: &str,
    policy: PullPolicy,
    field_path: &str,
    pull_backoff: &mut Backoff,
    result: &mut PodSyncResult,
) -> Result<(String, Option<ImageUser>), StartOutcome> {
    let pod = cx.pod;
    let fp = Some(field_path);
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
    let pull = match policy {
        PullPolicy::Never => false,
        PullPolicy::Always => true,
        PullPolicy::IfNotPresent => present.is_none(),
    };
    if !pull {
        return match present {
            Some(img) => {
                // kubelet: EnsureImageExists — events.PulledImage for a present image.
                env.managers.recorder.normal(
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
                env.managers.recorder.warning(
                    pod,
                    fp,
                    recorder::ERR_IMAGE_NEVER_PULL,
                    message.clone(),
                );
                Err(waiting(WaitingReason::ErrImageNeverPull, message))
            }
        };
    }
    let key = backoff::image_pull_key(&cx.pod.metadata.uid, wanted);
    if let Some(remaining) = pull_backoff.remaining_since_update(&key, env.clock.now()) {
        result.note_requeue(remaining);
        let message = format!("Back-off pulling image {:?}", wanted);
        // kubelet: EnsureImageExists — events.BackOffPullImage (type Normal upstream).
        env.managers
            .recorder
            .normal(pod, fp, recorder::BACK_OFF, message.clone());
        return Err(waiting(WaitingReason::ImagePullBackOff, message));
    }
    // kubelet: the docker config keyring, read at each pull (a pull is rare, and an edit of
    // the file applies without a restart). Never logged: only whether credentials went along.
    // kubelet: the pod's imagePullSecrets come first, then the node's keyring.
    let pod_ring = pull_secrets_keyring(env, cx.pod);
    let (keyring, problems) = credentials::Keyring::load(&env.managers.credential_paths);
    for p in problems {
        log::warn!("registry credentials: {p}");
    }
    let (auth, whose) = match pod_ring.lookup(&image) {
        Some(a) => (Some(a), " with the pod's imagePullSecrets"),
        None => (
            keyring.lookup(&image),
            " with the node's credentials for its registry",
        ),
    };
    log::info!(
        "pod {}: pulling image {:?}{}",
        cx.pod.full_name(),
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
    match env
        .runtime
        .pull_image(&image, auth, cx.sandbox_config)
        .await
    {
        Ok(image_ref) => {
            pull_backoff.gc(env.clock.now());
            // kubelet: events.PulledImage — "in <pull> (<total> including waiting)"; picolet
            // pulls one image at a time per pod and does not queue: both are the pull. The
            // image size upstream appends is not known here.
            let took = go_duration(pull_started.elapsed());
            env.managers.recorder.normal(
                pod,
                fp,
                recorder::PULLED_IMAGE,
                format!(
                    "Successfully pulled image {:?} in {took} ({took} including waiting)",
                    wanted
                ),
            );
            Ok((image_ref, None))
        }
        Err(e) => {
            let now = env.clock.now();
            pull_backoff.next(&key, now, now);
            result.note_requeue(pull_backoff.get(&key));
            // A registry that wants credentials: say where picolet looks for them.
            let msg = e.to_string();
            let lower = msg.to_ascii_lowercase();
            let hint = if ["401", "unauthorized", "authorization failed", "denied"]
                .iter()
                .any(|w| lower.contains(w))
            {
                let files: Vec<String> = env
                    .managers
                    .credential_paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                format!(
                    " ({} credentials for {}; picolet reads registry credentials from {} and the pod's imagePullSecrets)",
                    if auth.is_some() {
                        "the registry refused the"
                    } else {
                        "no"
                    },
                    credentials::image_location(&image),
                    files.join(", ")
                )
            } else {
                String::new()
            };
            log::warn!(
                "pod {}: failed to pull image {:?}: {msg}{hint}",
                cx.pod.full_name(),
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

/// A duration as Go's `time.Duration.String` prints it after `Truncate(time.Millisecond)`
/// (`523ms`, `1.2s`, `2m3.456s`, `0s`): the kubelet's Pulled message uses it.
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, rem) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rem) = (rem / 60_000, rem % 60_000);
    let (s, frac) = (rem / 1000, rem % 1000);
    let secs = if frac == 0 {
        format!("{s}s")
    } else {
        let f = format!("{frac:03}");
        format!("{s}.{}s", f.trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
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
