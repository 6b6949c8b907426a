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
use std::path::Path;
use std::rc::Rc;

use super::SyncEnv;
use crate::allocation::{self, Amounts, Named};
use crate::api::{self, ResourceRequirements};
use crate::clock::Clock;
use crate::cm::manager::CgroupError;
use crate::cri::{ContainerState, CriError, PodRuntimeStatus, Runtime};
use crate::kuberuntime::cri_config::ConfigError;
use crate::kuberuntime::plan::{self, ContainerUpdate};

/// The step a resize stopped at (the text is the PodResizeInProgress condition's message).
#[derive(Debug)]
pub(crate) enum ResizeError {
    /// The resized container's resources do not make a CRI config.
    Config(ConfigError),
    /// Writing the pod cgroup's new values failed.
    PodCgroup(CgroupError),
    /// `UpdateContainerResources` failed for the container.
    Container { name: String, source: CriError },
}

impl std::fmt::Display for ResizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResizeError::Config(e) => write!(f, "{e}"),
            ResizeError::PodCgroup(e) => write!(f, "failed to set the pod cgroup: {e}"),
            ResizeError::Container { name, source } => write!(f, "container {name:?}: {source}"),
        }
    }
}

impl std::error::Error for ResizeError {}

/// By pod UID: container ID → the cpu and memory it was last updated to (`None`: the pod's
/// file not read yet).
#[derive(Clone, Default)]
pub(crate) struct Records(Rc<RefCell<allocation::ByKey<Option<Named>>>>);

fn file(root: &Path, uid: &str) -> std::path::PathBuf {
    root.join("pods").join(uid).join("resized")
}

impl Records {
    /// The pod's records, read from its file the first time.
    fn loaded<'a>(
        all: &'a mut allocation::ByKey<Option<Named>>,
        root: &Path,
        uid: &str,
    ) -> &'a mut Named {
        all.entry(uid).get_or_insert_with(|| {
            std::fs::read(file(root, uid))
                .ok()
                .and_then(|b| allocation::read_json(&b))
                .map(|v| allocation::named_of_json(&v))
                .unwrap_or_default()
        })
    }

    /// The pod's updated containers.
    pub(crate) fn of(&self, root: &Path, uid: &str) -> Named {
        Self::loaded(&mut self.0.borrow_mut(), root, uid).clone()
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
        let pod = Self::loaded(&mut all, root, uid);
        pod.retain(|(k, _)| run(k));
        allocation::set_named(pod, id, r);
        allocation::write_file(&file(root, uid), &allocation::named_to_json(pod));
    }

    /// The pod is cleaned up (its directory goes with the file).
    pub(crate) fn forget(&self, uid: &str) {
        self.0.borrow_mut().remove(uid);
    }
}

/// What a running container runs with: its last update, else its creation annotation.
fn actual_of(records: &Named, c: &crate::cri::ContainerInfo) -> Option<ResourceRequirements> {
    allocation::named(records, &c.id)
        .cloned()
        .or_else(|| allocation::from_annotation(&c.annotations))
}

/// After a sync: each running container's cpu and memory by name (for
/// `status.containerStatuses[].resources`), and whether any differs from the allocated pod
/// (kubelet: `IsPodResizeInProgress`).
pub(crate) fn report(pod: &api::Pod, status: &PodRuntimeStatus, records: &Named) -> (bool, Named) {
    let mut in_progress = false;
    let mut actual = Named::new();
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
        actual.push((c.name.clone(), r));
    }
    (in_progress, actual)
}

/// One step of a resize, in order.
enum Step {
    /// The pod cgroup's cpu (`true`) or memory values, from the allocated pod.
    Cgroup(bool),
    /// `updates[i]` to `target`, as the runtime takes it.
    Update(usize, ResourceRequirements, crate::cri::Resources),
}

/// The steps of a resize in the kubelet's order (pure): memory, then cpu; for each, the
/// pod cgroup first when the pod's value grows and last when it shrinks; the containers'
/// decreases before their increases, each update carrying what the container then runs
/// with of the other resource.
#[inline(never)]
fn steps(
    pod: &api::Pod,
    updates: &[ContainerUpdate],
    restarted: bool,
    memory_capacity: u64,
    swap: &crate::qos::NodeSwap,
) -> Result<Vec<Step>, ResizeError> {
    let mut now: Vec<Amounts> = updates.iter().map(|u| u.current).collect();
    let mut out = Vec::new();
    for cpu in [false, true] {
        let pick = |a: &Amounts| {
            if cpu {
                (a.cpu_request, a.cpu_limit)
            } else {
                (a.memory_request, a.memory_limit)
            }
        };
        let changed = |u: &ContainerUpdate| pick(&u.desired_amounts) != pick(&u.current);
        if !updates.iter().any(changed) && !restarted {
            continue;
        }
        // The pod cgroup's values are its containers' sums (kubelet: ResourceConfigForPod;
        // an init container's larger request is not counted here): they grow when the
        // updates' changes add up to more, limit or request.
        let delta = |f: fn(&(i64, i64)) -> i64| -> i64 {
            updates
                .iter()
                .map(|u| f(&pick(&u.desired_amounts)) - f(&pick(&u.current)))
                .sum()
        };
        let grows = delta(|p| p.1) > 0 || (cpu && delta(|p| p.0) > 0);
        if grows {
            out.push(Step::Cgroup(cpu));
        }
        for increases in [false, true] {
            for (i, u) in updates.iter().enumerate() {
                let (d, c) = (pick(&u.desired_amounts), pick(&u.current));
                if !changed(u) || (d.1.max(d.0) > c.1.max(c.0)) != increases {
                    continue;
                }
                let target = if cpu {
                    with_amounts(&u.desired, &u.desired_amounts, &now[i])
                } else {
                    with_amounts(&u.desired, &now[i], &u.desired_amounts)
                };
                let spec = api::Container {
                    resources: Some(target.clone()),
                    ..Default::default()
                };
                let resources =
                    crate::kuberuntime::cri_config::resources(pod, &spec, memory_capacity, swap)
                        .map_err(ResizeError::Config)?;
                now[i] = Amounts::of(Some(&target));
                out.push(Step::Update(i, target, resources));
            }
        }
        if !grows {
            out.push(Step::Cgroup(cpu));
        }
    }
    Ok(out)
}

/// Applies `updates` (and the pod cgroup for containers restarted by their resize policy,
/// `restarted`) to the allocated `pod`, step by step; the first failure stops it and says
/// what failed (the condition's message).
pub(crate) async fn apply<R: Runtime, C: Clock>(
    env: &SyncEnv<R, C>,
    pod: &api::Pod,
    status: &PodRuntimeStatus,
    updates: &[ContainerUpdate],
    restarted: bool,
) -> Result<(), ResizeError> {
    let alive = |id: &str| {
        status
            .containers
            .iter()
            .any(|c| c.id == id && c.state == ContainerState::Running)
    };
    for step in steps(
        pod,
        updates,
        restarted,
        env.node.memory_capacity,
        &env.node.swap,
    )? {
        match step {
            Step::Cgroup(cpu) => {
                if let Some(cg) = &env.node.pod_cgroups {
                    cg.resize(pod, cpu).await.map_err(ResizeError::PodCgroup)?;
                }
            }
            Step::Update(i, target, resources) => {
                let u = &updates[i];
                env.runtime
                    .update_container_resources(&u.id, &resources)
                    .await
                    .map_err(|source| ResizeError::Container {
                        name: u.name.clone(),
                        source,
                    })?;
                log::info!("pod {}: container {:?} resized", pod.full_name(), u.name);
                env.resized
                    .record(&env.paths.root_dir, pod.uid(), &u.id, target, &alive);
            }
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
            // The apiserver's canonical spelling (status quantities are compared as text).
            let q = if name == "cpu" && value % 1000 != 0 {
                format!("{value}m")
            } else if name == "cpu" {
                decimal(value / 1000)
            } else {
                decimal(value)
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

/// A count in `DecimalSI` canonical form: the largest exact suffix of 1000 (`64M`, `1536`).
fn decimal(mut v: i64) -> String {
    let mut i = 0;
    while v != 0 && v % 1000 == 0 && i < 6 {
        v /= 1000;
        i += 1;
    }
    format!("{v}{}", ["", "k", "M", "G", "T", "P", "E"][i])
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_quantities_are_canonical() {
        let d = super::decimal;
        assert_eq!(
            (d(1536), d(64_000_000), d(0), d(2000)),
            ("1536".into(), "64M".into(), "0".into(), "2k".into())
        );
    }
}
