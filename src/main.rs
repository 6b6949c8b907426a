//! The `picolet` binary: flags → options → a current_thread tokio runtime → `daemon::run`.
//! Signals live here: SIGTERM/SIGINT cancel the one shutdown token (pods keep running, as
//! with the kubelet); SIGHUP asks the file source to re-list now.

// No production function over 120 lines (clippy.toml): a long flow reads as its numbered
// steps, each a named function. Tests (cfg(test), tests/) and the fakes are left out.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use picolet::{
    Command, CriRuntime, Options, Preflight, PreflightVerdict as Verdict, Runtime, build_features,
    detect_cgroups, node_name, options_help, parse_options,
};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse_options(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("picolet: {e}");
            return ExitCode::from(2);
        }
    };
    match command {
        Command::Version => {
            println!("picolet {}", env!("CARGO_PKG_VERSION"));
            println!("{}", build_features());
            ExitCode::SUCCESS
        }
        Command::Help => {
            print!("{}", options_help());
            ExitCode::SUCCESS
        }
        Command::Check(opts) => block_on(check(opts)),
        Command::Kubeconfig(opts) => {
            // Written by `picolet run` on every start (the node API's server, CA, token).
            let path = opts.root_dir.join("kubeconfig");
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!(
                        "picolet: {}: {e} (picolet run writes it when the node API starts)",
                        path.display()
                    );
                    ExitCode::FAILURE
                }
            }
        }
        Command::Cli(args) => ExitCode::from(picolet::cli_main(&args)),
        Command::Run(opts) => block_on(run(opts)),
    }
}

/// `RUST_LOG` (default info) to stderr, one line per record with a UTC millisecond stamp
/// (env_logger's own timestamps need its `humantime` feature; ours come from `clock`).
fn init_logging() {
    use picolet::{Clock, SystemClock, rfc3339_nanos};
    use std::io::Write;
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format(|buf, record| {
            let stamp = rfc3339_nanos(SystemClock.now());
            // 2026-11-30T05:09:28.123456789Z → keep milliseconds
            let stamp = match stamp.len() {
                30 => format!("{}Z", &stamp[..23]),
                _ => stamp,
            };
            writeln!(
                buf,
                "{stamp} {:<5} {}: {}",
                record.level(),
                record.target().trim_start_matches("picolet::"),
                record.args()
            )
        })
        .init();
}

fn block_on(fut: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The passes that read files on the blocking pool (eviction, log rotation: 10 s; the
        // manifest relist: 20 s; container GC: 60 s) find its threads still there, instead
        // of each starting one again (tokio's default keeps an idle thread 10 s: measured,
        // the thread starts and exits were a quarter of an idle node's CPU).
        .thread_keep_alive(std::time::Duration::from_secs(65))
        .build()
    {
        Ok(rt) => rt.block_on(fut),
        Err(e) => {
            eprintln!("picolet: cannot start the tokio runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(opts: Options) -> ExitCode {
    let shutdown = CancellationToken::new();
    let relist = Rc::new(tokio::sync::Notify::new());
    let (mut term, mut int, mut hup) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(t), Ok(i), Ok(h)) => (t, i, h),
        _ => {
            eprintln!("picolet: cannot install signal handlers");
            return ExitCode::FAILURE;
        }
    };
    let daemon = picolet::run_daemon(opts, shutdown.clone(), relist.clone());
    tokio::pin!(daemon);
    loop {
        tokio::select! {
            res = &mut daemon => {
                return match res {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => {
                        log::error!("{e}");
                        ExitCode::FAILURE
                    }
                };
            }
            _ = term.recv() => {
                log::info!("SIGTERM: stopping picolet; pods keep running");
                shutdown.cancel();
            }
            _ = int.recv() => {
                log::info!("SIGINT: stopping picolet; pods keep running");
                shutdown.cancel();
            }
            _ = hup.recv() => {
                log::info!("SIGHUP: re-listing pod sources now");
                relist.notify_one();
            }
        }
    }
}

/// `picolet check` with `--kubeconfig`: the kubeconfig loads, and the apiserver answers a
/// GET of this node (404 is fine: not registered yet). Unreachable is only a warning: the
/// node runs its checkpointed pods offline.
#[cfg(feature = "apiserver")]
async fn check_apiserver(kubeconfig: &std::path::Path, node: &str) -> (Verdict, String) {
    use picolet::api::cluster::Node;
    use picolet::apiserver::{Client, ClientConfig};
    let client = match ClientConfig::from_kubeconfig(kubeconfig).and_then(|c| Client::new(&c)) {
        Ok(c) => c,
        Err(e) => return (Verdict::Fail, e.to_string()),
    };
    let server = client.server().to_string();
    match client
        .get_opt::<Node>(&format!("/api/v1/nodes/{node}"))
        .await
    {
        Ok(Some(_)) => (Verdict::Ok, format!("{server}: node {node} registered")),
        Ok(None) => (
            Verdict::Ok,
            format!("{server}: reachable; node {node} not registered yet"),
        ),
        Err(e) if matches!(e.code(), Some(401 | 403)) => (Verdict::Fail, e.to_string()),
        Err(e) => (
            Verdict::Warn,
            format!("{e} (pods of the checkpoint run offline)"),
        ),
    }
}

async fn check(opts: Options) -> ExitCode {
    let mut report = Preflight::default();
    let node_name = node_name(opts.hostname_override.as_deref());
    match &node_name {
        Ok(n) => report.push(Verdict::Ok, "node name", n.clone()),
        Err(e) => report.push(Verdict::Fail, "node name", e.to_string()),
    }
    #[cfg(feature = "apiserver")]
    if let (Some(kubeconfig), Ok(node)) = (&opts.kubeconfig, &node_name) {
        let (verdict, detail) = check_apiserver(kubeconfig, node).await;
        report.push(verdict, "apiserver", detail);
    }
    let endpoint = &opts.container_runtime_endpoint;
    match CriRuntime::connect(endpoint) {
        Err(e) => report.push(Verdict::Fail, "CRI endpoint", e.to_string()),
        Ok(rt) => {
            match tokio::time::timeout(Duration::from_secs(5), rt.version()).await {
                Ok(Ok(v)) => {
                    report.push(
                        Verdict::Ok,
                        "CRI runtime",
                        format!(
                            "{} {} (CRI {}) at {endpoint}",
                            v.runtime_name, v.runtime_version, v.runtime_api_version
                        ),
                    );
                    #[cfg(feature = "image-mirror")]
                    if !opts.image_mirror_address.is_empty() {
                        let dir = opts
                            .image_archive_dir
                            .clone()
                            .unwrap_or_else(|| opts.root_dir.join("images"));
                        let (verdict, detail) = match picolet::runtime_uses_mirror(
                            &v.runtime_name,
                            &v.runtime_version,
                            &opts.image_mirror_address,
                            std::path::Path::new("/etc"),
                        ) {
                            Ok(how) => (Verdict::Ok, how),
                            Err(what) => (Verdict::Warn, what.to_string()),
                        };
                        report.push(
                            verdict,
                            "image mirror",
                            format!(
                                "{} on http://{}: {detail}",
                                dir.display(),
                                opts.image_mirror_address
                            ),
                        );
                    }
                }
                Ok(Err(e)) => report.push(Verdict::Fail, "CRI runtime", format!("{endpoint}: {e}")),
                Err(_) => report.push(
                    Verdict::Fail,
                    "CRI runtime",
                    format!("{endpoint}: no answer within 5s"),
                ),
            }
            if let Ok(Ok(h)) = tokio::time::timeout(Duration::from_secs(5), rt.status()).await {
                let verdict = if h.runtime_ready && h.network_ready {
                    Verdict::Ok
                } else {
                    Verdict::Warn
                };
                report.push(
                    verdict,
                    "CRI status",
                    format!(
                        "RuntimeReady={} NetworkReady={} {}",
                        h.runtime_ready, h.network_ready, h.message
                    ),
                );
            }
        }
    }
    #[cfg(feature = "device-plugins")]
    {
        let dir = match &opts.device_plugin_dir {
            Some(d) if d.as_os_str().is_empty() => None,
            Some(d) => Some(d.clone()),
            None => Some(picolet::DEVICE_PLUGIN_DIR.into()),
        };
        if let Some(dir) = dir {
            let (ok, detail) = picolet::check_device_plugin_dir(&dir);
            let verdict = if ok { Verdict::Ok } else { Verdict::Warn };
            report.push(verdict, "device plugins", detail);
        }
    }
    report.cgroups(detect_cgroups(
        std::path::Path::new("/sys/fs/cgroup"),
        std::path::Path::new("/proc/cgroups"),
    ));
    report.directories(&opts.pod_manifest_path, &opts.root_dir, &opts.pod_log_dir);
    println!("{report}");
    if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
