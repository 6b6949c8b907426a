//! The pod phase from container statuses (kubelet: `getPhase`, kubelet_pods.go).
//!
//! Counted, in upstream's words: regular init containers still to finish
//! (`pendingRegularInit`) or failed (`failedInit`); restartable init containers (sidecars)
//! not yet started (`pendingSidecars`); and, over sidecars and regular containers, how many
//! are running, waiting (never ran), stopped (terminated, or waiting to restart after a
//! termination), succeeded (stopped with exit 0) and unknown (no status).
//!
//! With ContainerRestartRules (beta, on by default since 1.35) whether a stopped container
//! comes back is the container's own decision (`api::container_should_restart`: its rules,
//! its policy, the pod's): a failed regular init container that will not restart fails the
//! pod, and stopped regular containers that will not restart make it Succeeded or Failed.

use crate::api::{self, ContainerStatus, Pod, PodPhase};

pub(super) fn get_phase(
    pod: &Pod,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
    pod_is_terminal: bool,
    pod_has_initialized: bool,
) -> PodPhase {
    let spec = &pod.spec;
    // kubelet: one status list, regular first, looked up by name.
    let find = |name: &str| regular.iter().chain(init).find(|s| s.name == name);

    let mut pending_regular_init = 0;
    let mut pending_sidecars = 0;
    // kubelet: failedInitializationNotRestartable, stoppedNotRestartable.
    let mut failed_init_not_restartable = 0;
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    let mut stopped_not_restartable = 0;
    let restarts =
        |c: &api::Container, exit_code: i32| api::container_should_restart(c, spec, exit_code);

    for c in spec
        .init_containers
        .iter()
        .filter(|c| !super::is_sidecar(c))
    {
        let Some(s) = find(&c.name) else {
            pending_regular_init += 1;
            continue;
        };
        if s.state.running.is_some() {
            pending_regular_init += 1;
        } else if let Some(t) = &s.state.terminated {
            if t.exit_code != 0 && !restarts(c, t.exit_code) {
                failed_init_not_restartable += 1;
            }
        } else if s.state.waiting.is_some() {
            match &s.last_state.terminated {
                Some(t) if t.exit_code != 0 => {
                    if !restarts(c, t.exit_code) {
                        failed_init_not_restartable += 1;
                    }
                }
                Some(_) => {}
                None => pending_regular_init += 1,
            }
        } else {
            pending_regular_init += 1;
        }
    }

    for c in spec.init_containers.iter().filter(|c| super::is_sidecar(c)) {
        let Some(s) = find(&c.name) else {
            unknown += 1;
            continue;
        };
        if s.state.running.is_some() {
            if s.started != Some(true) {
                pending_sidecars += 1;
            }
            running += 1;
        } else if s.state.terminated.is_some() {
            // A stopped sidecar does not count for the phase.
        } else if s.state.waiting.is_some() {
            if s.last_state.terminated.is_none() {
                pending_sidecars += 1;
                waiting += 1;
            }
        } else {
            pending_sidecars += 1;
            unknown += 1;
        }
    }

    for c in &spec.containers {
        let Some(s) = find(&c.name) else {
            unknown += 1;
            continue;
        };
        if s.state.running.is_some() {
            running += 1;
        } else if let Some(t) = &s.state.terminated {
            stopped += 1;
            if !restarts(c, t.exit_code) {
                stopped_not_restartable += 1;
            }
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if s.state.waiting.is_some() {
            if let Some(t) = &s.last_state.terminated {
                stopped += 1;
                if !restarts(c, t.exit_code) {
                    stopped_not_restartable += 1;
                }
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }

    if failed_init_not_restartable > 0 {
        return PodPhase::Failed;
    }
    // Init not finished (sidecars only count until a regular container ran in this
    // sandbox), or a container never ran yet: Pending.
    if pending_regular_init > 0 || (pending_sidecars > 0 && !pod_has_initialized) || waiting > 0 {
        return PodPhase::Pending;
    }
    if running > 0 && unknown == 0 {
        return PodPhase::Running;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        // The pod is terminal: its containers will not restart whatever the policy.
        // Upstream leaves static pods out (k8s#116484).
        if pod_is_terminal && !pod.is_static() {
            return if stopped == succeeded {
                PodPhase::Succeeded
            } else {
                PodPhase::Failed
            };
        }
        return if stopped != stopped_not_restartable {
            // At least one container is about to restart.
            PodPhase::Running
        } else if stopped == succeeded {
            PodPhase::Succeeded
        } else {
            PodPhase::Failed
        };
    }
    PodPhase::Pending
}
