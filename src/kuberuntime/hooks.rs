//! Lifecycle hooks (kubelet: `lifecycle/handlers.go` `HandlerRunner.Run`,
//! `kuberuntime_container.go` `executePreStopHook`, the postStart step of `startContainer`).
//!
//! Owns: running one `postStart` or `preStop` handler — `exec` (CRI `ExecSync` in the
//! container), `httpGet` (from picolet's network namespace to the pod IP, the node's for
//! host-network pods), `sleep` — and saying whether it failed and why. `tcpSocket` is
//! accepted by the API only for compatibility; running it fails ("invalid handler"), as
//! upstream. Where a hook runs, and what its failure does, is the sync's business (`sync/container.rs`, `sync/kill.rs`).
//!
//! As upstream, an HTTP hook fails only when no answer arrives: its status code is not
//! looked at. Deliberate difference: a postStart `exec` is bounded by
//! `--runtime-request-timeout` (upstream waits for it without a bound, and a hanging hook
//! holds the pod's sync forever); the preStop hook is bounded by the grace period.

use std::time::Duration;

use crate::api::{Container, LifecycleHandler};
use crate::cri::{CriError, Runtime};
use crate::probe;

/// `User-Agent` of HTTP hooks (kubelet: `kube-lifecycle/<major>.<minor>`).
pub(crate) const HOOK_USER_AGENT: &str = "kube-lifecycle/1.34";
/// The bound of an HTTP hook without a grace period to bound it (postStart).
const HTTP_HOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a hook failed (its text is the hook's failure message in logs and waiting reasons).
#[derive(Debug)]
pub(crate) enum HookError {
    /// The `exec` command ran and exited non-zero; `first_line` is its first output line.
    ExitCode {
        command: Vec<String>,
        exit_code: i32,
        first_line: String,
    },
    /// The `exec` command could not be run (`ExecSync` failed).
    Exec {
        command: Vec<String>,
        source: CriError,
    },
    /// The `httpGet` target could not be built or no answer arrived (the probe's message).
    Http(String),
    /// A `tcpSocket` handler: accepted by the API, never runnable as a hook.
    TcpSocket,
    /// None of `exec`, `httpGet` or `sleep` is set.
    NoHandler,
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::ExitCode {
                command,
                exit_code,
                first_line,
            } => write!(
                f,
                "command {command:?} exited with {exit_code}{}{first_line}",
                if first_line.is_empty() { "" } else { ": " }
            ),
            HookError::Exec { command, source } => write!(f, "command {command:?}: {source}"),
            HookError::Http(message) => f.write_str(message),
            HookError::TcpSocket => {
                f.write_str("invalid handler: tcpSocket cannot be a lifecycle hook")
            }
            HookError::NoHandler => {
                f.write_str("invalid handler: none of exec, httpGet or sleep is set")
            }
        }
    }
}

impl std::error::Error for HookError {}

/// Run the handler for the container instance `container_id`. `bound` limits an exec
/// command, an HTTP request and a sleep (preStop: the grace period); `None` for postStart.
pub(crate) async fn run<R: Runtime>(
    runtime: &R,
    container: &Container,
    container_id: &str,
    handler: &LifecycleHandler,
    pod_ip: &str,
    bound: Option<Duration>,
) -> Result<(), HookError> {
    if let Some(exec) = &handler.exec {
        // CRI: timeout 0 means no timeout of the command itself.
        let timeout = bound.unwrap_or(Duration::ZERO);
        return match runtime
            .exec_sync(container_id, &exec.command, timeout)
            .await
        {
            Ok(r) if r.exit_code == 0 => Ok(()),
            Ok(r) => Err(HookError::ExitCode {
                command: exec.command.clone(),
                exit_code: r.exit_code,
                first_line: probe::first_output_line(&r.stdout, &r.stderr),
            }),
            Err(source) => Err(HookError::Exec {
                command: exec.command.clone(),
                source,
            }),
        };
    }
    if let Some(h) = &handler.http_get {
        let headers = probe::headers(&h.http_headers);
        let target = probe::http_target(h, container, pod_ip, &headers)
            .map_err(|e| HookError::Http(e.to_string()))?;
        let timeout = bound.unwrap_or(HTTP_HOOK_TIMEOUT);
        return probe::http_hook(&target, HOOK_USER_AGENT, timeout)
            .await
            .map_err(|e| HookError::Http(e.to_string()));
    }
    if let Some(s) = &handler.sleep {
        let secs = u64::try_from(s.seconds).unwrap_or(0);
        let wanted = Duration::from_secs(secs);
        let d = bound.map_or(wanted, |b| b.min(wanted));
        tokio::time::sleep(d).await;
        return Ok(());
    }
    if handler.tcp_socket.is_some() {
        return Err(HookError::TcpSocket);
    }
    Err(HookError::NoHandler)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ExecAction, SleepAction, TcpSocketAction};
    use crate::clock::TokioClock;
    use crate::cri::fake::FakeRuntime;
    use crate::cri::{ContainerConfig, SandboxConfig};

    fn exec(cmd: &[&str]) -> LifecycleHandler {
        LifecycleHandler {
            exec: Some(ExecAction {
                command: cmd.iter().map(|s| s.to_string()).collect(),
            }),
            ..Default::default()
        }
    }

    async fn running_container(rt: &FakeRuntime) -> String {
        let sb_cfg = SandboxConfig::default();
        let sb = rt.run_pod_sandbox(&sb_cfg).await.unwrap();
        rt.add_image("busybox");
        let cfg = ContainerConfig {
            name: "app".into(),
            image: "busybox".into(),
            ..Default::default()
        };
        let id = rt.create_container(&sb, &cfg, &sb_cfg).await.unwrap();
        rt.start_container(&id).await.unwrap();
        id
    }

    #[tokio::test(start_paused = true)]
    async fn handlers() {
        let rt = FakeRuntime::new(TokioClock::new(0));
        let c = Container::default();
        let id = running_container(&rt).await;
        assert!(run(&rt, &c, &id, &exec(&["true"]), "", None).await.is_ok());
        rt.set_exec_result("app", 2, "boom\nmore");
        assert_eq!(
            run(&rt, &c, &id, &exec(&["false"]), "", None)
                .await
                .unwrap_err()
                .to_string(),
            "command [\"false\"] exited with 2: boom"
        );
        let sleep = LifecycleHandler {
            sleep: Some(SleepAction { seconds: 30 }),
            ..Default::default()
        };
        let t = tokio::time::Instant::now();
        assert!(
            run(&rt, &c, &id, &sleep, "", Some(Duration::from_secs(5)))
                .await
                .is_ok()
        );
        assert_eq!(
            t.elapsed(),
            Duration::from_secs(5),
            "bounded by the grace period"
        );
        let tcp = LifecycleHandler {
            tcp_socket: Some(TcpSocketAction::default()),
            ..Default::default()
        };
        assert!(
            run(&rt, &c, &id, &tcp, "", None)
                .await
                .unwrap_err()
                .to_string()
                .contains("invalid handler")
        );
        assert!(
            run(&rt, &c, &id, &LifecycleHandler::default(), "", None)
                .await
                .unwrap_err()
                .to_string()
                .contains("invalid handler")
        );
    }
}
