//! Container log rotation (kubelet: `pkg/kubelet/logs/container_log_manager.go`,
//! `ContainerLogManager`).
//!
//! Owns: the pure decision for one container's log ([`plan`]), the file-system pass that
//! carries it out on tokio's blocking pool, and the loop that runs a pass every
//! [`MONITOR_PERIOD`] over the running containers ([`LogManager::run`]). Which containers
//! run it does not ask the runtime: the agent publishes them from its runtime view
//! ([`RunningContainers`]), which the relister and the runtime's events keep current.
//!
//! What a pass does, as upstream (`rotateLogs`, `rotateLog`, `rotateLatestLog`):
//! - for every running container, its log path (CRI `ContainerStatus`, read once per
//!   container and kept: a container's log path never changes);
//! - the live file missing: CRI `ReopenContainerLog` (a rotation whose reopen failed and
//!   whose rename back failed too, or a file removed by hand);
//! - the live file at least `max_size`: of the rotated files `<log>.<timestamp>` the
//!   oldest go until `max_files - 2` remain (the live file and the one about to be rotated
//!   make `max_files`); the live file is renamed to `<log>.<YYYYMMDD-hhmmss>` and the runtime
//!   reopens its log (CRI `ReopenContainerLog`); when it cannot (the container stopped, an
//!   old runtime), the rotated file is renamed back so the live file is never lost.
//!
//! Deliberate differences: rotated files are not gzip-compressed (upstream compresses every
//! rotated file but the newest): the disk bound is `max_files × max_size` either way, the
//! node API and `picolet logs` read rotated files as plain text, and compression would add
//! a deflate crate and CPU bursts on the board at every rotation. The timestamp is UTC
//! (upstream formats local time). A rotated name already taken (two rotations within one
//! second) skips the rotation until the next pass instead of overwriting. The running
//! containers come from the agent's view instead of a `ListContainers` every 10 s
//! (upstream's): the same containers, the pods' (a container without picolet's pod UID
//! label is not in the view, and is not rotated), and an idle pass costs no CRI call.
//!
//! Logs of removed containers go with them: container GC removes the live file and its
//! rotated files ([`rotated_logs`]; kubelet: `ContainerLogManager.Clean`).
//!
//! Must never: remove or rename a live log file without putting it back when the runtime
//! does not reopen; touch files that are not `<log>.<timestamp>…` of a running container's log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, UnixNanos};
use crate::cri::{CriError, Runtime};
use crate::messages::RunningContainers;

/// kubelet: `containerLogMonitorInterval` (`--container-log-monitor-interval`, 10 s).
pub(crate) const MONITOR_PERIOD: Duration = Duration::from_secs(10);

/// kubelet: `ContainerLogManager`'s `LogRotatePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotatePolicy {
    /// `--container-log-max-size` (kubelet default 10Mi), bytes; at least 1.
    pub max_size: u64,
    /// `--container-log-max-files` (kubelet default 5); at least 2.
    pub max_files: usize,
}

impl Default for LogRotatePolicy {
    fn default() -> Self {
        LogRotatePolicy {
            max_size: 10 * 1024 * 1024,
            max_files: 5,
        }
    }
}

/// What one container's log needs in this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Below the size limit.
    Nothing,
    /// The live file does not exist: ask the runtime to reopen it.
    Reopen,
    /// Remove `remove` (rotated files, oldest first), rename the live file to `to`, reopen.
    Rotate { remove: Vec<PathBuf>, to: PathBuf },
}

/// The pure decision for one log (kubelet: `rotateLog` after the size check).
/// `live_size`: `None` when the live file is missing; `rotated`: the log's rotated files
/// (any order; see [`rotated_logs`]).
pub(crate) fn plan(
    log: &Path,
    live_size: Option<u64>,
    mut rotated: Vec<PathBuf>,
    policy: &LogRotatePolicy,
    now: UnixNanos,
) -> Step {
    let Some(size) = live_size else {
        return Step::Reopen;
    };
    if size < policy.max_size {
        return Step::Nothing;
    }
    let to = rotated_name(log, now);
    if rotated.contains(&to) {
        return Step::Nothing;
    }
    // kubelet: removeExcessLogs — the timestamp makes the name order the age order.
    crate::sort::sort_by_key(&mut rotated, |p| p.clone());
    let keep = policy.max_files.saturating_sub(2);
    let excess = rotated.len().saturating_sub(keep);
    rotated.truncate(excess);
    Step::Rotate {
        remove: rotated,
        to,
    }
}

/// `<log>.<YYYYMMDD-hhmmss>` (kubelet: `timestampFormat` "20060102-150405"), in UTC.
pub(crate) fn rotated_name(log: &Path, now: UnixNanos) -> PathBuf {
    let digits: String = crate::clock::rfc3339(now.max(1))
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let (date, time) = digits.split_at(digits.len().min(8));
    let mut name = log.as_os_str().to_owned();
    name.push(format!(".{date}-{time}"));
    PathBuf::from(name)
}

/// Whether `name` is a rotated file of the log file named `base`: `<base>.<8 digits>-<6
/// digits>` with any suffix (upstream's `.gz` and `.tmp` included).
pub(crate) fn is_rotated_name(base: &str, name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(base)
        .and_then(|r| r.strip_prefix('.'))
        .map(str::as_bytes)
    else {
        return false;
    };
    rest.len() >= 15
        && rest[..8].iter().all(u8::is_ascii_digit)
        && rest[8] == b'-'
        && rest[9..15].iter().all(u8::is_ascii_digit)
}

/// The rotated files of `log` in its directory (blocking I/O). A missing directory has
/// none.
pub(crate) fn rotated_logs(log: &Path) -> std::io::Result<Vec<PathBuf>> {
    let (Some(dir), Some(base)) = (log.parent(), log.file_name().and_then(|b| b.to_str())) else {
        return Ok(Vec::new());
    };
    let rd = match crate::dir_listing::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(rd
        .into_iter()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| is_rotated_name(base, n))
        })
        .map(|e| e.path())
        .collect())
}

// ---------------------------------------------------------------------------------------
// Executing a pass

/// What the file-system half of a pass did to one log.
#[derive(Debug)]
enum Done {
    Missing,
    /// Renamed away (`to`); the runtime must reopen, or the rename is undone.
    Renamed {
        to: PathBuf,
    },
}

/// A running container's log path, as its status gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LogPath {
    /// Not read yet, or the read failed: read at the next pass.
    Unread,
    /// The container has no log file (kubelet: it is not rotated).
    None,
    Known(PathBuf),
}

/// The running containers' logs by container ID, sorted by ID.
type Logs = Vec<(String, LogPath)>;

/// The blocking half of a pass: stat, list, remove excess, rename. Returns what it did,
/// by index into `logs`; nothing (and no allocation) for the logs below the limit. Errors
/// are logged and leave the log for the next pass.
fn fs_pass(
    logs: &[(String, LogPath)],
    policy: LogRotatePolicy,
    now: UnixNanos,
) -> Vec<(usize, Done)> {
    let mut out = Vec::new();
    for (i, (_, path)) in logs.iter().enumerate() {
        let LogPath::Known(log) = path else {
            continue;
        };
        let live_size = match std::fs::metadata(log) {
            Ok(md) => Some(md.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                log::warn!("log rotation: stat {}: {e}", log.display());
                continue;
            }
        };
        if live_size.is_some_and(|s| s < policy.max_size) {
            continue;
        }
        let rotated = match rotated_logs(log) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("log rotation: list rotated files of {}: {e}", log.display());
                continue;
            }
        };
        let done = match plan(log, live_size, rotated, &policy, now) {
            Step::Nothing => continue,
            Step::Reopen => Done::Missing,
            Step::Rotate { remove, to } => {
                for f in &remove {
                    match std::fs::remove_file(f) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => log::warn!("log rotation: remove {}: {e}", f.display()),
                    }
                }
                match std::fs::rename(log, &to) {
                    Ok(()) => Done::Renamed { to },
                    Err(e) => {
                        log::warn!(
                            "log rotation: rename {} to {}: {e}",
                            log.display(),
                            to.display()
                        );
                        continue;
                    }
                }
            }
        };
        out.push((i, done));
    }
    out
}

/// What a pass did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PassReport {
    /// Logs rotated (renamed and reopened).
    pub rotated: usize,
    /// Missing live files the runtime was asked to reopen.
    pub reopened: usize,
    /// Rotations undone because the runtime did not reopen.
    pub undone: usize,
    /// Running containers whose log path could not be read (tried again next pass).
    pub unread: usize,
}

/// The container log manager: the running containers' log paths, kept between passes.
///
/// Which containers run comes from the agent's runtime view ([`RunningContainers`] on a
/// `watch` channel), not from a list call of its own (upstream lists every 10 s): at idle a
/// pass makes no CRI call and allocates nothing; it stats the live files on the blocking
/// pool. The agent's view holds the containers of pods (those carrying a pod UID label),
/// which are the ones picolet starts.
#[derive(Debug)]
pub(crate) struct LogManager<R: Runtime, C: Clock> {
    runtime: R,
    clock: C,
    policy: LogRotatePolicy,
    running: watch::Receiver<RunningContainers>,
    /// Rebuilt only when the running set changes, and shared with the blocking half of a
    /// pass without a copy (kubelet reads every path again at every pass).
    logs: Arc<Logs>,
}

impl<R: Runtime, C: Clock> LogManager<R, C> {
    pub(crate) fn new(
        runtime: R,
        clock: C,
        policy: LogRotatePolicy,
        running: watch::Receiver<RunningContainers>,
    ) -> Self {
        LogManager {
            runtime,
            clock,
            policy,
            running,
            logs: Arc::new(Vec::new()),
        }
    }

    /// The running set changed: keep what is known of the containers that still run, and
    /// mark the new ones unread.
    fn take_running(&mut self) {
        // Err: the agent is gone (shutting down); keep the last set.
        if !self.running.has_changed().unwrap_or(false) {
            return;
        }
        let old = &self.logs;
        let mut logs: Logs = self
            .running
            .borrow_and_update()
            .iter()
            .map(|id| {
                let path = match old.binary_search_by(|(o, _)| o.as_str().cmp(id)) {
                    Ok(i) => old[i].1.clone(),
                    Err(_) => LogPath::Unread,
                };
                (id.clone(), path)
            })
            .collect();
        crate::sort::sort_by(&mut logs, |a, b| a.0.cmp(&b.0));
        self.logs = Arc::new(logs);
    }

    /// Reads the log path of every running container not read yet (one `ContainerStatus`
    /// each, once per container); how many could not be read.
    ///
    /// At most one line per pass: a failure that hits every container (a runtime that
    /// answers but is not well) must not become a line per container every 10 s.
    async fn read_paths(&mut self) -> usize {
        let unread: Vec<usize> = self
            .logs
            .iter()
            .enumerate()
            .filter(|(_, (_, p))| *p == LogPath::Unread)
            .map(|(i, _)| i)
            .collect();
        // The first failure, for the pass's one line, and how many failed.
        let (mut first, mut failed): (Option<(String, CriError)>, usize) = (None, 0);
        for (n, &i) in unread.iter().enumerate() {
            let id = self.logs[i].0.clone();
            let path = match self.runtime.container_status(&id).await {
                // kubelet: a container without a log path is not rotated.
                Ok(st) if st.log_path.is_empty() => LogPath::None,
                Ok(st) => LogPath::Known(PathBuf::from(st.log_path)),
                Err(e) if e.is_not_found() => continue,
                // The relister reports a runtime outage once; no line per container here,
                // and no call for the others: the next pass reads them.
                Err(e @ (CriError::Unavailable { .. } | CriError::Timeout { .. })) => {
                    log::debug!("log rotation: status of container {id}: {e}");
                    return failed + unread.len() - n;
                }
                Err(e) => {
                    failed += 1;
                    first.get_or_insert((id, e));
                    continue;
                }
            };
            // The blocking pass of the previous round holds no clone any more.
            Arc::make_mut(&mut self.logs)[i].1 = path;
        }
        if let Some((id, e)) = first {
            let more = match failed {
                1 => String::new(),
                n => format!(" (and {} other containers)", n - 1),
            };
            log::warn!("log rotation: status of container {id}: {e}{more}; retrying next pass");
        }
        failed
    }

    /// One pass (kubelet: `rotateLogs`).
    pub(crate) async fn rotate_logs(&mut self) -> PassReport {
        let mut report = PassReport::default();
        self.take_running();
        report.unread = self.read_paths().await;
        if !self
            .logs
            .iter()
            .any(|(_, p)| matches!(p, LogPath::Known(_)))
        {
            return report;
        }
        let logs = Arc::clone(&self.logs);
        let (policy, now) = (self.policy, self.clock.now());
        let done = match tokio::task::spawn_blocking(move || fs_pass(&logs, policy, now)).await {
            Ok(d) => d,
            Err(e) => {
                log::warn!("log rotation: {e}");
                return report;
            }
        };
        for (i, done) in done {
            let (id, LogPath::Known(log)) = &self.logs[i] else {
                continue;
            };
            match done {
                Done::Missing => match self.runtime.reopen_container_log(id).await {
                    Ok(()) => report.reopened += 1,
                    Err(e) => log::debug!(
                        "log rotation: reopen missing {} of container {id}: {e}",
                        log.display()
                    ),
                },
                Done::Renamed { to } => match self.runtime.reopen_container_log(id).await {
                    Ok(()) => {
                        log::debug!(
                            "log rotation: rotated {} to {}",
                            log.display(),
                            to.display()
                        );
                        report.rotated += 1;
                    }
                    Err(e) => {
                        // kubelet: rename the rotated log back, so that it is rotated again
                        // next round.
                        log::warn!(
                            "log rotation: container {id} did not reopen {}: {e}; renaming it back",
                            log.display()
                        );
                        let (from, back) = (to.clone(), log.clone());
                        let undo =
                            tokio::task::spawn_blocking(move || std::fs::rename(&from, &back))
                                .await;
                        match undo {
                            Ok(Ok(())) => report.undone += 1,
                            Ok(Err(e)) => log::warn!(
                                "log rotation: rename {} back to {}: {e}",
                                to.display(),
                                log.display()
                            ),
                            Err(e) => log::warn!("log rotation: {e}"),
                        }
                    }
                },
            }
        }
        report
    }

    /// A pass every [`MONITOR_PERIOD`] until `shutdown` (kubelet: `ContainerLogManager.Start`).
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let mut tick = crate::local_tasks::interval(MONITOR_PERIOD);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let report = self.rotate_logs().await;
            if report.rotated + report.reopened + report.undone > 0 {
                log::info!(
                    "log rotation: rotated {} container logs, reopened {} missing, undid {}",
                    report.rotated,
                    report.reopened,
                    report.undone
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    /// 2026-12-02T05:14:47Z
    const NOW: i64 = 1_796_188_487 * S;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn rotated_names() {
        assert_eq!(
            rotated_name(&p("/l/c/0.log"), NOW),
            p("/l/c/0.log.20261202-051447")
        );
        assert!(is_rotated_name("0.log", "0.log.20261202-051447"));
        assert!(is_rotated_name("0.log", "0.log.20261202-051447.gz"));
        for other in [
            "0.log",
            "1.log.20261202-051447",
            "0.log.2026120-0051447",
            "0.log.20261202_051447",
            "0.log.old",
            "0.log.",
        ] {
            assert!(!is_rotated_name("0.log", other), "{other}");
        }
    }

    #[test]
    fn plan_table() {
        let policy = LogRotatePolicy {
            max_size: 100,
            max_files: 3,
        };
        let log = p("/l/0.log");
        let to = p("/l/0.log.20261202-051447");
        let r = |ts: &str| p(&format!("/l/0.log.{ts}"));
        /// (name, live size, rotated files, policy, want)
        type Case<'a> = (&'a str, Option<u64>, Vec<PathBuf>, LogRotatePolicy, Step);
        let cases: Vec<Case> = vec![
            (
                "missing live file: reopen",
                None,
                vec![],
                policy,
                Step::Reopen,
            ),
            (
                "below the limit",
                Some(99),
                vec![r("20261201-000000")],
                policy,
                Step::Nothing,
            ),
            (
                "at the limit, nothing rotated yet",
                Some(100),
                vec![],
                policy,
                Step::Rotate {
                    remove: vec![],
                    to: to.clone(),
                },
            ),
            (
                "max 3 files: one rotated file may stay",
                Some(500),
                vec![r("20261201-000000")],
                policy,
                Step::Rotate {
                    remove: vec![],
                    to: to.clone(),
                },
            ),
            (
                "the oldest go first, whatever order they were listed in",
                Some(500),
                vec![
                    r("20261201-000002"),
                    r("20261201-000000.gz"),
                    r("20261201-000001"),
                ],
                policy,
                Step::Rotate {
                    remove: vec![r("20261201-000000.gz"), r("20261201-000001")],
                    to: to.clone(),
                },
            ),
            (
                "max 2 files: every rotated file goes",
                Some(500),
                vec![r("20261201-000000")],
                LogRotatePolicy {
                    max_size: 100,
                    max_files: 2,
                },
                Step::Rotate {
                    remove: vec![r("20261201-000000")],
                    to: to.clone(),
                },
            ),
            (
                "the rotated name is taken (same second): wait for the next pass",
                Some(500),
                vec![to.clone()],
                policy,
                Step::Nothing,
            ),
        ];
        for (name, size, rotated, policy, want) in cases {
            assert_eq!(plan(&log, size, rotated, &policy, NOW), want, "{name}");
        }
    }

    // ----- the manager over the fake runtime and a real directory ------------------------

    use crate::clock::TokioClock;
    use crate::cri::fake::{Call, FakeRuntime, Method};
    use crate::cri::{ContainerConfig, SandboxConfig};

    /// A running container whose log is `<dir>/app/0.log`, in a sandbox named after `dir`.
    async fn running_container(rt: &FakeRuntime, dir: &Path) -> (String, PathBuf) {
        let sandbox = SandboxConfig {
            name: dir.display().to_string(),
            log_directory: dir.display().to_string(),
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
        rt.start_container(&id).await.unwrap();
        std::fs::create_dir_all(dir.join("app")).unwrap();
        (id, dir.join("app/0.log"))
    }

    /// The manager over `rt`, told that `running` run (as the agent would publish them).
    fn manager(
        rt: &FakeRuntime,
        clock: TokioClock,
        policy: LogRotatePolicy,
        running: &[&str],
    ) -> (
        LogManager<FakeRuntime, TokioClock>,
        watch::Sender<RunningContainers>,
    ) {
        let (tx, rx) = watch::channel(Vec::new());
        tx.send_replace(running.iter().map(|id| id.to_string()).collect());
        (LogManager::new(rt.clone(), clock, policy, rx), tx)
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[tokio::test(start_paused = true)]
    async fn rotates_keeps_max_files_and_the_runtime_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let clock = TokioClock::new(NOW);
        let rt = FakeRuntime::new(clock);
        let (id, log) = running_container(&rt, dir.path()).await;
        let policy = LogRotatePolicy {
            max_size: 10,
            max_files: 3,
        };
        let (mut m, _running) = manager(&rt, clock, policy, &[&id]);
        std::fs::write(&log, "short\n").unwrap();
        assert_eq!(
            m.rotate_logs().await,
            PassReport::default(),
            "below the limit"
        );
        for round in 0..4 {
            std::fs::write(&log, format!("round {round}: more than ten bytes\n")).unwrap();
            let report = m.rotate_logs().await;
            assert_eq!(report.rotated, 1, "round {round}");
            assert!(!log.exists(), "renamed away until the runtime writes again");
            // The runtime's part: it reopened the file at the same path.
            std::fs::write(&log, "").unwrap();
            tokio::time::advance(MONITOR_PERIOD).await;
        }
        assert_eq!(rt.log_reopens(), vec![id.clone(); 4]);
        // The live file and the two newest rotated ones, with their content.
        assert_eq!(
            files(&dir.path().join("app")),
            vec!["0.log", "0.log.20261202-051507", "0.log.20261202-051517"]
        );
        let newest = dir.path().join("app/0.log.20261202-051517");
        assert_eq!(
            std::fs::read_to_string(newest).unwrap(),
            "round 3: more than ten bytes\n"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_reopen_renames_the_live_file_back() {
        let dir = tempfile::tempdir().unwrap();
        let clock = TokioClock::new(NOW);
        let rt = FakeRuntime::new(clock);
        let (id, log) = running_container(&rt, dir.path()).await;
        let policy = LogRotatePolicy {
            max_size: 10,
            max_files: 3,
        };
        let (mut m, _running) = manager(&rt, clock, policy, &[&id]);
        std::fs::write(&log, "more than ten bytes\n").unwrap();
        rt.fail_once(
            Method::ReopenContainerLog,
            FakeRuntime::rpc_error(Method::ReopenContainerLog, "container is not running"),
        );
        let report = m.rotate_logs().await;
        assert_eq!((report.rotated, report.undone), (0, 1));
        assert_eq!(files(&dir.path().join("app")), vec!["0.log"]);
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "more than ten bytes\n"
        );
        // The next pass rotates it.
        tokio::time::advance(MONITOR_PERIOD).await;
        assert_eq!(m.rotate_logs().await.rotated, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_live_file_is_reopened_and_exited_containers_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let clock = TokioClock::new(NOW);
        let rt = FakeRuntime::new(clock);
        let (id, log) = running_container(&rt, dir.path()).await;
        let (mut m, running) = manager(&rt, clock, LogRotatePolicy::default(), &[&id]);
        assert_eq!(m.rotate_logs().await.reopened, 1);
        assert_eq!(rt.log_reopens(), vec![id.clone()]);
        std::fs::write(&log, "x".repeat(11 * 1024 * 1024)).unwrap();
        rt.exit_container(&id, 0);
        // The agent's view no longer shows it running.
        running.send_replace(Vec::new());
        assert_eq!(m.rotate_logs().await, PassReport::default());
        assert_eq!(files(&dir.path().join("app")), vec!["0.log"]);
    }

    /// The log path is read once per container; a pass with nothing changed makes no CRI
    /// call (the running set comes from the agent, not from a list of its own).
    #[tokio::test(start_paused = true)]
    async fn an_idle_pass_makes_no_runtime_call() {
        let dir = tempfile::tempdir().unwrap();
        let clock = TokioClock::new(NOW);
        let rt = FakeRuntime::new(clock);
        let (a, log_a) = running_container(&rt, dir.path()).await;
        std::fs::write(&log_a, "short\n").unwrap();
        let (mut m, running) = manager(&rt, clock, LogRotatePolicy::default(), &[&a]);
        rt.take_calls();
        assert_eq!(m.rotate_logs().await, PassReport::default());
        assert_eq!(rt.take_calls(), vec![Call::ContainerStatus(a.clone())]);
        for _ in 0..3 {
            tokio::time::advance(MONITOR_PERIOD).await;
            assert_eq!(m.rotate_logs().await, PassReport::default());
        }
        assert_eq!(rt.take_calls(), vec![]);
        // A second container starts: only its path is read.
        let other = tempfile::tempdir().unwrap();
        let (b, _) = running_container(&rt, other.path()).await;
        rt.take_calls();
        let mut ids = vec![a.clone(), b.clone()];
        ids.sort();
        running.send_replace(ids);
        assert_eq!(m.rotate_logs().await.reopened, 1, "b has no live file yet");
        assert_eq!(
            rt.take_calls(),
            vec![
                Call::ContainerStatus(b.clone()),
                Call::ReopenContainerLog(b)
            ]
        );
    }

    /// A failed status read is tried again at the next pass; a container without a log
    /// path is not asked again.
    #[tokio::test(start_paused = true)]
    async fn a_failed_path_read_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let clock = TokioClock::new(NOW);
        let rt = FakeRuntime::new(clock);
        let (id, log) = running_container(&rt, dir.path()).await;
        std::fs::write(&log, "more than ten bytes\n").unwrap();
        let policy = LogRotatePolicy {
            max_size: 10,
            max_files: 3,
        };
        let (mut m, _running) = manager(&rt, clock, policy, &[&id]);
        rt.fail_once(
            Method::ContainerStatus,
            FakeRuntime::rpc_error(Method::ContainerStatus, "busy"),
        );
        assert_eq!(
            m.rotate_logs().await,
            PassReport {
                unread: 1,
                ..Default::default()
            }
        );
        tokio::time::advance(MONITOR_PERIOD).await;
        assert_eq!(m.rotate_logs().await.rotated, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_runtime_outage_stops_the_path_reads_until_the_next_pass() {
        let dir = tempfile::tempdir().unwrap();
        let clock = TokioClock::new(NOW);
        let rt = FakeRuntime::new(clock);
        let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(a_dir.join("app")).unwrap();
        std::fs::create_dir_all(b_dir.join("app")).unwrap();
        let (a, _) = running_container(&rt, &a_dir).await;
        let (b, _) = running_container(&rt, &b_dir).await;
        let policy = LogRotatePolicy {
            max_size: 10,
            max_files: 3,
        };
        let (mut m, _running) = manager(&rt, clock, policy, &[&a, &b]);
        rt.take_calls();
        rt.fail_once(
            Method::ContainerStatus,
            CriError::Unavailable {
                method: "ContainerStatus",
                message: "connection refused".into(),
            },
        );
        assert_eq!(
            m.rotate_logs().await,
            PassReport {
                unread: 2,
                ..Default::default()
            }
        );
        let reads = |calls: Vec<Call>| {
            calls
                .into_iter()
                .filter(|c| matches!(c, Call::ContainerStatus(_)))
                .count()
        };
        assert_eq!(reads(rt.take_calls()), 1, "no call for the other container");
        tokio::time::advance(MONITOR_PERIOD).await;
        m.rotate_logs().await;
        assert_eq!(reads(rt.take_calls()), 2, "both read at the next pass");
    }

    /// A runtime that answers every status read with an error (not an outage): each
    /// container is asked, the pass counts them (one line for all), the next pass asks again.
    #[tokio::test(start_paused = true)]
    async fn failed_path_reads_are_counted_and_retried() {
        let dir = tempfile::tempdir().unwrap();
        let clock = TokioClock::new(NOW);
        let rt = FakeRuntime::new(clock);
        let mut ids = Vec::new();
        for name in ["a", "b", "c"] {
            let d = dir.path().join(name);
            std::fs::create_dir_all(d.join("app")).unwrap();
            ids.push(running_container(&rt, &d).await.0);
        }
        let running: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (mut m, _running) = manager(&rt, clock, LogRotatePolicy::default(), &running);
        rt.take_calls();
        for _ in 0..3 {
            rt.fail_once(
                Method::ContainerStatus,
                FakeRuntime::rpc_error(Method::ContainerStatus, "busy"),
            );
        }
        assert_eq!(m.rotate_logs().await.unread, 3);
        let reads = |calls: Vec<Call>| {
            calls
                .into_iter()
                .filter(|c| matches!(c, Call::ContainerStatus(_)))
                .count()
        };
        assert_eq!(reads(rt.take_calls()), 3);
        tokio::time::advance(MONITOR_PERIOD).await;
        assert_eq!(m.rotate_logs().await.unread, 0);
        assert_eq!(reads(rt.take_calls()), 3, "all three read again");
    }
}
