//! Graceful node shutdown, the plan (kubelet: `pkg/kubelet/nodeshutdown`): when the *system*
//! goes down, pods are killed group by group, lowest priority first, each group within its
//! share of `shutdownGracePeriod`.
//!
//! Owns: the priority groups and their periods, which group a pod is in, the texts the
//! kubelet puts on pods and the node, and the request the node API sends the loop. The loop
//! (`agent/shutdown.rs`) carries the plan out.
//!
//! How the node learns of a shutdown — picolet differs here: the kubelet holds a logind delay
//! inhibitor lock over D-Bus and waits for `PrepareForShutdown`. picolet has no D-Bus client
//! (one does not fit the size budget, and OpenWrt's procd, OpenRC and busybox init have no
//! logind): the system's shutdown path calls `picolet node-shutdown`, which asks the running
//! picolet through its node API and returns when the pods are down. The packages install that
//! hook for each init (a systemd unit stopped only at shutdown, procd's `shutdown()`, an
//! OpenRC stop on the shutdown runlevel, a busybox `::shutdown:` line), so restarting or
//! upgrading picolet never drains the node.
//!
//! Must never: act on its own; it only plans.

use std::time::Duration;

use crate::qos::SYSTEM_CRITICAL_PRIORITY;

/// kubelet: the pod's status reason and message after a shutdown killed it.
pub(crate) const POD_REASON: &str = "Terminated";
pub(crate) const POD_MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// kubelet: admission's refusal while the node shuts down.
pub(crate) const ADMIT_REASON: &str = "NodeShutdown";
pub(crate) const ADMIT_MESSAGE: &str = "Pod was rejected as the node is shutting down.";
/// kubelet: the Ready condition's message while shutting down.
pub(crate) const NODE_NOT_READY_MESSAGE: &str = "node is shutting down";

/// One priority group: the pods whose priority is at least `min_priority` (and below the
/// next group's) get `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub min_priority: i32,
    pub period: Duration,
}

/// kubelet: `shutdownGracePeriod` T and `shutdownGracePeriodCriticalPods` C become two groups:
/// priority 0 gets T − C, system-critical pods get C. T = 0: no graceful shutdown (an empty
/// plan). C > T is refused when the options are read.
pub(crate) fn groups(grace: Duration, critical: Duration) -> Vec<Group> {
    if grace.is_zero() {
        return Vec::new();
    }
    vec![
        Group {
            min_priority: 0,
            period: grace.saturating_sub(critical),
        },
        Group {
            min_priority: SYSTEM_CRITICAL_PRIORITY,
            period: critical,
        },
    ]
}

/// The group a pod of `priority` is in (kubelet: `groupByPriority`): the highest group whose
/// priority is at most the pod's, else the lowest. `None` only for an empty plan.
pub(crate) fn group_of(groups: &[Group], priority: i32) -> Option<usize> {
    if groups.is_empty() {
        return None;
    }
    Some(
        groups
            .iter()
            .rposition(|g| g.min_priority <= priority)
            .unwrap_or(0),
    )
}

/// The grace period a pod of group `group` is killed with: the group's period, or the pod's
/// own `terminationGracePeriodSeconds` when shorter (kubelet: `killPods`).
pub(crate) fn pod_grace(group: &Group, pod_grace_seconds: Option<i64>) -> i64 {
    let period = i64::try_from(group.period.as_secs()).unwrap_or(i64::MAX);
    match pod_grace_seconds {
        Some(g) if g >= 0 && g < period => g,
        _ => period,
    }
}

/// What the node API sends the loop: start the shutdown (or join the one under way) and
/// answer, once every group is done, with a one-line report.
#[derive(Debug)]
pub struct Request {
    pub done: tokio::sync::oneshot::Sender<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn two_groups_from_the_two_periods() {
        assert_eq!(groups(S(0), S(0)), vec![]);
        assert_eq!(
            groups(S(0), S(10)),
            vec![],
            "no grace period: no shutdown manager"
        );
        assert_eq!(
            groups(S(30), S(10)),
            vec![
                Group {
                    min_priority: 0,
                    period: S(20)
                },
                Group {
                    min_priority: SYSTEM_CRITICAL_PRIORITY,
                    period: S(10)
                },
            ]
        );
        assert_eq!(groups(S(30), S(0))[0].period, S(30));
    }

    #[test]
    fn a_pod_joins_the_highest_group_its_priority_reaches() {
        let g = groups(S(30), S(10));
        for (priority, want) in [
            (0, 0),
            (-5, 0), // below every group: the lowest
            (1000, 0),
            (SYSTEM_CRITICAL_PRIORITY - 1, 0),
            (SYSTEM_CRITICAL_PRIORITY, 1),
            (SYSTEM_CRITICAL_PRIORITY + 1000, 1), // system-node-critical
        ] {
            assert_eq!(group_of(&g, priority), Some(want), "priority {priority}");
        }
        assert_eq!(group_of(&[], 0), None);
    }

    #[test]
    fn the_grace_is_the_shorter_of_the_group_and_the_pod() {
        let g = Group {
            min_priority: 0,
            period: S(20),
        };
        assert_eq!(pod_grace(&g, Some(5)), 5);
        assert_eq!(pod_grace(&g, Some(30)), 20);
        assert_eq!(pod_grace(&g, None), 20);
        assert_eq!(pod_grace(&g, Some(0)), 0);
        assert_eq!(pod_grace(&g, Some(-1)), 20);
    }
}
