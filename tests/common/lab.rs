//! What the tests against a real containerd (`tests/e2e.rs`, `tests/e2e_api.rs`) share:
//! finding the lab, a scenario directory, the CRI labels contract, a service container.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use picolet::{CriRuntime, Runtime};

/// The lab's CRI socket (`tests/e2e/run.sh` sets it); without it every lab test skips.
pub const ENDPOINT_VAR: &str = "PICOLET_E2E_ENDPOINT";

// The CRI labels contract (kubelet: kuberuntime/labels.go), spelled out here on purpose:
// the tests check picolet against the contract, not against picolet's own constants.
pub const POD_NAME: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const POD_UID: &str = "io.kubernetes.pod.uid";
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";

/// The lab's runtime (`tests/e2e/run.sh --runtime`, lab.sh's `PICOLET_LAB_RUNTIME`):
/// `containerd` (1.6, the default), `containerd2` or `crio` — for the rare expectation that
/// differs between runtimes.
pub const RUNTIME_VAR: &str = "PICOLET_E2E_RUNTIME";

/// The lab's runtime name (`containerd` unless `PICOLET_E2E_RUNTIME` says otherwise).
pub fn runtime_name() -> String {
    std::env::var(RUNTIME_VAR).unwrap_or_else(|_| "containerd".into())
}

/// The lab directory of an endpoint `unix://<lab>/<socket>`.
pub fn lab_dir(endpoint: &str) -> Option<PathBuf> {
    endpoint
        .trim_start_matches("unix://")
        .rsplit_once('/')
        .map(|(dir, _)| PathBuf::from(dir))
}

/// The image mirror address the lab's runtime pulls through (`lab.sh`: `MIRROR=` in
/// `lab.env`).
pub fn mirror_address(endpoint: &str) -> Option<String> {
    let env = std::fs::read_to_string(lab_dir(endpoint)?.join("lab.env")).ok()?;
    env.lines()
        .find_map(|l| l.strip_prefix("MIRROR="))
        .map(|v| v.trim_matches(|c| c == '\'' || c == '"').to_string())
        .filter(|v| !v.is_empty())
}

/// The lab runtime's log (`lab.sh`: always `<lab>/runtime.log`).
pub fn runtime_log(endpoint: &str) -> Option<PathBuf> {
    lab_dir(endpoint).map(|d| d.join("runtime.log"))
}

/// `tests/e2e/lab.sh ARGS... <lab>` on the endpoint's lab.
pub fn lab_sh(endpoint: &str, args: &[&str]) -> std::io::Result<Output> {
    let dir = lab_dir(endpoint).ok_or_else(|| std::io::Error::other("no lab directory"))?;
    Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/lab.sh"))
        .args(args)
        .arg(dir)
        .output()
}

/// The `--cgroup-root` of the lab's picolets: one per lab (named after its bridge,
/// `PICOLET_LAB_BRIDGE`), so labs running side by side on one machine never share a
/// `kubepods`; `lab.sh down` removes the cgroups made while the lab ran.
pub fn cgroup_root() -> String {
    let bridge = std::env::var("PICOLET_LAB_BRIDGE").unwrap_or_else(|_| "picolet0".into());
    format!("/picolet-e2e-{bridge}")
}

/// The lab's endpoint and a CRI client of it, its runtime and network ready; `None`, after
/// a skip line naming `who`, when no lab is configured.
pub async fn connect(who: &str) -> Option<(String, CriRuntime)> {
    let Ok(endpoint) = std::env::var(ENDPOINT_VAR) else {
        eprintln!("{who}: skipped ({ENDPOINT_VAR} is not set; run tests/e2e/run.sh as root)");
        return None;
    };
    let rt = CriRuntime::connect(&endpoint)
        .unwrap_or_else(|e| panic!("{who}: cannot connect to {endpoint}: {e}"));
    match rt.status().await {
        Ok(h) if h.runtime_ready && h.network_ready => {}
        Ok(h) => panic!("{who}: runtime at {endpoint} not ready: {h:?}"),
        Err(e) => panic!("{who}: CRI Status at {endpoint}: {e} (is the lab up?)"),
    }
    Some((endpoint, rt))
}

/// A temporary directory named `<prefix>…` with `manifests/`, `root/` and `logs/`.
pub fn scenario_dir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("tempdir");
    for sub in ["manifests", "root", "logs"] {
        fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
    }
    dir
}

/// A service-like container script: the TERM trap is set before "started" is printed, and
/// `sleep 1 & wait` (not a foreground `sleep 1`) lets the trap run at once on SIGTERM.
pub fn service_script(name: &str) -> String {
    format!(
        "trap 'echo got TERM; exit 0' TERM\necho \"{name} started\"\nwhile true; do sleep 1 & wait; done"
    )
}

/// Runs the future `job` makes to its end on a current-thread runtime in a thread of its
/// own: a `Drop` may run inside a tokio runtime, which cannot block.
pub fn block_on_a_thread<F, Fut>(job: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let _ = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(job());
    })
    .join();
}
