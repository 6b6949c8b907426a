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

/// kubelet: `getPhase` — count the containers, then decide.
pub(super) fn get_phase(
    pod: &Pod,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
    pod_is_terminal: bool,
    pod_has_initialized: bool,
) -> PodPhase {
    let mut n = Counts::default();
    n.count_regular_init(&pod.spec, init, regular);
    n.count_sidecars(&pod.spec, init, regular);
    n.count_regular(&pod.spec, init, regular);
    n.phase(pod, pod_is_terminal, pod_has_initialized)
}

/// The counters of `getPhase`, in upstream's names (see the module header).
#[derive(Default)]
struct Counts {
    pending_regular_init: u32,
    pending_sidecars: u32,
    // kubelet: failedInitializationNotRestartable, stoppedNotRestartable.
    failed_init_not_restartable: u32,
    stopped_not_restartable: u32,
    unknown: u32,
    running: u32,
    waiting: u32,
    stopped: u32,
    succeeded: u32,
}

/// kubelet: one status list, regular first, looked up by name.
fn find<'a>(
    init: &'a [ContainerStatus],
    regular: &'a [ContainerStatus],
    name: &str,
) -> Option<&'a ContainerStatus> {
    regular.iter().chain(init).find(|s| s.name == name)
}

/// Whether the container comes back after exiting with `exit_code` (its rules, its
/// policy, the pod's).
fn restarts(c: &api::Container, spec: &api::PodSpec, exit_code: i32) -> bool {
    api::container_should_restart(c, spec, exit_code)
}

impl Counts {
    /// Regular init containers: pending until terminated; failed for good when one exited
    /// non-zero and will not restart.
    fn count_regular_init(
        &mut self,
        spec: &api::PodSpec,
        init: &[ContainerStatus],
        regular: &[ContainerStatus],
    ) {
        for c in spec
            .init_containers
            .iter()
            .filter(|c| !super::is_sidecar(c))
        {
            let Some(s) = find(init, regular, &c.name) else {
                self.pending_regular_init += 1;
                continue;
            };
            if s.state.running.is_some() {
                self.pending_regular_init += 1;
            } else if let Some(t) = &s.state.terminated {
                if t.exit_code != 0 && !restarts(c, spec, t.exit_code) {
                    self.failed_init_not_restartable += 1;
                }
            } else if s.state.waiting.is_some() {
                match &s.last_state.terminated {
                    Some(t) if t.exit_code != 0 => {
                        if !restarts(c, spec, t.exit_code) {
                            self.failed_init_not_restartable += 1;
                        }
                    }
                    Some(_) => {}
                    None => self.pending_regular_init += 1,
                }
            } else {
                self.pending_regular_init += 1;
            }
        }
    }

    /// Sidecars: pending until started; running and waiting count with the regular
    /// containers, a stopped sidecar not at all.
    fn count_sidecars(
        &mut self,
        spec: &api::PodSpec,
        init: &[ContainerStatus],
        regular: &[ContainerStatus],
    ) {
        for c in spec.init_containers.iter().filter(|c| super::is_sidecar(c)) {
            let Some(s) = find(init, regular, &c.name) else {
                self.unknown += 1;
                continue;
            };
            if s.state.running.is_some() {
                if s.started != Some(true) {
                    self.pending_sidecars += 1;
                }
                self.running += 1;
            } else if s.state.terminated.is_some() {
                // A stopped sidecar does not count for the phase.
            } else if s.state.waiting.is_some() {
                if s.last_state.terminated.is_none() {
                    self.pending_sidecars += 1;
                    self.waiting += 1;
                }
            } else {
                self.pending_sidecars += 1;
                self.unknown += 1;
            }
        }
    }

    /// Regular containers: running, waiting (never ran), stopped (terminated, or waiting
    /// to restart after a termination; succeeded with exit 0), unknown (no status).
    fn count_regular(
        &mut self,
        spec: &api::PodSpec,
        init: &[ContainerStatus],
        regular: &[ContainerStatus],
    ) {
        for c in &spec.containers {
            let Some(s) = find(init, regular, &c.name) else {
                self.unknown += 1;
                continue;
            };
            if s.state.running.is_some() {
                self.running += 1;
            } else if let Some(t) = &s.state.terminated {
                self.stopped += 1;
                if !restarts(c, spec, t.exit_code) {
                    self.stopped_not_restartable += 1;
                }
                if t.exit_code == 0 {
                    self.succeeded += 1;
                }
            } else if s.state.waiting.is_some() {
                if let Some(t) = &s.last_state.terminated {
                    self.stopped += 1;
                    if !restarts(c, spec, t.exit_code) {
                        self.stopped_not_restartable += 1;
                    }
                } else {
                    self.waiting += 1;
                }
            } else {
                self.unknown += 1;
            }
        }
    }

    /// The decision of `getPhase` over the counts.
    fn phase(&self, pod: &Pod, pod_is_terminal: bool, pod_has_initialized: bool) -> PodPhase {
        if self.failed_init_not_restartable > 0 {
            return PodPhase::Failed;
        }
        // Init not finished (sidecars only count until a regular container ran in this
        // sandbox), or a container never ran yet: Pending.
        if self.pending_regular_init > 0
            || (self.pending_sidecars > 0 && !pod_has_initialized)
            || self.waiting > 0
        {
            return PodPhase::Pending;
        }
        if self.running > 0 && self.unknown == 0 {
            return PodPhase::Running;
        }
        if self.running == 0 && self.stopped > 0 && self.unknown == 0 {
            // The pod is terminal: its containers will not restart whatever the policy.
            // Upstream leaves static pods out (k8s#116484).
            if pod_is_terminal && !pod.is_static() {
                return if self.stopped == self.succeeded {
                    PodPhase::Succeeded
                } else {
                    PodPhase::Failed
                };
            }
            return if self.stopped != self.stopped_not_restartable {
                // At least one container is about to restart.
                PodPhase::Running
            } else if self.stopped == self.succeeded {
                PodPhase::Succeeded
            } else {
                PodPhase::Failed
            };
        }
        PodPhase::Pending
    }
}
