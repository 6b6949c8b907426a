//! Node-level facts: the node name, cgroup checks, the `picolet check` preflight, and the
//! systemd readiness notification.
//!
//! Owns: reading `/proc` and `/sys/fs/cgroup` (roots injected so tests use a tempdir) and
//! formatting the preflight report.
//!
//! Must never: change the system. The preflight's only write is a probe file in the root
//! dir that it removes at once.

pub(crate) mod shutdown;
pub(crate) mod stall;
#[cfg(feature = "apiserver")]
pub(crate) mod status;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("cannot read the hostname: {0}")]
    Hostname(#[source] nix::Error),
    #[error("node name {name:?} is not a valid DNS-1123 subdomain (use --hostname-override)")]
    BadNodeName { name: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The node name: `--hostname-override`, else the kernel hostname, lower-cased
/// (kubelet: `nodeutil.GetHostname`).
pub(crate) const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub(crate) const LABEL_OS: &str = "kubernetes.io/os";
pub(crate) const LABEL_ARCH: &str = "kubernetes.io/arch";

/// `kubernetes.io/arch` of the build target (Go's GOARCH names).
pub(crate) fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "mips" => "mipsle",
        other => other, // arm, riscv64, s390x, loong64 have the same names
    }
}

/// The node's labels: `--node-labels`, then the default labels, which win on conflict
/// (kubelet: `initialNode`). Offline too: admission checks `nodeSelector` against them.
pub fn node_labels(node_name: &str, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut labels = extra.clone();
    labels.insert(LABEL_HOSTNAME.into(), node_name.to_string());
    labels.insert(LABEL_OS.into(), "linux".into());
    labels.insert(LABEL_ARCH.into(), go_arch().into());
    labels
}

/// `MemTotal:  3884300 kB` → 3884300.
pub fn parse_meminfo(text: &str) -> Option<u64> {
    meminfo_field(text, "MemTotal:")
}

/// A `/proc/meminfo` field's number (kB), `key` with its colon.
pub(crate) fn meminfo_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The node's swap for containers (kubelet: cAdvisor's `SwapCapacity` = `SwapTotal`,
/// `isCgroup2UnifiedMode`, `checkSwapControllerAvailability`): v1 has a swap controller when
/// `memory.memsw.limit_in_bytes` is at the memory hierarchy's root (`swapaccount=1`), v2 when
/// `memory.swap.max` is in picolet's own cgroup (`/proc/self/cgroup`: none in the root).
pub(crate) fn swap(
    behavior: crate::qos::SwapBehavior,
    proc_root: &Path,
    cgroup_root: &Path,
) -> crate::qos::NodeSwap {
    let read = |p: &str| std::fs::read_to_string(proc_root.join(p)).unwrap_or_default();
    let unified = cgroup_root.join("cgroup.controllers").exists();
    let controller = if unified {
        read("self/cgroup")
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .is_some_and(|own| {
                cgroup_root
                    .join(own.trim_start_matches('/'))
                    .join("memory.swap.max")
                    .exists()
            })
    } else {
        cgroup_root
            .join("memory/memory.memsw.limit_in_bytes")
            .exists()
    };
    crate::qos::NodeSwap {
        behavior,
        controller,
        unified,
        capacity: meminfo_field(&read("meminfo"), "SwapTotal:")
            .map_or(0, |k| k.saturating_mul(1024)),
    }
}

/// The node's memory in bytes (`MemTotal` of `/proc/meminfo`, as the kubelet's machine
/// info); 0 if it cannot be read.
pub(crate) fn memory_capacity() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_meminfo(&t))
        .map_or(0, |kib| kib.saturating_mul(1024))
}

/// The node's CPUs in millicores (the kubelet's machine info counts online CPUs).
pub(crate) fn cpu_capacity_milli() -> i64 {
    std::thread::available_parallelism().map_or(1000, |n| n.get() as i64 * 1000)
}

pub fn node_name(hostname_override: Option<&str>) -> Result<String, NodeError> {
    let raw = match hostname_override.map(str::trim).filter(|s| !s.is_empty()) {
        Some(h) => h.to_string(),
        None => nix::unistd::gethostname()
            .map_err(NodeError::Hostname)?
            .to_string_lossy()
            .into_owned(),
    };
    let name = raw.trim().to_lowercase();
    if !is_dns1123_subdomain(&name) {
        return Err(NodeError::BadNodeName { name });
    }
    Ok(name)
}

fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Which cgroup hierarchy the host runs and which controllers are usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupInfo {
    pub version: CgroupVersion,
    /// controller → enabled
    pub controllers: BTreeMap<String, bool>,
}

impl CgroupInfo {
    pub fn has(&self, controller: &str) -> bool {
        self.controllers.get(controller).copied().unwrap_or(false)
    }
}

/// Detects cgroup v1/v2 under `sys_cgroup` (normally `/sys/fs/cgroup`) using
/// `proc_cgroups` (normally `/proc/cgroups`) for v1's enabled flags.
pub fn detect_cgroups(sys_cgroup: &Path, proc_cgroups: &Path) -> Result<CgroupInfo, NodeError> {
    let v2_controllers = sys_cgroup.join("cgroup.controllers");
    if v2_controllers.is_file() {
        let text = read(&v2_controllers)?;
        let controllers =
            crate::sort::collect_map(text.split_whitespace().map(|c| (c.to_string(), true)));
        return Ok(CgroupInfo {
            version: CgroupVersion::V2,
            controllers,
        });
    }
    // cgroup v1: /proc/cgroups has "#subsys_name hierarchy num_cgroups enabled".
    let text = read(proc_cgroups)?;
    let mut controllers = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if let [name, _, _, enabled, ..] = cols[..] {
            controllers.insert(name.to_string(), enabled == "1");
        }
    }
    Ok(CgroupInfo {
        version: CgroupVersion::V1,
        controllers,
    })
}

fn read(path: &Path) -> Result<String, NodeError> {
    std::fs::read_to_string(path).map_err(|source| NodeError::Read {
        path: path.to_path_buf(),
        source,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub verdict: Verdict,
    pub what: String,
    pub detail: String,
}

/// The preflight report of `picolet check`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preflight {
    pub lines: Vec<CheckLine>,
}

impl Preflight {
    pub fn push(&mut self, verdict: Verdict, what: impl Into<String>, detail: impl Into<String>) {
        self.lines.push(CheckLine {
            verdict,
            what: what.into(),
            detail: detail.into(),
        });
    }
    /// picolet could not work: at least one line failed.
    pub fn failed(&self) -> bool {
        self.lines.iter().any(|l| l.verdict == Verdict::Fail)
    }

    /// The cgroup lines: version, then cpu/memory/pids with the Raspberry Pi hint.
    pub fn cgroups(&mut self, info: Result<CgroupInfo, NodeError>) {
        let info = match info {
            Ok(i) => i,
            Err(e) => {
                self.push(Verdict::Fail, "cgroups", e.to_string());
                return;
            }
        };
        let v = match info.version {
            CgroupVersion::V1 => {
                "v1 (legacy; upstream kubelet refuses it from v1.35, picolet runs)"
            }
            CgroupVersion::V2 => "v2 (unified)",
        };
        self.push(Verdict::Ok, "cgroup hierarchy", v);
        for c in ["cpu", "memory", "pids"] {
            if info.has(c) {
                self.push(Verdict::Ok, format!("cgroup controller {c}"), "available");
            } else {
                let hint = match c {
                    "memory" => {
                        "missing: memory limits are not enforced. On a Raspberry Pi add \
                         `cgroup_enable=memory cgroup_memory=1` to /boot/firmware/cmdline.txt \
                         (or /boot/cmdline.txt) and reboot"
                    }
                    _ => "missing: limits for it are not enforced",
                };
                self.push(Verdict::Warn, format!("cgroup controller {c}"), hint);
            }
        }
    }

    /// The directory lines: manifest dir readable, root dir and log dir writable.
    pub fn directories(&mut self, manifest_dir: &Path, root_dir: &Path, log_dir: &Path) {
        match std::fs::read_dir(manifest_dir) {
            Ok(entries) => {
                let n = entries.filter_map(Result::ok).count();
                self.push(
                    Verdict::Ok,
                    "pod manifest path",
                    format!("{} readable ({n} entries)", manifest_dir.display()),
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.push(
                Verdict::Warn,
                "pod manifest path",
                format!(
                    "{} does not exist yet: picolet watches for it and runs no static pods until it does",
                    manifest_dir.display()
                ),
            ),
            Err(e) => self.push(
                Verdict::Fail,
                "pod manifest path",
                format!("{}: {e}", manifest_dir.display()),
            ),
        }
        for (what, dir) in [("root dir", root_dir), ("pod log dir", log_dir)] {
            match probe_writable(dir) {
                Ok(()) => self.push(Verdict::Ok, what, format!("{} writable", dir.display())),
                Err(e) => self.push(Verdict::Fail, what, format!("{}: {e}", dir.display())),
            }
        }
    }
}

/// Creates the directory if needed and writes+removes a probe file.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(format!(".picolet-check-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

impl fmt::Display for Preflight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            let tag = match l.verdict {
                Verdict::Ok => "ok  ",
                Verdict::Warn => "warn",
                Verdict::Fail => "FAIL",
            };
            writeln!(f, "[{tag}] {:<26} {}", l.what, l.detail)?;
        }
        if self.failed() {
            write!(
                f,
                "picolet cannot work on this node: fix the FAIL lines above"
            )
        } else {
            write!(f, "picolet can run on this node")
        }
    }
}

/// The node's own IP when `--node-ip` is not given (kubelet: `ChooseHostInterface`, the
/// address of the default route's interface): the source address the kernel picks for a
/// documentation address (a UDP "connect" sends nothing). IPv4 first, then IPv6; `None`
/// on a node without a default route.
pub(crate) fn default_route_ip() -> Option<std::net::IpAddr> {
    [("0.0.0.0:0", "192.0.2.1:9"), ("[::]:0", "[2001:db8::1]:9")]
        .into_iter()
        .find_map(|(bind, target)| {
            let sock = std::net::UdpSocket::bind(bind).ok()?;
            sock.connect(target).ok()?;
            let ip = sock.local_addr().ok()?.ip();
            (!ip.is_unspecified() && !ip.is_loopback()).then_some(ip)
        })
}

/// Gives free heap memory back to the system (glibc keeps the freed middle of the heap
/// after a burst of allocations; `malloc_trim(0)` returns it). musl's allocator returns
/// memory on its own: nothing to do there.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only walks glibc's own heap; it takes no pointers of ours.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Tells systemd (`Type=notify`) a state: one datagram (`READY=1`, `WATCHDOG=1`, …) on
/// `$NOTIFY_SOCKET` (an abstract socket when it starts with `@`). No libsystemd needed.
/// Does nothing outside systemd.
pub(crate) fn sd_notify(state: &str) {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let addr = match path.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
        None => SocketAddr::from_pathname(&path),
    };
    let sent = addr.and_then(|addr| {
        let sock = UnixDatagram::unbound()?;
        sock.send_to_addr(state.as_bytes(), &addr)
    });
    if let Err(e) = sent {
        log::warn!("sd_notify to {path}: {e}");
    }
}

/// Why the systemd watchdog's variables cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WatchdogError {
    /// `WATCHDOG_USEC` is not a number.
    NotMicroseconds(String),
    /// The timeout is not above two housekeeping ticks.
    TooShort(std::time::Duration),
}

impl std::fmt::Display for WatchdogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchdogError::NotMicroseconds(usec) => {
                write!(f, "WATCHDOG_USEC={usec:?} is not a number of microseconds")
            }
            WatchdogError::TooShort(timeout) => write!(
                f,
                "WatchdogSec={}ms is too short: picolet pings from its {} s housekeeping tick; set WatchdogSec= above {} s (e.g. 30s)",
                timeout.as_millis(),
                crate::local_tasks::GRID.as_secs(),
                (crate::local_tasks::GRID * 2).as_secs()
            ),
        }
    }
}

impl std::error::Error for WatchdogError {}

/// The systemd watchdog (kubelet: `watchdog/watchdog_linux.go`): with `WatchdogSec=` in the
/// unit, systemd passes `WATCHDOG_USEC` and restarts picolet when no `WATCHDOG=1` came for
/// that long. picolet sends it from its event loop itself, on the housekeeping tick: a loop
/// that is stuck stops the pings, which is the health check (the kubelet's `syncloop`
/// check, with the loop's own liveness instead of a timestamp it records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Watchdog {
    /// Half the timeout, as the kubelet and `sd_watchdog_enabled` advise.
    every: std::time::Duration,
    last: Option<tokio::time::Instant>,
}

impl Watchdog {
    /// From the environment systemd sets; `None` when no watchdog is asked for.
    pub(crate) fn from_env() -> Result<Option<Watchdog>, WatchdogError> {
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        Self::from_values(usec.as_deref(), pid.as_deref(), std::process::id())
    }

    /// `WATCHDOG_USEC` and `WATCHDOG_PID` as given (systemd: `sd_watchdog_enabled`): unset
    /// or 0 → none; a PID that is not `own_pid` → none (the variables were meant for another
    /// process); a timeout of 4 s or less → an error, since the pings come from a 2 s tick.
    pub(crate) fn from_values(
        usec: Option<&str>,
        pid: Option<&str>,
        own_pid: u32,
    ) -> Result<Option<Watchdog>, WatchdogError> {
        let Some(usec) = usec.map(str::trim).filter(|u| !u.is_empty()) else {
            return Ok(None);
        };
        let usec: u64 = usec
            .parse()
            .map_err(|_| WatchdogError::NotMicroseconds(usec.to_string()))?;
        if usec == 0 {
            return Ok(None);
        }
        if let Some(pid) = pid.map(str::trim).filter(|p| !p.is_empty()) {
            if pid.parse::<u32>().ok() != Some(own_pid) {
                return Ok(None);
            }
        }
        let timeout = std::time::Duration::from_micros(usec);
        if timeout <= crate::local_tasks::GRID * 2 {
            return Err(WatchdogError::TooShort(timeout));
        }
        Ok(Some(Watchdog {
            every: timeout / 2,
            last: None,
        }))
    }

    /// Whether a `WATCHDOG=1` is due at this tick (and, if so, it counts as sent). Ticks
    /// come every [`crate::local_tasks::GRID`]: the ping goes one tick early rather than one late,
    /// so two pings are never more than half the timeout apart.
    pub(crate) fn due(&mut self, now: tokio::time::Instant) -> bool {
        let due = match self.last {
            None => true,
            Some(last) => {
                now.saturating_duration_since(last) + crate::local_tasks::GRID >= self.every
            }
        };
        if due {
            self.last = Some(now);
        }
        due
    }

    /// A watchdog whose timeout is too short for the tick ([`Watchdog::from_values`]'s
    /// error): it pings on every tick, the best it can do.
    pub(crate) fn every_tick() -> Watchdog {
        Watchdog {
            every: std::time::Duration::ZERO,
            last: None,
        }
    }

    pub(crate) fn timeout(&self) -> std::time::Duration {
        self.every * 2
    }
}

/// An optional hardware watchdog (`--watchdog-device`, e.g. `/dev/watchdog`), petted from
/// the event loop's housekeeping tick: a board whose picolet loop (or whole system) hangs is
/// reset by the hardware once the device's timeout passes. picolet's own (the kubelet has
/// none); for boards where nothing else owns the device (OpenWrt's procd and systemd's
/// `RuntimeWatchdogSec=` do: leave it to them). The device's own timeout is used. A clean
/// stop of picolet disarms it (the magic close, `V`); a crash does not, and the restarted
/// picolet opens it again within the timeout (procd respawns in 5 s, systemd in 5 s).
#[derive(Debug)]
pub(crate) struct HwWatchdog {
    file: std::fs::File,
    path: PathBuf,
}

impl HwWatchdog {
    pub(crate) fn open(path: &Path) -> std::io::Result<HwWatchdog> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        Ok(HwWatchdog {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Any write restarts the device's countdown.
    pub(crate) fn pet(&mut self) {
        use std::io::Write;
        if let Err(e) = self.file.write_all(b"\0") {
            log::warn!("watchdog {}: {e}", self.path.display());
        }
    }

    /// The magic close: `V`, then close, disarms a driver that allows it.
    pub(crate) fn disarm(mut self) {
        use std::io::Write;
        if let Err(e) = self.file.write_all(b"V") {
            log::warn!("watchdog {}: cannot disarm: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_hardware_watchdog_is_petted_and_disarmed_with_the_magic_close() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = tmp.path().join("watchdog");
        std::fs::write(&dev, "").unwrap();
        let mut w = super::HwWatchdog::open(&dev).unwrap();
        w.pet();
        w.pet();
        w.disarm();
        assert_eq!(std::fs::read(&dev).unwrap(), b"\0\0V");
        assert!(super::HwWatchdog::open(&tmp.path().join("none")).is_err());
    }

    #[test]
    fn default_route_ip_is_a_real_address_when_there_is_one() {
        // No assertion that there is one: a CI machine may have no default route.
        if let Some(ip) = default_route_ip() {
            assert!(
                !ip.is_loopback() && !ip.is_unspecified() && !ip.is_multicast(),
                "{ip}"
            );
        }
    }

    use super::*;

    #[test]
    fn node_names() {
        assert_eq!(node_name(Some("Pi-Zero.LAN")).unwrap(), "pi-zero.lan");
        assert!(node_name(Some("bad_name")).is_err());
        assert!(node_name(Some("-x")).is_err());
        assert!(node_name(None).is_ok());
    }

    #[test]
    fn cgroup_v1_with_memory_disabled_gives_the_pi_hint() {
        let dir = tempfile::tempdir().unwrap();
        let proc_cgroups = dir.path().join("cgroups");
        std::fs::write(
            &proc_cgroups,
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t2\t1\t1\nmemory\t0\t1\t0\npids\t3\t1\t1\n",
        )
        .unwrap();
        let info = detect_cgroups(dir.path(), &proc_cgroups).unwrap();
        assert_eq!(info.version, CgroupVersion::V1);
        assert!(info.has("cpu") && !info.has("memory"));
        let mut p = Preflight::default();
        p.cgroups(Ok(info));
        let text = p.to_string();
        assert!(text.contains("cgroup_enable=memory"), "{text}");
        assert!(!p.failed());
    }

    #[test]
    fn cgroup_v2() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        let info = detect_cgroups(dir.path(), Path::new("/nonexistent")).unwrap();
        assert_eq!(info.version, CgroupVersion::V2);
        assert!(info.has("memory") && info.has("pids"));
    }

    #[test]
    fn directories() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Preflight::default();
        p.directories(
            &dir.path().join("missing-manifests"),
            &dir.path().join("root"),
            &dir.path().join("logs"),
        );
        assert!(!p.failed(), "{p}");
        assert_eq!(p.lines[0].verdict, Verdict::Warn);
        let mut p = Preflight::default();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        p.directories(dir.path(), &file.join("root"), &dir.path().join("logs"));
        assert!(p.failed());
    }

    #[test]
    fn sd_notify_sends_ready() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        // SAFETY: single-threaded test section; the variable is only read by sd_notify.
        unsafe { std::env::set_var("NOTIFY_SOCKET", &path) };
        sd_notify("READY=1");
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        let mut buf = [0u8; 16];
        let n = sock.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }

    #[test]
    fn watchdog_from_systemd_values() {
        use super::Watchdog;
        use std::time::Duration;
        assert_eq!(Watchdog::from_values(None, None, 7), Ok(None));
        assert_eq!(Watchdog::from_values(Some("0"), None, 7), Ok(None));
        // Meant for another process.
        assert_eq!(
            Watchdog::from_values(Some("30000000"), Some("8"), 7),
            Ok(None)
        );
        let w = Watchdog::from_values(Some("30000000"), Some("7"), 7)
            .unwrap()
            .unwrap();
        assert_eq!(w.timeout(), Duration::from_secs(30));
        let w = Watchdog::from_values(Some("30000000"), None, 7)
            .unwrap()
            .unwrap();
        assert_eq!(w.timeout(), Duration::from_secs(30));
        let e = Watchdog::from_values(Some("3000000"), None, 7)
            .unwrap_err()
            .to_string();
        assert!(e.contains("WatchdogSec=3000ms is too short"), "{e}");
        let e = Watchdog::from_values(Some("soon"), None, 7)
            .unwrap_err()
            .to_string();
        assert!(e.contains("WATCHDOG_USEC=\"soon\""), "{e}");
    }

    #[test]
    fn watchdog_pings_at_most_half_the_timeout_apart() {
        use super::Watchdog;
        use std::time::Duration;
        let mut w = Watchdog::from_values(Some("30000000"), None, 1)
            .unwrap()
            .unwrap();
        let t0 = tokio::time::Instant::now();
        let grid = crate::local_tasks::GRID;
        // Ticks every 2 s for 2 minutes: the first tick pings, then every 15 s or sooner.
        let pings: Vec<Duration> = (0..60u32)
            .map(|i| t0 + grid * i)
            .filter(|t| w.due(*t))
            .map(|t| t - t0)
            .collect();
        assert_eq!(pings[0], Duration::ZERO);
        for pair in pings.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(
                gap <= Duration::from_secs(15) && gap >= Duration::from_secs(12),
                "{pings:?}"
            );
        }
        // A loop stuck for 40 s: the next tick pings at once (systemd has restarted it by then).
        let late = t0 + grid * 60 + Duration::from_secs(40);
        assert!(w.due(late));
        assert!(!w.due(late + grid));
    }

    /// The swap a node offers: SwapTotal, the hierarchy, the controller (v1 at the memory
    /// root, v2 in picolet's own cgroup — none when it runs in the root cgroup).
    #[test]
    fn swap_of_the_host() {
        use crate::qos::SwapBehavior::{LimitedSwap, NoSwap};
        let tmp = tempfile::tempdir().unwrap();
        let (proc_root, cg) = (tmp.path().join("proc"), tmp.path().join("cg"));
        std::fs::create_dir_all(proc_root.join("self")).unwrap();
        std::fs::create_dir_all(cg.join("memory")).unwrap();
        std::fs::write(
            proc_root.join("meminfo"),
            "MemTotal: 4096 kB\nSwapTotal:  102396 kB\n",
        )
        .unwrap();
        // v1 without swapaccount: no memsw file.
        let s = swap(NoSwap, &proc_root, &cg);
        assert_eq!(
            (s.unified, s.controller, s.capacity),
            (false, false, 102_396 * 1024)
        );
        std::fs::write(cg.join("memory/memory.memsw.limit_in_bytes"), "").unwrap();
        assert!(swap(NoSwap, &proc_root, &cg).controller);
        // v2, picolet in system.slice/picolet.service.
        std::fs::write(cg.join("cgroup.controllers"), "cpu memory pids").unwrap();
        std::fs::write(
            proc_root.join("self/cgroup"),
            "0::/system.slice/picolet.service\n",
        )
        .unwrap();
        let s = swap(LimitedSwap, &proc_root, &cg);
        assert_eq!(
            (s.behavior, s.unified, s.controller),
            (LimitedSwap, true, false)
        );
        let own = cg.join("system.slice/picolet.service");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("memory.swap.max"), "max").unwrap();
        assert!(swap(LimitedSwap, &proc_root, &cg).controller);
        std::fs::write(proc_root.join("meminfo"), "MemTotal: 4096 kB\n").unwrap();
        assert_eq!(swap(NoSwap, &proc_root, &cg).capacity, 0);
    }
}
