//! picolet's benchmarks: footprint, idle cost, latency and scale of the real
//! `picolet run` binary, next to what a user would run instead.
//!
//! A `harness = false` bench target (feature `fake-cri`). `benches/run.sh` builds the release
//! binaries, brings up the e2e lab, runs every mode below and prints the table that
//! BENCHMARKS.md keeps. picolet is only observed from outside: `/proc/<pid>/{status,stat,
//! schedstat,io,smaps_rollup}` and the CRI (the fake's state, or containerd through
//! picolet's own `CriRuntime` as a plain client).
//!
//! ```text
//! cargo bench --features fake-cri --bench picolet -- <mode> --picolet <binary> [flags]
//!   fake-rss      --counts 0,10,100,500 [--wrap "valgrind --tool=massif …"] [--no-events]
//!                 [--then-delete [--rounds R]]  (also the RSS once every pod is deleted and
//!                 removed; R bursts of new pods, each deleted, in one process)
//!   fake-idle     --pods 50 --secs 60 [--callgrind] [--no-events]
//!   fake-probes   --pods 100 --secs 60 --period 10  (an exec liveness and an HTTP readiness
//!                 probe per pod, the HTTP server in this process)
//!   fake-latency  --isolated 100 --spacing-ms 400 --burst 100
//!   fake-scale    --counts 100,500
//!   hostile       [--reps 5] [--corpus DIR]   (rejection time per hostile manifest, the
//!                 slowest fuzz corpus input; valid pods beside the hostile ones)
//!   containerd    --endpoint unix://… --counts 1,20 --reps 3 --rss-pods 10 --idle-secs 60
//!                 [--containerd-pid PID] [--podman --image-tar busybox.tar]
//!                 [--label NAME]  (the runtime's name in the sections: `pod start (NAME)`…;
//!                 default containerd; any CRI endpoint works: CRI-O, containerd 2.x)
//! ```
//!
//! The fake serves `GetContainerEvents` (evented PLEG, as containerd ≥ 1.7); `--no-events`
//! makes it answer Unimplemented, as containerd 1.6 does (picolet then relists every 1 s).
//!
//! The fake CRI server (`picolet::fakes::FakeCri`) runs in THIS process, on its own
//! current-thread tokio runtime, so its memory and CPU are never counted as picolet's; the
//! measured binary is a separate `picolet run` child process.
//!
//! Output: progress on stderr; one `RESULT\t<section>\t<metric>\t<value>\t<note>` line per
//! figure on stdout. Figures are measurements of one run, never assertions.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use picolet::{
    ContainerState, CriRuntime, ListFilter, NodeParams, POD_NAMESPACE_LABEL, POD_UID_LABEL,
    Runtime, SOURCE_FILE, SandboxParams, SandboxState, container_config,
    fakes::{CriMethod as Method, FakeCri, FakeCriHandle, Fault},
    load_manifest, parse_resolv_conf, sandbox_config,
};

#[path = "../tests/common/hostile.rs"]
mod hostile;

type Res<T> = Result<T, String>;

const NODE: &str = "bench";
const NS: &str = "picolet-bench";
const IMAGE: &str = "localhost/busybox:edge";
const READY_LINE: &str = "runtime relisted: ready";

/// Per-call latencies of the "containerd-like" fake (fake-scale). The mutating calls are the
/// medians measured against containerd 1.6.20 on this machine class
/// (/work/shared/docs/containerd-e2e.md); StopContainer is the measured time of a container
/// that traps TERM (~50 ms); RemoveContainer and the read-only calls are assumptions
/// (the `containerd` mode prints this machine's medians next to them).
const CONTAINERD_PROFILE: &[(Method, u64)] = &[
    (Method::RunPodSandbox, 138),
    (Method::CreateContainer, 21),
    (Method::StartContainer, 75),
    (Method::StopContainer, 50),
    (Method::StopPodSandbox, 96),
    (Method::RemovePodSandbox, 34),
    (Method::RemoveContainer, 20),
    (Method::ListPodSandbox, 2),
    (Method::ListContainers, 2),
    (Method::PodSandboxStatus, 2),
    (Method::ContainerStatus, 2),
    (Method::ImageStatus, 2),
    (Method::Version, 1),
    (Method::Status, 1),
];

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench: tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    let res = rt.block_on(async {
        match args.mode.as_str() {
            "fake-rss" => fake_rss(&args).await,
            "fake-idle" => fake_idle(&args).await,
            "fake-probes" => fake_probes(&args).await,
            "fake-latency" => fake_latency(&args).await,
            "fake-scale" => fake_scale(&args).await,
            "hostile" => hostile(&args).await,
            "containerd" => containerd(&args).await,
            "" => {
                // `cargo bench` without arguments: nothing to measure on its own (benches/run.sh
                // passes the binary under test and the mode).
                log("no mode given: run benches/run.sh, or see the modes in benches/picolet.rs");
                Ok(())
            }
            other => Err(format!("unknown mode {other}")),
        }
    });
    remove_cgroup_root();
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------------------
// Arguments and output

struct Args {
    mode: String,
    flags: HashMap<String, String>,
}

impl Args {
    fn parse(it: impl Iterator<Item = String>) -> Res<Args> {
        let mut mode = String::new();
        let mut flags = HashMap::new();
        let mut it = it.peekable();
        while let Some(a) = it.next() {
            // `cargo bench` appends --bench to a harness = false target.
            if a == "--bench" {
                continue;
            }
            if let Some(name) = a.strip_prefix("--") {
                let value = match it.peek() {
                    Some(v) if !v.starts_with("--") => it.next().unwrap_or_default(),
                    _ => "true".to_string(),
                };
                flags.insert(name.to_string(), value);
            } else if mode.is_empty() {
                mode = a;
            } else {
                return Err(format!("unexpected argument {a}"));
            }
        }
        Ok(Args { mode, flags })
    }

    fn str(&self, name: &str) -> Option<&str> {
        self.flags.get(name).map(String::as_str)
    }

    fn num(&self, name: &str, default: u64) -> Res<u64> {
        match self.str(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name}: not a number: {v}")),
        }
    }

    fn list(&self, name: &str, default: &[u64]) -> Res<Vec<u64>> {
        match self.str(name) {
            None => Ok(default.to_vec()),
            Some(v) => v
                .split(',')
                .map(|x| x.trim().parse().map_err(|_| format!("--{name}: {v}")))
                .collect(),
        }
    }

    fn flag(&self, name: &str) -> bool {
        self.str(name).is_some_and(|v| v != "false")
    }

    fn picolet(&self) -> Res<PathBuf> {
        let p = PathBuf::from(
            self.str("picolet")
                .ok_or("--picolet <binary> is required")?,
        );
        if !p.is_file() {
            return Err(format!("--picolet {}: no such file", p.display()));
        }
        Ok(p)
    }
}

fn log(msg: impl AsRef<str>) {
    eprintln!("bench: {}", msg.as_ref());
}

fn result(section: &str, metric: &str, value: impl std::fmt::Display, note: &str) {
    println!("RESULT\t{section}\t{metric}\t{value}\t{note}");
    let _ = std::io::stdout().flush();
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Nearest-rank percentile of an ascending slice.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 50.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(kb: u64) -> String {
    format!("{:.1} MiB", kb as f64 / 1024.0)
}

async fn sleep(d: Duration) {
    tokio::time::sleep(d).await;
}

/// Polls `check` every `every` until it is true; the time it took, or an error after
/// `timeout` naming `what` and the last state `check` described.
async fn wait_until<F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: F,
) -> Res<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, String>>,
{
    let start = Instant::now();
    loop {
        match check().await {
            Ok(true) => return Ok(start.elapsed()),
            Ok(false) => {}
            Err(state) if start.elapsed() > timeout => {
                return Err(format!(
                    "timeout after {timeout:?} waiting for {what}: {state}"
                ));
            }
            Err(_) => {}
        }
        if start.elapsed() > timeout {
            return Err(format!("timeout after {timeout:?} waiting for {what}"));
        }
        sleep(every).await;
    }
}

// ---------------------------------------------------------------------------------------
// /proc

#[derive(Debug, Clone, Copy, Default)]
struct ProcSample {
    rss_kb: u64,
    hwm_kb: u64,
    pss_kb: u64,
    threads: u64,
    /// utime + stime in clock ticks (exited threads included).
    cpu_ticks: u64,
    /// Sum of live threads' on-CPU nanoseconds (/proc/<pid>/task/*/schedstat).
    run_ns: u64,
    wchar: u64,
    syscw: u64,
    write_bytes: u64,
}

/// CPU seconds between two samples of one process: its live threads' schedstat (ns), or its
/// utime + stime (clock ticks, but counting the threads that exited in between — the blocking
/// pool's, which the schedstat sum loses), whichever is larger.
fn cpu_secs(a: &ProcSample, b: &ProcSample) -> f64 {
    let sched = b.run_ns.saturating_sub(a.run_ns) as f64 / 1e9;
    let ticks = b.cpu_ticks.saturating_sub(a.cpu_ticks) as f64 / clock_ticks_per_sec() as f64;
    sched.max(ticks)
}

fn read(path: impl AsRef<Path>) -> Res<String> {
    fs::read_to_string(path.as_ref()).map_err(|e| format!("{}: {e}", path.as_ref().display()))
}

fn field_kb(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn sample(pid: u32) -> Res<ProcSample> {
    let status = read(format!("/proc/{pid}/status"))?;
    let rollup = read(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let stat = read(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // After "pid (comm)": field 3 (state) is index 0; utime (14) is 11, stime (15) is 12.
    let cpu_ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    let mut run_ns = 0;
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(t.path().join("schedstat")) {
                run_ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    let io = read(format!("/proc/{pid}/io"))?;
    let io_field = |k: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok(ProcSample {
        rss_kb: field_kb(&status, "VmRSS:"),
        hwm_kb: field_kb(&status, "VmHWM:"),
        pss_kb: field_kb(&rollup, "Pss:"),
        threads: field_kb(&status, "Threads:"),
        cpu_ticks,
        run_ns,
        wchar: io_field("wchar:"),
        syscw: io_field("syscw:"),
        write_bytes: io_field("write_bytes:"),
    })
}

/// CPU time of `pid` and of the children it has waited for (utime + stime + cutime +
/// cstime), in ms: containerd's includes the CNI plugins it runs for each sandbox.
fn cpu_ms_with_children(pid: u32) -> f64 {
    let Ok(stat) = read(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    // After "pid (comm)": utime (field 14) is index 11 … cstime (17) is index 14.
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|x| x.parse::<u64>().unwrap_or(0))
        .sum();
    ticks as f64 * 1000.0 / clock_ticks_per_sec() as f64
}

fn clock_ticks_per_sec() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// Pids whose command line contains `needle` (and whose name is `comm`).
fn pids_named(comm: &str, needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let c = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if c.trim() != comm {
            continue;
        }
        let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(needle) {
            out.push(pid);
        }
    }
    out
}

fn pss_sum(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| sample(*p).ok())
        .map(|s| s.pss_kb)
        .sum()
}

fn cpu_sum_ticks(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| sample(*p).ok())
        .map(|s| s.cpu_ticks)
        .sum()
}

// ---------------------------------------------------------------------------------------
// Manifests

fn pod_name(i: usize) -> String {
    format!("bench-{i:04}")
}

/// The one pod spec every mode and every contender uses: one busybox container, a shell
/// loop that exits at once on SIGTERM. `rev` changes the document (a mass edit).
fn manifest_yaml(i: usize, rev: u32) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {NS}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: {IMAGE}
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c"]
    args: ["trap 'exit 0' TERM; while true; do sleep 1 & wait; done"]
    env:
    - name: REV
      value: "{rev}"
"#,
        name = pod_name(i)
    )
}

/// Writes manifest `i` atomically: a hidden temporary (ignored by picolet) renamed into
/// place, so picolet never sees half a file.
fn write_manifest(dir: &Path, i: usize, rev: u32) -> Res<()> {
    write_manifest_yaml(dir, i, &manifest_yaml(i, rev))
}

/// Writes `yaml` as manifest `i`, atomically (see [`write_manifest`]).
fn write_manifest_yaml(dir: &Path, i: usize, yaml: &str) -> Res<()> {
    let tmp = dir.join(format!(".{}.yaml.part", pod_name(i)));
    fs::write(&tmp, yaml).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let dst = dir.join(format!("{}.yaml", pod_name(i)));
    fs::rename(&tmp, &dst).map_err(|e| format!("{}: {e}", dst.display()))
}

fn remove_manifest(dir: &Path, i: usize) -> Res<()> {
    let p = dir.join(format!("{}.yaml", pod_name(i)));
    fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))
}

/// The sandbox name of pod `i` (kubelet: static pod `<name>-<node>`).
fn sandbox_name(i: usize) -> String {
    format!("{}-{NODE}", pod_name(i))
}

// ---------------------------------------------------------------------------------------
// The picolet child process

/// The pod cgroup root of every picolet this bench starts: its own. `--cgroup-root` belongs
/// to one agent (as the kubelet's): two picolets on the default `/` (this bench and another
/// one, or a picolet running on the host) each see the other's pod cgroups as orphans and
/// remove them — measured here, 500 removals in one idle window, the other bench's pods
/// losing their cgroups.
fn cgroup_root() -> String {
    format!("/picolet-bench-{}", std::process::id())
}

/// Removes what is left of [`cgroup_root`] (the kubepods and QoS directories; the pods' own
/// are gone with the pods) in the v2 tree or in every v1 hierarchy, deepest first.
fn remove_cgroup_root() {
    fn rmdir_tree(dir: &Path) {
        if let Ok(entries) = fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    rmdir_tree(&e.path());
                }
            }
        }
        let _ = fs::remove_dir(dir);
    }
    let base = Path::new("/sys/fs/cgroup");
    let name = cgroup_root();
    let name = name.trim_start_matches('/');
    let mut roots = vec![base.join(name)];
    if let Ok(entries) = fs::read_dir(base) {
        roots.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path().join(name)),
        );
    }
    for root in roots.iter().filter(|r| r.is_dir()) {
        rmdir_tree(root);
    }
}

struct Workdir {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Workdir {
    fn new() -> Res<Workdir> {
        let tmp = tempfile::Builder::new()
            .prefix("picolet-bench.")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let root = tmp.path().to_path_buf();
        fs::create_dir_all(root.join("manifests")).map_err(|e| format!("mkdir: {e}"))?;
        Ok(Workdir { _tmp: tmp, root })
    }

    fn manifests(&self) -> PathBuf {
        self.root.join("manifests")
    }

    fn socket(&self) -> PathBuf {
        self.root.join("cri.sock")
    }
}

struct Picolet {
    child: Child,
    stderr: PathBuf,
}

impl Picolet {
    /// `picolet run` against `endpoint`, with its state under `dir`; `wrapper` (e.g.
    /// valgrind) is prepended to the command. stderr goes to `dir/picolet.log` (on disk, so
    /// its log lines count in the process's `write_bytes`, as they would on a board that
    /// logs to a file; they are also counted separately).
    fn spawn(bin: &Path, wrapper: &[String], dir: &Workdir, endpoint: &str) -> Res<Picolet> {
        let stderr = dir.root.join("picolet.log");
        let log = fs::File::create(&stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        cmd.arg("run")
            .arg("--pod-manifest-path")
            .arg(dir.manifests())
            .arg("--container-runtime-endpoint")
            .arg(endpoint)
            .arg("--root-dir")
            .arg(dir.root.join("root"))
            .arg("--pod-log-dir")
            .arg(dir.root.join("logs"))
            .arg("--hostname-override")
            .arg(NODE)
            .arg("--cgroup-root")
            .arg(cgroup_root())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| format!("dup: {e}"))?)
            .stderr(log);
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        Ok(Picolet { child, stderr })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log_len(&self) -> u64 {
        fs::metadata(&self.stderr).map(|m| m.len()).unwrap_or(0)
    }

    fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn alive(&mut self) -> Res<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(st)) => Err(format!("picolet exited ({st}):\n{}", self.log_tail())),
            Err(e) => Err(format!("wait: {e}")),
        }
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Res<Duration> {
        let start = Instant::now();
        loop {
            self.alive()?;
            if fs::read_to_string(&self.stderr)
                .unwrap_or_default()
                .contains(READY_LINE)
            {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "picolet not ready after {timeout:?}:\n{}",
                    self.log_tail()
                ));
            }
            sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGTERM (pods keep running, as designed), then SIGKILL after 10 s.
    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        for _ in 0..200 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Picolet {
    fn drop(&mut self) {
        self.stop();
        // PICOLET_BENCH_KEEP_LOGS=DIR keeps every picolet stderr for a post-mortem.
        if let Some(keep) = std::env::var_os("PICOLET_BENCH_KEEP_LOGS") {
            let keep = PathBuf::from(keep);
            let name = format!("picolet-{}.log", self.child.id());
            if fs::create_dir_all(&keep).is_ok() {
                let _ = fs::copy(&self.stderr, keep.join(name));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The fake CRI's view

#[derive(Debug, Default)]
struct FakeView {
    /// Pod UIDs with a ready sandbox and a running container.
    running: HashSet<String>,
    /// Pod UIDs with a ready sandbox or a running/created container.
    live: HashSet<String>,
    sandboxes: usize,
}

fn fake_view(fake: &FakeCriHandle) -> FakeView {
    let mut v = FakeView::default();
    let mut ready_sandbox: HashMap<String, String> = HashMap::new();
    for s in fake.sandboxes() {
        if s.namespace != NS {
            continue;
        }
        v.sandboxes += 1;
        if s.state == SandboxState::Ready {
            v.live.insert(s.uid.clone());
            ready_sandbox.insert(s.id.clone(), s.uid.clone());
        }
    }
    for c in fake.containers() {
        let Some(uid) = c.labels.get(POD_UID_LABEL) else {
            continue;
        };
        if c.labels.get(POD_NAMESPACE_LABEL).map(String::as_str) != Some(NS) {
            continue;
        }
        match c.state {
            ContainerState::Running => {
                v.live.insert(uid.clone());
                if ready_sandbox.contains_key(&c.sandbox_id) {
                    v.running.insert(uid.clone());
                }
            }
            ContainerState::Created => {
                v.live.insert(uid.clone());
            }
            _ => {}
        }
    }
    v
}

async fn start_fake(dir: &Workdir) -> Res<FakeCriHandle> {
    let fake = FakeCri::start(dir.socket())
        .await
        .map_err(|e| format!("fake CRI: {e}"))?;
    fake.preload_image(IMAGE);
    Ok(fake)
}

/// `--no-events`: the fake answers `GetContainerEvents` as containerd 1.6 (Unimplemented).
fn events_per_flag(fake: &FakeCriHandle, args: &Args) -> &'static str {
    if args.flag("no-events") {
        fake.inject(
            Method::GetContainerEvents,
            Fault::fail(
                picolet::fakes::Code::Unimplemented,
                "unknown method GetContainerEvents",
            ),
        );
        "no container events (1 s relist)"
    } else {
        "container events (300 s relist)"
    }
}

fn endpoint_of(dir: &Workdir) -> String {
    format!("unix://{}", dir.socket().display())
}

/// Starts picolet over the fake with `n` manifests already written, and waits until every
/// pod runs. Returns the process and the time from spawn to converged.
async fn start_converged(
    bin: &Path,
    wrapper: &[String],
    dir: &Workdir,
    fake: &FakeCriHandle,
    n: usize,
    timeout: Duration,
) -> Res<(Picolet, Duration)> {
    for i in 0..n {
        write_manifest(&dir.manifests(), i, 1)?;
    }
    converge(bin, wrapper, dir, fake, n, timeout).await
}

/// Starts picolet over the manifests already in place and waits until `n` pods run.
async fn converge(
    bin: &Path,
    wrapper: &[String],
    dir: &Workdir,
    fake: &FakeCriHandle,
    n: usize,
    timeout: Duration,
) -> Res<(Picolet, Duration)> {
    let start = Instant::now();
    let mut p = Picolet::spawn(bin, wrapper, dir, &endpoint_of(dir))?;
    p.wait_ready(timeout).await?;
    loop {
        p.alive()?;
        let last = fake_view(fake).running.len();
        if last == n {
            break;
        }
        if start.elapsed() > timeout {
            return Err(format!(
                "{last}/{n} pods running after {timeout:?}:\n{}",
                p.log_tail()
            ));
        }
        sleep(Duration::from_millis(20)).await;
    }
    Ok((p, start.elapsed()))
}

// ---------------------------------------------------------------------------------------
// hostile: what a hostile manifest costs, and whether it delays the valid ones

async fn hostile(args: &Args) -> Res<()> {
    let bin = args.picolet()?;
    let reps = args.num("reps", 5)?.max(1);
    for (name, bytes, _) in hostile::corpus() {
        let mut best = Duration::MAX;
        let mut outcome = String::new();
        for _ in 0..reps {
            let t = Instant::now();
            let r = load_manifest(name, &bytes, NODE, SOURCE_FILE, 0);
            best = best.min(t.elapsed());
            outcome = match r {
                Ok(_) => "accepted?!".to_string(),
                Err(e) => e.to_string().chars().take(90).collect(),
            };
        }
        result(
            "hostile",
            &format!("{name} ({} bytes) rejected in", bytes.len()),
            format!("{:.2} ms", ms(best)),
            &outcome,
        );
    }
    // A fuzzer's corpus (`--corpus tests/fuzz/corpus/manifest`): the slowest input.
    if let Some(dir) = args.str("corpus") {
        let mut slowest = (Duration::ZERO, String::new());
        let mut n = 0;
        for entry in fs::read_dir(dir)
            .map_err(|e| format!("{dir}: {e}"))?
            .flatten()
        {
            let bytes = fs::read(entry.path()).map_err(|e| format!("{e}"))?;
            let t = Instant::now();
            let _ = load_manifest("fuzz.yaml", &bytes, NODE, SOURCE_FILE, 0);
            let took = t.elapsed();
            n += 1;
            if took > slowest.0 {
                slowest = (took, entry.file_name().to_string_lossy().into_owned());
            }
        }
        result(
            "hostile",
            &format!("slowest of {n} fuzz corpus inputs"),
            format!("{:.2} ms", ms(slowest.0)),
            &slowest.1,
        );
    }
    // End to end: three valid pods alone, then beside the corpus (the real binary, fake CRI).
    for with_corpus in [false, true] {
        let dir = Workdir::new()?;
        let fake = start_fake(&dir).await?;
        if with_corpus {
            hostile::write_into(&dir.manifests()).map_err(|e| format!("corpus: {e}"))?;
        }
        let (mut p, took) =
            start_converged(&bin, &[], &dir, &fake, 3, Duration::from_secs(120)).await?;
        result(
            "hostile",
            if with_corpus {
                "3 valid pods beside the corpus: spawn -> all running"
            } else {
                "3 valid pods alone: spawn -> all running"
            },
            format!("{:.0} ms", ms(took)),
            "",
        );
        p.stop();
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// fake-rss: footprint at 0, 10, 100, 500 pods

async fn fake_rss(args: &Args) -> Res<()> {
    let bin = args.picolet()?;
    let counts = args.list("counts", &[0, 10, 100, 500])?;
    let settle = Duration::from_secs(args.num("settle-secs", 5)?);
    let mut by_count = BTreeMap::new();
    for &n in &counts {
        let n = n as usize;
        let dir = Workdir::new()?;
        let fake = start_fake(&dir).await?;
        let events = events_per_flag(&fake, args);
        // --wrap "valgrind --tool=massif …": a heap profile instead of a plain run.
        let wrapper: Vec<String> = args
            .str("wrap")
            .map(|w| w.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let timeout = Duration::from_secs(120 + n as u64 * if wrapper.is_empty() { 1 } else { 4 });
        let (mut p, took) = start_converged(&bin, &wrapper, &dir, &fake, n, timeout).await?;
        log(format!(
            "fake-rss: {n} pods running after {:.0} ms, {events}",
            ms(took)
        ));
        sleep(settle).await;
        p.alive()?;
        let s = sample(p.pid())?;
        log(format!(
            "fake-rss: {n} pods: VmRSS {} kB, VmHWM {} kB, Pss {} kB, {} threads",
            s.rss_kb, s.hwm_kb, s.pss_kb, s.threads
        ));
        result(
            "footprint",
            &format!("RSS at {n} pods (fake CRI)"),
            mib(s.rss_kb),
            &format!(
                "VmRSS {} kB, VmHWM {} kB, PSS {} kB, {} threads",
                s.rss_kb, s.hwm_kb, s.pss_kb, s.threads
            ),
        );
        by_count.insert(n, s);
        // --then-delete: every manifest removed; once the runtime holds nothing of the pods
        // (stopped, then removed by container GC), what stays resident. --rounds R: then
        // R − 1 more bursts of n new pods (a new revision each), each deleted again, in the
        // same process: whether the space a burst left behind is reused.
        let rounds = if args.flag("then-delete") && n > 0 {
            args.num("rounds", 1)?.max(1) as u32
        } else {
            0
        };
        for round in 1..=rounds {
            let of_round = if rounds > 1 {
                format!(", round {round}")
            } else {
                String::new()
            };
            if round > 1 {
                for i in 0..n {
                    write_manifest(&dir.manifests(), i, round)?;
                }
                wait_until("all running", timeout, Duration::from_millis(50), || {
                    let running = fake_view(&fake).running.len();
                    let alive = p.alive();
                    async move {
                        alive?;
                        if running == n {
                            Ok(true)
                        } else {
                            Err(format!("{running}/{n} running"))
                        }
                    }
                })
                .await?;
                sleep(settle).await;
                let s = sample(p.pid())?;
                log(format!(
                    "fake-rss: {n} pods{of_round}: VmRSS {} kB, VmHWM {} kB",
                    s.rss_kb, s.hwm_kb
                ));
                result(
                    "footprint",
                    &format!("RSS at {n} pods (fake CRI){of_round}"),
                    mib(s.rss_kb),
                    &format!("VmRSS {} kB, VmHWM {} kB", s.rss_kb, s.hwm_kb),
                );
            }
            for i in 0..n {
                remove_manifest(&dir.manifests(), i)?;
            }
            wait_until("all removed", timeout, Duration::from_millis(50), || {
                let left = fake_view(&fake).sandboxes;
                let alive = p.alive();
                async move {
                    alive?;
                    if left == 0 {
                        Ok(true)
                    } else {
                        Err(format!("{left} sandboxes left"))
                    }
                }
            })
            .await?;
            sleep(settle).await;
            let d = sample(p.pid())?;
            log(format!(
                "fake-rss: {n} pods deleted{of_round}: VmRSS {} kB, VmHWM {} kB, Pss {} kB, {} threads",
                d.rss_kb, d.hwm_kb, d.pss_kb, d.threads
            ));
            result(
                "footprint",
                &format!("RSS after {n} pods were deleted (fake CRI){of_round}"),
                mib(d.rss_kb),
                &format!(
                    "VmRSS {} kB, VmHWM {} kB, PSS {} kB, {} threads; every manifest removed, the runtime empty",
                    d.rss_kb, d.hwm_kb, d.pss_kb, d.threads
                ),
            );
        }
        p.stop();
    }
    if let Some(base) = by_count.get(&0) {
        for (&n, s) in &by_count {
            if n == 0 {
                continue;
            }
            let per = (s.rss_kb as f64 - base.rss_kb as f64) / n as f64;
            result(
                "footprint",
                &format!("RSS per pod (0→{n} pods)"),
                format!("{per:.1} kB"),
                "(VmRSS(n) − VmRSS(0)) / n",
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// fake-idle: CPU and writes with N pods and nothing changing

async fn fake_idle(args: &Args) -> Res<()> {
    let bin = args.picolet()?;
    let n = args.num("pods", 50)? as usize;
    let secs = args.num("secs", 60)?;
    let settle = Duration::from_secs(args.num("settle-secs", 5)?);
    let callgrind = args.flag("callgrind");
    let dir = Workdir::new()?;
    let fake = start_fake(&dir).await?;
    let events = events_per_flag(&fake, args);
    let cg_out = dir.root.join("callgrind.out");
    let wrapper: Vec<String> = if callgrind {
        vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            format!("--callgrind-out-file={}", cg_out.display()),
        ]
    } else {
        Vec::new()
    };
    let timeout = Duration::from_secs(if callgrind { 600 } else { 120 } + n as u64);
    let (mut p, took) = start_converged(&bin, &wrapper, &dir, &fake, n, timeout).await?;
    let section = if callgrind {
        "idle (callgrind)"
    } else {
        "idle"
    };
    log(format!(
        "{section}: {n} pods running after {:.0} ms, {events}; settling",
        ms(took)
    ));
    sleep(settle).await;
    let pid = p.pid();
    if callgrind {
        callgrind_control(&["-z", &pid.to_string()])?;
    }
    let s0 = sample(pid)?;
    let calls0 = fake.calls().len();
    let log0 = p.log_len();
    log(format!(
        "{section}: measuring {secs} s with {n} pods, nothing changing"
    ));
    let start = Instant::now();
    sleep(Duration::from_secs(secs)).await;
    let elapsed = start.elapsed().as_secs_f64();
    p.alive()?;
    let s1 = sample(pid)?;
    let calls = fake.calls();
    let log_bytes = p.log_len().saturating_sub(log0);
    let window = format!("{n} pods, {secs} s");
    if callgrind {
        callgrind_control(&["-d", &pid.to_string()])?;
        sleep(Duration::from_secs(3)).await;
        let ir = callgrind_total(&dir.root)?;
        result(
            section,
            &format!("instructions at idle ({window})"),
            format!("{:.2} M/s", ir as f64 / elapsed / 1e6),
            &format!("{ir} Ir in {elapsed:.0} s, picolet under valgrind --tool=callgrind"),
        );
        let keep = PathBuf::from(args.str("keep-dir").unwrap_or("/tmp"));
        if let Ok(dump) = callgrind_dump(&dir.root) {
            let _ = fs::copy(dump, keep.join("picolet-idle.callgrind"));
        }
        if let Ok(top) = callgrind_top(&dir.root) {
            for line in top.lines().take(12) {
                log(format!("{section}: {line}"));
            }
            let _ = fs::write(keep.join("picolet-idle-callgrind.txt"), &top);
        }
        p.stop();
        return Ok(());
    }
    let hz = clock_ticks_per_sec() as f64;
    let cpu_s = (s1.cpu_ticks - s0.cpu_ticks) as f64 / hz;
    let run_s = cpu_secs(&s0, &s1);
    result(
        section,
        &format!("CPU time ({window})"),
        format!("{:.3} s", run_s),
        &format!(
            "{:.3}% of one core; utime+stime {cpu_s:.2} s (10 ms ticks); schedstat of live threads",
            run_s / elapsed * 100.0
        ),
    );
    result(
        section,
        &format!("bytes written to disk ({window})"),
        s1.write_bytes - s0.write_bytes,
        "/proc/<pid>/io write_bytes",
    );
    result(
        section,
        &format!("log bytes ({window})"),
        log_bytes,
        "stderr at RUST_LOG=info (a file here; journald/logd on a board)",
    );
    result(
        section,
        &format!("write() bytes incl. sockets ({window})"),
        s1.wchar - s0.wchar,
        &format!(
            "wchar; {} write syscalls — CRI gRPC traffic, not disk",
            s1.syscw - s0.syscw
        ),
    );
    let idle_calls = &calls[calls0.min(calls.len())..];
    let mut by_method: BTreeMap<&str, usize> = BTreeMap::new();
    for c in idle_calls {
        *by_method.entry(c.method.name()).or_default() += 1;
    }
    let mut breakdown = String::new();
    for (m, c) in &by_method {
        let _ = write!(breakdown, "{m} {:.2}/s, ", *c as f64 / elapsed);
    }
    result(
        section,
        &format!("CRI calls ({window})"),
        format!("{:.1}/s", idle_calls.len() as f64 / elapsed),
        &format!("{}; {events}", breakdown.trim_end_matches(", ")),
    );
    result(
        section,
        &format!("RSS growth over the window ({window})"),
        format!("{} kB", s1.rss_kb as i64 - s0.rss_kb as i64),
        &format!("VmRSS {} → {} kB", s0.rss_kb, s1.rss_kb),
    );
    p.stop();
    Ok(())
}

// ---------------------------------------------------------------------------------------
// fake-probes: what probes cost — an exec liveness probe (ExecSync on the fake) and an HTTP
// readiness probe (to a server in this process) per pod

/// `manifest_yaml` with the two probes, both every `period` seconds.
fn probed_manifest_yaml(i: usize, port: u16, period: u64) -> String {
    manifest_yaml(i, 1).replace(
        "    env:\n",
        &format!(
            "    livenessProbe:\n      exec: {{command: [\"true\"]}}\n      periodSeconds: {period}\n    \
             readinessProbe:\n      httpGet: {{host: 127.0.0.1, port: {port}, path: /healthz}}\n      \
             periodSeconds: {period}\n    env:\n"
        ),
    )
}

/// A minimal HTTP server answering 200 to everything; counts the requests.
async fn probe_target() -> Res<(u16, std::sync::Arc<std::sync::atomic::AtomicU64>)> {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("bind: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                seen.fetch_add(1, Ordering::Relaxed);
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    Ok((port, count))
}

async fn fake_probes(args: &Args) -> Res<()> {
    let bin = args.picolet()?;
    let n = args.num("pods", 100)? as usize;
    let secs = args.num("secs", 60)?;
    let period = args.num("period", 10)?;
    let timeout = Duration::from_secs(120 + n as u64);
    let section = "probes";
    // The same pods without probes first: the RSS difference is the probes'.
    // The same pods without probes first, over the same window: the differences are the
    // probes'.
    let (base, base_cpu) = {
        let dir = Workdir::new()?;
        let fake = start_fake(&dir).await?;
        let (mut p, _) = start_converged(&bin, &[], &dir, &fake, n, timeout).await?;
        sleep(Duration::from_secs(period + 5)).await;
        let s0 = sample(p.pid())?;
        let start = Instant::now();
        sleep(Duration::from_secs(secs)).await;
        let elapsed = start.elapsed().as_secs_f64();
        let s1 = sample(p.pid())?;
        p.stop();
        let run_s = cpu_secs(&s0, &s1);
        (s1, run_s / elapsed * 100.0)
    };
    let (port, requests) = probe_target().await?;
    let dir = Workdir::new()?;
    let fake = start_fake(&dir).await?;
    for i in 0..n {
        write_manifest_yaml(&dir.manifests(), i, &probed_manifest_yaml(i, port, period))?;
    }
    let (mut p, took) = converge(&bin, &[], &dir, &fake, n, timeout).await?;
    log(format!(
        "{section}: {n} pods with 2 probes each running after {:.0} ms; settling {}s",
        ms(took),
        period + 5
    ));
    // Every worker has started (a random first delay within one period) and ticked.
    sleep(Duration::from_secs(period + 5)).await;
    let pid = p.pid();
    let s0 = sample(pid)?;
    let calls0 = fake.calls().len();
    let req0 = requests.load(std::sync::atomic::Ordering::Relaxed);
    let start = Instant::now();
    sleep(Duration::from_secs(secs)).await;
    let elapsed = start.elapsed().as_secs_f64();
    p.alive()?;
    let s1 = sample(pid)?;
    let execs = fake.calls()[calls0..]
        .iter()
        .filter(|c| c.method == Method::ExecSync)
        .count();
    let gets = requests.load(std::sync::atomic::Ordering::Relaxed) - req0;
    let window = format!("{n} pods × 2 probes every {period} s, {secs} s");
    let run_s = cpu_secs(&s0, &s1);
    let with = run_s / elapsed * 100.0;
    result(
        section,
        &format!("CPU of the probes ({window})"),
        format!("{:.3}% of one core", with - base_cpu),
        &format!(
            "{with:.3}% with them − {base_cpu:.3}% for the same pods without probes; schedstat"
        ),
    );
    result(
        section,
        &format!("ExecSync calls per minute ({window})"),
        format!("{:.0}", execs as f64 / elapsed * 60.0),
        &format!(
            "{execs} calls; expected {:.0}/min",
            n as f64 * 60.0 / period as f64
        ),
    );
    result(
        section,
        &format!("HTTP probe requests per minute ({window})"),
        format!("{:.0}", gets as f64 / elapsed * 60.0),
        &format!("{gets} requests to the bench's server"),
    );
    let per_probe = (s1.rss_kb as f64 - base.rss_kb as f64) * 1024.0 / (2 * n) as f64;
    result(
        section,
        &format!("RSS per probe ({n} pods)"),
        format!("{per_probe:.0} B"),
        &format!(
            "(VmRSS with probes {} kB − without {} kB) / {} probes",
            s1.rss_kb,
            base.rss_kb,
            2 * n
        ),
    );
    result(
        section,
        &format!("log bytes ({window})"),
        p.log_len(),
        "stderr at RUST_LOG=info, whole run",
    );
    p.stop();
    Ok(())
}

fn callgrind_control(args: &[&str]) -> Res<()> {
    let out = Command::new("callgrind_control")
        .args(args)
        .output()
        .map_err(|e| format!("callgrind_control: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "callgrind_control {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The newest callgrind dump under `dir` (the one `callgrind_control -d` wrote).
fn callgrind_dump(dir: &Path) -> Res<PathBuf> {
    let mut dumps: Vec<(SystemTime, PathBuf)> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("callgrind.out"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    dumps.sort();
    dumps
        .pop()
        .map(|(_, p)| p)
        .ok_or_else(|| "no callgrind dump".to_string())
}

fn callgrind_total(dir: &Path) -> Res<u64> {
    let dump = callgrind_dump(dir)?;
    let text = read(&dump)?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{}: no summary line", dump.display()))
}

fn callgrind_top(dir: &Path) -> Res<String> {
    let dump = callgrind_dump(dir)?;
    let out = Command::new("callgrind_annotate")
        .args(["--inclusive=yes", "--threshold=99", "--auto=no"])
        .arg(&dump)
        .output()
        .map_err(|e| format!("callgrind_annotate: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // Keep the totals and the function table (drops the long header).
    let body: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("PROGRAM TOTALS"))
        .filter(|l| !l.starts_with("---") && !l.trim().is_empty())
        .take(60)
        .collect();
    Ok(body.join("\n"))
}

// ---------------------------------------------------------------------------------------
// fake-latency: manifest written → RunPodSandbox called

async fn fake_latency(args: &Args) -> Res<()> {
    let bin = args.picolet()?;
    let isolated = args.num("isolated", 100)? as usize;
    let spacing = Duration::from_millis(args.num("spacing-ms", 400)?);
    let burst = args.num("burst", 100)? as usize;
    let dir = Workdir::new()?;
    let fake = start_fake(&dir).await?;
    let mut p = Picolet::spawn(&bin, &[], &dir, &endpoint_of(&dir))?;
    p.wait_ready(Duration::from_secs(30)).await?;
    sleep(Duration::from_secs(2)).await;
    let manifests = dir.manifests();

    // Isolated: one manifest at a time, the next only after the previous pod runs and a
    // pause longer than the file source's debounce.
    let mut to_sandbox = Vec::new();
    let mut to_start = Vec::new();
    for i in 0..isolated {
        let t0 = now_ns();
        write_manifest(&manifests, i, 1)?;
        let name = sandbox_name(i);
        wait_until(
            &format!("pod {i} running"),
            Duration::from_secs(10),
            Duration::from_millis(2),
            || {
                let ok = fake_view(&fake).running.len() == i + 1;
                async move { Ok(ok) }
            },
        )
        .await?;
        let (sb, started) = fake_times(&fake, &name)?;
        to_sandbox.push((sb - t0) as f64 / 1e6);
        to_start.push((started - t0) as f64 / 1e6);
        sleep(spacing).await;
        p.alive()?;
    }
    report_latency("isolated writes", isolated, &mut to_sandbox, &mut to_start);
    // The same pod count as fake-rss reaches all at once, reached one pod at a time: the
    // difference is the start-up peak that the allocator keeps (VmRSS == VmHWM there).
    let s = sample(p.pid())?;
    result(
        "footprint",
        &format!("RSS at {isolated} pods added one at a time (fake CRI)"),
        mib(s.rss_kb),
        &format!("VmRSS {} kB, VmHWM {} kB", s.rss_kb, s.hwm_kb),
    );

    // Edits, one at a time: manifest rewritten → the new UID's RunPodSandbox (the old pod
    // is stopped first, as the kubelet does for static pods).
    let edits = (args.num("edits", 20)? as usize).min(isolated);
    let mut to_new = Vec::new();
    for i in 0..edits {
        let name = sandbox_name(i);
        let old_uid = fake
            .sandboxes()
            .into_iter()
            .find(|s| s.name == name)
            .map(|s| s.uid)
            .ok_or_else(|| format!("no sandbox {name}"))?;
        let t0 = now_ns();
        write_manifest(&manifests, i, 2)?;
        wait_until(
            &format!("pod {i} replaced"),
            Duration::from_secs(30),
            Duration::from_millis(2),
            || {
                let ok = fake
                    .sandboxes()
                    .iter()
                    .any(|s| s.name == name && s.uid != old_uid && s.state == SandboxState::Ready);
                async move { Ok(ok) }
            },
        )
        .await?;
        let created = fake
            .sandboxes()
            .into_iter()
            .filter(|s| s.name == name && s.uid != old_uid)
            .map(|s| s.created_at)
            .max()
            .unwrap_or(t0);
        to_new.push((created - t0) as f64 / 1e6);
        sleep(spacing).await;
        p.alive()?;
    }
    if !to_new.is_empty() {
        to_new.sort_by(f64::total_cmp);
        result(
            "latency (fake CRI)",
            &format!("manifest edited → new pod's RunPodSandbox ({edits} edits, one at a time)"),
            format!(
                "p50 {:.0} ms, p99 {:.0} ms",
                percentile(&to_new, 50.0),
                percentile(&to_new, 99.0)
            ),
            &format!(
                "min {:.0} ms; includes stopping the old pod (instant in the fake)",
                to_new[0]
            ),
        );
    }

    // Burst: `burst` manifests written at once.
    let mut to_sandbox = Vec::new();
    let mut to_start = Vec::new();
    let t0 = now_ns();
    for i in isolated..isolated + burst {
        write_manifest(&manifests, i, 1)?;
    }
    let wrote = (now_ns() - t0) as f64 / 1e6;
    wait_until(
        "burst running",
        Duration::from_secs(60 + burst as u64),
        Duration::from_millis(5),
        || {
            let ok = fake_view(&fake).running.len() == isolated + burst;
            async move { Ok(ok) }
        },
    )
    .await?;
    for i in isolated..isolated + burst {
        let (sb, started) = fake_times(&fake, &sandbox_name(i))?;
        to_sandbox.push((sb - t0) as f64 / 1e6);
        to_start.push((started - t0) as f64 / 1e6);
    }
    log(format!("burst: {burst} manifests written in {wrote:.1} ms"));
    report_latency(
        &format!("a burst of {burst} at once"),
        burst,
        &mut to_sandbox,
        &mut to_start,
    );
    p.stop();
    Ok(())
}

/// (RunPodSandbox time, StartContainer time) of the pod whose sandbox is `name`.
fn fake_times(fake: &FakeCriHandle, name: &str) -> Res<(i64, i64)> {
    let sb = fake
        .sandboxes()
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| format!("no sandbox {name}"))?;
    let started = fake
        .containers()
        .into_iter()
        .filter(|c| c.sandbox_id == sb.id)
        .map(|c| c.started_at)
        .max()
        .ok_or_else(|| format!("no container in {name}"))?;
    Ok((sb.created_at, started))
}

fn report_latency(what: &str, n: usize, to_sandbox: &mut [f64], to_start: &mut [f64]) {
    to_sandbox.sort_by(f64::total_cmp);
    to_start.sort_by(f64::total_cmp);
    let pct = |v: &[f64]| {
        format!(
            "p50 {:.0} ms, p99 {:.0} ms",
            percentile(v, 50.0),
            percentile(v, 99.0)
        )
    };
    result(
        "latency (fake CRI)",
        &format!("manifest → RunPodSandbox, {what} ({n} pods)"),
        pct(to_sandbox),
        &format!(
            "min {:.0} ms, max {:.0} ms; written to a hidden name and renamed into place (IN_MOVED_TO: no debounce)",
            to_sandbox.first().copied().unwrap_or(f64::NAN),
            to_sandbox.last().copied().unwrap_or(f64::NAN)
        ),
    );
    result(
        "latency (fake CRI)",
        &format!("manifest → StartContainer, {what} ({n} pods)"),
        pct(to_start),
        &format!("max {:.0} ms", to_start.last().copied().unwrap_or(f64::NAN)),
    );
}

// ---------------------------------------------------------------------------------------
// fake-scale: converge times with containerd-like latency

async fn fake_scale(args: &Args) -> Res<()> {
    let bin = args.picolet()?;
    let counts = args.list("counts", &[100, 500])?;
    let hz = clock_ticks_per_sec() as f64;
    let profile: String = CONTAINERD_PROFILE
        .iter()
        .filter(|(_, d)| *d >= 20)
        .map(|(m, d)| format!("{} {d}", m.name()))
        .collect::<Vec<_>>()
        .join(", ");
    for &n in &counts {
        let n = n as usize;
        let timeout = Duration::from_secs(120 + n as u64);
        let dir = Workdir::new()?;
        let fake = start_fake(&dir).await?;
        for (m, d) in CONTAINERD_PROFILE {
            fake.inject(*m, Fault::Delay(Duration::from_millis(*d)));
        }
        let section = "scale (fake CRI, containerd-like latency)";
        let (mut p, took) = start_converged(&bin, &[], &dir, &fake, n, timeout).await?;
        let pid = p.pid();
        let s_start = sample(pid)?;
        result(
            section,
            &format!("{n} pods: start → all running"),
            format!("{:.2} s", took.as_secs_f64()),
            &format!(
                "from spawning picolet; CPU {:.2} s; VmHWM {}",
                s_start.cpu_ticks as f64 / hz,
                mib(s_start.hwm_kb)
            ),
        );
        sleep(Duration::from_secs(3)).await;

        // Mass edit: every manifest changes (new UIDs); converged when every new pod runs
        // and nothing of an old one is live.
        let old = fake_view(&fake).running;
        let s0 = sample(pid)?;
        let t0 = Instant::now();
        for i in 0..n {
            write_manifest(&dir.manifests(), i, 2)?;
        }
        let took = wait_until(
            "mass edit converged",
            timeout,
            Duration::from_millis(20),
            || {
                let v = fake_view(&fake);
                let new = v.running.iter().filter(|u| !old.contains(*u)).count();
                let old_live = v.live.iter().filter(|u| old.contains(*u)).count();
                let alive = p.alive();
                async move {
                    alive?;
                    if new == n && old_live == 0 {
                        Ok(true)
                    } else {
                        Err(format!("{new}/{n} new running, {old_live} old live"))
                    }
                }
            },
        )
        .await
        .map(|_| t0.elapsed())?;
        let s1 = sample(pid)?;
        result(
            section,
            &format!("{n} pods: mass edit → all replaced"),
            format!("{:.2} s", took.as_secs_f64()),
            &format!(
                "old stopped and new running; CPU {:.2} s",
                (s1.cpu_ticks - s0.cpu_ticks) as f64 / hz
            ),
        );
        sleep(Duration::from_secs(3)).await;

        // Delete all.
        let s0 = sample(pid)?;
        let t0 = Instant::now();
        for i in 0..n {
            remove_manifest(&dir.manifests(), i)?;
        }
        let stopped = wait_until("all stopped", timeout, Duration::from_millis(20), || {
            let live = fake_view(&fake).live.len();
            async move {
                if live == 0 {
                    Ok(true)
                } else {
                    Err(format!("{live} live"))
                }
            }
        })
        .await?;
        let removed = wait_until("all removed", timeout, Duration::from_millis(20), || {
            let left = fake_view(&fake).sandboxes;
            async move {
                if left == 0 {
                    Ok(true)
                } else {
                    Err(format!("{left} sandboxes left"))
                }
            }
        })
        .await
        .map(|_| t0.elapsed())?;
        let s1 = sample(pid)?;
        result(
            section,
            &format!("{n} pods: delete all → all stopped"),
            format!("{:.2} s", stopped.as_secs_f64()),
            &format!(
                "all removed after {:.2} s; CPU {:.2} s; VmHWM {}",
                removed.as_secs_f64(),
                (s1.cpu_ticks - s0.cpu_ticks) as f64 / hz,
                mib(s1.hwm_kb)
            ),
        );
        p.alive()?;
        p.stop();
    }
    result(
        "scale (fake CRI, containerd-like latency)",
        "per-call latency of the fake",
        "see note",
        &format!("ms: {profile}; list/status calls 1–2 ms; all calls concurrent"),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// containerd: picolet vs raw CRI vs podman kube play; RSS and idle at 10 pods

async fn containerd(args: &Args) -> Res<()> {
    let bin = args.picolet()?;
    let endpoint = args
        .str("endpoint")
        .ok_or("--endpoint unix://… is required")?
        .to_string();
    let counts = args.list("counts", &[1, 20])?;
    let reps = args.num("reps", 3)? as usize;
    let rss_pods = args.num("rss-pods", 10)? as usize;
    let idle_secs = args.num("idle-secs", 60)?;
    let containerd_pid = args.num("containerd-pid", 0)? as u32;
    let _ = RUNTIME_LABEL.set(args.str("label").unwrap_or("containerd").to_string());
    let rt = CriRuntime::connect(&endpoint).map_err(|e| e.to_string())?;
    let v = rt
        .version()
        .await
        .map_err(|e| format!("CRI version: {e}"))?;
    log(format!(
        "containerd: {} {} (CRI {})",
        v.runtime_name, v.runtime_version, v.runtime_api_version
    ));
    let podman = if args.flag("podman") {
        let tar = args
            .str("image-tar")
            .ok_or("--podman needs --image-tar <busybox OCI tar>")?;
        match Podman::setup(Path::new(tar)) {
            Ok(p) => Some(p),
            Err(e) => {
                log(format!("podman: cannot set up: {e}"));
                result(&rt_section("pod start"), "podman kube play", "n/a", &e);
                None
            }
        }
    } else {
        None
    };
    let res = containerd_inner(
        &bin,
        &endpoint,
        &rt,
        podman.as_ref(),
        &counts,
        reps,
        rss_pods,
        idle_secs,
        containerd_pid,
    )
    .await;
    sweep(&rt).await;
    if let Some(p) = podman {
        p.teardown();
    }
    res
}

/// The runtime's name in the `containerd` mode's sections (`--label`).
static RUNTIME_LABEL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `kind (runtime)`: a section of the `containerd` mode.
fn rt_section(kind: &str) -> String {
    format!("{kind} ({})", rt_label())
}

/// The runtime's name (`--label`, default containerd).
fn rt_label() -> &'static str {
    RUNTIME_LABEL.get().map_or("containerd", String::as_str)
}

#[allow(clippy::too_many_arguments)]
async fn containerd_inner(
    bin: &Path,
    endpoint: &str,
    rt: &CriRuntime,
    podman: Option<&Podman>,
    counts: &[u64],
    reps: usize,
    rss_pods: usize,
    idle_secs: u64,
    containerd_pid: u32,
) -> Res<()> {
    let section = &rt_section("pod start");
    sweep(rt).await;
    // Warm-up: the first pod after containerd starts pays for snapshots and CNI setup.
    log("containerd: warm-up");
    raw_start(rt, 1).await?;
    sweep(rt).await;
    if let Some(pm) = podman {
        pm.play(1)?;
        pm.rm_all();
    }
    let mut call_ms: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for &n in counts {
        let n = n as usize;
        let mut raw_all = Vec::new();
        let mut pico_all = Vec::new();
        let mut pico_first = Vec::new();
        let mut pm_all = Vec::new();
        let mut pm_cmd = Vec::new();
        let (mut raw_cpu, mut pico_cpu, mut pico_ctrd_cpu) = (Vec::new(), Vec::new(), Vec::new());
        for rep in 0..reps {
            let c0 = cpu_ms_with_children(containerd_pid);
            let r = raw_start(rt, n).await?;
            sleep(START_CPU_SETTLE).await;
            raw_cpu.push(cpu_ms_with_children(containerd_pid) - c0);
            if n == 1 {
                for (k, v) in r.calls {
                    call_ms.entry(k).or_default().push(v);
                }
            }
            raw_all.push(r.last_started_ms);
            sweep(rt).await;

            let pico = picolet_start(bin, endpoint, rt, n, containerd_pid).await?;
            pico_first.push(pico.first_ms);
            pico_all.push(pico.last_ms);
            pico_cpu.push(pico.cpu_ms);
            pico_ctrd_cpu.push(pico.containerd_cpu_ms);
            sweep(rt).await;

            if let Some(pm) = podman {
                let (last, cmd) = pm.play(n)?;
                pm_all.push(last);
                pm_cmd.push(cmd);
                pm.rm_all();
            }
            log(format!(
                "containerd: {n} pods rep {rep}: raw {:.0} ms, picolet {:.0} ms (×{:.2}); CPU: containerd {:.0} / {:.0} ms, picolet {:.0} ms{}",
                raw_all[rep],
                pico_all[rep],
                pico_all[rep] / raw_all[rep],
                raw_cpu[rep],
                pico_ctrd_cpu[rep],
                pico_cpu[rep],
                pm_all
                    .get(rep)
                    .map(|v| format!(", podman {v:.0} ms"))
                    .unwrap_or_default()
            ));
        }
        let spread = |v: &[f64]| {
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            format!(
                "median of {reps}; runs {}",
                s.iter()
                    .map(|x| format!("{x:.0}"))
                    .collect::<Vec<_>>()
                    .join("/")
            )
        };
        result(
            section,
            &format!("{n} pod(s): raw CRI client (RunPodSandbox→CreateContainer→StartContainer)"),
            format!("{:.0} ms", median(&raw_all)),
            &format!(
                "first call → last container StartedAt; pods concurrent; {}",
                spread(&raw_all)
            ),
        );
        result(
            section,
            &format!("{n} pod(s): picolet (manifest written → last container started)"),
            format!("{:.0} ms", median(&pico_all)),
            &format!(
                "{}; first RunPodSandbox at {:.0} ms (the manifest renamed into place: no debounce)",
                spread(&pico_all),
                median(&pico_first)
            ),
        );
        let mut ratios: Vec<f64> = pico_all.iter().zip(&raw_all).map(|(p, r)| p / r).collect();
        ratios.sort_by(f64::total_cmp);
        result(
            section,
            &format!("{n} pod(s): picolet ÷ raw, per rep"),
            format!("×{:.2}", median(&ratios)),
            &format!(
                "median of the {reps} reps' ratios (each rep runs raw, then picolet); {}",
                ratios
                    .iter()
                    .map(|x| format!("×{x:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        );
        if containerd_pid != 0 {
            result(
                section,
                &format!("{n} pod(s): CPU during the start"),
                format!(
                    "containerd {:.0} ms (raw) / {:.0} ms (picolet); picolet {:.0} ms",
                    median(&raw_cpu),
                    median(&pico_ctrd_cpu),
                    median(&pico_cpu)
                ),
                &format!(
                    "medians of {reps}; utime+stime with waited-for children (CNI plugins), from the first write or call to {} s after the last container runs; shims not counted",
                    START_CPU_SETTLE.as_secs()
                ),
            );
        }
        if podman.is_some() {
            result(
                section,
                &format!("{n} pod(s): podman kube play"),
                format!("{:.0} ms", median(&pm_all)),
                &format!(
                    "command start → last container StartedAt; command returned at {:.0} ms; {}",
                    median(&pm_cmd),
                    spread(&pm_all)
                ),
            );
        }
    }
    for (k, v) in &call_ms {
        result(
            &rt_section("per-call latency (raw client, 1 pod)"),
            k,
            format!("{:.0} ms", median(v)),
            &format!("median of {}", v.len()),
        );
    }
    read_call_medians(rt).await;

    // RSS and idle cost at `rss_pods` pods.
    let dir = Workdir::new()?;
    for i in 0..rss_pods {
        write_manifest(&dir.manifests(), i, 1)?;
    }
    let mut p = Picolet::spawn(bin, &[], &dir, endpoint)?;
    p.wait_ready(Duration::from_secs(60)).await?;
    wait_until(
        &format!("{rss_pods} pods running on containerd"),
        Duration::from_secs(120),
        Duration::from_millis(200),
        || async { Ok(running_pods(rt).await?.len() == rss_pods) },
    )
    .await?;
    sleep(Duration::from_secs(5)).await;
    p.alive()?;
    let s = sample(p.pid())?;
    let section = &rt_section("footprint");
    result(
        section,
        &format!("picolet RSS at {rss_pods} pods ({})", rt_label()),
        mib(s.rss_kb),
        &format!(
            "VmRSS {} kB, VmHWM {} kB, PSS {} kB",
            s.rss_kb, s.hwm_kb, s.pss_kb
        ),
    );
    let shims = pids_named("containerd-shim", "");
    let shims: Vec<u32> = shims
        .into_iter()
        .filter(|p| {
            fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c).contains(endpoint.trim_start_matches("unix://"))
                })
                .unwrap_or(false)
        })
        .collect();
    if containerd_pid != 0 {
        let c = sample(containerd_pid)?;
        result(
            section,
            &format!("{} + shims PSS at {rss_pods} pods", rt_label()),
            mib(c.pss_kb + pss_sum(&shims)),
            &format!(
                "runtime {} kB + {} shims {} kB (shared with any CRI client; CRI-O's conmons are not counted)",
                c.pss_kb,
                shims.len(),
                pss_sum(&shims)
            ),
        );
    }
    let hz = clock_ticks_per_sec() as f64;
    let p0 = sample(p.pid())?;
    let c0 = if containerd_pid != 0 {
        sample(containerd_pid)?.cpu_ticks
    } else {
        0
    };
    let sh0 = cpu_sum_ticks(&shims);
    log(format!(
        "containerd: idle {idle_secs} s with {rss_pods} pods (picolet + containerd)"
    ));
    let t0 = Instant::now();
    sleep(Duration::from_secs(idle_secs)).await;
    let el = t0.elapsed().as_secs_f64();
    p.alive()?;
    let p1 = sample(p.pid())?;
    let section = &rt_section("idle");
    result(
        section,
        &format!("picolet CPU ({rss_pods} pods, {idle_secs} s)"),
        format!("{:.3} s", cpu_secs(&p0, &p1)),
        &format!(
            "{:.3}% of one core; bytes written {}; write syscalls {} (CRI calls and log lines, but also tokio's eventfd wake-ups of its blocking pool)",
            cpu_secs(&p0, &p1) / el * 100.0,
            p1.write_bytes - p0.write_bytes,
            p1.syscw.saturating_sub(p0.syscw)
        ),
    );
    let c1 = if containerd_pid != 0 {
        sample(containerd_pid)?.cpu_ticks
    } else {
        0
    };
    let sh1 = cpu_sum_ticks(&shims);
    p.stop();
    if containerd_pid != 0 {
        // The same window with the pods still running and picolet stopped: what containerd
        // costs by itself, so the difference is what picolet's relisting costs it.
        log(format!(
            "containerd: idle {idle_secs} s with {rss_pods} pods, picolet stopped"
        ));
        let b0 = sample(containerd_pid)?.cpu_ticks;
        let t0 = Instant::now();
        sleep(Duration::from_secs(idle_secs)).await;
        let bel = t0.elapsed().as_secs_f64();
        let b1 = sample(containerd_pid)?.cpu_ticks;
        result(
            section,
            &format!(
                "{} CPU with picolet running ({rss_pods} pods, {idle_secs} s)",
                rt_label()
            ),
            format!("{:.2} s", (c1 - c0) as f64 / hz),
            &format!(
                "{:.2}% of one core; without picolet {:.2} s ({:.2}%); shims {:.2} s",
                (c1 - c0) as f64 / hz / el * 100.0,
                (b1 - b0) as f64 / hz,
                (b1 - b0) as f64 / hz / bel * 100.0,
                sh1.saturating_sub(sh0) as f64 / hz
            ),
        );
    }
    sweep(rt).await;

    if let Some(pm) = podman {
        pm.play(rss_pods)?;
        sleep(Duration::from_secs(5)).await;
        let conmons = pm.conmons();
        let c0 = cpu_sum_ticks(&conmons);
        result(
            &rt_section("footprint"),
            &format!("podman: conmon PSS at {rss_pods} pods"),
            mib(pss_sum(&conmons)),
            &format!(
                "{} conmon processes (infra + app per pod); podman itself is not resident",
                conmons.len()
            ),
        );
        sleep(Duration::from_secs(idle_secs.min(30))).await;
        result(
            &rt_section("idle"),
            &format!(
                "podman: conmon CPU ({rss_pods} pods, {} s)",
                idle_secs.min(30)
            ),
            format!(
                "{:.2} s",
                cpu_sum_ticks(&conmons).saturating_sub(c0) as f64 / hz
            ),
            "utime+stime of all conmons",
        );
        pm.rm_all();
    }
    Ok(())
}

struct RawStart {
    last_started_ms: f64,
    calls: Vec<(&'static str, f64)>,
}

/// The minimal CRI client: for each of `n` pods (concurrently, as picolet's workers run),
/// RunPodSandbox → CreateContainer → StartContainer with the configs picolet's own builders
/// make from the same manifest; no image check, no status calls, no mounts.
async fn raw_start(rt: &CriRuntime, n: usize) -> Res<RawStart> {
    let logs = tempfile::Builder::new()
        .prefix("picolet-bench-raw.")
        .tempdir()
        .map_err(|e| format!("tempdir: {e}"))?;
    let host_dns = fs::read_to_string("/etc/resolv.conf")
        .ok()
        .map(|t| parse_resolv_conf(&t));
    let mut pods = Vec::new();
    for i in 0..n {
        let path = format!("/bench/{}.yaml", pod_name(i));
        let loaded = load_manifest(
            &path,
            manifest_yaml(i, 1).as_bytes(),
            NODE,
            "file",
            now_ns(),
        )
        .map_err(|e| e.to_string())?;
        pods.push(loaded.pod);
    }
    let t0 = now_ns();
    let results = join_all(pods.iter().map(|pod| {
        let logs = logs.path();
        let host_dns = host_dns.as_ref();
        async move {
            let node = NodeParams {
                seccomp_root: Path::new("/var/lib/picolet/seccomp"),
                seccomp_default: false,
                memory_capacity: 1 << 30,
                cpu_capacity_milli: 4000,
                swap: Default::default(),
                host_ip: "",
                objects: None,
            };
            let params = SandboxParams {
                pod_log_dir: logs,
                cgroup_parent: "",
                host_dns,
                node,
            };
            let sb_cfg = sandbox_config(pod, 0, params);
            fs::create_dir_all(&sb_cfg.log_directory).map_err(|e| e.to_string())?;
            let c = &pod.spec.containers[0];
            let c_cfg = container_config(pod, c, 0, "", Vec::new(), node, &Default::default())
                .map_err(|e| e.to_string())?;
            // The container's own log directory (`<pod dir>/<name>/`), as picolet makes it:
            // CRI-O's conmon does not create it (containerd does).
            if let Some(dir) = Path::new(&c_cfg.log_path).parent() {
                fs::create_dir_all(Path::new(&sb_cfg.log_directory).join(dir))
                    .map_err(|e| e.to_string())?;
            }
            let t = Instant::now();
            let sb = rt
                .run_pod_sandbox(&sb_cfg)
                .await
                .map_err(|e| e.to_string())?;
            let d_run = ms(t.elapsed());
            let t = Instant::now();
            let id = rt
                .create_container(&sb, &c_cfg, &sb_cfg)
                .await
                .map_err(|e| e.to_string())?;
            let d_create = ms(t.elapsed());
            let t = Instant::now();
            rt.start_container(&id).await.map_err(|e| e.to_string())?;
            let d_start = ms(t.elapsed());
            let st = rt.container_status(&id).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((st.started_at, [d_run, d_create, d_start]))
        }
    }))
    .await;
    let mut last = 0;
    let mut calls = Vec::new();
    for r in results {
        let (started, d) = r?;
        last = last.max(started);
        calls.push(("RunPodSandbox", d[0]));
        calls.push(("CreateContainer", d[1]));
        calls.push(("StartContainer", d[2]));
    }
    Ok(RawStart {
        last_started_ms: (last - t0) as f64 / 1e6,
        calls,
    })
}

/// Medians of the read-only calls picolet makes at idle, against the pods left running
/// by nothing: one pod started for the purpose.
async fn read_call_medians(rt: &CriRuntime) {
    if raw_start(rt, 1).await.is_err() {
        return;
    }
    let all = ListFilter::default();
    let mut t_sb = Vec::new();
    let mut t_c = Vec::new();
    let mut t_sbs = Vec::new();
    let mut t_cs = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let Ok(sbs) = rt.list_pod_sandboxes(&all).await else {
            break;
        };
        t_sb.push(ms(t.elapsed()));
        let t = Instant::now();
        let Ok(cs) = rt.list_containers(&all).await else {
            break;
        };
        t_c.push(ms(t.elapsed()));
        if let Some(s) = sbs.first() {
            let t = Instant::now();
            let _ = rt.pod_sandbox_status(&s.id).await;
            t_sbs.push(ms(t.elapsed()));
        }
        if let Some(c) = cs.first() {
            let t = Instant::now();
            let _ = rt.container_status(&c.id).await;
            t_cs.push(ms(t.elapsed()));
        }
    }
    for (name, v) in [
        ("ListPodSandbox", t_sb),
        ("ListContainers", t_c),
        ("PodSandboxStatus", t_sbs),
        ("ContainerStatus", t_cs),
    ] {
        if !v.is_empty() {
            result(
                &rt_section("per-call latency (raw client, 1 pod)"),
                name,
                format!("{:.1} ms", median(&v)),
                &format!("median of {}", v.len()),
            );
        }
    }
    sweep(rt).await;
}

/// Pod UIDs (namespace picolet-bench) with a running container.
async fn running_pods(rt: &CriRuntime) -> Result<HashSet<String>, String> {
    let filter = ListFilter {
        labels: [(POD_NAMESPACE_LABEL.to_string(), NS.to_string())].into(),
        sandbox_id: None,
    };
    let cs = rt
        .list_containers(&filter)
        .await
        .map_err(|e| e.to_string())?;
    Ok(cs
        .into_iter()
        .filter(|c| c.state == ContainerState::Running)
        .filter_map(|c| c.labels.get(POD_UID_LABEL).cloned())
        .collect())
}

/// How long after a start its CPU keeps being counted (the status reads and relists
/// that follow it are part of its cost).
const START_CPU_SETTLE: Duration = Duration::from_secs(1);

/// One picolet start of `n` pods.
struct PicoletStart {
    /// Manifests written → first sandbox created, ms.
    first_ms: f64,
    /// Manifests written → last container started, ms.
    last_ms: f64,
    /// picolet's CPU from the writes to [`START_CPU_SETTLE`] after all run, ms.
    cpu_ms: f64,
    /// containerd's over the same window, ms.
    containerd_cpu_ms: f64,
}

/// picolet (already running, ready, empty directory) gets `n` manifests at once.
async fn picolet_start(
    bin: &Path,
    endpoint: &str,
    rt: &CriRuntime,
    n: usize,
    containerd_pid: u32,
) -> Res<PicoletStart> {
    let dir = Workdir::new()?;
    let mut p = Picolet::spawn(bin, &[], &dir, endpoint)?;
    p.wait_ready(Duration::from_secs(60)).await?;
    sleep(Duration::from_millis(1500)).await;
    let (p0, c0) = (
        cpu_ms_with_children(p.pid()),
        cpu_ms_with_children(containerd_pid),
    );
    let t0 = now_ns();
    for i in 0..n {
        write_manifest(&dir.manifests(), i, 1)?;
    }
    // The figure is the runtime's StartedAt, not when this poll noticed: a slow poll
    // loses nothing, and does not load containerd during the start it measures (the raw
    // client's run has no poll beside it).
    wait_until(
        &format!("{n} pods running"),
        Duration::from_secs(120),
        Duration::from_millis(250),
        || async { Ok(running_pods(rt).await?.len() == n) },
    )
    .await?;
    sleep(START_CPU_SETTLE).await;
    let (cpu_ms, containerd_cpu_ms) = (
        cpu_ms_with_children(p.pid()) - p0,
        cpu_ms_with_children(containerd_pid) - c0,
    );
    p.alive()?;
    let filter = ListFilter {
        labels: [(POD_NAMESPACE_LABEL.to_string(), NS.to_string())].into(),
        sandbox_id: None,
    };
    let sbs = rt
        .list_pod_sandboxes(&filter)
        .await
        .map_err(|e| e.to_string())?;
    let first = sbs.iter().map(|s| s.created_at).min().unwrap_or(t0);
    let mut last = 0;
    for c in rt
        .list_containers(&filter)
        .await
        .map_err(|e| e.to_string())?
    {
        let st = rt
            .container_status(&c.id)
            .await
            .map_err(|e| e.to_string())?;
        last = last.max(st.started_at);
    }
    p.stop();
    Ok(PicoletStart {
        first_ms: (first - t0) as f64 / 1e6,
        last_ms: (last - t0) as f64 / 1e6,
        cpu_ms,
        containerd_cpu_ms,
    })
}

/// Stops and removes every sandbox of namespace picolet-bench.
async fn sweep(rt: &CriRuntime) {
    let filter = ListFilter {
        labels: [(POD_NAMESPACE_LABEL.to_string(), NS.to_string())].into(),
        sandbox_id: None,
    };
    let Ok(sbs) = rt.list_pod_sandboxes(&filter).await else {
        return;
    };
    join_all(sbs.iter().map(|s| async move {
        let _ = rt.stop_pod_sandbox(&s.id).await;
        let _ = rt.remove_pod_sandbox(&s.id).await;
    }))
    .await;
    // picolet was stopped before its pods were removed: their pod cgroups are left, and the
    // next picolet would remove them during the burst it is timed on.
    remove_cgroup_root();
}

// ---------------------------------------------------------------------------------------
// podman kube play

/// A private podman: its own storage, run root, network config and containers.conf under
/// one temporary directory; cgroupfs and file events (no systemd here).
struct Podman {
    dir: tempfile::TempDir,
}

impl Podman {
    fn setup(busybox_tar: &Path) -> Res<Podman> {
        // podman refuses a run root longer than 50 characters: keep the path short.
        let mut base = std::env::temp_dir();
        if base.as_os_str().len() > 32 {
            base = PathBuf::from("/tmp");
        }
        let dir = tempfile::Builder::new()
            .prefix("pm.")
            .tempdir_in(base)
            .map_err(|e| format!("tempdir: {e}"))?;
        // This machine refuses to raise RLIMIT_NOFILE/NPROC to podman's defaults
        // (`error setting rlimit type 7: operation not permitted`): ask for low ones, as
        // containerd's default spec does.
        fs::write(
            dir.path().join("containers.conf"),
            "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=4096:4096\"]\n",
        )
        .map_err(|e| e.to_string())?;
        fs::create_dir_all(dir.path().join("net")).map_err(|e| e.to_string())?;
        let pm = Podman { dir };
        pm.run(&["load", "-q", "-i", &busybox_tar.to_string_lossy()])?;
        Ok(pm)
    }

    fn cmd(&self) -> Command {
        let d = self.dir.path();
        let mut c = Command::new("podman");
        c.env("CONTAINERS_CONF", d.join("containers.conf"))
            .arg("--root")
            .arg(d.join("root"))
            .arg("--runroot")
            .arg(d.join("run"))
            .arg("--network-config-dir")
            .arg(d.join("net"))
            .args(["--cgroup-manager", "cgroupfs", "--events-backend", "file"]);
        c
    }

    fn run(&self, args: &[&str]) -> Res<String> {
        let out = self
            .cmd()
            .args(args)
            .output()
            .map_err(|e| format!("podman: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "podman {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `podman kube play` of `n` pods in one multi-document file. Returns (command start →
    /// last app container StartedAt, command start → command returned) in ms.
    fn play(&self, n: usize) -> Res<(f64, f64)> {
        let file = self.dir.path().join(format!("pods-{n}.yaml"));
        let docs: Vec<String> = (0..n).map(|i| manifest_yaml(i, 1)).collect();
        fs::write(&file, docs.join("---\n")).map_err(|e| e.to_string())?;
        let t0 = now_ns();
        self.run(&["kube", "play", "-q", &file.to_string_lossy()])?;
        let returned = (now_ns() - t0) as f64 / 1e6;
        let ids = self.run(&["ps", "-q", "--filter", "name=-app$"])?;
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if ids.len() != n {
            return Err(format!(
                "podman: {} app containers running, want {n}",
                ids.len()
            ));
        }
        let mut args = vec!["inspect", "--format", "{{.State.StartedAt.UnixNano}}"];
        args.extend(ids.iter().copied());
        let out = self.run(&args)?;
        let last = out
            .split_whitespace()
            .filter_map(|v| v.parse::<i64>().ok())
            .max()
            .ok_or("podman inspect: no StartedAt")?;
        Ok(((last - t0) as f64 / 1e6, returned))
    }

    fn conmons(&self) -> Vec<u32> {
        pids_named("conmon", &self.dir.path().to_string_lossy())
    }

    fn rm_all(&self) {
        if let Err(e) = self.run(&["pod", "rm", "-a", "-f", "-t", "0"]) {
            log(format!("podman cleanup: {e}"));
        }
    }

    /// Removes every pod, the kube network (and its bridge), the storage; the CNI IPAM
    /// state podman's CNI backend keeps under /var/lib/cni/networks.
    fn teardown(&self) {
        self.rm_all();
        let _ = self.run(&["network", "rm", "-f", "podman-default-kube-network"]);
        let _ = self.run(&["system", "reset", "-f"]);
        let _ = fs::remove_dir_all("/var/lib/cni/networks/podman-default-kube-network");
    }
}
