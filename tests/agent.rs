//! The whole agent — file source, merge, pod workers, runtime sync, relister, housekeeping —
//! against the in-memory fake runtime, with paused tokio time. Fast and deterministic; the
//! same scenarios run against a real containerd in `tests/e2e.rs`.

use std::rc::Rc;
use std::time::Duration;

mod common;

use common::IMAGE;
use common::agent::{
    Agent, agent_dir, fake_runtime, running_ids, settle, start, start_with_clock, start_with_events,
};
use picolet::{
    ContainerState, DaemonConfig, Runtime as _, SandboxState,
    fakes::{FakeRuntime, RuntimeCall as Call},
};
use tokio::sync::Notify;
use tokio::task::LocalSet;
use tokio_util::sync::CancellationToken;

fn manifest(name: &str, env: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: {IMAGE}
    command: ["sh", "-c", "sleep 1000"]
    env: [{{name: X, value: "{env}"}}]
  - name: side
    image: {IMAGE}
"#
    )
}

/// inotify events come from notify's own thread in real time, while the test's clock is
/// paused and jumps ahead: give the event real time to arrive before virtual time moves.
fn let_inotify_deliver() {
    std::thread::sleep(Duration::from_millis(300));
}

/// Virtual seconds to wait after a manifest is written or removed: past the file source's
/// 20 s re-list (`--file-check-frequency` in `tests/common/agent.rs`), so a test never
/// depends on inotify delivering within the real 300 ms above (on a loaded machine it may
/// not). Paused time makes the wait cost nothing.
const INOTIFY_OR_RELIST: u64 = 25;

/// The wall clock jumps a day back, then a day forward (a board without a real-time clock:
/// NTP's first step, an operator's `date`): no running container is touched, a crash-loop
/// back-off lasts no longer than its delay, container GC goes on.
#[tokio::test(start_paused = true)]
async fn a_clock_jump_disturbs_no_pod_and_holds_no_back_off() {
    const DAY: i64 = 86_400 * 1_000_000_000;
    LocalSet::new()
        .run_until(async {
            let (tmp, cfg) = agent_dir("node1");
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let _ = &tmp;
            let clock = picolet::fakes::JumpClock::new(1_800_000_000_000_000_000);
            let rt = FakeRuntime::new(clock.clone());
            rt.add_image(IMAGE);
            let agent = start_with_clock(&rt, clock.clone(), &cfg);
            settle(3).await;
            assert_eq!(running_ids(&rt).len(), 2);
            let side = rt.running("side");
            let sandbox = rt.sandboxes()[0].id.clone();
            // Three crashes: restarted at once, then after 10 s; the third waits 20 s.
            for wait in [3, 15] {
                let app = rt.running("app")[0].clone();
                rt.exit_container(&app, 1);
                settle(wait).await;
                assert_eq!(rt.running("app").len(), 1, "not restarted after {wait} s");
            }
            let app = rt.running("app")[0].clone();
            rt.exit_container(&app, 1);
            settle(2).await;
            assert!(
                rt.running("app").is_empty(),
                "restarted inside its back-off"
            );

            // Back a day: the container exited "tomorrow"; its 20 s back-off runs from when
            // picolet saw that (with the grid's rounding), not for a day.
            clock.jump(-DAY);
            settle(60).await;
            assert_eq!(
                rt.running("app").len(),
                1,
                "a clock gone back held the back-off"
            );
            assert_eq!(rt.running("side"), side, "a running container was touched");
            // Container GC (a pass a minute) keeps one dead instance of a wanted container,
            // whatever the stamps say.
            settle(70).await;
            let dead_apps = rt
                .containers()
                .into_iter()
                .filter(|c| c.name == "app" && c.state == ContainerState::Exited)
                .count();
            assert_eq!(dead_apps, 1, "container GC held by the clock");

            // Forward a day (back to the true time): nothing is restarted or removed.
            let before = running_ids(&rt);
            clock.jump(DAY);
            settle(120).await;
            assert_eq!(
                running_ids(&rt),
                before,
                "a clock jump restarted a container"
            );
            let ready: Vec<_> = rt
                .sandboxes()
                .into_iter()
                .filter(|s| s.state == SandboxState::Ready)
                .map(|s| s.id)
                .collect();
            assert_eq!(ready, vec![sandbox]);
            agent.stop().await;
        })
        .await;
}

/// A board without an RTC reboots with its clock behind the last boot's: the runtime still
/// holds the pod's dead sandbox and containers, stamped "later" than anything made now. The
/// pod gets one new sandbox and keeps it — not one per sync because the dead one looks newer
/// (found on the emulated board) — and its new instances take attempts after the old ones'.
#[tokio::test(start_paused = true)]
async fn a_reboot_with_the_clock_behind_makes_one_sandbox() {
    const DAY: i64 = 86_400 * 1_000_000_000;
    LocalSet::new()
        .run_until(async {
            let (tmp, cfg) = agent_dir("node1");
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let _ = &tmp;
            let clock = picolet::fakes::JumpClock::new(1_800_000_000_000_000_000);
            let rt = FakeRuntime::new(clock.clone());
            rt.add_image(IMAGE);
            let agent = start_with_clock(&rt, clock.clone(), &cfg);
            settle(3).await;
            assert_eq!(running_ids(&rt).len(), 2);
            agent.stop().await;

            // The power goes: every process dies, the sandbox is down; the next boot's clock
            // is a day behind.
            for id in running_ids(&rt) {
                rt.exit_container(&id, 137);
            }
            let old = rt.sandboxes();
            assert_eq!(old.len(), 1);
            rt.set_sandbox_state(&old[0].id, SandboxState::NotReady);
            clock.jump(-DAY);

            let agent = start_with_clock(&rt, clock.clone(), &cfg);
            settle(180).await;
            let sandboxes = rt.sandboxes();
            assert_eq!(sandboxes.len(), 2, "a sandbox per sync: {sandboxes:?}");
            let new = sandboxes.iter().find(|s| s.id != old[0].id).unwrap();
            assert_eq!(new.state, SandboxState::Ready);
            assert!(
                new.attempt > old[0].attempt && new.created_at < old[0].created_at,
                "{new:?} {old:?}"
            );
            let running: Vec<_> = rt
                .containers()
                .into_iter()
                .filter(|c| c.state == ContainerState::Running)
                .collect();
            assert_eq!(running.len(), 2, "{running:?}");
            for c in &running {
                assert_eq!(c.sandbox_id, new.id);
                assert_eq!(c.attempt, 1, "{} reused an attempt", c.name);
            }
            let before = running_ids(&rt);
            settle(120).await;
            assert_eq!(running_ids(&rt), before, "the pod did not settle");
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn start_crash_restart_adopt_edit_delete() {
    LocalSet::new()
        .run_until(async {
            let (tmp, cfg) = agent_dir("node1");
            std::fs::write(tmp.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
            let file = cfg.pod_manifest_path.join("web.yaml");
            std::fs::write(&file, manifest("web", "1")).unwrap();

            let (clock, rt) = fake_runtime();

            // 1. the pod starts: one sandbox, two running containers, named per kubelet.
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            let sandboxes = rt.sandboxes();
            assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
            assert_eq!(sandboxes[0].name, "web-node1");
            assert_eq!(running_ids(&rt).len(), 2);
            assert_eq!(rt.running("app").len(), 1);

            // 2. a container exits on its own: noticed by the relister, restarted at once
            //    (first restart has no back-off), attempt 1.
            let app = rt.running("app")[0].clone();
            rt.exit_container(&app, 1);
            settle(3).await;
            let apps: Vec<_> = rt
                .containers()
                .into_iter()
                .filter(|c| c.name == "app")
                .collect();
            assert_eq!(apps.len(), 2, "{apps:?}");
            assert_eq!(apps[1].attempt, 1);
            assert_eq!(apps[1].state, ContainerState::Running);

            // 3. it crashes again: back-off 10 s before the next start.
            let app = rt.running("app")[0].clone();
            rt.exit_container(&app, 1);
            settle(5).await;
            assert!(
                rt.running("app").is_empty(),
                "restarted inside its back-off"
            );
            settle(8).await;
            assert_eq!(
                rt.running("app").len(),
                1,
                "not restarted after its back-off"
            );

            // 4. picolet restarts (as after kill -9): nothing is created, stopped or removed.
            agent.stop().await;
            let before = running_ids(&rt);
            rt.take_calls();
            let agent = start(&rt, clock, &cfg);
            settle(5).await;
            let mutations: Vec<Call> = rt
                .take_calls()
                .into_iter()
                .filter(Call::is_mutation)
                .collect();
            assert!(
                mutations.is_empty(),
                "adoption touched the runtime: {mutations:?}"
            );
            assert_eq!(running_ids(&rt), before);

            // 5. edit the manifest: the old pod stops completely before the new sandbox exists
            //    (kubelet: a new UID with the same full name waits for the old one).
            let old_sandbox = rt.sandboxes()[0].id.clone();
            rt.take_calls();
            std::fs::write(&file, manifest("web", "2")).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            let calls = rt.take_calls();
            let pos = |f: &dyn Fn(&Call) -> bool| calls.iter().position(f);
            let stop_old = calls
                .iter()
                .rposition(|c| matches!(c, Call::StopPodSandbox(id) if *id == old_sandbox))
                .unwrap_or_else(|| panic!("old sandbox {old_sandbox} not stopped: {calls:?}"));
            let run_new = pos(&|c| matches!(c, Call::RunPodSandbox { .. })).expect("new sandbox");
            assert!(stop_old < run_new, "{calls:?}");
            let sandboxes: Vec<_> = rt
                .sandboxes()
                .into_iter()
                .filter(|s| s.state == SandboxState::Ready)
                .collect();
            assert_eq!(sandboxes.len(), 1);
            assert_ne!(sandboxes[0].id, old_sandbox);
            assert_eq!(running_ids(&rt).len(), 2);

            // 6. delete the manifest: containers stopped with the pod's grace, then the sandbox.
            rt.take_calls();
            std::fs::remove_file(&file).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            assert!(running_ids(&rt).is_empty());
            let calls = rt.take_calls();
            assert!(
                calls
                    .iter()
                    .any(|c| matches!(c, Call::StopContainer { timeout: 5, .. })),
                "{calls:?}"
            );
            assert!(
                rt.sandboxes()
                    .iter()
                    .all(|s| s.state == SandboxState::NotReady)
            );
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn orphans_are_killed_only_after_sources_are_ready() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let file = cfg.pod_manifest_path.join("web.yaml");
            std::fs::write(&file, manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            assert_eq!(running_ids(&rt).len(), 2);
            agent.stop().await;

            // The manifest goes away while picolet is down: the next picolet kills the pod.
            std::fs::remove_file(&file).unwrap();
            let agent = start(&rt, clock, &cfg);
            settle(6).await;
            assert!(running_ids(&rt).is_empty(), "orphan still running");
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn edit_while_down_never_runs_two_copies() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let file = cfg.pod_manifest_path.join("web.yaml");
            std::fs::write(&file, manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            let old_sandbox = rt.sandboxes()[0].id.clone();
            agent.stop().await;

            // Edited while picolet is down: a new UID with the same full name. The kubelet
            // would start it at once; picolet first stops the old one.
            std::fs::write(&file, manifest("web", "2")).unwrap();
            rt.take_calls();
            let agent = start(&rt, clock, &cfg);
            settle(8).await;
            let calls = rt.take_calls();
            let stop_old = calls
                .iter()
                .rposition(|c| matches!(c, Call::StopPodSandbox(id) if *id == old_sandbox))
                .unwrap_or_else(|| panic!("old sandbox not stopped: {calls:?}"));
            let run_new = calls
                .iter()
                .position(|c| matches!(c, Call::RunPodSandbox { .. }))
                .unwrap_or_else(|| panic!("new sandbox not created: {calls:?}"));
            assert!(stop_old < run_new, "{calls:?}");
            assert_eq!(running_ids(&rt).len(), 2);
            agent.stop().await;
        })
        .await;
}

fn job_manifest(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  containers:
  - name: job
    image: {IMAGE}
    command: ["sh", "-c", "echo done"]
"#
    )
}

/// Container GC (kubelet: containerGC every minute, MinAge 0, MaxPerPodContainer 1): a
/// finished `restartPolicy: Never` pod keeps its dead container while its manifest is
/// there, so a restarted picolet does not run it again; once the manifest is gone, the next
/// pass removes container, sandbox and log directory.
#[tokio::test(start_paused = true)]
async fn container_gc_keeps_finished_pods_evidence_until_unwanted() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let file = cfg.pod_manifest_path.join("job.yaml");
            std::fs::write(&file, job_manifest("job")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            let job = rt.running("job");
            assert_eq!(job.len(), 1);
            rt.exit_container(&job[0], 0);
            // Succeeded → terminated → finished; then two GC periods.
            settle(125).await;
            let containers = rt.containers();
            assert_eq!(
                containers.len(),
                1,
                "the finished container is kept: {containers:?}"
            );
            assert_eq!(containers[0].state, ContainerState::Exited);
            assert_eq!(rt.sandboxes().len(), 1, "and its sandbox");
            agent.stop().await;

            // A restart: the completed pod is not run again.
            rt.take_calls();
            let agent = start(&rt, clock, &cfg);
            settle(10).await;
            let mutations: Vec<Call> = rt
                .take_calls()
                .into_iter()
                .filter(|c| matches!(c, Call::RunPodSandbox { .. } | Call::CreateContainer { .. }))
                .collect();
            assert!(
                mutations.is_empty(),
                "the finished pod ran again: {mutations:?}"
            );

            // The manifest goes: within one GC period everything of the pod is removed.
            std::fs::remove_file(&file).unwrap();
            let_inotify_deliver();
            settle(65).await;
            assert!(rt.containers().is_empty(), "{:?}", rt.containers());
            assert!(rt.sandboxes().is_empty(), "{:?}", rt.sandboxes());
            // (the pod log directory goes after a period of real idleness: gc.rs and
            // sync_tests.rs test that part)
            agent.stop().await;
        })
        .await;
}

/// `--minimum-container-ttl-duration`: dead containers younger than it stay, even those of
/// a pod no source wants any more.
#[tokio::test(start_paused = true)]
async fn container_gc_honours_the_minimum_ttl() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, mut cfg) = agent_dir("node1");
            cfg.agent.gc_policy.min_age = Duration::from_secs(600);
            let file = cfg.pod_manifest_path.join("web.yaml");
            std::fs::write(&file, manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            assert_eq!(running_ids(&rt).len(), 2);
            std::fs::remove_file(&file).unwrap();
            let_inotify_deliver();
            settle(125).await;
            assert!(running_ids(&rt).is_empty());
            assert_eq!(rt.containers().len(), 2, "removed before the TTL");
            settle(600).await;
            assert!(rt.containers().is_empty(), "{:?}", rt.containers());
            assert!(rt.sandboxes().is_empty(), "{:?}", rt.sandboxes());
            agent.stop().await;
        })
        .await;
}

/// A manifest removed and put back with the same content is the same UID, but a new pod:
/// its containers start at restart count 0 (the old ones, kept here by a long
/// `--minimum-container-ttl-duration`, are removed first), as its age starts over.
#[tokio::test(start_paused = true)]
async fn a_manifest_put_back_is_a_new_pod_with_no_old_restarts() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, mut cfg) = agent_dir("node1");
            cfg.agent.gc_policy.min_age = Duration::from_secs(3600);
            let file = cfg.pod_manifest_path.join("web.yaml");
            std::fs::write(&file, manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            let app = rt.running("app")[0].clone();
            rt.exit_container(&app, 1);
            settle(3).await;
            let attempts = |name: &str| -> Vec<u32> {
                rt.containers()
                    .into_iter()
                    .filter(|c| c.name == name && c.state == ContainerState::Running)
                    .map(|c| c.attempt)
                    .collect()
            };
            assert_eq!(attempts("app"), vec![1]);

            std::fs::remove_file(&file).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            assert!(running_ids(&rt).is_empty());
            assert_eq!(rt.containers().len(), 3, "kept by the TTL");

            rt.take_calls();
            std::fs::write(&file, manifest("web", "1")).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            assert_eq!(attempts("app"), vec![0], "{:?}", rt.containers());
            assert_eq!(attempts("side"), vec![0]);
            assert_eq!(rt.containers().len(), 2, "{:?}", rt.containers());
            let ready: Vec<_> = rt
                .sandboxes()
                .into_iter()
                .filter(|s| s.state == SandboxState::Ready)
                .collect();
            assert_eq!(rt.sandboxes().len(), 1, "{:?}", rt.sandboxes());
            assert_eq!(ready[0].attempt, 0);

            // A picolet restart is not a new pod: nothing is removed, counts go on.
            agent.stop().await;
            let app = rt.running("app")[0].clone();
            rt.exit_container(&app, 1);
            let agent = start(&rt, clock, &cfg);
            settle(5).await;
            assert_eq!(attempts("app"), vec![1], "{:?}", rt.containers());
            agent.stop().await;
        })
        .await;
}

/// Counts of calls of one kind.
fn count(calls: &[Call], f: impl Fn(&Call) -> bool) -> usize {
    calls.iter().filter(|c| f(c)).count()
}

/// `--sync-frequency` (kubelet: the periodic resync of a running pod). A resync reuses the
/// pod's cached runtime view only when a relist since confirmed it; with the relister hung
/// each resync reads the pod's sandbox status, which the relister never does.
#[tokio::test(start_paused = true)]
async fn sync_frequency_sets_the_periodic_resync() {
    for (every, want_resyncs) in [
        (Duration::from_secs(5), true),
        (Duration::from_secs(60), false),
    ] {
        LocalSet::new()
            .run_until(async {
                let (_tmp, mut cfg) = agent_dir("node1");
                cfg.agent.sync_frequency = every;
                std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1"))
                    .unwrap();
                let (clock, rt) = fake_runtime();
                let agent = start(&rt, clock, &cfg);
                settle(3).await;
                assert_eq!(running_ids(&rt).len(), 2);
                rt.set_unfiltered_list_delay(Duration::from_secs(3600));
                settle(2).await;
                rt.take_calls();
                settle(20).await;
                let resyncs = count(&rt.take_calls(), |c| matches!(c, Call::PodSandboxStatus(_)));
                assert_eq!(
                    resyncs > 0,
                    want_resyncs,
                    "every {every:?}: {resyncs} resync reads"
                );
                agent.stop().await;
            })
            .await;
    }
}

/// kubelet: the PLEG's pod cache — at idle a resync reuses the runtime view its last sync
/// ended with (the relister confirms every second that nothing changed): no status call at
/// all; a container that exits is still noticed and restarted.
#[tokio::test(start_paused = true)]
async fn idle_resyncs_cost_no_status_calls() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, mut cfg) = agent_dir("node1");
            cfg.agent.sync_frequency = Duration::from_secs(5);
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(5).await;
            assert_eq!(running_ids(&rt).len(), 2);
            rt.take_calls();
            settle(30).await;
            let calls = rt.take_calls();
            let status_reads = count(&calls, |c| {
                matches!(c, Call::PodSandboxStatus(_) | Call::ContainerStatus(_))
            });
            assert_eq!(status_reads, 0, "{calls:?}");
            let app = rt.running("app")[0].clone();
            rt.exit_container(&app, 1);
            settle(3).await;
            assert_eq!(rt.running("app").len(), 1);
            assert_ne!(rt.running("app")[0], app);
            agent.stop().await;
        })
        .await;
}

/// kubelet: the PLEG's cache is stamped with when a relist observed the runtime. A relist
/// can begin before a sync reads a pod and list after a change that follows that read: its
/// view is newer than the sync's, so the change must still invalidate the sync's cached
/// view. Here the relist's lists take 30 s; the pod starts and its container exits while
/// it waits; the exit must be noticed when the relist lands, and the container restarted.
#[tokio::test(start_paused = true)]
async fn a_relist_that_began_before_a_sync_still_invalidates_its_view() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            rt.set_unfiltered_list_delay(Duration::from_secs(30));
            let relists = rt.relists();
            while rt.relists() == relists {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Only the relist under way waits (its sandbox list); its container list and
            // the relists after it answer at once.
            rt.set_unfiltered_list_delay(Duration::ZERO);
            let began = tokio::time::Instant::now();
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let_inotify_deliver();
            while rt.running("app").is_empty() {
                assert!(
                    began.elapsed() < Duration::from_secs(25),
                    "web never started"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let app = rt.running("app")[0].clone();
            assert!(rt.exit_container(&app, 1));
            settle(35).await;
            assert!(
                began.elapsed() > Duration::from_secs(30),
                "the relist has landed"
            );
            let now = rt.running("app");
            assert_eq!(now.len(), 1, "app restarted after the exit: {now:?}");
            assert_ne!(now[0], app);
            agent.stop().await;
        })
        .await;
}

/// Waits (virtual time) until `done`, failing after `secs`.
async fn until(what: &str, secs: u64, done: impl Fn() -> bool) {
    let began = tokio::time::Instant::now();
    while !done() {
        assert!(began.elapsed() < Duration::from_secs(secs), "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An agent running pod "base", whose processes picolet cannot watch (so the relister
/// lists every second); base's `app` container.
async fn start_with_base() -> (tempfile::TempDir, DaemonConfig, FakeRuntime, Agent, String) {
    let (tmp, cfg) = agent_dir("node1");
    std::fs::write(
        cfg.pod_manifest_path.join("base.yaml"),
        manifest("base", "1"),
    )
    .unwrap();
    let (clock, rt) = fake_runtime();
    let agent = start(&rt, clock, &cfg);
    until("base started", 30, || running_ids(&rt).len() == 2).await;
    settle(3).await;
    let base_app = rt.running("app")[0].clone();
    (tmp, cfg, rt, agent, base_app)
}

/// web's `app` container: the one that is not base's.
fn web_app(rt: &FakeRuntime, base_app: &str) -> String {
    let apps = rt.running("app");
    apps.into_iter()
        .find(|id| id != base_app)
        .expect("web's app runs")
}

/// Waits until a new `app` container runs in place of `app`, beside base's.
async fn until_replaced(rt: &FakeRuntime, app: &str, secs: u64) {
    until(&format!("{app} replaced"), secs, || {
        let now = rt.running("app");
        now.len() == 2 && !now.iter().any(|id| id == app)
    })
    .await;
}

/// A relist that lists a pod halfway through its first sync (the sandbox there, a container
/// still being started: the burst of a mass start on a slow runtime) is no change to read
/// the pod again for: the pod's sandbox status is read once, after RunPodSandbox.
#[tokio::test(start_paused = true)]
async fn a_relist_halfway_through_a_start_reads_nothing_again() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg, rt, agent, base_app) = start_with_base().await;
            rt.set_start_delay(Duration::from_secs(3));
            rt.take_calls();
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let_inotify_deliver();
            until("web started", 30, || running_ids(&rt).len() == 4).await;
            settle(5).await;
            let calls = rt.take_calls();
            let relists = count(&calls, |c| matches!(c, Call::ListPodSandboxes));
            assert!(
                relists >= 6,
                "the relister listed during the start: {calls:?}"
            );
            let sandbox_reads = count(&calls, |c| matches!(c, Call::PodSandboxStatus(_)));
            assert_eq!(sandbox_reads, 1, "{calls:?}");
            // A container that exits afterwards is still noticed.
            let app = web_app(&rt, &base_app);
            rt.exit_container(&app, 1);
            until_replaced(&rt, &app, 10).await;
            agent.stop().await;
        })
        .await;
}

/// The other half: a relist that began during the sync and listed after it, when a
/// container had been removed behind picolet's back, looks like an earlier stage of the
/// pod (it cannot tell "removed" from "not created yet"). The next relist compares the pod
/// again and the container is created anew.
#[tokio::test(start_paused = true)]
async fn a_container_removed_while_a_relist_lists_is_recreated() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg, rt, agent, base_app) = start_with_base().await;
            rt.set_start_delay(Duration::from_secs(2));
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let_inotify_deliver();
            until("web's sandbox", 30, || rt.sandboxes().len() == 2).await;
            // The next relist begins within a second, during web's sync (two starts of 2 s
            // each), and lists 6 s later, after it.
            rt.set_unfiltered_list_delay(Duration::from_secs(6));
            let relists = rt.relists();
            until("a relist began", 2, || rt.relists() > relists).await;
            rt.set_unfiltered_list_delay(Duration::ZERO);
            until("web started", 5, || running_ids(&rt).len() == 4).await;
            let app = web_app(&rt, &base_app);
            rt.stop_container(&app, 0).await.unwrap();
            rt.remove_container(&app).await.unwrap();
            until_replaced(&rt, &app, 30).await;
            agent.stop().await;
        })
        .await;
}

/// `--file-check-frequency` (kubelet: the full re-list of the manifest directory): a change
/// that inotify cannot see — the target of a symlink in another directory — is picked up by
/// the re-list, at the configured period.
#[tokio::test(start_paused = true)]
async fn file_check_frequency_sets_the_relist_period() {
    for (every, want_seen) in [
        (Duration::from_secs(5), true),
        (Duration::from_secs(20), false),
    ] {
        LocalSet::new()
            .run_until(async {
                let (tmp, mut cfg) = agent_dir("node1");
                cfg.file_check_frequency = every;
                let elsewhere = tmp.path().join("elsewhere");
                std::fs::create_dir_all(&elsewhere).unwrap();
                let target = elsewhere.join("web.yaml");
                std::fs::write(&target, manifest("web", "1")).unwrap();
                std::os::unix::fs::symlink(&target, cfg.pod_manifest_path.join("web.yaml"))
                    .unwrap();
                let (clock, rt) = fake_runtime();
                let agent = start(&rt, clock, &cfg);
                settle(2).await;
                assert_eq!(running_ids(&rt).len(), 2);
                rt.take_calls();
                std::fs::write(&target, manifest("web", "2")).unwrap();
                settle(9).await;
                let new_sandboxes = count(&rt.take_calls(), |c| {
                    matches!(c, Call::RunPodSandbox { .. })
                });
                assert_eq!(new_sandboxes > 0, want_seen, "re-list every {every:?}");
                agent.stop().await;
            })
            .await;
    }
}

/// A mass delete bounds the terminations' bookkeeping (at most 32 status reads and 32
/// cleanups at once) but never a kill: 40 pods whose containers ignore SIGTERM (grace 5 s)
/// are deleted together, and every container's StopContainer is in flight before any grace
/// period ends; all are gone after it.
#[tokio::test(start_paused = true)]
async fn a_mass_delete_kills_every_pod_at_once() {
    const PODS: usize = 40; // more than agent::TERMINATION_STEPS_IN_FLIGHT
    const { assert!(PODS > picolet::TERMINATION_STEPS_IN_FLIGHT) };
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            // One file of 40 documents: its removal is one change of the source, whatever
            // the real time its scans take (on the blocking pool) against the paused clock.
            let all: Vec<String> = (0..PODS).map(|i| manifest(&format!("p{i}"), "1")).collect();
            let file = cfg.pod_manifest_path.join("pods.yaml");
            std::fs::write(&file, all.join("\n---\n")).unwrap();
            let (clock, rt) = fake_runtime();
            rt.set_stop_delay(Duration::from_secs(1000)); // ignores SIGTERM
            let agent = start(&rt, clock, &cfg);
            settle(10).await;
            assert_eq!(running_ids(&rt).len(), 2 * PODS);
            rt.take_calls();

            std::fs::remove_file(&file).unwrap();
            // The removal is seen by inotify (real time, from notify's thread) or at the
            // latest by the 20 s re-list: wait in virtual time for the first kill, so that
            // a late inotify event on a loaded machine cannot eat the grace period (CI once
            // counted 0 stops 3 virtual seconds after the removal).
            let_inotify_deliver();
            let mut calls = Vec::new();
            for _ in 0..INOTIFY_OR_RELIST * 10 {
                calls.extend(rt.take_calls());
                if calls
                    .iter()
                    .any(|c| matches!(c, Call::StopContainer { .. }))
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // Well inside the 5 s grace from the first kill: every container has been asked
            // to stop.
            settle(3).await;
            calls.extend(rt.take_calls());
            let stops = calls
                .into_iter()
                .filter(|c| matches!(c, Call::StopContainer { timeout: 5, .. }))
                .count();
            assert_eq!(stops, 2 * PODS, "every kill in flight at once");
            assert_eq!(
                running_ids(&rt).len(),
                2 * PODS,
                "none before its grace ended"
            );
            settle(5).await;
            assert!(running_ids(&rt).is_empty(), "{:?}", running_ids(&rt));
            agent.stop().await;
        })
        .await;
}

/// An API pod (source "api") the test hands the agent directly, as the API source would.
fn api_pod(grace: i64, deletion_grace: Option<i64>) -> picolet::api::Pod {
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: slow\n  namespace: default\n  uid: uid-slow\n  \
         annotations: {{kubernetes.io/config.source: api}}\nspec:\n  nodeName: node1\n  \
         terminationGracePeriodSeconds: {grace}\n  containers:\n  - name: app\n    image: {IMAGE}\n"
    );
    let mut pod = picolet::parse_manifest(yaml.as_bytes()).expect("pod");
    picolet::apply_defaults(&mut pod);
    if let Some(g) = deletion_grace {
        pod.metadata.deletion_timestamp = Some("2027-01-15T08:00:00Z".into());
        pod.metadata.deletion_grace_period_seconds = Some(g);
    }
    pod
}

/// Grace only shrinks, and a shrink takes effect now (kubelet: podWorkers cancels the
/// running SyncTerminatingPod): a pod stopping with 300 s grace whose container ignores
/// SIGTERM is deleted again with 2 s — it is gone within seconds, not after 300 s.
#[tokio::test(start_paused = true)]
async fn a_shorter_grace_period_cuts_a_termination_short() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let (clock, rt) = fake_runtime();
            rt.set_stop_delay(Duration::from_secs(1000)); // ignores SIGTERM
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            let ext = picolet::Extensions {
                sources: vec!["api"],
                source_channel: Some((tx.clone(), rx)),
                ..Default::default()
            };
            let shutdown = CancellationToken::new();
            let handle = tokio::task::spawn_local(picolet::run_daemon_with_extensions(
                rt.clone(),
                clock,
                cfg.clone(),
                ext,
                shutdown.clone(),
                Rc::new(Notify::new()),
            ));
            let send = |pod| {
                let tx = tx.clone();
                async move {
                    tx.send(picolet::SourceUpdate {
                        source: "api",
                        pods: vec![std::sync::Arc::new(pod)],
                        objects: None,
                    })
                    .await
                    .unwrap();
                }
            };
            send(api_pod(300, None)).await;
            settle(3).await;
            assert_eq!(running_ids(&rt).len(), 1);

            send(api_pod(300, Some(300))).await;
            settle(10).await;
            assert_eq!(running_ids(&rt).len(), 1, "still in its 300 s grace");
            rt.take_calls();

            send(api_pod(300, Some(2))).await;
            settle(5).await;
            assert!(
                running_ids(&rt).is_empty(),
                "the 2 s grace was not applied at once"
            );
            let calls = rt.take_calls();
            assert!(
                calls
                    .iter()
                    .any(|c| matches!(c, Call::StopContainer { timeout: 2, .. })),
                "{calls:?}"
            );
            shutdown.cancel();
            handle.await.unwrap();
        })
        .await;
}

/// The loop only ever waits on its `select!`: with the runtime's full lists (the relister's)
/// hanging, a new manifest still starts its pod (per-pod calls answer), and shutdown is
/// immediate.
#[tokio::test(start_paused = true)]
async fn a_hung_relist_stalls_nothing_else() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            assert_eq!(running_ids(&rt).len(), 2);

            rt.set_unfiltered_list_delay(Duration::from_secs(100_000));
            settle(3).await; // a relist is now stuck in the runtime
            std::fs::write(cfg.pod_manifest_path.join("db.yaml"), manifest("db", "1")).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            assert_eq!(
                running_ids(&rt).len(),
                4,
                "the new pod waited for the hung relist"
            );

            let t = tokio::time::Instant::now();
            agent.stop().await;
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "shutdown waited {:?}",
                t.elapsed()
            );
        })
        .await;
}

/// `status.hostIP`/`hostIPs` is the node's IP on every pod, and a host-network pod's podIP
/// is the node's IP too (kubelet: `generateAPIPodStatus`).
#[tokio::test(start_paused = true)]
async fn statuses_carry_the_node_ip() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, mut cfg) = agent_dir("node1");
            cfg.agent.node_ip = Some("192.0.2.7".parse().unwrap());
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let host = manifest("host", "1").replace("spec:\n", "spec:\n  hostNetwork: true\n");
            std::fs::write(cfg.pod_manifest_path.join("host.yaml"), host).unwrap();
            let (clock, rt) = fake_runtime();
            rt.set_sandbox_ip("10.88.0.9");
            let mut agent = start_with_events(&rt, clock, &cfg);
            settle(3).await;
            let last = agent.statuses();
            for name in ["web-node1", "host-node1"] {
                let st = &last[name];
                assert_eq!(st.host_ip.as_deref(), Some("192.0.2.7"), "{name}");
                assert_eq!(st.host_ips.len(), 1, "{name}");
                assert_eq!(st.host_ips[0].ip, "192.0.2.7", "{name}");
            }
            assert_eq!(last["web-node1"].pod_ip.as_deref(), Some("10.88.0.9"));
            assert_eq!(last["host-node1"].pod_ip.as_deref(), Some("192.0.2.7"));
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn refused_and_unmatched_pods_fail_without_starting_anything() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, mut cfg) = agent_dir("node1");
            cfg.agent.node_labels.insert("zone".into(), "garage".into());
            let dir = &cfg.pod_manifest_path;
            // Warned (a probe picolet does not run yet) and a matching selector: runs.
            let web = manifest("web", "1").replace(
                "spec:\n",
                "spec:\n  nodeSelector: {zone: garage, kubernetes.io/os: linux}\n",
            );
            std::fs::write(dir.join("web.yaml"), web).unwrap();
            let users = manifest("users", "1").replace(
                "    command:",
                "    volumeDevices: [{name: v, devicePath: /dev/xvda}]\n    command:",
            );
            std::fs::write(dir.join("users.yaml"), users).unwrap();
            // A volume kind picolet does not implement: the same policy (refused at
            // admission, the volume named), not a broken file.
            let claim = manifest("claim", "1").replace(
                "spec:\n",
                "spec:\n  volumes: [{name: data, persistentVolumeClaim: {claimName: pvc}}]\n",
            );
            std::fs::write(dir.join("claim.yaml"), claim).unwrap();
            let sel =
                manifest("sel", "1").replace("spec:\n", "spec:\n  nodeSelector: {disk: ssd}\n");
            std::fs::write(dir.join("sel.yaml"), sel).unwrap();
            // Two pods asking for the same host port: the second one admitted fails.
            for name in ["porta", "portb"] {
                let m = manifest(name, "1").replace(
                    "    command:",
                    "    ports: [{containerPort: 80, hostPort: 8080}]\n    command:",
                );
                std::fs::write(dir.join(format!("{name}.yaml")), m).unwrap();
            }
            let (clock, rt) = fake_runtime();
            let mut agent = start_with_events(&rt, clock, &cfg);
            settle(5).await;
            let last = agent.statuses();
            let users = &last["users-node1"];
            assert_eq!(users.phase, Some(picolet::api::PodPhase::Failed));
            assert_eq!(users.reason.as_deref(), Some("UnsupportedField"));
            let msg = users.message.as_deref().unwrap_or_default();
            assert!(msg.contains("spec.containers[0].volumeDevices"), "{msg}");
            let claim = &last["claim-node1"];
            assert_eq!(claim.phase, Some(picolet::api::PodPhase::Failed));
            assert_eq!(claim.reason.as_deref(), Some("UnsupportedField"));
            let msg = claim.message.as_deref().unwrap_or_default();
            assert!(
                msg.contains("spec.volumes[0].persistentVolumeClaim of volume \"data\""),
                "{msg}"
            );
            let sel = &last["sel-node1"];
            assert_eq!(sel.phase, Some(picolet::api::PodPhase::Failed));
            assert_eq!(sel.reason.as_deref(), Some("NodeAffinity"));
            // kubelet: rejectPod — a Warning with the rejection's reason and message.
            let rejected = agent.pod_events("sel-node1");
            assert_eq!(rejected.len(), 1, "{rejected:?}");
            assert_eq!(
                (rejected[0].0.as_str(), rejected[0].1.as_str()),
                ("Warning", "NodeAffinity")
            );
            assert!(rejected[0].2.contains("disk=ssd"), "{rejected:?}");
            assert!(
                sel.message
                    .as_deref()
                    .unwrap_or_default()
                    .contains("disk=ssd")
            );
            let ports: Vec<Option<&str>> = ["porta-node1", "portb-node1"]
                .iter()
                .map(|n| last[*n].reason.as_deref())
                .collect();
            assert!(
                ports == vec![None, Some("NodePorts")] || ports == vec![Some("NodePorts"), None],
                "exactly one of the two gets the port: {ports:?}"
            );
            // Only the admitted pods have a sandbox.
            let mut sandboxes: Vec<String> = rt.sandboxes().into_iter().map(|s| s.name).collect();
            sandboxes.sort();
            assert_eq!(sandboxes.len(), 2, "{sandboxes:?}");
            assert!(
                sandboxes.contains(&"web-node1".to_string()),
                "{sandboxes:?}"
            );
            assert_eq!(
                last["web-node1"].phase,
                Some(picolet::api::PodPhase::Running)
            );
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn active_deadline_fails_and_stops_the_pod() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let job =
                manifest("job", "1").replace("spec:\n", "spec:\n  activeDeadlineSeconds: 30\n");
            std::fs::write(cfg.pod_manifest_path.join("job.yaml"), job).unwrap();
            let (clock, rt) = fake_runtime();
            let mut agent = start_with_events(&rt, clock, &cfg);
            settle(5).await;
            assert_eq!(running_ids(&rt).len(), 2, "running before the deadline");
            // Well past the deadline (30 s from the start) but before the 60 s resync: the
            // deadline itself brings the sync.
            settle(35).await;
            assert!(running_ids(&rt).is_empty(), "stopped at the deadline");
            let st = agent
                .statuses()
                .remove("job-node1")
                .expect("a status for job-node1");
            assert_eq!(st.phase, Some(picolet::api::PodPhase::Failed));
            assert_eq!(st.reason.as_deref(), Some("DeadlineExceeded"));
            // It stays stopped: not restarted by housekeeping or the resync.
            settle(120).await;
            assert!(running_ids(&rt).is_empty(), "not started again");
            assert_eq!(rt.sandboxes().len(), 1, "no new sandbox");
            agent.stop().await;
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_started_pod_records_its_events_and_an_idle_node_none() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start_with_events(&rt, clock, &cfg);
            settle(5).await;
            assert_eq!(running_ids(&rt).len(), 2);
            let reasons: Vec<String> = agent
                .pod_events("web-node1")
                .into_iter()
                .map(|(_, reason, _, _)| reason)
                .collect();
            assert_eq!(
                reasons,
                [
                    "Pulled", "Created", "Started", "Pulled", "Created", "Started"
                ],
                "image present, then created and started, per container"
            );
            // Idle for 10 minutes of relists, housekeeping and resyncs: nothing recorded.
            let rv = agent.recorder.resource_version();
            settle(600).await;
            assert_eq!(
                agent.recorder.resource_version(),
                rv,
                "{:?}",
                agent.recorder.list()
            );
            agent.stop().await;
        })
        .await;
}

/// A broken edit keeps the running pod (picolet's deliberate difference) and says so where
/// kubectl looks: one `FailedValidation` warning on that pod naming the file and the field,
/// once per broken version (the 20 s re-lists add nothing); a broken document of a
/// multi-document file likewise; a Secret's value never in it.
#[tokio::test(start_paused = true)]
async fn a_broken_edit_is_an_event_on_the_pod_it_keeps() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let file = cfg.pod_manifest_path.join("web.yaml");
            std::fs::write(&file, manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start_with_events(&rt, clock, &cfg);
            settle(5).await;
            let before = running_ids(&rt);
            assert_eq!(before.len(), 2);

            std::fs::write(&file, manifest("web", "1").replace("  - name: side\n", "  - name: 7\n  - name: side\n"))
                .unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST * 3).await;
            assert_eq!(running_ids(&rt), before, "the running pod was kept");
            let warnings: Vec<_> = agent
                .pod_events("web-node1")
                .into_iter()
                .filter(|(t, reason, _, _)| t == "Warning" && reason == "FailedValidation")
                .collect();
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            let (_, _, message, count) = &warnings[0];
            assert_eq!(*count, 1, "once per broken version, not per re-list");
            assert!(message.contains(&file.display().to_string()), "{message}");
            assert!(message.contains("spec.containers[1].name"), "{message}");
            assert!(message.contains("keeps running as it was"), "{message}");

            // A second file: a pod and a Secret; the Secret breaks with a value in it.
            let two = cfg.pod_manifest_path.join("two.yaml");
            let secret = |v: &str| {
                format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\nstringData: {{pin: {v}}}\n")
            };
            let pod = manifest("db", "1");
            std::fs::write(&two, format!("{pod}---\n{}", secret("\"1\""))).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            std::fs::write(&two, format!("{pod}---\n{}", secret("98765432123"))).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            let all = format!("{:?}", agent.recorder.list());
            assert!(!all.contains("98765432123"), "{all}");
            // Now its pod document breaks: the warning is on db's pod.
            let broken = pod.replace("terminationGracePeriodSeconds: 5", "terminationGracePeriodSeconds: x");
            std::fs::write(&two, format!("{broken}---\n{}", secret("\"1\""))).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            let db: Vec<_> = agent
                .pod_events("db-node1")
                .into_iter()
                .filter(|(_, reason, _, _)| reason == "FailedValidation")
                .collect();
            assert_eq!(db.len(), 1, "{db:?}");
            assert!(db[0].2.contains("terminationGracePeriodSeconds"), "{db:?}");
            assert_eq!(rt.running("app").len(), 2, "both pods still run");
            agent.stop().await;
        })
        .await;
}

/// `--cgroups-per-qos` over an injected cgroup v1 root: `kubepods` and the QoS cgroups
/// get their shares and limits at the start; a Burstable pod's cgroup is made with its
/// limits before its sandbox, whose cgroup parent it is; the burstable shares follow the
/// pods; the pod's cgroup goes once the pod is deleted.
#[tokio::test(start_paused = true)]
async fn pod_cgroups_are_made_before_the_sandbox_and_removed_after_the_pod() {
    use picolet::{
        CgroupDriver, CgroupLayout as Layout, CgroupVersion, PodCgroupsConfig, V1_CONTROLLERS,
        kubepods_resources, split_cgroup_root,
    };
    LocalSet::new()
        .run_until(async {
            let (tmp, mut cfg) = agent_dir("node1");
            let cg_root = tmp.path().join("cgroup");
            cfg.pod_cgroups = Some(PodCgroupsConfig {
                layout: Layout {
                    version: CgroupVersion::V1,
                    driver: CgroupDriver::Cgroupfs,
                    root: split_cgroup_root("/"),
                    v1_controllers: V1_CONTROLLERS.to_vec(),
                },
                mount_root: cg_root.clone(),
                kubepods: kubepods_resources(3500, 900 << 20),
            });
            let file = cfg.pod_manifest_path.join("limited.yaml");
            std::fs::write(
                &file,
                format!(
                    r#"apiVersion: v1
kind: Pod
metadata:
  name: limited
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: {IMAGE}
    resources:
      requests: {{cpu: 250m, memory: 32Mi}}
      limits: {{cpu: 500m, memory: 64Mi}}
"#
                ),
            )
            .unwrap();
            let (clock, rt) = fake_runtime();
            let agent = start(&rt, clock, &cfg);
            settle(3).await;
            let read = |p: &str| {
                std::fs::read_to_string(cg_root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
            };
            assert_eq!(read("cpu/kubepods/cpu.shares"), "3584");
            assert_eq!(read("memory/kubepods/memory.limit_in_bytes"), "943718400");
            assert_eq!(read("cpu/kubepods/besteffort/cpu.shares"), "2");
            let sandboxes = rt.sandboxes();
            assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
            let uid = sandboxes[0].uid.clone();
            let config = rt.sandbox_config(&sandboxes[0].id).unwrap();
            assert_eq!(
                config.cgroup_parent,
                format!("/kubepods/burstable/pod{uid}")
            );
            let pod_dir = format!("kubepods/burstable/pod{uid}");
            assert_eq!(read(&format!("cpu/{pod_dir}/cpu.shares")), "256");
            assert_eq!(read(&format!("cpu/{pod_dir}/cpu.cfs_quota_us")), "50000");
            assert_eq!(
                read(&format!("memory/{pod_dir}/memory.limit_in_bytes")),
                (64u64 << 20).to_string()
            );
            assert_eq!(read("cpu/kubepods/burstable/cpu.shares"), "256");

            std::fs::remove_file(&file).unwrap();
            let_inotify_deliver();
            settle(INOTIFY_OR_RELIST).await;
            assert!(running_ids(&rt).is_empty());
            for c in ["cpu", "memory", "pids"] {
                assert!(!cg_root.join(c).join(&pod_dir).exists(), "{c}/{pod_dir}");
            }
            assert_eq!(read("cpu/kubepods/burstable/cpu.shares"), "2");
            agent.stop().await;
        })
        .await;
}

/// Log rotation on: the log manager learns which containers run from the loop's runtime
/// view, not from a list of its own. The fake writes no log files, so every live log is
/// missing and reopened once a pass; a restarted container's log follows, the exited one's
/// is left alone.
#[tokio::test(start_paused = true)]
async fn log_rotation_follows_the_runtime_view_without_listing() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, mut cfg) = agent_dir("node1");
            cfg.log_rotation = Some(picolet::LogRotatePolicy::default());
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web", "1")).unwrap();
            let (clock, rt) = fake_runtime();
            rt.serve_events(true);
            let agent = start(&rt, clock, &cfg);
            settle(25).await;
            let running = running_ids(&rt);
            assert_eq!(running.len(), 2);
            let reopened = |rt: &FakeRuntime| {
                let mut ids = rt.log_reopens();
                ids.sort();
                ids.dedup();
                ids
            };
            assert_eq!(reopened(&rt), running);

            rt.take_calls();
            settle(60).await;
            let calls = rt.take_calls();
            // A relist or a pod's status read lists sandboxes and containers; the log
            // manager used to list containers alone every 10 s.
            let lists = count(&calls, |c| matches!(c, Call::ListContainers));
            let sandbox_lists = count(&calls, |c| matches!(c, Call::ListPodSandboxes));
            assert_eq!(lists, sandbox_lists, "{calls:?}");
            let reopens = count(&calls, |c| matches!(c, Call::ReopenContainerLog(_)));
            assert_eq!(reopens, 12, "both missing logs, every 10 s: {calls:?}");

            let app = rt.running("app")[0].clone();
            rt.exit_container(&app, 1);
            settle(25).await;
            let restarted = rt.running("app")[0].clone();
            assert_ne!(restarted, app);
            assert!(reopened(&rt).contains(&restarted), "{:?}", rt.log_reopens());
            rt.take_calls();
            settle(20).await;
            let calls = rt.take_calls();
            assert!(
                !calls.contains(&Call::ReopenContainerLog(app.clone())),
                "the exited container is left alone: {calls:?}"
            );
            agent.stop().await;
        })
        .await;
}
