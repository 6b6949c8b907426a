//! The loop's half of graceful node shutdown (kubelet: `nodeshutdown.managerImpl`): on a
//! request (the node API's, from `picolet node-shutdown` in the system's shutdown path) it
//! refuses new pods, kills the pods group by group as `node::shutdown` plans, lowest priority
//! first, each with the shorter of its group's period and its own grace, marks each Failed
//! the kubelet's way, and answers every request once the last group is done. A group ends
//! when all its pods have terminated or its period has passed; the loop checks on its
//! housekeeping tick.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Loop;
use crate::admission::Rejection;
use crate::api::Pod;
use crate::clock::Clock;
use crate::cri::Runtime;
use crate::node::shutdown::{self as plan, Group, Request};
use crate::pod_manager::is_mirror_pod;
use crate::pod_workers::UpdatePodOptions;

/// The shutdown under way.
pub(super) struct ShutdownState {
    /// The group being killed (an index into the plan's groups), its pods and its end.
    group: usize,
    pods: Vec<String>,
    deadline: Instant,
    started: Instant,
    killed: usize,
    /// Who asked, answered at the end.
    waiters: Vec<tokio::sync::oneshot::Sender<String>>,
    done: Option<String>,
}

impl<R: Runtime, C: Clock> Loop<R, C> {
    /// kubelet: the shutdown manager's admit handler.
    pub(super) fn shutdown_admit(&self) -> Option<Rejection> {
        self.shutdown.as_ref().map(|_| Rejection {
            reason: plan::ADMIT_REASON,
            message: plan::ADMIT_MESSAGE.to_string(),
        })
    }

    /// A request: start the shutdown, or join the one under way (or answer at once when it
    /// is over, or when graceful shutdown is off).
    pub(super) fn on_shutdown_request(&mut self, req: Request) {
        if self.policy.shutdown_groups.is_empty() {
            let _ = req.done.send(
                "graceful node shutdown is off (shutdownGracePeriod is 0): no pod was stopped"
                    .to_string(),
            );
            return;
        }
        if let Some(s) = self.shutdown.as_mut() {
            match &s.done {
                Some(report) => {
                    let _ = req.done.send(report.clone());
                }
                None => s.waiters.push(req.done),
            }
            return;
        }
        let total: Duration = self.policy.shutdown_groups.iter().map(|g| g.period).sum();
        log::warn!(
            "node shutdown: the node is shutting down: new pods are refused, pods are stopped in {} priority groups within {} s",
            self.policy.shutdown_groups.len(),
            total.as_secs()
        );
        self.node_shutting_down(true);
        let now = Instant::now();
        self.shutdown = Some(ShutdownState {
            group: 0,
            pods: Vec::new(),
            deadline: now,
            started: now,
            killed: 0,
            waiters: vec![req.done],
            done: None,
        });
        self.start_shutdown_group(0);
    }

    fn node_shutting_down(&self, on: bool) {
        if let Some(tx) = &self.out.shutting_down {
            tx.send_replace(on);
        }
    }

    /// Kills the pods of group `index` (and of no other).
    fn start_shutdown_group(&mut self, index: usize) {
        let Some(group) = self.policy.shutdown_groups.get(index).copied() else {
            return;
        };
        let groups = self.policy.shutdown_groups.clone();
        let pods: Vec<Arc<Pod>> = self
            .pods
            .pods()
            .into_iter()
            .filter(|p| {
                !is_mirror_pod(p)
                    && self.workers.is_known(p.uid())
                    && !self.workers.is_finished(p.uid())
                    && plan::group_of(&groups, p.spec.priority.unwrap_or(0)) == Some(index)
            })
            .collect();
        log::info!(
            "node shutdown: stopping {} pod(s) of priority {}+ within {} s",
            pods.len(),
            group.min_priority,
            group.period.as_secs()
        );
        for pod in &pods {
            self.kill_for_shutdown(pod, &group);
        }
        let now = Instant::now();
        if let Some(s) = self.shutdown.as_mut() {
            s.group = index;
            s.killed += pods.len();
            s.pods = pods.iter().map(|p| p.uid().to_string()).collect();
            s.deadline = now + group.period;
        }
    }

    fn kill_for_shutdown(&mut self, pod: &Arc<Pod>, group: &Group) {
        let grace = plan::pod_grace(group, pod.spec.termination_grace_period_seconds);
        log::info!(
            "node shutdown: stopping pod {} (uid {}), grace {grace} s",
            pod.full_name(),
            pod.uid()
        );
        // kubelet: killPodFunc with phase Failed, reason Terminated and the DisruptionTarget
        // condition (TerminationByKubelet).
        let now = self.clock.now();
        self.pod_state
            .fail_pod_disrupted(pod, plan::POD_REASON, plan::POD_MESSAGE, now);
        // Never started again by this picolet (the next boot starts it afresh).
        self.rejected.insert(pod.uid().to_string());
        self.workers
            .update_pod(UpdatePodOptions::kill(Arc::clone(pod), Some(grace)));
    }

    /// On the housekeeping tick: the current group is over when its pods are all down or its
    /// period has passed; then the next group, or the end.
    pub(super) fn shutdown_step(&mut self) {
        let Some(s) = self.shutdown.as_ref() else {
            return;
        };
        if s.done.is_some() {
            return;
        }
        let left = s
            .pods
            .iter()
            .filter(|uid| self.workers.is_known(uid) && !self.workers.is_finished(uid))
            .count();
        let now = Instant::now();
        if left > 0 && now < s.deadline {
            return;
        }
        if left > 0 {
            log::warn!(
                "node shutdown: {left} pod(s) of the group still stopping after its period: going on"
            );
        }
        let next = s.group + 1;
        if next < self.policy.shutdown_groups.len() {
            self.start_shutdown_group(next);
            return;
        }
        let Some(s) = self.shutdown.as_mut() else {
            return;
        };
        let report = format!(
            "node shutdown: done: {} pod(s) stopped in {:.1} s",
            s.killed,
            now.duration_since(s.started).as_secs_f64()
        );
        log::warn!("{report}");
        for w in s.waiters.drain(..) {
            let _ = w.send(report.clone());
        }
        s.done = Some(report);
    }
}
