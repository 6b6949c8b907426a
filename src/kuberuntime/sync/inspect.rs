//! Reading what the runtime holds (kubelet: `GetPodStatus`, `GetPods`): one pod's
//! sandboxes and containers by its UID, the relister's whole view, a refresh of what a sync
//! created.

use crate::cri::{ContainerInfo, CriError, ListFilter, PodRuntimeStatus, Runtime};
use crate::kuberuntime::labels;

use super::*;

pub(super) fn uid_filter(uid: &str) -> ListFilter {
    ListFilter {
        labels: [(labels::POD_UID_LABEL.to_string(), uid.to_string())].into(),
        sandbox_id: None,
    }
}

/// Everything the runtime holds for one pod UID, newest first, with per-sandbox status
/// (IP, network mode) and per-container status (times, exit code) (kubelet:
/// `GetPodStatus`). Objects removed between the list and the status call are skipped.
pub(crate) async fn get_pod_status<R: Runtime>(
    rt: &R,
    uid: &str,
) -> Result<PodRuntimeStatus, CriError> {
    let filter = uid_filter(uid);
    let mut listed = rt.list_pod_sandboxes(&filter).await?;
    crate::sort::sort_by_key(&mut listed, |x| std::cmp::Reverse(x.recency()));
    let mut sandboxes = Vec::with_capacity(listed.len());
    for s in listed {
        match rt.pod_sandbox_status(&s.id).await {
            Ok(mut full) => {
                if full.labels.is_empty() {
                    full.labels = s.labels;
                }
                if full.annotations.is_empty() {
                    full.annotations = s.annotations;
                }
                sandboxes.push(full);
            }
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        }
    }
    let listed = rt.list_containers(&filter).await?;
    let mut containers = Vec::with_capacity(listed.len());
    for c in listed {
        match rt.container_status(&c.id).await {
            Ok(mut full) => {
                // CRI ContainerStatus carries no sandbox ID; labels may be missing too.
                if full.sandbox_id.is_empty() {
                    full.sandbox_id = c.sandbox_id;
                }
                if full.labels.is_empty() {
                    full.labels = c.labels;
                }
                if full.annotations.is_empty() {
                    full.annotations = c.annotations;
                }
                containers.push(full);
            }
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        }
    }
    crate::sort::sort_by_key(&mut containers, |x| std::cmp::Reverse(x.recency()));
    let mut status = PodRuntimeStatus {
        uid: uid.to_string(),
        sandboxes,
        containers,
        ..Default::default()
    };
    fill_identity(&mut status);
    Ok(status)
}

/// The pod's runtime view after a sync, from the view the sync planned on and what the sync
/// did, without reading the pod back whole: the new sandbox as its `PodSandboxStatus`
/// answered during the sync, one `ContainerStatus` per container started. `None` when the
/// sync did something this cannot model (a kill, a removal, a failed start that may have
/// left a container behind) or the runtime's answer does not fit: then read it whole.
///
/// kubelet: `SyncPod` reads nothing back; the PLEG's next relist reads the pod whole and
/// syncs it again. picolet records the status at once (a started pod reports Running
/// without waiting for the relist) but reads only the objects the sync created: in a burst
/// of starts, the lists per pod would compete with the other pods' starts in the runtime.
/// What else changed in the meantime the relist sees, as upstream's does.
pub(crate) async fn refresh_after_sync<R: Runtime>(
    rt: &R,
    observed: &PodRuntimeStatus,
    result: &PodSyncResult,
) -> Result<Option<PodRuntimeStatus>, CriError> {
    if !result.is_modelled(observed) {
        return Ok(None);
    }
    let mut after = observed.clone();
    if let Some(s) = &result.new_sandbox {
        if s.labels.is_empty() {
            return Ok(None);
        }
        after.sandboxes.retain(|x| x.id != s.id);
        after.sandboxes.push(s.clone());
    }
    for c in &result.containers {
        let StartOutcome::Started { id, .. } = &c.outcome else {
            continue;
        };
        let mut full = match rt.container_status(id).await {
            Ok(full) => full,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        if full.labels.is_empty() {
            return Ok(None);
        }
        // CRI ContainerStatus carries no sandbox ID.
        if full.sandbox_id.is_empty() {
            full.sandbox_id.clone_from(&result.sandbox_id);
        }
        after.containers.retain(|x| x.id != full.id);
        after.containers.push(full);
    }
    regroup(&mut after);
    Ok(Some(after))
}

/// Every pod the runtime holds that carries the kubelet's pod-UID label, grouped by UID,
/// from the two list calls only (no per-object status: cheap enough for the 1 s relist).
/// `ip`/`network` of sandboxes and exit details of containers are therefore unknown.
/// Pods are ordered newest first.
#[cfg(test)]
pub(crate) async fn list_runtime_pods<R: Runtime>(
    rt: &R,
) -> Result<Vec<PodRuntimeStatus>, CriError> {
    let all = ListFilter::default();
    let sandboxes = rt.list_pod_sandboxes(&all).await?;
    let containers = rt.list_containers(&all).await?;
    Ok(group_runtime_pods(sandboxes, containers))
}

/// [`list_runtime_pods`] for the relist: `None` when the runtime's lists are unchanged
/// since `digest` (nothing decoded, nothing grouped: the idle case).
pub(crate) async fn relist_runtime_pods<R: Runtime>(
    rt: &R,
    digest: &mut crate::cri::RelistDigest,
) -> Result<Option<Vec<PodRuntimeStatus>>, CriError> {
    Ok(rt
        .relist(digest)
        .await?
        .map(|(sandboxes, containers)| group_runtime_pods(sandboxes, containers)))
}

/// The two lists grouped by pod UID (see [`list_runtime_pods`]).
pub(super) fn group_runtime_pods(
    sandboxes: Vec<crate::cri::Sandbox>,
    containers: Vec<ContainerInfo>,
) -> Vec<PodRuntimeStatus> {
    let mut pods: std::collections::BTreeMap<String, PodRuntimeStatus> = Default::default();
    for s in sandboxes {
        let Some(uid) = labels::pod_uid(&s.labels).map(str::to_string) else {
            continue;
        };
        let pod = pods.entry(uid.clone()).or_insert_with(|| PodRuntimeStatus {
            uid,
            ..Default::default()
        });
        pod.sandboxes.push(s);
    }
    for c in containers {
        let Some(uid) = labels::pod_uid(&c.labels).map(str::to_string) else {
            continue;
        };
        let pod = pods.entry(uid.clone()).or_insert_with(|| PodRuntimeStatus {
            uid,
            ..Default::default()
        });
        pod.containers.push(c);
    }
    let mut out: Vec<PodRuntimeStatus> = pods
        .into_values()
        .map(|mut p| {
            regroup(&mut p);
            p
        })
        .collect();
    let newest = |p: &PodRuntimeStatus| {
        let s = p.sandboxes.first().map_or(0, |s| s.created_at);
        let c = p.containers.first().map_or(0, |c| c.created_at);
        s.max(c)
    };
    crate::sort::sort_by_key(&mut out, |p| std::cmp::Reverse(newest(p)));
    out
}

/// Orders a pod's sandboxes and containers newest first and fills its name and namespace,
/// as the relist groups them (the evented PLEG's edits of one pod keep that form).
pub(crate) fn regroup(p: &mut PodRuntimeStatus) {
    crate::sort::sort_by_key(&mut p.sandboxes, |x| std::cmp::Reverse(x.recency()));
    crate::sort::sort_by_key(&mut p.containers, |x| std::cmp::Reverse(x.recency()));
    fill_identity(p);
}

/// Pod name and namespace from the newest sandbox's labels, else a container's.
pub(super) fn fill_identity(p: &mut PodRuntimeStatus) {
    if let Some(s) = p.sandboxes.first() {
        let i = labels::sandbox_info(s);
        p.name = i.pod_name;
        p.namespace = i.pod_namespace;
    }
    if p.name.is_empty() {
        if let Some(c) = p.containers.first() {
            let i = labels::container_label_info(c);
            p.name = i.pod_name;
            p.namespace = i.pod_namespace;
        }
    }
}

// ---------------------------------------------------------------------------------------
// SyncPod
