//! The PLEG with and without the runtime's container events (kubelet: evented PLEG), the
//! whole agent against the in-memory fake runtime on paused tokio time. The fake answers
//! `GetContainerEvents` with Unimplemented (containerd 1.6) unless told to serve events.
//! Counts of relists over windows of virtual time, never wall-clock timings.

use std::time::Duration;

mod common;

use common::IMAGE;
use common::agent::{Agent, agent_dir, running_ids, settle, start};
use picolet::{
    ContainerState, CriError, TokioClock,
    fakes::{FakeRuntime, RuntimeCall as Call, RuntimeMethod as Method},
};
use tokio::task::LocalSet;

fn manifest(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: {IMAGE}
"#
    )
}

fn fake_runtime(events: bool) -> (TokioClock, FakeRuntime) {
    let (clock, rt) = common::agent::fake_runtime();
    rt.serve_events(events);
    (clock, rt)
}

fn count(calls: &[Call], f: impl Fn(&Call) -> bool) -> usize {
    calls.iter().filter(|c| f(c)).count()
}

fn opens(rt: &FakeRuntime) -> usize {
    count(&rt.calls(), |c| matches!(c, Call::GetContainerEvents))
}

/// The one pod, running, with the agent started over `rt`.
async fn running_pod(rt: &FakeRuntime, clock: TokioClock) -> (tempfile::TempDir, Agent) {
    let (tmp, cfg) = agent_dir("node1");
    std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web")).unwrap();
    let agent = start(rt, clock, &cfg);
    settle(3).await;
    assert_eq!(running_ids(rt).len(), 1, "{:?}", rt.containers());
    (tmp, agent)
}

/// With events, at idle the periodic resyncs reuse the cached view (the stream confirms
/// it): no list and no status call at all; and a container that exits is restarted
/// through its STOPPED event, no relist in between (the safety net is minutes away).
#[tokio::test(start_paused = true)]
async fn an_exited_container_is_noticed_through_its_event() {
    LocalSet::new()
        .run_until(async {
            let (clock, rt) = fake_runtime(true);
            let (_tmp, agent) = running_pod(&rt, clock).await;
            assert_eq!(rt.event_streams(), 1);

            // Idle for two resyncs (every 60–90 s): nothing is read from the runtime. (The
            // first resync after the start may read once: the start's own events can reach
            // the loop after the sync's last read began.)
            settle(150).await;
            rt.take_calls();
            settle(130).await;
            let calls = rt.take_calls();
            assert!(calls.is_empty(), "{calls:?}");

            let relists = rt.relists();
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
            assert_eq!(rt.relists(), relists, "a relist ran");

            agent.stop().await;
        })
        .await;
}

/// containerd 1.6: `GetContainerEvents` is Unimplemented. Asked once, never again; the
/// relist stays the 1 s one.
#[tokio::test(start_paused = true)]
async fn unimplemented_keeps_the_one_second_relist() {
    LocalSet::new()
        .run_until(async {
            let (clock, rt) = fake_runtime(false);
            let (_tmp, agent) = running_pod(&rt, clock).await;
            let relists = rt.relists();
            settle(20).await;
            let more = rt.relists() - relists;
            assert!(more >= 18, "{more} relists in 20 s");
            assert_eq!(opens(&rt), 1);
            agent.stop().await;
        })
        .await;
}

/// containerd 1.6 with the exit watch: once the sandbox's and the container's processes
/// (real child processes here) are watched through pidfds, the relist slows to every 10 s;
/// an exit wakes it at once and the container is restarted without waiting for it; the
/// new container has no process the runtime names, so the relist is the 1 s one again.
#[tokio::test(start_paused = true)]
async fn watched_exits_slow_the_relist_and_wake_it() {
    LocalSet::new()
        .run_until(async {
            let (clock, rt) = fake_runtime(false);
            let (_tmp, agent) = running_pod(&rt, clock).await;
            let spawn = || std::process::Command::new("sleep").arg("1000").spawn();
            let (Ok(mut pause), Ok(mut app_process)) = (spawn(), spawn()) else {
                agent.stop().await;
                return; // no `sleep` on this machine
            };
            let sandbox = rt.sandboxes()[0].id.clone();
            let app = rt.running("app")[0].clone();
            rt.set_process(&sandbox, pause.id());
            rt.set_process(&app, app_process.id());
            // A relist that changes nothing opens both.
            settle(5).await;
            let relists = rt.relists();
            settle(60).await;
            let more = rt.relists() - relists;
            if more > 30 {
                // An old kernel (no pidfd_open): the 1 s relist, nothing else to check.
                let _ = (
                    pause.kill(),
                    app_process.kill(),
                    pause.wait(),
                    app_process.wait(),
                );
                agent.stop().await;
                return;
            }
            assert!((5..=8).contains(&more), "{more} relists in 60 s");

            // The container's process ends: restarted at once (with no exit watch, the
            // next relist would be up to 10 s away).
            rt.exit_container(&app, 1);
            let _ = app_process.kill();
            let _ = app_process.wait();
            tokio::time::sleep(Duration::from_millis(200)).await;
            let apps: Vec<_> = rt
                .containers()
                .into_iter()
                .filter(|c| c.name == "app")
                .collect();
            assert_eq!(apps.len(), 2, "{apps:?}");
            assert_eq!(apps[1].state, ContainerState::Running);

            // The new container has no process to watch: every second again.
            settle(3).await;
            let relists = rt.relists();
            settle(10).await;
            let more = rt.relists() - relists;
            assert!(more >= 9, "{more} relists in 10 s");

            let _ = pause.kill();
            let _ = pause.wait();
            agent.stop().await;
        })
        .await;
}

/// A stream that breaks: a change whose event was lost is seen by the relist, the stream
/// is opened again, and then the relist is the safety net again.
#[tokio::test(start_paused = true)]
async fn a_broken_stream_relists_and_reconnects() {
    LocalSet::new()
        .run_until(async {
            let (clock, rt) = fake_runtime(true);
            let (_tmp, agent) = running_pod(&rt, clock).await;
            assert_eq!(opens(&rt), 1);

            // The stream breaks and the exit's event goes nowhere.
            rt.break_event_streams();
            let app = rt.running("app")[0].clone();
            rt.exit_container(&app, 1);
            settle(5).await;
            assert_eq!(rt.running("app").len(), 1, "{:?}", rt.containers());
            assert_ne!(rt.running("app")[0], app);
            assert_eq!(opens(&rt), 2);
            assert_eq!(rt.event_streams(), 1);

            let relists = rt.relists();
            settle(60).await;
            assert_eq!(rt.relists(), relists, "the 1 s relist kept running");
            agent.stop().await;
        })
        .await;
}

/// kubelet: eventedPlegMaxStreamRetries — after the 5th failure in a row the 1 s relist
/// is back for good and the stream is not asked for again.
#[tokio::test(start_paused = true)]
async fn five_failures_fall_back_to_the_one_second_relist() {
    LocalSet::new()
        .run_until(async {
            let (clock, rt) = fake_runtime(true);
            rt.fail_always(
                Method::GetContainerEvents,
                FakeRuntime::rpc_error(Method::GetContainerEvents, "stream not available"),
            );
            let (_tmp, agent) = running_pod(&rt, clock).await;
            settle(120).await;
            assert_eq!(opens(&rt), 5);
            rt.clear_failures();
            let relists = rt.relists();
            settle(20).await;
            let more = rt.relists() - relists;
            assert!(more >= 18, "{more} relists in 20 s");
            assert_eq!(opens(&rt), 5);
            assert_eq!(rt.event_streams(), 0);
            agent.stop().await;
        })
        .await;
}

/// Breaks count as failures too: a stream that breaks at once five times in a row ends
/// the evented mode as well.
#[tokio::test(start_paused = true)]
async fn a_stream_that_keeps_breaking_falls_back() {
    LocalSet::new()
        .run_until(async {
            let (clock, rt) = fake_runtime(true);
            let (_tmp, agent) = running_pod(&rt, clock).await;
            for _ in 0..5 {
                common::wait_until("a stream", 120, || (rt.event_streams() == 1).then_some(()))
                    .await;
                rt.break_event_streams();
            }
            settle(120).await;
            assert_eq!(opens(&rt), 5);
            assert_eq!(rt.event_streams(), 0);
            let relists = rt.relists();
            settle(10).await;
            assert!(rt.relists() - relists >= 8);
            agent.stop().await;
        })
        .await;
}

/// A runtime that cannot be reached (picolet started first, containerd restarting) is not
/// a stream that does not work: it is retried, with back-off, until it answers.
#[tokio::test(start_paused = true)]
async fn an_unreachable_runtime_is_retried_until_it_answers() {
    LocalSet::new()
        .run_until(async {
            let (clock, rt) = fake_runtime(true);
            rt.fail_always(
                Method::GetContainerEvents,
                CriError::Unavailable {
                    method: "GetContainerEvents",
                    message: "connection refused".into(),
                },
            );
            let (_tmp, agent) = running_pod(&rt, clock).await;
            settle(300).await;
            let tried = opens(&rt);
            assert!(tried > 5, "{tried} attempts");
            rt.clear_failures();
            settle(60).await;
            assert_eq!(rt.event_streams(), 1);
            agent.stop().await;
        })
        .await;
}

/// The status sees an event at once too: a `restartPolicy: Never` pod whose container
/// exits 1 is Failed, reported without any relist in between.
#[tokio::test(start_paused = true)]
async fn the_status_follows_an_event() {
    LocalSet::new()
        .run_until(async {
            let (clock, rt) = fake_runtime(true);
            let (_tmp, cfg) = agent_dir("node1");
            let never = manifest("job").replace("spec:\n", "spec:\n  restartPolicy: Never\n");
            std::fs::write(cfg.pod_manifest_path.join("job.yaml"), never).unwrap();
            let mut agent = common::agent::start_with_events(&rt, clock, &cfg);
            settle(3).await;
            assert_eq!(running_ids(&rt).len(), 1);
            let before = agent.statuses();
            assert_eq!(
                before["job-node1"].phase,
                Some(picolet::api::PodPhase::Running),
                "{before:?}"
            );
            let relists = rt.relists();
            rt.exit_container(&rt.running("app")[0], 1);
            settle(2).await;
            let after = agent.statuses();
            assert_eq!(
                after["job-node1"].phase,
                Some(picolet::api::PodPhase::Failed)
            );
            assert_eq!(rt.relists(), relists, "a relist ran");
            agent.stop().await;
        })
        .await;
}
