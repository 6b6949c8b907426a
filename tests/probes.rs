//! Probes and lifecycle hooks through the whole agent, against the in-memory fake runtime
//! with paused time (exec probes and exec hooks: the fake answers `ExecSync` as scripted).
//! The network handlers have their own tests in `src/probe/`; the same scenarios run
//! against a real containerd in `tests/e2e.rs`.

use std::collections::HashMap;
use std::time::Duration;

mod common;

use common::agent::{fake_runtime, settle};

use common::IMAGE;
use common::agent::{EventedAgent, agent_dir, start_with_events};
use picolet::{
    ContainerState,
    api::PodStatus,
    fakes::{FakeRuntime, RuntimeCall as Call},
};
use tokio::task::LocalSet;

/// A pod with one container `app` and the given container-level YAML lines (indented 4).
fn pod(name: &str, container_yaml: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: app
    image: {IMAGE}
{container_yaml}"#
    )
}

/// The newest status of each pod, kept across calls.
struct Statuses(HashMap<String, std::sync::Arc<PodStatus>>);

impl Statuses {
    fn update(&mut self, agent: &mut EventedAgent) -> &HashMap<String, std::sync::Arc<PodStatus>> {
        self.0.extend(agent.statuses());
        &self.0
    }
}

fn condition(st: &PodStatus, type_: &str) -> String {
    st.conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.to_string())
        .unwrap_or_default()
}

/// Paused time goes by in 100 ms steps until `done` holds: how long that took, or None if
/// not within `limit`. Waits for an outcome, not for a guessed delay.
async fn until(limit: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = tokio::time::Instant::now();
    while !done() {
        if t0.elapsed() >= limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Some(t0.elapsed())
}

fn execs(rt: &FakeRuntime, first_word: &str) -> usize {
    rt.exec_commands()
        .iter()
        .filter(|(_, cmd)| cmd.first().map(String::as_str) == Some(first_word))
        .count()
}

#[tokio::test(start_paused = true)]
async fn failing_liveness_probe_restarts_the_container() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let spec = "    livenessProbe:\n      exec: {command: [live]}\n      periodSeconds: 2\n      failureThreshold: 3\n";
            std::fs::write(cfg.pod_manifest_path.join("p.yaml"), pod("web", spec)).unwrap();
            let (clock, rt) = fake_runtime();
            let mut agent = start_with_events(&rt, clock, &cfg);
            settle(10).await;
            let first = rt.running("app");
            assert_eq!(first.len(), 1);
            assert!(execs(&rt, "live") >= 3, "the probe runs every 2 s");

            // It starts failing: killed and restarted after 3 failures (about 6 s), then
            // healthy again.
            rt.set_exec_result("app", 1, "unhealthy\nsecond line");
            settle(7).await;
            rt.set_exec_result("app", 0, "");
            settle(6).await;
            let now = rt.running("app");
            assert_eq!(now.len(), 1, "{:?}", rt.containers());
            assert_ne!(now, first, "restarted");
            let old = rt
                .containers()
                .into_iter()
                .find(|c| c.id == first[0])
                .expect("old instance kept for its status");
            assert_eq!(old.state, ContainerState::Exited);
            let mut statuses = Statuses(HashMap::new());
            let st = statuses.update(&mut agent)["web-node1"].clone();
            let cs = &st.container_statuses[0];
            assert_eq!(cs.restart_count, 1, "{cs:?}");
            let last = cs.last_state.terminated.as_ref().expect("last state");
            assert_eq!(
                last.message.as_deref(),
                Some("Container app failed liveness probe, will be restarted"),
                "{cs:?}"
            );
            // kubelet: Unhealthy at every failed run (aggregated), then Killing with the
            // probe's message.
            let events = agent.pod_events("web-node1");
            let unhealthy = events
                .iter()
                .find(|(_, reason, _, _)| reason == "Unhealthy")
                .unwrap_or_else(|| panic!("{events:?}"));
            assert_eq!(unhealthy.0, "Warning");
            assert_eq!(unhealthy.2, "Liveness probe failed: command exited 1: unhealthy");
            assert!(unhealthy.3 >= 3, "{events:?}");
            assert!(
                events.iter().any(|(ty, reason, msg, _)| ty == "Normal"
                    && reason == "Killing"
                    && msg == "Container app failed liveness probe, will be restarted"),
                "{events:?}"
            );

            // Failing for good: every instance is stopped once, never twice (the worker
            // holds after a failure until it sees the next instance).
            rt.set_exec_result("app", 1, "unhealthy");
            settle(60).await;
            let mut stops: HashMap<String, usize> = HashMap::new();
            for c in rt.calls() {
                if let Call::StopContainer { id, .. } = c {
                    *stops.entry(id).or_default() += 1;
                }
            }
            assert!(stops.len() >= 3, "{stops:?}");
            assert!(stops.values().all(|n| *n == 1), "{stops:?}");
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn readiness_probe_drives_ready_without_restarts() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let spec = "    readinessProbe:\n      exec: {command: [ready]}\n      periodSeconds: 1\n      failureThreshold: 2\n";
            std::fs::write(cfg.pod_manifest_path.join("p.yaml"), pod("web", spec)).unwrap();
            let (clock, rt) = fake_runtime();
            rt.set_exec_result("app", 1, "");
            let mut agent = start_with_events(&rt, clock, &cfg);
            let mut statuses = Statuses(HashMap::new());
            settle(5).await;
            let st = statuses.update(&mut agent)["web-node1"].clone();
            assert_eq!(condition(&st, "Ready"), "False");
            assert_eq!(condition(&st, "ContainersReady"), "False");
            assert!(!st.container_statuses[0].ready);
            assert_eq!(st.container_statuses[0].started, Some(true));

            rt.set_exec_result("app", 0, "");
            settle(3).await;
            let st = statuses.update(&mut agent)["web-node1"].clone();
            assert_eq!(condition(&st, "Ready"), "True", "{st:?}");
            assert_eq!(condition(&st, "ContainersReady"), "True");
            assert!(st.container_statuses[0].ready);

            rt.set_exec_result("app", 1, "");
            settle(4).await;
            let st = statuses.update(&mut agent)["web-node1"].clone();
            assert_eq!(condition(&st, "Ready"), "False");
            assert_eq!(st.container_statuses[0].restart_count, 0, "readiness never restarts");
            assert_eq!(rt.running("app").len(), 1);
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn startup_probe_holds_liveness_until_it_succeeds() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let spec = "    startupProbe:\n      exec: {command: [startup]}\n      periodSeconds: 1\n      failureThreshold: 30\n    livenessProbe:\n      exec: {command: [live]}\n      periodSeconds: 1\n";
            std::fs::write(cfg.pod_manifest_path.join("p.yaml"), pod("web", spec)).unwrap();
            let (clock, rt) = fake_runtime();
            rt.set_exec_result("app", 1, "");
            let mut agent = start_with_events(&rt, clock, &cfg);
            let mut statuses = Statuses(HashMap::new());
            settle(8).await;
            assert!(execs(&rt, "startup") >= 5);
            assert_eq!(execs(&rt, "live"), 0, "liveness ran before startup succeeded");
            let st = statuses.update(&mut agent)["web-node1"].clone();
            assert_eq!(st.container_statuses[0].started, Some(false));

            rt.set_exec_result("app", 0, "");
            settle(5).await;
            let startups = execs(&rt, "startup");
            assert!(execs(&rt, "live") >= 2, "liveness runs once started");
            settle(3).await;
            assert_eq!(execs(&rt, "startup"), startups, "startup stops once it succeeded");
            let st = statuses.update(&mut agent)["web-node1"].clone();
            assert_eq!(st.container_statuses[0].started, Some(true));
            assert!(st.container_statuses[0].ready);
            agent.stop().await;
        })
        .await;
}

/// kubelet: `UpdatePodStatus` runs a readiness probe without a success at once: a container
/// is ready as soon as its startup probe succeeds, not a readiness period later (upstream's
/// "should be ready immediately after startupProbe succeeds"). The readiness worker waits
/// either in its start-up jitter (a period of an hour) or for its next tick (20 s, after
/// several): startup's success wakes it in both.
///
/// Measured on the paused clock, not by counting runs in a window: the static pod's UID
/// hashes the manifest's (temporary, random) path, so the workers' start-up jitter, hence
/// the phase of readiness's own 20 s ticks, differs from run to run, and a regular tick may
/// legitimately follow the woken run within a second (as the kubelet's ticker would).
#[tokio::test(start_paused = true)]
async fn readiness_runs_as_soon_as_startup_succeeds() {
    for period in [3600, 20] {
        LocalSet::new()
            .run_until(async {
                let (_tmp, cfg) = agent_dir("node1");
                let spec = format!(
                    "    startupProbe:\n      exec: {{command: [startup]}}\n      periodSeconds: 1\n      failureThreshold: 300\n    readinessProbe:\n      exec: {{command: [ready]}}\n      periodSeconds: {period}\n"
                );
                std::fs::write(cfg.pod_manifest_path.join("p.yaml"), pod("web", &spec)).unwrap();
                let (clock, rt) = fake_runtime();
                rt.set_exec_result("app", 1, "");
                let mut agent = start_with_events(&rt, clock, &cfg);
                let mut statuses = Statuses(HashMap::new());
                settle(75).await;
                assert_eq!(execs(&rt, "ready"), 0, "{period}: readiness before startup");
                let st = statuses.update(&mut agent)["web-node1"].clone();
                assert_eq!(st.container_statuses[0].started, Some(false));

                rt.set_exec_result("app", 0, "");
                let startups = execs(&rt, "startup");
                until(Duration::from_secs(2), || execs(&rt, "startup") > startups)
                    .await
                    .expect("the startup probe runs every second");
                // The readiness run comes at the instant of startup's success: seen at the
                // same 100 ms step, or the next if the test looked between the two workers.
                // Waiting for its period would take 20 s or an hour of paused time.
                let after = until(Duration::from_secs(period), || execs(&rt, "ready") > 0)
                    .await
                    .unwrap_or_else(|| panic!("{period}: no readiness run within its period"));
                assert!(
                    after <= Duration::from_millis(100),
                    "{period}: readiness ran {after:?} after startup succeeded"
                );
                // Its success makes the container ready (the loop syncs the pod at once).
                let ready = |statuses: &mut Statuses, agent: &mut EventedAgent| {
                    statuses
                        .update(agent)
                        .get("web-node1")
                        .is_some_and(|st| st.container_statuses[0].ready)
                };
                until(Duration::from_secs(1), || ready(&mut statuses, &mut agent))
                    .await
                    .unwrap_or_else(|| panic!("{period}: not ready: {:?}", statuses.0));
                let st = statuses.update(&mut agent)["web-node1"].clone();
                assert_eq!(st.container_statuses[0].started, Some(true));
                assert_eq!(condition(&st, "Ready"), "True", "{period}: {st:?}");
                agent.stop().await;
            })
            .await;
    }
}

#[tokio::test(start_paused = true)]
async fn failing_startup_probe_restarts_the_container() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let spec = "    startupProbe:\n      exec: {command: [startup]}\n      periodSeconds: 1\n      failureThreshold: 3\n";
            std::fs::write(cfg.pod_manifest_path.join("p.yaml"), pod("web", spec)).unwrap();
            let (clock, rt) = fake_runtime();
            rt.set_exec_result("app", 1, "");
            let agent = start_with_events(&rt, clock, &cfg);
            settle(8).await;
            let apps = rt
                .containers()
                .into_iter()
                .filter(|c| c.name == "app")
                .count();
            assert!(apps >= 2, "not restarted: {:?}", rt.containers());
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn pre_stop_runs_before_the_stop_and_shortens_its_grace() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let spec = "    lifecycle:\n      preStop:\n        sleep: {seconds: 5}\n";
            let file = cfg.pod_manifest_path.join("p.yaml");
            std::fs::write(&file, pod("web", spec)).unwrap();
            let spec2 = "    lifecycle:\n      preStop:\n        exec: {command: [drain]}\n";
            let file2 = cfg.pod_manifest_path.join("q.yaml");
            std::fs::write(&file2, pod("exec", spec2)).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start_with_events(&rt, clock, &cfg);
            settle(3).await;
            rt.take_calls();
            std::fs::remove_file(&file).unwrap();
            std::fs::remove_file(&file2).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            // Past the file source's 20 s re-list: the removal is seen even if inotify is
            // slow to deliver on a loaded machine.
            settle(25).await;
            let calls = rt.take_calls();
            // The sleep hook took 5 s of the 20 s grace: StopContainer gets 15 s.
            assert!(
                calls
                    .iter()
                    .any(|c| matches!(c, Call::StopContainer { timeout: 15, .. })),
                "{calls:?}"
            );
            // The exec hook ran in the container before its StopContainer.
            let exec = calls
                .iter()
                .position(|c| matches!(c, Call::ExecSync(_)))
                .expect("preStop exec");
            let Call::ExecSync(id) = &calls[exec] else {
                unreachable!()
            };
            let stop = calls
                .iter()
                .position(|c| matches!(c, Call::StopContainer { id: s, .. } if s == id))
                .expect("stop");
            assert!(exec < stop, "{calls:?}");
            assert_eq!(execs(&rt, "drain"), 1);
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn pre_stop_survives_a_picolet_restart() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let spec = "    lifecycle:\n      preStop:\n        exec: {command: [drain, now]}\n";
            let file = cfg.pod_manifest_path.join("p.yaml");
            std::fs::write(&file, pod("web", spec)).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start_with_events(&rt, clock, &cfg);
            settle(3).await;
            agent.stop().await;
            // While picolet is down the manifest goes; the next picolet kills the orphan
            // from its annotations alone, preStop included.
            std::fs::remove_file(&file).unwrap();
            let agent = start_with_events(&rt, clock, &cfg);
            settle(8).await;
            assert!(rt.running("app").is_empty());
            let cmds = rt.exec_commands();
            assert_eq!(
                cmds,
                vec![(
                    "app".to_string(),
                    vec!["drain".to_string(), "now".to_string()]
                )]
            );
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn failing_post_start_kills_the_container() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let spec = "    lifecycle:\n      postStart:\n        exec: {command: [setup]}\n";
            std::fs::write(cfg.pod_manifest_path.join("p.yaml"), pod("web", spec)).unwrap();
            let (clock, rt) = fake_runtime();
            rt.set_exec_result("app", 3, "no config");
            let mut agent = start_with_events(&rt, clock, &cfg);
            // Every status reported, read every 100 ms (the mailbox keeps the newest): the
            // first failure is PostStartHookError, the later ones wait in CrashLoopBackOff.
            let mut waiting = Vec::new();
            for _ in 0..30 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                for ev in agent.events.try_recv() {
                    if let picolet::PodEvent::Status { status, .. } = ev {
                        waiting.extend(status.container_statuses[0].state.waiting.clone());
                    }
                }
            }
            assert!(
                rt.running("app").is_empty(),
                "killed after postStart failed"
            );
            let events = agent.pod_events("web-node1");
            assert!(
                events.iter().any(|(ty, reason, msg, _)| ty == "Warning"
                    && reason == "FailedPostStartHook"
                    && msg == "PostStartHook failed"),
                "{events:?}"
            );
            let hook = waiting
                .iter()
                .find(|w| w.reason.as_deref() == Some("PostStartHookError"))
                .unwrap_or_else(|| panic!("{waiting:?}"));
            assert!(
                hook.message
                    .as_deref()
                    .unwrap_or_default()
                    .contains("no config"),
                "{hook:?}"
            );

            // Fixed: the next start (after its back-off) runs.
            rt.set_exec_result("app", 0, "");
            settle(25).await;
            assert_eq!(rt.running("app").len(), 1);
            agent.stop().await;
        })
        .await;
}
