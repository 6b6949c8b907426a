//! The file source: static pod manifests in `--pod-manifest-path DIR`
//! (kubelet: `config/file.go`, `config/file_linux.go`).
//!
//! Owns: listing the directory, a per-file cache of parsed pods, the inotify watch, and the
//! full snapshots it sends as [`SourceUpdate`]s (`source = "file"`).
//!
//! Must never: write to disk, talk to the runtime, or send a snapshot equal to the last one.
//!
//! Behaviour:
//! - The first snapshot is sent at once, even empty ("source seen"); a missing directory is
//!   an empty snapshot (logged once, picked up when it appears). An unreadable directory
//!   (e.g. permission denied) sends nothing, as upstream: the source is not "seen" until it
//!   can be read, so nothing is cleaned up on a guess.
//! - Full re-list every 20 s (kubelet: `fileCheckFrequency`) plus an inotify watch (not
//!   recursive). A file its writer is done with — closed after writing (`IN_CLOSE_WRITE`) or
//!   renamed into place (`IN_MOVED_TO`) — is re-listed at once, every event already queued
//!   folded into that one pass: no fixed delay between a saved manifest and its pod. Such a
//!   fast pass is *tentative*: a file that does not parse yet (a writer that closes between
//!   steps) is neither logged nor cached, keeps its last good pod, and is read again after
//!   the debounce. Every other event (a write without a close, a rename away, a deletion,
//!   a new name) waits for the directory to be quiet for the debounce (150 ms; at most 8
//!   debounces after the first event of a burst), so editors that save in several steps or
//!   via rename cause no churn, and a snapshot is sent only if it differs. Watch errors, a missing directory or a replaced directory re-arm the
//!   watch with back-off 1 s → 20 s. SIGHUP (`relist_now`) re-lists at once and re-reads
//!   every file.
//! - A re-list at idle costs a `readdir` and one `stat` per file: parsed pods are cached per
//!   file name, keyed by (dev, inode, size, mtime, ctime).
//! - Ignored names (see [`is_ignored_name`]): `.*` (kubelet: hidden files), `*~` (editor
//!   backups), vim's `*.swp`/`*.swo`/`*.swx` and `4913` write probe, emacs `#*#`, `*.tmp`
//!   (atomic-write temporaries), GNU `sed -i` temporaries (`sed` + 6 letters/digits), and
//!   package-manager leftovers (`*.dpkg-new|old|dist|tmp|bak`, `*.rpmnew|rpmsave|rpmorig`,
//!   `*-opkg`) that would otherwise duplicate a pod. Subdirectories and non-regular files
//!   are skipped; symlinks are followed (like upstream's `os.Stat`). Files over 10 MiB are
//!   rejected.
//! - Each problem is logged ONCE per file version (when the file appears or changes), not at
//!   every re-list, and never disturbs another file's pod.
//! - **Deliberate difference from upstream**: a file that was good and becomes broken (parse
//!   or validation error, too large, unreadable) keeps its last good pod, and the log says
//!   so — a typo in an edit must not kill a running service on a remote board. A broken file
//!   that never parsed yields no pod; a deleted file removes its pod.
//! - Two files giving the same pod full name (or UID): the first by file name wins, the
//!   other is skipped with one warning naming both files (kubelet: the merge drops
//!   duplicates).
//! - Unknown fields: one debug line per file version.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::SourceError;
use crate::api::{self, Pod};
use crate::clock::{Clock, UnixNanos};
use crate::config_data::{self, Object};
use crate::local_tasks::sleep_until_opt;
use crate::manifest::{self, ManifestError, fields};
use crate::messages::SourceUpdate;
use crate::recorder::{self, Recorder};

/// The `source` of this source's updates.
pub(crate) const SOURCE: &str = manifest::SOURCE_FILE;

/// Timings and limits; the defaults are upstream's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSourceOptions {
    /// Full re-list period (kubelet: `fileCheckFrequency`, 20 s).
    pub relist_interval: Duration,
    /// Quiet time after the last inotify event before re-listing.
    pub debounce: Duration,
    /// Back-off for (re-)arming the watch (kubelet: 1 s → 20 s).
    pub watch_retry_initial: Duration,
    pub watch_retry_max: Duration,
    /// Larger files are rejected (kubelet: `maxConfigLength`, 10 MiB).
    pub max_file_size: u64,
}

impl Default for FileSourceOptions {
    fn default() -> Self {
        FileSourceOptions {
            relist_interval: Duration::from_secs(20),
            debounce: Duration::from_millis(150),
            watch_retry_initial: Duration::from_secs(1),
            watch_retry_max: Duration::from_secs(20),
            max_file_size: 10 * 1024 * 1024,
        }
    }
}

/// A burst of events re-lists at the latest this many debounces after its first event.
const MAX_BURST_DEBOUNCES: u32 = 8;

/// Whether a directory entry is skipped by name (see the module doc).
pub(crate) fn is_ignored_name(name: &str) -> bool {
    const SUFFIXES: [&str; 13] = [
        ".swp",
        ".swo",
        ".swx",
        ".tmp",
        ".dpkg-new",
        ".dpkg-old",
        ".dpkg-dist",
        ".dpkg-tmp",
        ".dpkg-bak",
        ".rpmnew",
        ".rpmsave",
        ".rpmorig",
        "-opkg",
    ];
    name.starts_with('.')
        || name.ends_with('~')
        || name == "4913"
        || (name.len() > 1 && name.starts_with('#') && name.ends_with('#'))
        || SUFFIXES.iter().any(|s| name.ends_with(s))
        || is_sed_temp(name)
}

/// GNU sed `-i` writes `sedXXXXXX` (6 random letters/digits) next to the file.
fn is_sed_temp(name: &str) -> bool {
    name.len() == 9
        && name.starts_with("sed")
        && name.bytes().skip(3).all(|b| b.is_ascii_alphanumeric())
}

fn ignored(name: &OsStr) -> bool {
    is_ignored_name(&name.to_string_lossy())
}

/// The static pod directory source.
pub struct FileSource<C: Clock> {
    dir: PathBuf,
    node_name: String,
    clock: C,
    options: FileSourceOptions,
    recorder: Option<Recorder>,
}

impl<C: Clock> FileSource<C> {
    pub fn new(dir: PathBuf, node_name: String, clock: C) -> Self {
        FileSource {
            dir,
            node_name,
            clock,
            options: FileSourceOptions::default(),
            recorder: None,
        }
    }

    /// Records a `FailedValidation` warning on each pod a broken edit leaves running as it
    /// was, so `kubectl describe pod` and `kubectl get events` show what the log says.
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    pub fn with_options(mut self, options: FileSourceOptions) -> Self {
        self.options = options;
        self
    }

    /// Sends full snapshots on `tx` until `shutdown` (or until `tx` is closed).
    /// `relist_now` (SIGHUP; use `notify_one`) forces a re-list that re-reads every file.
    pub async fn run(
        self,
        tx: mpsc::Sender<SourceUpdate>,
        relist_now: Rc<Notify>,
        shutdown: CancellationToken,
    ) {
        let mut lister = Lister::new(self, tx, relist_now, shutdown);
        loop {
            // 1. List the directory.
            let Some(scanned) = lister.scan().await else {
                return;
            };
            // 2. Send the snapshot if it changed.
            if !lister.publish(scanned).await {
                return;
            }
            lister.force = false;
            lister.tentative = false;
            lister.watch.check(&lister.dir, &lister.ev_tx);
            lister.relist.reset();
            // 3. Wait for the next reason to re-list.
            if !lister.wait_for_reason().await {
                return;
            }
            // A tentative pass keeps a pending debounce: it confirms what the pass skipped.
            if !lister.tentative {
                lister.pending = None;
            }
        }
    }
}

/// The state of [`FileSource::run`] between its passes.
struct Lister<C: Clock> {
    dir: PathBuf,
    node_name: String,
    clock: C,
    options: FileSourceOptions,
    recorder: Option<Recorder>,
    tx: mpsc::Sender<SourceUpdate>,
    relist_now: Rc<Notify>,
    shutdown: CancellationToken,
    ev_tx: mpsc::Sender<WatchMsg>,
    ev_rx: mpsc::Receiver<WatchMsg>,
    watch: Watch,
    /// The per-file cache; away on the blocking pool during a pass.
    scanner: Option<Scanner>,
    relist: tokio::time::Interval,
    /// (first event, deadline) of the debounce under way.
    pending: Option<(Instant, Instant)>,
    max_burst: Duration,
    /// The last snapshot sent.
    last: Option<Snapshot>,
    /// The next pass re-reads every file (SIGHUP).
    force: bool,
    /// The next pass follows a writer being done (see the module doc).
    tentative: bool,
}

impl<C: Clock> Lister<C> {
    /// Arms the watch before the first listing so nothing between the two is missed.
    fn new(
        source: FileSource<C>,
        tx: mpsc::Sender<SourceUpdate>,
        relist_now: Rc<Notify>,
        shutdown: CancellationToken,
    ) -> Self {
        let FileSource {
            dir,
            node_name,
            clock,
            options,
            recorder,
        } = source;
        let (ev_tx, ev_rx) = mpsc::channel::<WatchMsg>(64);
        let mut watch = Watch::new(&options);
        let scanner = Some(Scanner::new(
            dir.clone(),
            node_name.clone(),
            options.max_file_size,
        ));
        watch.arm(&dir, &ev_tx);
        let relist = crate::local_tasks::interval_at(
            Instant::now() + options.relist_interval,
            options.relist_interval,
        );
        let max_burst = options.debounce * MAX_BURST_DEBOUNCES;
        Lister {
            dir,
            node_name,
            clock,
            options,
            recorder,
            tx,
            relist_now,
            shutdown,
            ev_tx,
            ev_rx,
            watch,
            scanner,
            relist,
            pending: None,
            max_burst,
            last: None,
            force: false,
            tentative: false,
        }
    }

    /// One pass: readdir, stat, read and parse on tokio's blocking pool, so a slow SD card
    /// or a large manifest never holds up the event loop's thread. The scanner (the
    /// per-file cache) travels to the pool and back. `None` on shutdown.
    async fn scan(&mut self) -> Option<Scanned> {
        let now = self.clock.now();
        let mut s = self.scanner.take().unwrap_or_else(|| {
            Scanner::new(
                self.dir.clone(),
                self.node_name.clone(),
                self.options.max_file_size,
            )
        });
        let (force, tentative) = (self.force, self.tentative);
        let scan = tokio::task::spawn_blocking(move || {
            let scanned = s.scan(now, force, tentative);
            (s, scanned)
        });
        let scanned = tokio::select! {
            r = scan => r,
            _ = self.shutdown.cancelled() => return None,
        };
        Some(match scanned {
            Ok((mut s, scanned)) => {
                for (pod, message) in s.kept_warnings.drain(..) {
                    if let Some(r) = &self.recorder {
                        r.warning(&pod, None, recorder::FAILED_VALIDATION, message);
                    }
                }
                // A file that did not parse in a tentative pass is read again after the
                // debounce (then its problem is logged, if it is still there).
                if self.tentative && s.deferred {
                    let at = Instant::now() + self.options.debounce;
                    self.pending = Some((self.pending.map_or(at, |(first, _)| first), at));
                }
                self.scanner = Some(s);
                scanned
            }
            Err(e) => {
                // Only a panic gets here (and release builds abort on panic).
                log::error!("{}: scanning the manifests failed: {e}", self.dir.display());
                Scanned::Unreadable
            }
        })
    }

    /// Sends a listed snapshot unless it equals the last one sent; false on shutdown or
    /// when the receiver is gone.
    async fn publish(&mut self, scanned: Scanned) -> bool {
        if let Scanned::Listed(snap) = scanned
            && self.last.as_ref() != Some(&snap)
        {
            let update = SourceUpdate {
                source: SOURCE,
                pods: snap.pods.clone(),
                objects: Some(snap.objects.clone()),
            };
            tokio::select! {
                sent = self.tx.send(update) => if sent.is_err() { return false },
                _ = self.shutdown.cancelled() => return false,
            }
            self.last = Some(snap);
        }
        true
    }

    /// Waits for the next reason to re-list: SIGHUP, a writer done with a file, the end
    /// of a debounce, the watch re-armed, or the periodic re-list. False on shutdown.
    async fn wait_for_reason(&mut self) -> bool {
        loop {
            let debounce_at = self.pending.map(|(_, deadline)| deadline);
            let retry_at = self.watch.retry_at;
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return false,
                _ = self.relist_now.notified() => {
                    log::info!("{}: re-listing static pod manifests (SIGHUP)", self.dir.display());
                    self.force = true;
                    return true;
                }
                Some(msg) = self.ev_rx.recv() => match msg {
                    WatchMsg::Changed { complete: true } => {
                        // Fold in what is already queued: one pass for a burst.
                        while let Ok(queued) = self.ev_rx.try_recv() {
                            if let WatchMsg::Error(error) = queued {
                                self.watch.failed(&self.dir, error);
                            }
                        }
                        self.tentative = true;
                        return true;
                    }
                    WatchMsg::Changed { complete: false } => {
                        let now = Instant::now();
                        let first = self.pending.map_or(now, |(first, _)| first);
                        self.pending = Some((first, (now + self.options.debounce).min(first + self.max_burst)));
                    }
                    WatchMsg::Error(error) => {
                        self.watch.failed(&self.dir, error);
                        return true;
                    }
                },
                _ = sleep_until_opt(debounce_at), if debounce_at.is_some() => return true,
                _ = sleep_until_opt(retry_at), if retry_at.is_some() => {
                    // Armed again (the directory may have appeared): re-list at once.
                    if self.watch.arm(&self.dir, &self.ev_tx) {
                        return true;
                    }
                }
                _ = self.relist.tick() => return true,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The watch

enum WatchMsg {
    /// `complete`: a writer is done with a candidate file (closed after writing, or renamed
    /// into place).
    Changed {
        complete: bool,
    },
    Error(notify::Error),
}

/// (st_dev, st_ino) of the watched directory: a replaced directory needs a new watch.
type DirId = (u64, u64);

fn dir_id(dir: &Path) -> io::Result<DirId> {
    let m = fs::metadata(dir)?;
    if m.is_dir() {
        Ok((m.dev(), m.ino()))
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        ))
    }
}

struct Watch {
    active: Option<(RecommendedWatcher, DirId)>,
    retry_at: Option<Instant>,
    delay: Duration,
    initial: Duration,
    max: Duration,
    /// A failure was already logged above debug level in this streak.
    failing: bool,
    /// The last failure was "no such directory": arm as soon as a listing sees it.
    missing: bool,
}

impl Watch {
    fn new(options: &FileSourceOptions) -> Self {
        Watch {
            active: None,
            retry_at: None,
            delay: options.watch_retry_initial,
            initial: options.watch_retry_initial,
            max: options.watch_retry_max,
            failing: false,
            missing: false,
        }
    }

    /// Tries to watch `dir`; on failure schedules a retry with back-off. True when armed.
    fn arm(&mut self, dir: &Path, ev_tx: &mpsc::Sender<WatchMsg>) -> bool {
        self.active = None;
        match start_watch(dir, ev_tx) {
            Ok(active) => {
                if self.failing {
                    log::info!("{}: watching the manifest directory again", dir.display());
                }
                log::debug!("{}: watching the manifest directory", dir.display());
                self.active = Some(active);
                self.retry_at = None;
                self.delay = self.initial;
                self.failing = false;
                self.missing = false;
                true
            }
            Err(error) => {
                let missing = matches!(&error.kind, notify::ErrorKind::PathNotFound)
                    || matches!(&error.kind, notify::ErrorKind::Io(e) if e.kind() == io::ErrorKind::NotFound);
                self.missing = missing;
                let error = SourceError::Watch {
                    path: dir.to_path_buf(),
                    error,
                };
                // A missing directory is reported once by the listing; stay quiet here.
                if self.failing || missing {
                    log::debug!("{error}; retrying in {:?}", self.delay);
                } else {
                    log::warn!("{error}; retrying in {:?}", self.delay);
                    self.failing = true;
                }
                self.retry_at = Some(Instant::now() + self.delay);
                self.delay = (self.delay * 2).min(self.max);
                false
            }
        }
    }

    /// The watcher reported an error: drop it and retry with back-off.
    fn failed(&mut self, dir: &Path, error: notify::Error) {
        let error = SourceError::Watch {
            path: dir.to_path_buf(),
            error,
        };
        if self.failing {
            log::debug!("{error}");
        } else {
            log::warn!("{error}; re-arming the watch");
            self.failing = true;
        }
        self.active = None;
        self.retry_at = Some(Instant::now() + self.delay);
        self.delay = (self.delay * 2).min(self.max);
    }

    /// After a listing: re-arm at once if the directory appeared or was replaced; otherwise
    /// a pending retry keeps its back-off.
    fn check(&mut self, dir: &Path, ev_tx: &mpsc::Sender<WatchMsg>) {
        let now = dir_id(dir).ok();
        match (&self.active, now) {
            (Some((_, id)), Some(now)) if *id == now => {}
            (Some(_), Some(_)) => {
                // Replaced (e.g. `mv new manifests`): the watch follows the old inode.
                self.arm(dir, ev_tx);
            }
            (Some(_), None) => {
                // Gone: the watch is dead; retry with back-off until it returns.
                self.active = None;
                self.missing = true;
                self.delay = self.initial;
                self.retry_at = Some(Instant::now() + self.delay);
            }
            (None, Some(_)) if self.missing || self.retry_at.is_none() => {
                self.arm(dir, ev_tx);
            }
            (None, _) => {}
        }
    }
}

fn start_watch(
    dir: &Path,
    ev_tx: &mpsc::Sender<WatchMsg>,
) -> notify::Result<(RecommendedWatcher, DirId)> {
    let id = dir_id(dir).map_err(notify::Error::io)?;
    let tx = ev_tx.clone();
    let watched = dir.to_path_buf();
    // Runs on notify's thread: forward a "something changed" signal. A full channel means a
    // re-list is already pending, so dropping the message loses nothing.
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let msg = match res {
            Ok(event) if relevant(&event, &watched) => WatchMsg::Changed {
                complete: complete(&event),
            },
            Ok(_) => return,
            Err(error) => WatchMsg::Error(error),
        };
        let _ = tx.try_send(msg);
    })?;
    watcher.watch(dir, RecursiveMode::NonRecursive)?;
    Ok((watcher, id))
}

/// Opens and read-closes (including our own reads and `readdir`s) change nothing; events
/// only about ignored names (swap files, backups) neither.
fn relevant(event: &notify::Event, dir: &Path) -> bool {
    let kind_matters = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    };
    kind_matters
        && (event.need_rescan()
            || event.paths.is_empty()
            || event
                .paths
                .iter()
                .any(|p| p == dir || p.file_name().is_none_or(|n| !ignored(n))))
}

/// A writer is done with a candidate file: `IN_CLOSE_WRITE`, or `IN_MOVED_TO` (a rename
/// into place; for a paired rename, its destination). A rename away, a deletion or a plain
/// write is not: those wait for the debounce, so that an editor's intermediate steps never
/// remove or churn a pod.
fn complete(event: &notify::Event) -> bool {
    use notify::event::{ModifyKind, RenameMode};
    let candidate = |p: &PathBuf| p.file_name().is_some_and(|n| !ignored(n));
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write))
        | EventKind::Modify(ModifyKind::Name(RenameMode::To)) => event.paths.iter().any(candidate),
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
            event.paths.get(1).is_some_and(candidate)
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// Listing and the per-file cache

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileKey {
    fn of(m: &Metadata) -> Self {
        FileKey {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// What one document of a file gave.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    /// Shared with the snapshots this source sends (one copy per pod).
    Pod(Arc<Pod>),
    Object(Object),
}

impl Item {
    fn describe(&self) -> String {
        match self {
            Item::Pod(pod) => format!("static pod {} (uid {})", pod.full_name(), pod.uid()),
            Item::Object(o) => {
                format!("{} {}/{}", o.key.kind.as_str(), o.key.namespace, o.key.name)
            }
        }
    }
}

struct Entry {
    /// The version last processed (`None`: could not even stat it).
    key: Option<FileKey>,
    /// The last good item of each document, by position (a document that broke keeps its
    /// previous good item), possibly from an earlier version of the file.
    items: Vec<Option<Item>>,
    /// The current version is broken (its problem has been logged).
    broken: bool,
}

impl Entry {
    fn good(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().flatten()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DirState {
    Unknown,
    Present,
    Missing,
    Unreadable(String),
}

struct Scanner {
    dir: PathBuf,
    node_name: String,
    max_file_size: u64,
    cache: BTreeMap<OsString, Entry>,
    dir_state: DirState,
    /// (skipped file, file that owns the name) pairs already warned about.
    duplicates: HashSet<(OsString, OsString)>,
    /// Last stat error logged per file.
    stat_errors: HashMap<OsString, String>,
    /// This pass is tentative (a writer just finished): a file that does not load is
    /// neither logged nor cached.
    tentative: bool,
    /// A tentative pass skipped a file that did not load.
    deferred: bool,
    /// The cache changed since the last snapshot was built (a file loaded, dropped, or
    /// its stat failed): the next pass builds one. At idle a pass only stats the files.
    changed: bool,
    /// The problems this pass logged for pods it keeps (see
    /// [`FileSource::with_recorder`]); the run loop records them (the scan runs on the
    /// blocking pool, the recorder lives on the loop's thread).
    kept_warnings: Vec<(Arc<Pod>, String)>,
}

impl Scanner {
    fn new(dir: PathBuf, node_name: String, max_file_size: u64) -> Self {
        Scanner {
            dir,
            node_name,
            max_file_size,
            cache: BTreeMap::new(),
            dir_state: DirState::Unknown,
            duplicates: HashSet::new(),
            stat_errors: HashMap::new(),
            tentative: false,
            deferred: false,
            changed: true,
            kept_warnings: Vec::new(),
        }
    }

    /// A problem logged for a file (or one of its documents) whose previous good pods stay:
    /// a `FailedValidation` warning on each of them.
    fn warn_kept<'a>(
        warnings: &mut Vec<(Arc<Pod>, String)>,
        kept: impl IntoIterator<Item = &'a Item>,
        error: &str,
    ) {
        for item in kept {
            if let Item::Pod(pod) = item {
                let message =
                    format!("{error}; the pod keeps running as it was until the manifest is fixed");
                warnings.push((Arc::clone(pod), message));
            }
        }
    }

    fn set_dir_state(&mut self, state: DirState) {
        if state == self.dir_state {
            return;
        }
        let dir = self.dir.display();
        match &state {
            DirState::Missing => log::warn!(
                "{dir}: the static pod manifest directory does not exist; no static pods until it is created"
            ),
            DirState::Unreadable(error) => log::error!("{error}"),
            DirState::Present => match self.dir_state {
                DirState::Missing => {
                    log::info!("{dir}: the static pod manifest directory exists now")
                }
                DirState::Unreadable(_) => {
                    log::info!("{dir}: the static pod manifest directory is readable again")
                }
                DirState::Present | DirState::Unknown => {}
            },
            DirState::Unknown => {}
        }
        self.dir_state = state;
    }

    /// One re-list. `tentative`: see [`Scanner::tentative`].
    fn scan(&mut self, now: UnixNanos, force: bool, tentative: bool) -> Scanned {
        self.tentative = tentative;
        self.deferred = false;
        let names = match self.list() {
            Ok(names) => names,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                self.set_dir_state(DirState::Missing);
                self.forget_all();
                return Scanned::Listed(Snapshot::default());
            }
            Err(error) => {
                let error = SourceError::ReadDir {
                    path: self.dir.clone(),
                    error,
                };
                self.set_dir_state(DirState::Unreadable(error.to_string()));
                return Scanned::Unreadable;
            }
        };
        self.set_dir_state(DirState::Present);

        // Listed names that are no candidate (rare): with the names not listed, their
        // entries go.
        let mut skipped = Vec::new();
        for name in &names {
            if !self.visit(name, now, force) {
                skipped.push(name);
            }
        }
        let listed = |n: &OsString| names.binary_search(n).is_ok() && !skipped.contains(&n);
        let gone: Vec<OsString> = self.cache.keys().filter(|n| !listed(n)).cloned().collect();
        for name in gone {
            self.changed = true;
            if let Some(entry) = self.cache.remove(&name) {
                for item in entry.good() {
                    log::info!(
                        "{}: removed; {} goes away",
                        self.dir.join(&name).display(),
                        item.describe()
                    );
                }
            }
        }
        self.stat_errors.retain(|n, _| listed(n));
        // The snapshot is a function of the cache alone.
        if !std::mem::take(&mut self.changed) && !force {
            return Scanned::Unchanged;
        }
        Scanned::Listed(self.snapshot(&names))
    }

    fn forget_all(&mut self) {
        self.changed = true;
        self.cache.clear();
        self.duplicates.clear();
        self.stat_errors.clear();
    }

    /// The candidate names, sorted.
    fn list(&self) -> io::Result<Vec<OsString>> {
        let mut names: Vec<OsString> = crate::dir_listing::read_dir(&self.dir)?
            .into_iter()
            .map(|e| e.file_name())
            .filter(|n| !ignored(n))
            .collect();
        crate::sort::sort(&mut names);
        Ok(names)
    }

    /// Brings one file's cache entry up to date. False when the file is not (or no longer)
    /// a candidate: its entry, if any, is dropped by the caller.
    fn visit(&mut self, name: &OsStr, now: UnixNanos, force: bool) -> bool {
        let path = self.dir.join(name);
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            // Vanished since the readdir, or a dangling symlink: as if deleted.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
            Err(error) => {
                self.stat_failed(name, path, error);
                return true;
            }
        };
        self.stat_errors.remove(name);
        if !meta.is_file() {
            log::trace!("{}: not a regular file, skipped", path.display());
            return false;
        }
        let key = FileKey::of(&meta);
        if !force
            && let Some(entry) = self.cache.get(name)
            && entry.key == Some(key)
        {
            return true;
        }

        self.changed = true;
        let entry = self.reload(name, &path, &meta, key, now);
        self.cache.insert(name.to_os_string(), entry);
        true
    }

    /// A listed file that cannot be stat'ed: it keeps its last good pod (if any) and is
    /// marked broken; each distinct error is logged once.
    fn stat_failed(&mut self, name: &OsStr, path: PathBuf, error: io::Error) {
        let error = SourceError::Stat { path, error }.to_string();
        if self.stat_errors.get(name) != Some(&error) {
            log::error!("{error}{}", self.keeping(name));
            if let Some(entry) = self.cache.get(name) {
                Self::warn_kept(&mut self.kept_warnings, entry.good(), &error);
            }
            self.stat_errors.insert(name.to_os_string(), error);
        }
        self.changed = true;
        let entry = self.cache.entry(name.to_os_string()).or_insert(Entry {
            key: None,
            items: Vec::new(),
            broken: true,
        });
        entry.key = None;
        entry.broken = true;
    }

    /// Reads and parses a new version of a file; its new cache entry. A version that does
    /// not load keeps the previous items (deferred instead in a tentative pass).
    fn reload(
        &mut self,
        name: &OsStr,
        path: &Path,
        meta: &Metadata,
        key: FileKey,
        now: UnixNanos,
    ) -> Entry {
        let result = self.load(path, meta, now);
        let previous = self.cache.remove(name);
        let (prev_items, was_broken) = match previous {
            Some(Entry { items, broken, .. }) => (items, broken),
            None => (Vec::new(), false),
        };
        let failed = match &result {
            Err(_) => true,
            Ok(docs) => docs.iter().any(Result::is_err),
        };
        if failed && self.tentative {
            // Perhaps a writer between two steps: read it again after the debounce.
            self.deferred = true;
            return Entry {
                key: None,
                items: prev_items,
                broken: was_broken,
            };
        }
        match result {
            Ok(docs) => {
                // Once per file version taken, however it arrived (written and closed,
                // renamed into place, chmod, present at start, edited): a version is
                // read once and cached, so the check lives where it is taken.
                warn_if_secret_readable(path, meta, &docs);
                let mut warnings = std::mem::take(&mut self.kept_warnings);
                let items = self.take_documents(path, docs, prev_items, &mut warnings);
                self.kept_warnings = warnings;
                if was_broken && !failed {
                    log::info!("{}: the manifest is valid again", path.display());
                }
                Entry {
                    key: Some(key),
                    items,
                    broken: failed,
                }
            }
            Err(error) => {
                let kept: Vec<String> = prev_items.iter().flatten().map(Item::describe).collect();
                if kept.is_empty() {
                    log::error!("{error}; nothing from this file until it is fixed");
                } else {
                    log::error!(
                        "{error}; keeping the previous version of {} until the file is fixed",
                        kept.join(", ")
                    );
                    Self::warn_kept(
                        &mut self.kept_warnings,
                        prev_items.iter().flatten(),
                        &error.to_string(),
                    );
                }
                Entry {
                    key: Some(key),
                    items: prev_items,
                    broken: true,
                }
            }
        }
    }

    fn keeping(&self, name: &OsStr) -> String {
        let kept: Vec<String> = self
            .cache
            .get(name)
            .map(|e| e.good().map(Item::describe).collect())
            .unwrap_or_default();
        if kept.is_empty() {
            String::new()
        } else {
            format!("; keeping the previous version of {}", kept.join(", "))
        }
    }

    /// The items of a file's documents, logging what changed and what is broken; a broken
    /// document keeps the previous good item at its position.
    fn take_documents(
        &self,
        path: &Path,
        docs: Vec<Result<manifest::Document, ManifestError>>,
        mut prev: Vec<Option<Item>>,
        warnings: &mut Vec<(Arc<Pod>, String)>,
    ) -> Vec<Option<Item>> {
        let shown = path.display().to_string();
        let mut items = Vec::with_capacity(docs.len());
        for (i, doc) in docs.into_iter().enumerate() {
            let prev_item = prev.get_mut(i).and_then(Option::take);
            let item = match doc {
                Ok(manifest::Document::Pod(loaded)) => {
                    if let Some(w) = fields::unknown_fields_warning(&shown, &loaded.unknown_fields)
                    {
                        log::warn!("{w}");
                    }
                    match prev_item {
                        // Same content again (touch, rename-into-place, SIGHUP): keep the pod
                        // as it was, including its first-seen stamp, so nothing churns.
                        Some(Item::Pod(prev)) if same_ignoring_seen(&prev, &loaded.pod) => {
                            Item::Pod(prev)
                        }
                        prev => {
                            let item = Item::Pod(Arc::new(loaded.pod));
                            log::info!(
                                "{shown}: {} {}",
                                item.describe(),
                                if prev.is_some() { "updated" } else { "added" }
                            );
                            item
                        }
                    }
                }
                Ok(manifest::Document::Object(o)) => {
                    let item = Item::Object(o);
                    match &prev_item {
                        Some(p) if *p == item => {}
                        p => log::info!(
                            "{shown}: {} {}",
                            item.describe(),
                            if p.is_some() { "updated" } else { "added" }
                        ),
                    }
                    item
                }
                Err(error) => {
                    match &prev_item {
                        Some(p) => {
                            log::error!(
                                "{error}; keeping the previous version of {} until the document is fixed",
                                p.describe()
                            );
                            Self::warn_kept(warnings, std::iter::once(p), &error.to_string());
                        }
                        None => {
                            log::error!("{error}; nothing from this document until it is fixed")
                        }
                    }
                    items.push(prev_item);
                    continue;
                }
            };
            items.push(Some(item));
        }
        items
    }

    fn load(
        &self,
        path: &Path,
        meta: &Metadata,
        now: UnixNanos,
    ) -> Result<Vec<Result<manifest::Document, ManifestError>>, SourceError> {
        let max = self.max_file_size;
        if meta.size() > max {
            return Err(SourceError::TooLarge {
                path: path.to_path_buf(),
                size: meta.size(),
                max,
            });
        }
        let read_error = |error| SourceError::Read {
            path: path.to_path_buf(),
            error,
        };
        // O_NONBLOCK: never hang on a FIFO swapped in after the stat.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(path)
            .map_err(read_error)?;
        if !file.metadata().map_err(read_error)?.is_file() {
            return Err(read_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            )));
        }
        let mut bytes = Vec::new();
        File::take(file, max + 1)
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        if bytes.len() as u64 > max {
            return Err(SourceError::TooLarge {
                path: path.to_path_buf(),
                size: bytes.len() as u64,
                max,
            });
        }
        let shown = path.to_string_lossy();
        manifest::load_documents(&shown, &bytes, &self.node_name, SOURCE, now)
            .map_err(|e: ManifestError| SourceError::Manifest(e))
    }

    /// The pods and objects in file-name order, skipping duplicate pod full names and UIDs
    /// and duplicate objects.
    fn snapshot(&mut self, names: &[OsString]) -> Snapshot {
        let mut out = Snapshot::default();
        let mut owners: HashMap<String, &OsString> = HashMap::new();
        let mut uids: HashMap<String, &OsString> = HashMap::new();
        let mut object_owners: HashMap<config_data::ObjectKey, &OsString> = HashMap::new();
        let mut duplicates = HashSet::new();
        for name in names {
            let Some(entry) = self.cache.get(name) else {
                continue;
            };
            for item in entry.good() {
                let owner = match item {
                    Item::Pod(pod) => owners
                        .get(&pod.full_name())
                        .or_else(|| uids.get(pod.uid()))
                        .copied(),
                    Item::Object(o) => object_owners.get(&o.key).copied(),
                };
                if let Some(owner) = owner {
                    let pair = (name.clone(), owner.clone());
                    if !self.duplicates.contains(&pair) {
                        log::warn!(
                            "{}: {} is already defined by {}; ignoring it here",
                            self.dir.join(name).display(),
                            item.describe(),
                            self.dir.join(owner).display()
                        );
                    }
                    duplicates.insert(pair);
                    continue;
                }
                match item {
                    Item::Pod(pod) => {
                        owners.insert(pod.full_name(), name);
                        uids.insert(pod.uid().to_string(), name);
                        out.pods.push(Arc::clone(pod));
                    }
                    Item::Object(o) => {
                        object_owners.insert(o.key.clone(), name);
                        out.objects.push(o.clone());
                    }
                }
            }
        }
        self.duplicates = duplicates;
        out
    }
}

/// kubelet has no such check (its Secrets come from the apiserver): a local file holding a
/// Secret should be as private as the Secret. The mode is the one stat'ed before the read.
fn warn_if_secret_readable(
    path: &Path,
    meta: &Metadata,
    docs: &[Result<manifest::Document, ManifestError>],
) {
    let has_secret = docs.iter().any(|d| {
        matches!(d, Ok(manifest::Document::Object(o)) if o.key.kind == config_data::Kind::Secret)
    });
    if has_secret && meta.mode() & 0o044 != 0 {
        log::warn!(
            "{}: holds a Secret but is readable by others than its owner (mode {:o}); chmod 600 it",
            path.display(),
            meta.mode() & 0o777
        );
    }
}

/// What one re-list found.
enum Scanned {
    /// The directory could not be read: send nothing.
    Unreadable,
    /// Nothing changed since the last snapshot (not even built).
    Unchanged,
    Listed(Snapshot),
}

/// One pass's result: the source's pods and local objects.
#[derive(Debug, Default, Clone)]
struct Snapshot {
    pods: Vec<Arc<Pod>>,
    objects: Vec<Object>,
}

/// Pods the cache kept are the same `Arc`s as in the last snapshot: those compare equal
/// without a field-by-field comparison.
impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        self.pods.len() == other.pods.len()
            && self
                .pods
                .iter()
                .zip(&other.pods)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
            && self.objects == other.objects
    }
}

fn same_ignoring_seen(old: &Pod, new: &Pod) -> bool {
    let seen = |p: &Pod| {
        p.annotation(api::ANNOTATION_CONFIG_SEEN)
            .map(str::to_string)
    };
    if seen(old) == seen(new) {
        return old == new;
    }
    let mut new = new.clone();
    match seen(old) {
        Some(s) => {
            new.metadata
                .annotations
                .insert(api::ANNOTATION_CONFIG_SEEN.to_string(), s);
        }
        None => {
            new.metadata.annotations.remove(api::ANNOTATION_CONFIG_SEEN);
        }
    }
    *old == new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_names() {
        let table = [
            ("web.yaml", false),
            ("web.json", false),
            ("web", false),
            ("web.yaml.bak", false), // a duplicate, warned about, not ignored
            ("sedation", false),
            (".web.yaml", true),
            (".web.yaml.swp", true),
            ("web.yaml~", true),
            ("web.yaml.swp", true),
            ("web.yaml.swx", true),
            ("4913", true),
            ("#web.yaml#", true),
            ("#", false),
            ("web.yaml.tmp", true),
            ("sedAb12Cd", true),
            ("sedAb12C", false),
            ("web.yaml.dpkg-dist", true),
            ("web.yaml.rpmnew", true),
            ("web.yaml-opkg", true),
        ];
        for (name, want) in table {
            assert_eq!(is_ignored_name(name), want, "{name}");
        }
    }

    #[test]
    fn seen_stamp_alone_is_no_change() {
        let mut a = Pod::default();
        a.metadata.annotations.insert(
            api::ANNOTATION_CONFIG_SEEN.into(),
            "2026-01-01T00:00:00Z".into(),
        );
        let mut b = a.clone();
        b.metadata.annotations.insert(
            api::ANNOTATION_CONFIG_SEEN.into(),
            "2026-01-02T00:00:00Z".into(),
        );
        assert!(same_ignoring_seen(&a, &b));
        b.metadata.name = "other".into();
        assert!(!same_ignoring_seen(&a, &b));
    }

    fn pod_yaml(name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: app\n    image: busybox\n"
        )
    }

    fn names(scanned: &Scanned) -> Option<Vec<String>> {
        match scanned {
            Scanned::Listed(snap) => {
                Some(snap.pods.iter().map(|p| p.metadata.name.clone()).collect())
            }
            Scanned::Unchanged => None,
            Scanned::Unreadable => Some(vec!["unreadable".into()]),
        }
    }

    /// A re-list that finds every file as it was builds no snapshot; any change to the
    /// cache (a new, edited, removed or no longer regular file) and a forced pass do.
    #[test]
    fn an_unchanged_directory_builds_no_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.yaml"), pod_yaml("a")).unwrap();
        let mut s = Scanner::new(d.to_path_buf(), "node".into(), 1 << 20);
        let scan = |s: &mut Scanner, force| names(&s.scan(0, force, false));
        assert_eq!(scan(&mut s, false), Some(vec!["a-node".to_string()]));
        assert_eq!(scan(&mut s, false), None);
        std::fs::write(d.join("b.yaml"), pod_yaml("b")).unwrap();
        assert_eq!(
            scan(&mut s, false),
            Some(vec!["a-node".into(), "b-node".into()])
        );
        assert_eq!(scan(&mut s, false), None);
        assert_eq!(
            scan(&mut s, true),
            Some(vec!["a-node".into(), "b-node".into()])
        );
        // Another size: the cache key holds the size (two writes may share an mtime tick).
        std::fs::write(d.join("b.yaml"), pod_yaml("cc")).unwrap();
        assert_eq!(
            scan(&mut s, false),
            Some(vec!["a-node".into(), "cc-node".into()])
        );
        std::fs::remove_file(d.join("a.yaml")).unwrap();
        assert_eq!(scan(&mut s, false), Some(vec!["cc-node".into()]));
        assert_eq!(scan(&mut s, false), None);
        std::fs::remove_file(d.join("b.yaml")).unwrap();
        std::fs::create_dir(d.join("b.yaml")).unwrap();
        assert_eq!(scan(&mut s, false), Some(vec![]));
        assert_eq!(scan(&mut s, false), None);
        std::fs::remove_dir(d.join("b.yaml")).unwrap();
        std::fs::remove_dir(d).unwrap();
        assert_eq!(
            scan(&mut s, false),
            Some(vec![]),
            "missing: an empty snapshot"
        );
    }

    #[test]
    fn snapshots_compare_shared_pods_by_pointer_and_others_by_value() {
        let pod = |name: &str| {
            let mut p = Pod::default();
            p.metadata.name = name.into();
            Arc::new(p)
        };
        let (a, b) = (pod("a"), pod("b"));
        let snap = |pods: Vec<Arc<Pod>>| Snapshot {
            pods,
            objects: Vec::new(),
        };
        assert_eq!(
            snap(vec![a.clone(), b.clone()]),
            snap(vec![a.clone(), b.clone()])
        );
        assert_eq!(
            snap(vec![a.clone(), b.clone()]),
            snap(vec![pod("a"), b.clone()])
        );
        assert_ne!(
            snap(vec![a.clone(), b.clone()]),
            snap(vec![a.clone(), pod("c")])
        );
        assert_ne!(snap(vec![a.clone()]), snap(vec![a, b]));
    }
}
