//! Image garbage collection (kubelet: `pkg/kubelet/images/image_gc_manager.go`,
//! `realImageGCManager`), run every [`GC_PERIOD`].
//!
//! Owns: the image records (first seen, last used, size — kept in memory, as upstream's
//! `imageRecords`; a restart forgets them and every image is "first seen" again), the pure
//! decisions ([`detect`], [`bytes_to_free`], [`plan_free`]) and the manager that runs them
//! against the runtime ([`ImageManager`]).
//!
//! A pass, as upstream (`GarbageCollect`, `freeSpace`, `detectImages`):
//! - the image file system: CRI `ImageFsInfo` names its mountpoint; capacity and available
//!   bytes come from statfs of that mountpoint (upstream: cadvisor's info for the same
//!   device); `usage = 100 − available × 100 / capacity`;
//! - at `usage >= high` (`--image-gc-high-threshold`, 85) it frees
//!   `capacity × (100 − low) / 100 − available` bytes (`--image-gc-low-threshold`, 80);
//! - candidates: images no container uses (every container the runtime lists, exited ones
//!   included), not pinned by the runtime, not the sandbox image, first seen at least
//!   `--minimum-image-ttl-duration` (2 m) ago; least recently used first, then first seen;
//!   removed (CRI `RemoveImage` by id) until enough is freed.
//!
//! [`ImageManager::free_space`] and [`ImageManager::delete_unused_images`] are the same
//! removal asked for a number of bytes (kubelet: the eviction manager's image reclaim,
//! `DeleteUnusedImages`).
//!
//! Deliberate differences: the sandbox image (`--pod-infra-container-image`) is protected
//! by repository, any tag (upstream compares the exact image): containerd 1.6 does not pin
//! its sandbox image, and a board whose containerd config names another pause tag must not
//! lose the image it needs offline to start every pod. `--image-maximum-gc-age` is not
//! implemented.
//!
//! Must never: remove an image a container uses, a pinned image, or the sandbox image.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, UnixNanos, nanos};
use crate::cri::credentials::image_location;
use crate::cri::{ContainerInfo, CriError, ImageInfo, ListFilter, Runtime};

/// kubelet: `ImageGCPeriod`.
pub(crate) const GC_PERIOD: Duration = Duration::from_secs(5 * 60);

/// kubelet's default `--pod-infra-container-image` (v1.31+).
pub(crate) const DEFAULT_SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10";

#[derive(Debug, thiserror::Error)]
pub(crate) enum ImageGcError {
    #[error("{0}")]
    Cri(#[from] CriError),
    #[error("the runtime reports no image file system")]
    NoImageFs,
    #[error("statfs {path}: {source}")]
    Statfs {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid capacity 0 on image filesystem {0}")]
    InvalidCapacity(String),
    #[error("an image GC pass is already running")]
    Busy,
}

/// kubelet: `ImageGCPolicy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// `--image-gc-high-threshold` (percent; 100 disables image GC).
    pub high_threshold_percent: u8,
    /// `--image-gc-low-threshold` (percent, at most the high one).
    pub low_threshold_percent: u8,
    /// `--minimum-image-ttl-duration`.
    pub min_age: Duration,
    /// `--pod-infra-container-image`: its repository is never removed.
    pub sandbox_image: String,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(120),
            sandbox_image: DEFAULT_SANDBOX_IMAGE.to_string(),
        }
    }
}

/// An image GC policy the kubelet refuses to start with (kubelet's messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// The high threshold is over 100 %.
    HighThreshold(u8),
    /// `(low, high)`: the low threshold is above the high one.
    LowAboveHigh(u8, u8),
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyError::HighThreshold(high) => {
                write!(
                    f,
                    "--image-gc-high-threshold {high} must be within [0, 100]"
                )
            }
            PolicyError::LowAboveHigh(low, high) => write!(
                f,
                "--image-gc-low-threshold {low} can not be higher than --image-gc-high-threshold {high}"
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

impl ImageGcPolicy {
    /// kubelet: `NewImageGCManager`'s checks.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.high_threshold_percent > 100 {
            return Err(PolicyError::HighThreshold(self.high_threshold_percent));
        }
        if self.low_threshold_percent > self.high_threshold_percent {
            return Err(PolicyError::LowAboveHigh(
                self.low_threshold_percent,
                self.high_threshold_percent,
            ));
        }
        Ok(())
    }

    /// kubelet: a high threshold of 100 disables image GC.
    pub fn enabled(&self) -> bool {
        self.high_threshold_percent < 100
    }
}

/// kubelet: `imageRecord`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ImageRecord {
    pub first_detected: UnixNanos,
    /// 0: never seen in use.
    pub last_used: UnixNanos,
    pub size: u64,
    /// Pinned by the runtime, or the sandbox image: never a candidate.
    pub protected: bool,
}

/// By image id.
pub(crate) type ImageRecords = HashMap<String, ImageRecord>;

/// Whether a container uses the image (the CRI list gives the image id as `image_ref`
/// with containerd; a reference by tag is accepted too).
fn uses(c: &ContainerInfo, image: &ImageInfo) -> bool {
    c.image_ref == image.id
        || c.image == image.id
        || image
            .repo_tags
            .iter()
            .any(|t| *t == c.image || *t == c.image_ref)
}

/// kubelet: `detectImages` — records every image (first seen now if new), stamps the
/// ones in use, drops the records of images gone. Returns the ids in use.
pub(crate) fn detect(
    records: &mut ImageRecords,
    images: &[ImageInfo],
    containers: &[ContainerInfo],
    sandbox_image: &str,
    now: UnixNanos,
) -> HashSet<String> {
    let sandbox_repo = (!sandbox_image.is_empty()).then(|| image_location(sandbox_image));
    let mut in_use = HashSet::new();
    for image in images {
        let rec = records.entry(image.id.clone()).or_insert(ImageRecord {
            first_detected: now,
            ..ImageRecord::default()
        });
        // picolet: the clock went back (no RTC, NTP's first step): stamps after `now`
        // come down to it, so no age waits out the jump (the kubelet's do).
        rec.first_detected = rec.first_detected.min(now);
        rec.last_used = rec.last_used.min(now);
        if containers.iter().any(|c| uses(c, image)) {
            rec.last_used = now;
            in_use.insert(image.id.clone());
        }
        rec.size = image.size;
        rec.protected = image.pinned
            || sandbox_repo
                .as_ref()
                .is_some_and(|repo| image.repo_tags.iter().any(|t| image_location(t) == *repo));
    }
    let present: HashSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
    records.retain(|id, _| present.contains(id.as_str()));
    in_use
}

/// kubelet: `GarbageCollect`'s threshold check — how many bytes to free, `None` below the
/// high threshold.
pub(crate) fn bytes_to_free(
    capacity: u64,
    available: u64,
    high_percent: u8,
    low_percent: u8,
) -> Option<u64> {
    if capacity == 0 {
        return None;
    }
    let available = available.min(capacity);
    let (cap, avail) = (u128::from(capacity), u128::from(available));
    let usage = 100 - avail * 100 / cap;
    if usage < u128::from(high_percent) {
        return None;
    }
    let target = cap * u128::from(100 - low_percent.min(100)) / 100;
    Some(u64::try_from(target.saturating_sub(avail)).unwrap_or(u64::MAX))
}

/// kubelet: `freeSpace`'s choice — the ids to remove, in order, until `bytes` are freed:
/// not in use, not protected, first seen at least `min_age` before `now`; least recently
/// used first, then first seen.
pub(crate) fn plan_free(
    records: &ImageRecords,
    in_use: &HashSet<String>,
    now: UnixNanos,
    min_age: Duration,
    bytes: u64,
) -> Vec<(String, u64)> {
    let mut candidates: Vec<(&String, &ImageRecord)> = records
        .iter()
        .filter(|(id, r)| {
            !in_use.contains(*id)
                && !r.protected
                && r.last_used < now
                && now.saturating_sub(r.first_detected) >= nanos(min_age)
        })
        .collect();
    crate::sort::sort_by_key(&mut candidates, |(id, r)| {
        (r.last_used, r.first_detected, (*id).clone())
    });
    let mut out = Vec::new();
    let mut freed = 0u64;
    for (id, r) in candidates {
        if freed >= bytes {
            break;
        }
        freed = freed.saturating_add(r.size);
        out.push((id.clone(), r.size));
    }
    out
}

// ---------------------------------------------------------------------------------------
// The manager

/// Capacity and available bytes of a file system (statfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FsCapacity {
    pub capacity: u64,
    pub available: u64,
}

/// statfs of a path (blocking): the boundary tests replace.
pub(crate) type StatFs = Arc<dyn Fn(&Path) -> std::io::Result<FsCapacity> + Send + Sync>;

/// The real statfs (`f_blocks`, `f_bavail` × `f_frsize`). The conversions are real on
/// 32-bit targets.
#[allow(clippy::useless_conversion)]
pub(crate) fn statfs(path: &Path) -> std::io::Result<FsCapacity> {
    let st = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
    let frsize = u64::from(st.fragment_size());
    Ok(FsCapacity {
        capacity: u64::from(st.blocks()).saturating_mul(frsize),
        available: u64::from(st.blocks_available()).saturating_mul(frsize),
    })
}

/// What a removal did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct FreeReport {
    /// Bytes asked for (`u64::MAX`: every unused image).
    pub wanted: u64,
    pub freed: u64,
    pub removed: Vec<String>,
    /// One line per failed removal (the next pass tries again).
    pub errors: Vec<String>,
}

/// kubelet: `ImageGCManager`. Cheap to clone: clones share the records. One pass at a
/// time: a call while another runs answers [`ImageGcError::Busy`].
#[derive(Clone)]
pub(crate) struct ImageManager<R: Runtime, C: Clock> {
    runtime: R,
    clock: C,
    policy: ImageGcPolicy,
    statfs: StatFs,
    records: Rc<RefCell<ImageRecords>>,
    busy: Rc<Cell<bool>>,
    /// The last pass over the threshold freed nothing: the next such pass says it at debug
    /// only (a board whose disk is full of other things wrote two lines every 5 minutes).
    stuck: Rc<Cell<bool>>,
}

/// Clears the busy flag however the pass ends (a dropped future included).
struct Running(Rc<Cell<bool>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl<R: Runtime, C: Clock> ImageManager<R, C> {
    pub(crate) fn new(runtime: R, clock: C, policy: ImageGcPolicy) -> Self {
        ImageManager {
            runtime,
            clock,
            policy,
            statfs: Arc::new(statfs),
            records: Rc::default(),
            busy: Rc::default(),
            stuck: Rc::default(),
        }
    }

    #[cfg(test)]
    /// Replaces statfs (tests).
    #[must_use]
    pub(crate) fn with_statfs(mut self, statfs: StatFs) -> Self {
        self.statfs = statfs;
        self
    }

    fn start(&self) -> Result<Running, ImageGcError> {
        if self.busy.replace(true) {
            return Err(ImageGcError::Busy);
        }
        Ok(Running(Rc::clone(&self.busy)))
    }

    /// kubelet: `detectImages` against the runtime.
    async fn detect_images(&self, now: UnixNanos) -> Result<HashSet<String>, ImageGcError> {
        let images = self.runtime.list_images().await?;
        let containers = self.runtime.list_containers(&ListFilter::default()).await?;
        let mut records = self.records.borrow_mut();
        Ok(detect(
            &mut records,
            &images,
            &containers,
            &self.policy.sandbox_image,
            now,
        ))
    }

    /// The image file system's capacity and available bytes.
    async fn image_fs(&self) -> Result<(String, FsCapacity), ImageGcError> {
        let fs = self.runtime.image_fs_info().await?;
        let mountpoint = fs
            .into_iter()
            .map(|f| f.mountpoint)
            .find(|m| !m.is_empty())
            .ok_or(ImageGcError::NoImageFs)?;
        let statfs = Arc::clone(&self.statfs);
        let path = mountpoint.clone();
        let stat = tokio::task::spawn_blocking(move || statfs(Path::new(&path)))
            .await
            .map_err(|e| ImageGcError::Statfs {
                path: mountpoint.clone(),
                source: std::io::Error::other(e.to_string()),
            })?
            .map_err(|source| ImageGcError::Statfs {
                path: mountpoint.clone(),
                source,
            })?;
        if stat.capacity == 0 {
            return Err(ImageGcError::InvalidCapacity(mountpoint));
        }
        Ok((mountpoint, stat))
    }

    /// One periodic pass (kubelet: `GarbageCollect`): `None` below the high threshold.
    pub(crate) async fn garbage_collect(&self) -> Result<Option<FreeReport>, ImageGcError> {
        let _running = self.start()?;
        let now = self.clock.now();
        // kubelet: the records are refreshed at every pass (and by a 5-minute detect loop).
        let in_use = self.detect_images(now).await?;
        let (mountpoint, fs) = self.image_fs().await?;
        let Some(bytes) = bytes_to_free(
            fs.capacity,
            fs.available,
            self.policy.high_threshold_percent,
            self.policy.low_threshold_percent,
        ) else {
            return Ok(None);
        };
        let used = 100 - u128::from(fs.available.min(fs.capacity)) * 100 / u128::from(fs.capacity);
        let high = self.policy.high_threshold_percent;
        // kubelet: both lines at every pass over the threshold. picolet: after a pass that
        // freed nothing, again only once something is freed (a board whose disk is full of
        // other things wrote two lines every 5 minutes).
        let stuck = self.stuck.get();
        let freeing = || {
            format!(
                "image GC: {mountpoint} is {used}% used (high threshold {high}%): freeing {bytes} bytes"
            )
        };
        if !stuck {
            log::info!("{}", freeing());
        }
        let report = self.remove(&in_use, now, bytes).await;
        let quiet = stuck && report.freed == 0;
        if stuck && !quiet {
            log::info!("{}", freeing());
        }
        if report.freed < bytes {
            let short = format!(
                "image GC: attempted to free {bytes} bytes, but only found {} bytes eligible to free",
                report.freed
            );
            if quiet {
                log::debug!("{short}");
            } else if report.freed == 0 {
                log::warn!("{short} (said once while nothing can be freed)");
            } else {
                log::warn!("{short}");
            }
        }
        self.stuck.set(report.freed == 0);
        Ok(Some(report))
    }

    /// Removes unused images until `bytes` are freed (kubelet: `freeSpace`), whatever the
    /// thresholds: the eviction manager's reclaim under disk pressure.
    pub(crate) async fn free_space(&self, bytes: u64) -> Result<FreeReport, ImageGcError> {
        let _running = self.start()?;
        let now = self.clock.now();
        let in_use = self.detect_images(now).await?;
        Ok(self.remove(&in_use, now, bytes).await)
    }

    /// Every unused image that may go (kubelet: `DeleteUnusedImages`).
    pub(crate) async fn delete_unused_images(&self) -> Result<FreeReport, ImageGcError> {
        self.free_space(u64::MAX).await
    }

    async fn remove(&self, in_use: &HashSet<String>, now: UnixNanos, bytes: u64) -> FreeReport {
        let chosen = plan_free(
            &self.records.borrow(),
            in_use,
            now,
            self.policy.min_age,
            bytes,
        );
        let mut report = FreeReport {
            wanted: bytes,
            ..FreeReport::default()
        };
        for (id, size) in chosen {
            match self.runtime.remove_image(&id).await {
                Ok(()) => {
                    log::info!("image GC: removed image {id} ({size} bytes)");
                    self.records.borrow_mut().remove(&id);
                    report.freed = report.freed.saturating_add(size);
                    report.removed.push(id);
                }
                Err(e) => report.errors.push(format!("remove image {id}: {e}")),
            }
        }
        report
    }

    /// A pass every [`GC_PERIOD`], the first one at once, until `shutdown` (kubelet:
    /// `StartGarbageCollection`'s image loop).
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut tick = crate::local_tasks::interval(GC_PERIOD);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.garbage_collect().await {
                Ok(Some(report)) => {
                    for e in &report.errors {
                        log::warn!("image GC: {e}");
                    }
                }
                Ok(None) | Err(ImageGcError::Busy) => {}
                // The relister reports a runtime outage once.
                Err(e @ ImageGcError::Cri(CriError::Unavailable { .. })) => {
                    log::debug!("image GC: {e}")
                }
                Err(e) => log::warn!("image GC: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::ContainerState;

    const S: i64 = 1_000_000_000;
    const MI: u64 = 1024 * 1024;

    fn image(id: &str, tag: &str, size: u64, pinned: bool) -> ImageInfo {
        ImageInfo {
            id: id.into(),
            repo_tags: vec![tag.into()],
            size,
            pinned,
            user: Default::default(),
        }
    }

    fn container(image_ref: &str) -> ContainerInfo {
        ContainerInfo {
            id: "c".into(),
            sandbox_id: "s".into(),
            name: "app".into(),
            attempt: 0,
            image: image_ref.into(),
            image_ref: image_ref.into(),
            state: ContainerState::Exited,
            created_at: 0,
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            labels: Default::default(),
            annotations: Default::default(),
            log_path: String::new(),
        }
    }

    #[test]
    fn policy_checks() {
        let ok = ImageGcPolicy::default();
        assert!(ok.validate().is_ok() && ok.enabled());
        let low_above_high = ImageGcPolicy {
            high_threshold_percent: 50,
            low_threshold_percent: 60,
            ..ImageGcPolicy::default()
        };
        assert!(low_above_high.validate().is_err());
        let off = ImageGcPolicy {
            high_threshold_percent: 100,
            ..ImageGcPolicy::default()
        };
        assert!(off.validate().is_ok() && !off.enabled());
        let always = ImageGcPolicy {
            high_threshold_percent: 0,
            low_threshold_percent: 0,
            ..ImageGcPolicy::default()
        };
        assert!(always.validate().is_ok());
    }

    #[test]
    fn thresholds_table() {
        // (capacity, available, high, low, want)
        let cases: Vec<(u64, u64, u8, u8, Option<u64>)> = vec![
            (1000, 200, 85, 80, None),      // 80 % used
            (1000, 150, 85, 80, Some(50)),  // 85 % used: back to 80 %
            (1000, 100, 85, 80, Some(100)), // 90 % used
            (1000, 2000, 85, 80, None),     // available above capacity is capped
            (1000, 900, 1, 0, Some(100)),   // "always full": free everything used
            (1000, 1000, 0, 0, Some(0)),    // high 0 with an empty disk: nothing to free
            (0, 0, 85, 80, None),           // no capacity: nothing (the caller errs)
        ];
        for (cap, avail, high, low, want) in cases {
            assert_eq!(
                bytes_to_free(cap, avail, high, low),
                want,
                "{cap} {avail} {high} {low}"
            );
        }
    }

    #[test]
    fn detect_records_and_protects() {
        let mut records = ImageRecords::new();
        let images = vec![
            image("sha256:a", "docker.io/library/busybox:1", MI, false),
            image("sha256:p", "registry.k8s.io/pause:3.6", MI, false),
            image("sha256:q", "localhost/pinned:1", MI, true),
        ];
        let in_use = detect(
            &mut records,
            &images,
            &[container("sha256:a")],
            DEFAULT_SANDBOX_IMAGE,
            10 * S,
        );
        assert_eq!(in_use, HashSet::from(["sha256:a".to_string()]));
        assert_eq!(records["sha256:a"].last_used, 10 * S);
        assert!(records["sha256:p"].protected, "another pause tag");
        assert!(records["sha256:q"].protected, "pinned");
        assert!(!records["sha256:a"].protected);
        // Later: the container is gone, an image is removed behind our back.
        let in_use = detect(
            &mut records,
            &images[..1],
            &[],
            DEFAULT_SANDBOX_IMAGE,
            20 * S,
        );
        assert!(in_use.is_empty());
        assert_eq!(
            records["sha256:a"],
            ImageRecord {
                first_detected: 10 * S,
                last_used: 10 * S,
                size: MI,
                protected: false,
            }
        );
        assert_eq!(records.len(), 1);
        // The clock goes back a day: the stamps come down to now, and the image may go
        // once the TTL has passed from there (not a day later).
        const DAY: i64 = 86_400 * S;
        detect(
            &mut records,
            &images[..1],
            &[],
            DEFAULT_SANDBOX_IMAGE,
            30 * S - DAY,
        );
        assert_eq!(
            (
                records["sha256:a"].first_detected,
                records["sha256:a"].last_used
            ),
            (30 * S - DAY, 30 * S - DAY)
        );
        let ttl = Duration::from_secs(120);
        let none = HashSet::new();
        let later = 30 * S - DAY + 120 * S;
        assert!(plan_free(&records, &none, later - S, ttl, 1).is_empty());
        assert_eq!(plan_free(&records, &none, later, ttl, 1).len(), 1);
    }

    #[test]
    fn plan_free_table() {
        let rec = |first: i64, last: i64, size: u64, protected: bool| ImageRecord {
            first_detected: first * S,
            last_used: last * S,
            size,
            protected,
        };
        let records: ImageRecords = [
            ("never-used", rec(0, 0, 10, false)),
            ("used-long-ago", rec(0, 50, 20, false)),
            ("used-recently", rec(0, 250, 30, false)),
            ("young", rec(290, 0, 40, false)),
            ("in-use", rec(0, 300, 50, false)),
            ("pinned", rec(0, 0, 60, true)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let in_use = HashSet::from(["in-use".to_string()]);
        let ids = |v: Vec<(String, u64)>| v.into_iter().map(|(id, _)| id).collect::<Vec<_>>();
        let ttl = Duration::from_secs(120);
        // (name, bytes, min age, want)
        let cases: Vec<(&str, u64, Duration, Vec<&str>)> = vec![
            ("nothing asked", 0, ttl, vec![]),
            ("least recently used first", 5, ttl, vec!["never-used"]),
            (
                "until enough is freed",
                25,
                ttl,
                vec!["never-used", "used-long-ago"],
            ),
            (
                "everything eligible: never in use, pinned or younger than the TTL",
                u64::MAX,
                ttl,
                vec!["never-used", "used-long-ago", "used-recently"],
            ),
            (
                "TTL 0: the young one too",
                u64::MAX,
                Duration::ZERO,
                vec!["never-used", "young", "used-long-ago", "used-recently"],
            ),
        ];
        for (name, bytes, min_age, want) in cases {
            assert_eq!(
                ids(plan_free(&records, &in_use, 300 * S, min_age, bytes)),
                want,
                "{name}"
            );
        }
    }

    // ----- the manager over the fake runtime ----------------------------------------------

    use crate::clock::TokioClock;
    use crate::cri::fake::{Call, FakeRuntime};
    use crate::cri::{ContainerConfig, SandboxConfig};
    use std::sync::Mutex;

    /// A fake runtime with `app` (used by a running container), `old`, `older` (unused),
    /// the sandbox image and a pinned one, 100 MiB each; a 1000 MiB disk with `avail` MiB
    /// free (shared, so a test can change it).
    async fn setup(avail: u64) -> (FakeRuntime, Arc<Mutex<u64>>, StatFs) {
        let rt = FakeRuntime::new(TokioClock::new(1_000 * S));
        for image in ["localhost/app:1", "localhost/old:1", "localhost/older:1"] {
            rt.add_image(image);
            rt.set_image(image, 100 * MI, false);
        }
        rt.add_image("registry.k8s.io/pause:3.9");
        rt.set_image("registry.k8s.io/pause:3.9", 100 * MI, false);
        rt.add_image("localhost/pinned:1");
        rt.set_image("localhost/pinned:1", 100 * MI, true);
        let sandbox = SandboxConfig {
            name: "p".into(),
            ..Default::default()
        };
        let sb = rt.run_pod_sandbox(&sandbox).await.unwrap();
        let cfg = ContainerConfig {
            name: "app".into(),
            image: "localhost/app:1".into(),
            ..Default::default()
        };
        let id = rt.create_container(&sb, &cfg, &sandbox).await.unwrap();
        rt.start_container(&id).await.unwrap();
        let free = Arc::new(Mutex::new(avail * MI));
        let shared = Arc::clone(&free);
        let statfs: StatFs = Arc::new(move |path: &Path| {
            assert_eq!(
                path,
                Path::new(crate::cri::fake_containerd::IMAGE_FS_MOUNTPOINT)
            );
            Ok(FsCapacity {
                capacity: 1000 * MI,
                available: *shared.lock().unwrap(),
            })
        });
        (rt, free, statfs)
    }

    fn tags(rt: &FakeRuntime) -> Vec<String> {
        let mut t: Vec<String> = rt.images().into_iter().flat_map(|i| i.repo_tags).collect();
        t.sort();
        t
    }

    fn policy(min_age_secs: u64) -> ImageGcPolicy {
        ImageGcPolicy {
            min_age: Duration::from_secs(min_age_secs),
            ..ImageGcPolicy::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn gc_frees_down_to_the_low_threshold_least_recently_used_first() {
        let (rt, _free, statfs) = setup(100).await; // 90 % used: free 100 MiB
        let m = ImageManager::new(rt.clone(), TokioClock::new(1_000 * S), policy(120))
            .with_statfs(statfs);
        // Everything is first seen now: younger than the TTL.
        let first = m.garbage_collect().await.unwrap().unwrap();
        assert_eq!((first.freed, first.removed.len()), (0, 0));
        tokio::time::advance(Duration::from_secs(120)).await;
        let report = m.garbage_collect().await.unwrap().unwrap();
        assert_eq!(report.wanted, 100 * MI);
        assert_eq!(report.freed, 100 * MI);
        // `old` and `older` tie (never used, seen together): the id decides.
        assert_eq!(report.removed.len(), 1);
        assert_eq!(tags(&rt).len(), 4);
        assert!(rt.calls().iter().any(|c| matches!(c, Call::RemoveImage(_))));
    }

    /// A pass over the threshold that frees nothing marks the manager stuck (its lines go
    /// to debug from the next such pass); a pass that frees something clears it.
    #[tokio::test(start_paused = true)]
    async fn a_pass_that_frees_nothing_is_said_once() {
        let (rt, _free, statfs) = setup(100).await; // 90 % used
        let m = ImageManager::new(rt.clone(), TokioClock::new(1_000 * S), policy(120))
            .with_statfs(statfs);
        assert!(!m.stuck.get());
        let first = m.garbage_collect().await.unwrap().unwrap();
        assert_eq!(first.freed, 0, "everything younger than the TTL");
        assert!(m.stuck.get());
        m.garbage_collect().await.unwrap().unwrap();
        assert!(m.stuck.get());
        tokio::time::advance(Duration::from_secs(120)).await;
        let freed = m.garbage_collect().await.unwrap().unwrap();
        assert!(freed.freed > 0);
        assert!(!m.stuck.get());
    }

    #[tokio::test(start_paused = true)]
    async fn below_the_high_threshold_nothing_goes() {
        let (rt, _free, statfs) = setup(200).await; // 80 % used
        let m = ImageManager::new(rt.clone(), TokioClock::new(1_000 * S), policy(0))
            .with_statfs(statfs);
        assert_eq!(m.garbage_collect().await.unwrap(), None);
        assert_eq!(tags(&rt).len(), 5);
        assert!(!rt.calls().iter().any(|c| matches!(c, Call::RemoveImage(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn delete_unused_images_spares_used_pinned_and_the_sandbox_image() {
        let (rt, _free, statfs) = setup(900).await;
        let m = ImageManager::new(rt.clone(), TokioClock::new(1_000 * S), policy(0))
            .with_statfs(statfs);
        tokio::time::advance(Duration::from_secs(1)).await;
        let report = m.delete_unused_images().await.unwrap();
        assert_eq!(report.freed, 200 * MI);
        assert_eq!(
            tags(&rt),
            vec![
                "localhost/app:1",
                "localhost/pinned:1",
                "registry.k8s.io/pause:3.9"
            ]
        );
        // free_space stops once enough is freed.
        let (rt, _free, statfs) = setup(900).await;
        let m = ImageManager::new(rt.clone(), TokioClock::new(1_000 * S), policy(0))
            .with_statfs(statfs);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(m.free_space(1).await.unwrap().removed.len(), 1);
        assert_eq!(tags(&rt).len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn an_image_whose_container_was_removed_is_used_recently_and_goes_last() {
        let (rt, _free, statfs) = setup(900).await;
        let m = ImageManager::new(rt.clone(), TokioClock::new(1_000 * S), policy(0))
            .with_statfs(statfs);
        let app_id = rt
            .images()
            .into_iter()
            .find(|i| i.repo_tags[0] == "localhost/app:1")
            .unwrap()
            .id;
        m.free_space(0).await.unwrap(); // detect: app in use now
        for c in rt.containers() {
            rt.remove_container(&c.id).await.unwrap();
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        let report = m.delete_unused_images().await.unwrap();
        assert_eq!(report.removed.len(), 3, "{report:?}");
        assert_eq!(
            report.removed.last(),
            Some(&app_id),
            "used most recently: last"
        );
        assert_eq!(
            tags(&rt),
            vec!["localhost/pinned:1", "registry.k8s.io/pause:3.9"]
        );
    }
}
