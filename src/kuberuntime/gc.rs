//! Container garbage collection (kubelet: `kuberuntime/kuberuntime_gc.go`, `containerGC`,
//! run every `ContainerGCPeriod` = 1 min by the kubelet).
//!
//! Owns: the pure decision of which dead containers, dead sandboxes and pod log directories
//! go ([`plan`], [`stale_log_dirs`]) and the thin executor that removes them
//! ([`execute`]). The agent runs one pass per period as a local task over the relister's
//! last view of the runtime, so the event loop never waits for it.
//!
//! What a pass removes, as upstream (policy `MinAge` 0, `MaxPerPodContainer` 1,
//! `MaxContainers` −1):
//! - a container is *evictable* when it is not running and was created at least
//!   `min_age` ago (`--minimum-container-ttl-duration`);
//! - pods whose content may go (no source wants the UID, no pod worker owns it, and every
//!   source has been seen — kubelet: `ShouldPodContentBeRemoved`): every evictable
//!   container, then every sandbox that is not ready and holds no container;
//! - every other pod (still wanted, or still stopping): per container name the newest
//!   `max_per_pod_container` evictable instances stay (the status of a finished
//!   container, `restartPolicy: Never` evidence that survives a picolet restart,
//!   `--previous` logs), older ones go; of its sandboxes the newest stays, older ones
//!   that are not ready and empty go;
//! - a removed container's log file and its rotated files go with it (kubelet:
//!   `removeContainerLog`, `ContainerLogManager.Clean`), and the
//!   pod log directory `<ns>_<name>_<uid>` of a pod whose content may go once the runtime
//!   holds nothing of it.
//!
//! Deliberate differences: a sandbox whose last containers this very pass removes is
//! removed in the same pass (upstream waits one more period); a pod log directory changed
//! within the last period is left for the next pass (a pod re-created with the same UID
//! between the snapshot and the removal keeps its logs); a container that the snapshot
//! shows as `Created` or `Unknown` is re-read before removal and spared if it runs now.
//!
//! Must never: remove a running container or a ready sandbox, or touch an object without
//! the kubelet's pod-UID label (it is not picolet's).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::clock::{UnixNanos, nanos};
use crate::cri::{ContainerState, PodRuntimeStatus, Runtime, SandboxState};
use crate::kuberuntime::labels;

/// kubelet: `ContainerGCPeriod`.
pub(crate) const GC_PERIOD: Duration = Duration::from_secs(60);

/// kubelet: `kubecontainer.GCPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    /// `--minimum-container-ttl-duration` (kubelet default 0).
    pub min_age: Duration,
    /// `--maximum-dead-containers-per-container` (kubelet default 1); `None` = no limit.
    pub max_per_pod_container: Option<usize>,
}

impl Default for GcPolicy {
    fn default() -> Self {
        GcPolicy {
            min_age: Duration::ZERO,
            max_per_pod_container: Some(1),
        }
    }
}

/// One object a pass removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GcObject {
    pub uid: String,
    pub id: String,
    /// Container name (empty for a sandbox).
    pub name: String,
    /// The snapshot showed it exited: no re-read needed before removal.
    pub exited: bool,
}

/// What one pass removes: containers first, then sandboxes, oldest first within a pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct GcPlan {
    pub containers: Vec<GcObject>,
    pub sandboxes: Vec<GcObject>,
    /// Pods of which the runtime holds nothing once the pass is done.
    pub emptied: Vec<String>,
}

impl GcPlan {
    pub(crate) fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.sandboxes.is_empty()
    }
}

/// The pure decision (kubelet: `evictContainers` + `evictSandboxes`). `removable(uid)`:
/// the pod's content may go. `pods` is the relister's view (list calls only: created
/// times and states are known, exit details are not needed).
pub(crate) fn plan<'a>(
    pods: impl IntoIterator<Item = &'a PodRuntimeStatus>,
    removable: impl Fn(&str) -> bool,
    now: UnixNanos,
    policy: &GcPolicy,
) -> GcPlan {
    let newest_gc_time = now.saturating_sub(nanos(policy.min_age));
    let mut out = GcPlan::default();
    for pod in pods {
        let remove_all = removable(&pod.uid);
        // Newest first (as the relister sorts them), grouped by container name.
        let mut by_name: BTreeMap<&str, Vec<&crate::cri::ContainerInfo>> = BTreeMap::new();
        for c in &pod.containers {
            // picolet: with no minimum age (the default) a dead container's stamp is not
            // looked at, so a wall clock gone back (no RTC) holds nothing for the jump's
            // length (the kubelet compares with `now` even then).
            let young = !policy.min_age.is_zero() && c.created_at > newest_gc_time;
            if c.state == ContainerState::Running || young {
                continue;
            }
            by_name
                .entry(labels::container_name(c))
                .or_default()
                .push(c);
        }
        let mut gone: HashSet<&str> = HashSet::new();
        for (name, mut dead) in by_name {
            crate::sort::sort_by_key(&mut dead, |c| std::cmp::Reverse(c.recency()));
            let keep = match (remove_all, policy.max_per_pod_container) {
                (true, _) => 0,
                (false, Some(n)) => n,
                (false, None) => dead.len(),
            };
            // oldest first
            for c in dead.into_iter().skip(keep).rev() {
                gone.insert(&c.id);
                out.containers.push(GcObject {
                    uid: pod.uid.clone(),
                    id: c.id.clone(),
                    name: name.to_string(),
                    exited: c.state == ContainerState::Exited,
                });
            }
        }
        let occupied: HashSet<&str> = pod
            .containers
            .iter()
            .filter(|c| !gone.contains(c.id.as_str()))
            .map(|c| c.sandbox_id.as_str())
            .collect();
        let mut sandboxes: Vec<&crate::cri::Sandbox> = pod.sandboxes.iter().collect();
        crate::sort::sort_by_key(&mut sandboxes, |s| std::cmp::Reverse(s.recency()));
        let keep = usize::from(!remove_all);
        let mut removed_sandboxes = 0;
        for s in sandboxes.iter().skip(keep).rev() {
            if s.state == SandboxState::Ready || occupied.contains(s.id.as_str()) {
                continue;
            }
            removed_sandboxes += 1;
            out.sandboxes.push(GcObject {
                uid: pod.uid.clone(),
                id: s.id.clone(),
                name: String::new(),
                exited: true,
            });
        }
        if remove_all && occupied.is_empty() && removed_sandboxes == pod.sandboxes.len() {
            out.emptied.push(pod.uid.clone());
        }
    }
    out
}

/// Pod log directories (`<namespace>_<name>_<uid>`, with their modification time) that
/// may go: the UID is not kept, and the directory did not change within `min_idle`.
/// Names that are not of that shape are not picolet's and stay.
pub(crate) fn stale_log_dirs(
    entries: &[(String, UnixNanos)],
    keep: impl Fn(&str) -> bool,
    now: UnixNanos,
    min_idle: Duration,
) -> Vec<String> {
    entries
        .iter()
        .filter(|(name, mtime)| {
            let Some(uid) = log_dir_uid(name) else {
                return false;
            };
            !keep(uid) && *mtime <= now.saturating_sub(nanos(min_idle))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// The UID of a pod log directory name `<namespace>_<name>_<uid>` (none of the three can
/// hold `_`: DNS labels, DNS subdomains, UUIDs or picolet's hex UIDs).
pub(crate) fn log_dir_uid(name: &str) -> Option<&str> {
    let mut parts = name.split('_');
    let (ns, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || ns.is_empty() || pod.is_empty() || uid.is_empty() {
        return None;
    }
    Some(uid)
}

// ---------------------------------------------------------------------------------------
// Executing a plan

/// What a pass did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct GcReport {
    pub containers: usize,
    pub sandboxes: usize,
    pub log_dirs: usize,
    /// One line per failed step (the next pass tries again).
    pub errors: Vec<String>,
}

/// Removes what `plan` says, then the pod log directories that `keep_uid` does not hold
/// and that no container of the runtime still writes to. File-system work runs on tokio's
/// blocking pool. `keep_uid` is evaluated on the snapshot the plan was made from.
pub(crate) async fn execute<R: Runtime>(
    rt: &R,
    plan: &GcPlan,
    pod_log_dir: &Path,
    keep_uid: HashSet<String>,
    now: UnixNanos,
    remove_log_dirs: bool,
) -> GcReport {
    let mut report = GcReport::default();
    let mut log_files: Vec<PathBuf> = Vec::new();
    for c in &plan.containers {
        // The snapshot may be a second old: a container it showed as Created may run now.
        // The status read also gives the log path (kubelet: `removeContainerLog`).
        let log_path = match rt.container_status(&c.id).await {
            Ok(st) if st.state == ContainerState::Running => continue,
            Ok(st) => (!st.log_path.is_empty()).then(|| PathBuf::from(st.log_path)),
            Err(e) if e.is_not_found() => continue,
            Err(e) if c.exited => {
                log::debug!("container GC: status of {}: {e}", c.id);
                None
            }
            Err(e) => {
                report
                    .errors
                    .push(format!("status of container {} ({}): {e}", c.name, c.id));
                continue;
            }
        };
        match rt.remove_container(&c.id).await {
            Ok(()) => {
                log::debug!(
                    "container GC: removed container {:?} ({}) of pod {}",
                    c.name,
                    c.id,
                    c.uid
                );
                report.containers += 1;
                log_files.extend(log_path);
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => report
                .errors
                .push(format!("remove container {} ({}): {e}", c.name, c.id)),
        }
    }
    for s in &plan.sandboxes {
        match rt.remove_pod_sandbox(&s.id).await {
            Ok(()) => {
                log::debug!("container GC: removed sandbox {} of pod {}", s.id, s.uid);
                report.sandboxes += 1;
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => report.errors.push(format!("remove sandbox {}: {e}", s.id)),
        }
    }
    if log_files.is_empty() && !remove_log_dirs {
        return report;
    }
    let dir = pod_log_dir.to_path_buf();
    let fs_work = tokio::task::spawn_blocking(move || {
        let mut removed = 0;
        let mut errors = Vec::new();
        // kubelet: ContainerLogManager.Clean — the live file and its rotated files.
        for log in &log_files {
            let rotated = match crate::log_rotation::rotated_logs(log) {
                Ok(r) => r,
                Err(e) => {
                    errors.push(format!("list rotated files of {}: {e}", log.display()));
                    Vec::new()
                }
            };
            for f in std::iter::once(log).chain(&rotated) {
                match std::fs::remove_file(f) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => errors.push(format!("remove {}: {e}", f.display())),
                }
            }
        }
        if remove_log_dirs {
            let entries = read_log_dirs(&dir);
            for name in stale_log_dirs(&entries, |uid| keep_uid.contains(uid), now, GC_PERIOD) {
                let path = dir.join(&name);
                match std::fs::remove_dir_all(&path) {
                    Ok(()) => {
                        log::debug!("container GC: removed pod log directory {}", path.display());
                        removed += 1;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => errors.push(format!("remove {}: {e}", path.display())),
                }
            }
        }
        (removed, errors)
    })
    .await;
    match fs_work {
        Ok((removed, errors)) => {
            report.log_dirs = removed;
            report.errors.extend(errors);
        }
        Err(e) => report.errors.push(format!("log file removal: {e}")),
    }
    report
}

/// Sub-directories of the pod log directory with their modification times.
fn read_log_dirs(dir: &Path) -> Vec<(String, UnixNanos)> {
    let Ok(rd) = crate::dir_listing::read_dir(dir) else {
        return Vec::new();
    };
    rd.into_iter()
        .filter_map(|e| {
            let md = e.metadata().ok()?;
            if !md.is_dir() {
                return None;
            }
            let mtime = md
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            Some((e.file_name().into_string().ok()?, nanos(mtime)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::{ContainerInfo, Sandbox};

    const S: i64 = 1_000_000_000;

    fn sandbox(uid: &str, id: &str, ready: bool, created: i64) -> Sandbox {
        Sandbox {
            id: id.into(),
            name: "p".into(),
            namespace: "default".into(),
            uid: uid.into(),
            attempt: 0,
            state: if ready {
                SandboxState::Ready
            } else {
                SandboxState::NotReady
            },
            created_at: created * S,
            labels: [(labels::POD_UID_LABEL.to_string(), uid.to_string())].into(),
            annotations: Default::default(),
            ip: None,
            network: None,
        }
    }

    fn container(
        sb: &str,
        id: &str,
        name: &str,
        state: ContainerState,
        created: i64,
    ) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            sandbox_id: sb.into(),
            name: name.into(),
            attempt: 0,
            image: String::new(),
            image_ref: String::new(),
            state,
            created_at: created * S,
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            labels: [(labels::CONTAINER_NAME_LABEL.to_string(), name.to_string())].into(),
            annotations: Default::default(),
            log_path: String::new(),
        }
    }

    fn pod(uid: &str, sandboxes: Vec<Sandbox>, containers: Vec<ContainerInfo>) -> PodRuntimeStatus {
        PodRuntimeStatus {
            uid: uid.into(),
            name: "p".into(),
            namespace: "default".into(),
            sandboxes,
            containers,
        }
    }

    fn ids(objs: &[GcObject]) -> Vec<&str> {
        objs.iter().map(|o| o.id.as_str()).collect()
    }

    use ContainerState::{Created, Exited, Running, Unknown};

    /// (name, pod, removable, policy, now (s), want containers, want sandboxes, emptied)
    type Case<'a> = (
        &'a str,
        &'a PodRuntimeStatus,
        bool,
        &'a GcPolicy,
        i64,
        Vec<&'a str>,
        Vec<&'a str>,
        bool,
    );

    #[test]
    fn plan_table() {
        let policy = GcPolicy::default();
        let unlimited = GcPolicy {
            max_per_pod_container: None,
            ..GcPolicy::default()
        };
        let ttl = GcPolicy {
            min_age: Duration::from_secs(600),
            ..GcPolicy::default()
        };
        let crashloop = pod(
            "u",
            vec![sandbox("u", "s1", true, 1)],
            vec![
                container("s1", "c4", "app", Running, 40),
                container("s1", "c3", "app", Exited, 30),
                container("s1", "c2", "app", Exited, 20),
                container("s1", "c1", "app", Exited, 10),
                container("s1", "d1", "side", Exited, 5),
            ],
        );
        let recreated = pod(
            "u",
            vec![
                sandbox("u", "s3", true, 30),
                sandbox("u", "s2", false, 20),
                sandbox("u", "s1", false, 10),
            ],
            vec![
                container("s3", "c3", "app", Running, 31),
                container("s2", "c2", "side", Exited, 21),
            ],
        );
        let finished = pod(
            "u",
            vec![sandbox("u", "s2", false, 20), sandbox("u", "s1", false, 10)],
            vec![
                container("s2", "c2", "app", Exited, 21),
                container("s1", "c1", "app", Exited, 11),
            ],
        );
        let stopping = pod(
            "u",
            vec![sandbox("u", "s1", false, 10)],
            vec![
                container("s1", "c2", "app", Running, 21),
                container("s1", "c1", "old", Exited, 11),
            ],
        );
        let cases: Vec<Case> = vec![
            (
                "wanted: the newest dead instance per name stays, older go oldest first",
                &crashloop,
                false,
                &policy,
                100,
                vec!["c1", "c2"],
                vec![],
                false,
            ),
            (
                "wanted, no per-container limit: nothing goes",
                &crashloop,
                false,
                &unlimited,
                100,
                vec![],
                vec![],
                false,
            ),
            (
                "min age: only containers created before now - min_age are evictable",
                &crashloop,
                false,
                &ttl,
                620,
                vec!["c1"],
                vec![],
                false,
            ),
            (
                "min age not reached: nothing",
                &crashloop,
                false,
                &ttl,
                100,
                vec![],
                vec![],
                false,
            ),
            (
                "removable: every dead container, the running one never",
                &crashloop,
                true,
                &policy,
                100,
                vec!["c1", "c2", "c3", "d1"],
                vec![],
                false,
            ),
            (
                "wanted, sandbox re-created: the newest sandbox stays, an old one holding a kept \
                 container stays, an empty old one goes",
                &recreated,
                false,
                &policy,
                100,
                vec![],
                vec!["s1"],
                false,
            ),
            (
                "finished but still wanted (restartPolicy Never): the newest instance and the \
                 newest sandbox stay",
                &finished,
                false,
                &policy,
                100,
                vec!["c1"],
                vec!["s1"],
                false,
            ),
            (
                "removable and finished: everything goes, the pod is emptied",
                &finished,
                true,
                &policy,
                100,
                vec!["c1", "c2"],
                vec!["s1", "s2"],
                true,
            ),
            (
                "removable but min age not reached: the sandboxes stay with their containers",
                &finished,
                true,
                &ttl,
                100,
                vec![],
                vec![],
                false,
            ),
            (
                "the clock gone back below every stamp (no RTC), no min age: as at any time",
                &finished,
                true,
                &policy,
                5,
                vec!["c1", "c2"],
                vec!["s1", "s2"],
                true,
            ),
            (
                "removable while a container still runs: its sandbox stays",
                &stopping,
                true,
                &policy,
                100,
                vec!["c1"],
                vec![],
                false,
            ),
        ];
        for (name, p, removable, policy, now, want_c, want_s, emptied) in cases {
            let got = plan([p], |_| removable, now * S, policy);
            assert_eq!(ids(&got.containers), want_c, "{name}: containers");
            assert_eq!(ids(&got.sandboxes), want_s, "{name}: sandboxes");
            assert_eq!(!got.emptied.is_empty(), emptied, "{name}: emptied");
        }
    }

    #[test]
    fn created_and_unknown_are_evictable_but_flagged_for_a_re_read() {
        let p = pod(
            "u",
            vec![sandbox("u", "s1", false, 1)],
            vec![
                container("s1", "c3", "app", Created, 30),
                container("s1", "c2", "app", Unknown, 20),
                container("s1", "c1", "app", Exited, 10),
            ],
        );
        let got = plan([&p], |_| true, 100 * S, &GcPolicy::default());
        let flags: Vec<(&str, bool)> = got
            .containers
            .iter()
            .map(|o| (o.id.as_str(), o.exited))
            .collect();
        assert_eq!(flags, vec![("c1", true), ("c2", false), ("c3", false)]);
    }

    #[test]
    fn pods_are_planned_independently() {
        let a = pod(
            "a",
            vec![sandbox("a", "sa", false, 1)],
            vec![container("sa", "ca", "app", Exited, 2)],
        );
        let b = pod(
            "b",
            vec![sandbox("b", "sb", false, 1)],
            vec![container("sb", "cb", "app", Exited, 2)],
        );
        let got = plan([&a, &b], |uid| uid == "b", 100 * S, &GcPolicy::default());
        assert_eq!(ids(&got.containers), vec!["cb"]);
        assert_eq!(ids(&got.sandboxes), vec!["sb"]);
        assert_eq!(got.emptied, vec!["b".to_string()]);
    }

    #[test]
    fn log_dirs() {
        assert_eq!(log_dir_uid("default_web-node1_0123abcd"), Some("0123abcd"));
        for bad in ["web", "a_b", "a_b_c_d", "_b_c", "a__c", "a_b_"] {
            assert_eq!(log_dir_uid(bad), None, "{bad}");
        }
        let entries = vec![
            ("default_old-n_u1".to_string(), 10 * S),
            ("default_kept-n_u2".to_string(), 10 * S),
            ("default_fresh-n_u3".to_string(), 95 * S),
            ("not-ours".to_string(), 10 * S),
        ];
        let got = stale_log_dirs(
            &entries,
            |uid| uid == "u2",
            100 * S,
            Duration::from_secs(60),
        );
        assert_eq!(got, vec!["default_old-n_u1".to_string()]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_removed_container_takes_its_rotated_logs_along() {
        use crate::clock::TokioClock;
        use crate::cri::fake::FakeRuntime;
        use crate::cri::{ContainerConfig, SandboxConfig};
        let dir = tempfile::tempdir().unwrap();
        let rt = FakeRuntime::new(TokioClock::new(1_000 * S));
        let sandbox = SandboxConfig {
            name: "p".into(),
            uid: "u".into(),
            log_directory: dir.path().display().to_string(),
            ..Default::default()
        };
        let sb = rt.run_pod_sandbox(&sandbox).await.unwrap();
        rt.add_image("busybox");
        let cfg = ContainerConfig {
            name: "app".into(),
            image: "busybox".into(),
            log_path: "app/0.log".into(),
            ..Default::default()
        };
        let id = rt.create_container(&sb, &cfg, &sandbox).await.unwrap();
        let app = dir.path().join("app");
        std::fs::create_dir_all(&app).unwrap();
        for f in [
            "0.log",
            "0.log.20261202-051447",
            "0.log.20261202-051457",
            "1.log",
        ] {
            std::fs::write(app.join(f), "x").unwrap();
        }
        let plan = GcPlan {
            containers: vec![GcObject {
                uid: "u".into(),
                id,
                name: "app".into(),
                exited: true,
            }],
            ..GcPlan::default()
        };
        let report = execute(&rt, &plan, dir.path(), HashSet::new(), 0, false).await;
        assert_eq!(
            (report.containers, report.errors.len()),
            (1, 0),
            "{report:?}"
        );
        let left: Vec<String> = std::fs::read_dir(&app)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            left,
            vec!["1.log".to_string()],
            "another instance's log stays"
        );
    }
}
