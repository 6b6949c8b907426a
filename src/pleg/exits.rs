//! The exit watch: picolet's own addition to the generic PLEG for runtimes without
//! container events (containerd 1.6). Every running container and sandbox the relist saw
//! is opened as a pidfd ([`crate::cri::process`]); the moment one exits, the PLEG
//! relists at once. While every running process is watched, nothing can change in the
//! runtime that picolet does not either do itself (and then it asks for a relist, see
//! `pleg::spawn`'s poke) or hear of at once, so the relist slows from 1 s to
//! [`super::EXIT_WATCHED_RELIST_PERIOD`] — what is left for it to catch is what others do
//! behind picolet's back that ends no process (removing an exited container by hand).
//!
//! kubelet: none — the generic PLEG relists every second whatever happens; the evented
//! PLEG relies on the runtime's event stream (containerd ≥ 1.7). This is the same trade
//! for a runtime that has no stream: events for exits, the relist as a safety net.
//!
//! Falls back to the 1 s relist, by itself, whenever a running process cannot be watched:
//! an old kernel (`pidfd_open` is Linux 5.3+; logged once, off for good), a runtime that
//! names no PID in its verbose status, picolet in another PID namespace than the runtime
//! (the cgroup check fails), or a process that exited before it was opened.

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;

use futures_util::StreamExt as _;
use futures_util::future::LocalBoxFuture;
use futures_util::stream::FuturesUnordered;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::cri::process::ExitHandle;
use crate::cri::{ContainerState, PodRuntimeStatus, SandboxState};

/// At most this many processes are opened per relist round (each is one verbose status
/// call): a burst of new pods is covered over a few rounds without a long stall.
pub(super) const OPENS_PER_ROUND: usize = 64;

#[derive(Default)]
pub(super) struct ExitWatch {
    /// The kernel has no pidfd: nothing is ever watched.
    unsupported: bool,
    /// Running containers and ready sandboxes of the last relist that changed
    /// (id → whether it is a sandbox).
    running: HashMap<String, bool>,
    /// Ids whose process is watched (their futures are in `exits`).
    watched: HashSet<String>,
    /// Ids the runtime named no process of we could open: not asked again while they run.
    unknown: HashSet<String>,
    exits: FuturesUnordered<LocalBoxFuture<'static, String>>,
}

impl ExitWatch {
    /// A relist that changed: what runs now. Ids no longer running are forgotten (a
    /// watched one's exit, when it comes, is then ignored).
    pub(super) fn update(&mut self, pods: &[PodRuntimeStatus]) {
        self.running.clear();
        for pod in pods {
            for s in &pod.sandboxes {
                if s.state == SandboxState::Ready {
                    self.running.insert(s.id.clone(), true);
                }
            }
            for c in &pod.containers {
                if c.state == ContainerState::Running {
                    self.running.insert(c.id.clone(), false);
                }
            }
        }
        let running = &self.running;
        self.watched.retain(|id| running.contains_key(id));
        self.unknown.retain(|id| running.contains_key(id));
    }

    /// Running processes not watched yet and not given up on (at most
    /// [`OPENS_PER_ROUND`]), as `(id, is sandbox)`.
    pub(super) fn to_open(&self) -> Vec<(String, bool)> {
        if self.unsupported {
            return Vec::new();
        }
        let mut ids: Vec<(String, bool)> = self
            .running
            .iter()
            .filter(|(id, _)| !self.watched.contains(*id) && !self.unknown.contains(*id))
            .map(|(id, sandbox)| (id.clone(), *sandbox))
            .collect();
        ids.sort_unstable();
        ids.truncate(OPENS_PER_ROUND);
        ids
    }

    /// What opening `id` gave.
    pub(super) fn opened(&mut self, id: &str, handle: ExitHandle) {
        if !self.running.contains_key(id) {
            return;
        }
        match handle {
            ExitHandle::Pidfd(fd) => match watch(id.to_string(), fd) {
                Some(exit) => {
                    self.watched.insert(id.to_string());
                    self.exits.push(exit);
                }
                None => {
                    self.unknown.insert(id.to_string());
                }
            },
            ExitHandle::Unknown => {
                self.unknown.insert(id.to_string());
            }
            ExitHandle::Unsupported => {
                if !self.unsupported {
                    log::info!(
                        "container exits: the kernel has no pidfd_open (Linux < 5.3); relisting every {:?}",
                        super::RELIST_PERIOD
                    );
                }
                self.unsupported = true;
                self.watched.clear();
                self.exits.clear();
            }
        }
    }

    /// Whether every running process is watched (then nothing exits unseen).
    pub(super) fn covers_all(&self) -> bool {
        !self.unsupported && self.running.keys().all(|id| self.watched.contains(id))
    }

    /// How many processes are watched.
    pub(super) fn watched(&self) -> usize {
        self.watched.len()
    }

    /// The next watched process that exited: its id (`None`: one no longer of interest).
    /// Pending for ever while nothing is watched; cancel-safe.
    pub(super) async fn next_exit(&mut self) -> Option<String> {
        if self.exits.is_empty() {
            return std::future::pending().await;
        }
        let id = self.exits.next().await?;
        self.watched.remove(&id).then_some(id)
    }
}

/// A future that resolves to `id` once the pidfd is readable (its process exited).
fn watch(id: String, fd: OwnedFd) -> Option<LocalBoxFuture<'static, String>> {
    // SAFETY: the `OwnedFd` moves into the `AsyncFd` and stays open, the same descriptor,
    // for as long as it lives.
    let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()?;
    Some(Box::pin(async move {
        let _ = fd.readable().await;
        id
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::{ContainerInfo, Sandbox};

    fn pod(
        sandbox: (&str, SandboxState),
        containers: &[(&str, ContainerState)],
    ) -> PodRuntimeStatus {
        PodRuntimeStatus {
            uid: "u1".into(),
            sandboxes: vec![Sandbox {
                id: sandbox.0.into(),
                name: "web".into(),
                namespace: "default".into(),
                uid: "u1".into(),
                attempt: 0,
                state: sandbox.1,
                created_at: 0,
                labels: Default::default(),
                annotations: Default::default(),
                ip: None,
                network: None,
            }],
            containers: containers
                .iter()
                .map(|(id, state)| ContainerInfo {
                    id: (*id).into(),
                    state: *state,
                    ..ContainerInfo::default()
                })
                .collect(),
            ..PodRuntimeStatus::default()
        }
    }

    #[test]
    fn what_is_opened_and_when_all_is_covered() {
        let mut w = ExitWatch::default();
        // Nothing runs: nothing can exit unseen.
        assert!(w.covers_all());
        w.update(&[pod(
            ("s1", SandboxState::Ready),
            &[
                ("c1", ContainerState::Running),
                ("c0", ContainerState::Exited),
            ],
        )]);
        assert_eq!(
            w.to_open(),
            vec![("c1".to_string(), false), ("s1".to_string(), true)]
        );
        assert!(!w.covers_all());
        // The runtime names no process for c1: not asked again, and not covered.
        w.opened("c1", ExitHandle::Unknown);
        assert_eq!(w.to_open(), vec![("s1".to_string(), true)]);
        assert!(!w.covers_all());
        // c1 exited, c2 runs: c2 is asked for.
        w.update(&[pod(
            ("s1", SandboxState::Ready),
            &[
                ("c2", ContainerState::Running),
                ("c1", ContainerState::Exited),
            ],
        )]);
        assert_eq!(
            w.to_open(),
            vec![("c2".to_string(), false), ("s1".to_string(), true)]
        );
        // An old kernel: nothing is asked for again, never covered.
        w.opened("c2", ExitHandle::Unsupported);
        assert!(w.to_open().is_empty());
        assert!(!w.covers_all());
    }

    #[tokio::test]
    async fn an_exit_is_seen_and_a_forgotten_one_ignored() {
        let spawn = || std::process::Command::new("sleep").arg("1000").spawn();
        let (Ok(mut a), Ok(mut b)) = (spawn(), spawn()) else {
            return; // no `sleep` here
        };
        let mut w = ExitWatch::default();
        w.update(&[pod(
            ("s1", SandboxState::Ready),
            &[
                ("a", ContainerState::Running),
                ("b", ContainerState::Running),
            ],
        )]);
        w.opened("s1", ExitHandle::Unknown);
        for (id, child) in [("a", &a), ("b", &b)] {
            match crate::cri::process::open(child.id(), None) {
                ExitHandle::Unsupported => return, // an old kernel
                handle => w.opened(id, handle),
            }
        }
        assert_eq!(w.watched(), 2);
        assert!(!w.covers_all(), "s1 is not watched");
        // b is forgotten (the relist saw it exit), then really ends: ignored.
        w.update(&[pod(
            ("s1", SandboxState::Ready),
            &[("a", ContainerState::Running)],
        )]);
        let _ = b.kill();
        let _ = b.wait();
        assert_eq!(w.next_exit().await, None);
        // a ends: seen.
        let _ = a.kill();
        let _ = a.wait();
        assert_eq!(w.next_exit().await, Some("a".to_string()));
        assert_eq!(w.watched(), 0);
    }
}
