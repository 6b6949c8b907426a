//! The effects of an in-place resize (kubelet: `doPodResizeAction`,
//! `updatePodContainerResources`, the actuated state).
//!
//! Owns: applying a pod's container updates (from `plan::add_resize`) in the kubelet's
//! order — memory first, then cpu; per resource, the pod cgroup before the containers when
//! the pod's value grows and after them when it shrinks; decreases before increases — and
//! what each updated container now runs with: `ROOT-DIR/pods/<uid>/resized` (container
//! ID → cpu and memory, JSON), kept in memory once read, gone with the pod directory. A
//! container never updated runs with what its creation annotation says
//! (`allocation::RESOURCES_ANNOTATION`), so a node whose pods never resize writes nothing.
//!
//! Must never: decide what to update (that is `plan::add_resize`), or retry on its own: a
//! failed step stops the resize; the next sync plans what is left again.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;

use super::SyncEnv;
use crate::allocation::{self, Amounts};
use crate::api::{self, ResourceRequirements};
use crate::clock::Clock;
use crate::cri::{ContainerState, PodRuntimeStatus, Runtime};
use crate::kuberuntime::plan::{self, ContainerUpdate};

/// By pod UID: container ID → the cpu and memory it was last updated to.
#[derive(Clone, Default)]
pub struct Records(Rc<RefCell<HashMap<String, BTreeMap<String, ResourceRequirements>>>>);

fn file(root: &Path, uid: &str) -> std::path::PathBuf {
    root.join("pods").join(uid).join("resized")
}

impl Records {
    /// The pod's updated containers (read from its file the first time).
    pub fn of(&self, root: &Path, uid: &str) -> BTreeMap<String, ResourceRequirements> {
        let mut all = self.0.borrow_mut();
        all.entry(uid.to_string())
            .or_insert_with(|| {
                std::fs::read(file(root, uid))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default()
            })
            .clone()
    }

    /// Records an update; the file keeps only containers that still `run`.
    fn record(
        &self,
        root: &Path,
        uid: &str,
        id: &str,
        r: ResourceRequirements,
        run: &dyn Fn(&str) -> bool,
    ) {
        let mut all = self.0.borrow_mut();
        let pod = all.entry(uid.to_string()).or_default();
        pod.retain(|k, _| run(k));
        pod.insert(id.to_string(), r);
        let path = file(root, uid);
        let r = serde_json::to_vec(&*pod)
            .map_err(std::io::Error::other)
            .and_then(|b| std::fs::write(path.with_extension("tmp"), b))
            .and_then(|()| std::fs::rename(path.with_extension("tmp"), &path));
        if let Err(e) = r {
            log::warn!("{}: {e}", path.display());
        }
    }

    /// The pod is cleaned up (its directory goes with the file).
    pub fn forget(&self, uid: &str) {
        self.0.borrow_mut().remove(uid);
    }
}

/// What a running container runs with: its last update, else its creation annotation.
fn actual_of(
    records: &BTreeMap<String, ResourceRequirements>,
    c: &crate::cri::ContainerInfo,
) -> Option<ResourceRequirements> {
    records
        .get(&c.id)
        .cloned()
        .or_else(|| allocation::from_annotation(&c.annotations))
}

/// After a sync: each running container's cpu and memory by name (for
/// `status.containerStatuses[].resources`), and whether any differs from the allocated pod
/// (kubelet: `IsPodResizeInProgress`).
pub fn report(
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    records: &BTreeMap<String, ResourceRequirements>,
) -> (bool, BTreeMap<String, ResourceRequirements>) {
    let mut in_progress = false;
    let mut actual = BTreeMap::new();
    for c in pod.spec.containers.iter().chain(&pod.spec.init_containers) {
        let Some(s) =
            plan::newest_container(status, &c.name).filter(|s| s.state == ContainerState::Running)
        else {
            continue;
        };
        let Some(r) = actual_of(records, s) else {
            continue;
        };
        in_progress |= Amounts::of(Some(&r)) != Amounts::of(c.resources.as_ref());
        actual.insert(c.name.clone(), r);
    }
    (in_progress, actual)
}

/// Applies `updates` (and the pod cgroup for containers restarted by their resize policy,
/// `restarted`) to the allocated `pod`. The error says what failed (the condition's
/// message).
pub async fn apply<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    updates: &[ContainerUpdate],
    restarted: bool,
) -> Result<(), String> {
    let uid = pod.uid();
    // The pod as it runs: each container's current values in place of the allocated ones.
    let current = allocation::PodAllocation {
        pod: None,
        containers: pod
            .spec
            .containers
            .iter()
            .chain(&pod.spec.init_containers)
            .map(|c| {
                let u = updates.iter().find(|u| u.name == c.name);
                let r = match u {
                    Some(u) => with_amounts(&u.desired, &u.current, &u.current),
                    None => allocation::cpu_memory(c.resources.as_ref()),
                };
                (c.name.clone(), r)
            })
            .collect(),
    };
    let running = allocation::apply(pod, &current).unwrap_or_else(|| pod.clone());
    let alive = |id: &str| {
        status
            .containers
            .iter()
            .any(|c| c.id == id && c.state == ContainerState::Running)
    };
    let mut now: HashMap<&str, Amounts> =
        updates.iter().map(|u| (u.id.as_str(), u.current)).collect();
    for cpu in [false, true] {
        let pick = |a: &Amounts| {
            if cpu {
                (a.cpu_request, a.cpu_limit)
            } else {
                (a.memory_request, a.memory_limit)
            }
        };
        let mut changed: Vec<&ContainerUpdate> = updates
            .iter()
            .filter(|u| pick(&u.desired_amounts) != pick(&u.current))
            .collect();
        if changed.is_empty() && !restarted {
            continue;
        }
        let pod_value = |p: &api::Pod| {
            let r = crate::cm::pod_resources(p);
            if cpu {
                (
                    r.cpu_quota.unwrap_or(i64::MAX),
                    r.cpu_shares.unwrap_or(0) as i64,
                )
            } else {
                (r.memory_limit.unwrap_or(i64::MAX), 0)
            }
        };
        let (old, new) = (pod_value(&running), pod_value(pod));
        let grows = new.0 > old.0 || new.1 > old.1;
        let cgroup = || async {
            match &env.pod_cgroups {
                Some(cg) => cg
                    .resize(pod, cpu)
                    .await
                    .map_err(|e| format!("failed to set the pod cgroup: {e}")),
                None => Ok(()),
            }
        };
        if grows {
            cgroup().await?;
        }
        // kubelet: decreases first, so that the pod's total never passes its limit.
        let up = |u: &&ContainerUpdate| {
            let (d, c) = (pick(&u.desired_amounts), pick(&u.current));
            d.1.max(d.0) > c.1.max(c.0)
        };
        crate::sort::sort_by(&mut changed, |a, b| up(a).cmp(&up(b)));
        for u in changed {
            // The resource in hand takes its new values; the other keeps what runs.
            let have = now.get(u.id.as_str()).copied().unwrap_or(u.current);
            let target = if cpu {
                with_amounts(&u.desired, &u.desired_amounts, &have)
            } else {
                with_amounts(&u.desired, &have, &u.desired_amounts)
            };
            let mut spec = pod
                .spec
                .containers
                .iter()
                .chain(&pod.spec.init_containers)
                .find(|c| c.name == u.name)
                .cloned()
                .unwrap_or_default();
            spec.resources = Some(target.clone());
            let resources =
                crate::kuberuntime::cri_config::resources(pod, &spec, env.memory_capacity)
                    .map_err(|e| e.to_string())?;
            env.runtime
                .update_container_resources(&u.id, &resources)
                .await
                .map_err(|e| format!("container {:?}: {e}", u.name))?;
            log::info!(
                "pod {}: container {:?} resized to {}",
                pod.full_name(),
                u.name,
                serde_json::to_string(&target).unwrap_or_default()
            );
            now.insert(u.id.as_str(), Amounts::of(Some(&target)));
            env.resized
                .record(&env.root_dir, uid, &u.id, target, &alive);
        }
        if !grows {
            cgroup().await?;
        }
    }
    Ok(())
}

/// `desired`'s cpu from `cpu` and memory from `memory` (the amounts back as quantities:
/// `desired`'s own when they match, else plain numbers).
fn with_amounts(
    desired: &ResourceRequirements,
    cpu: &Amounts,
    memory: &Amounts,
) -> ResourceRequirements {
    let mine = Amounts::of(Some(desired));
    let mut out = ResourceRequirements::default();
    let mut put = |limits: bool, name: &str, value: i64, same: bool| {
        let map = if limits {
            &mut out.limits
        } else {
            &mut out.requests
        };
        let src = if limits {
            &desired.limits
        } else {
            &desired.requests
        };
        if same {
            if let Some(q) = src.get(name) {
                map.insert(name.to_string(), q.clone());
            }
        } else if value > 0 {
            let q = if name == "cpu" {
                format!("{value}m")
            } else {
                value.to_string()
            };
            map.insert(name.to_string(), api::Quantity::Str(q));
        }
    };
    put(
        false,
        "cpu",
        cpu.cpu_request,
        cpu.cpu_request == mine.cpu_request,
    );
    put(true, "cpu", cpu.cpu_limit, cpu.cpu_limit == mine.cpu_limit);
    put(
        false,
        "memory",
        memory.memory_request,
        memory.memory_request == mine.memory_request,
    );
    put(
        true,
        "memory",
        memory.memory_limit,
        memory.memory_limit == mine.memory_limit,
    );
    out
}
