//! The agent over the real CRI client against the fake CRI gRPC server, with faults: a
//! call that never answers, a runtime that is down at start, a runtime restart. Real time
//! (socket I/O and client deadlines), so every wait here is a bounded poll.

use std::rc::Rc;
use std::time::Duration;

mod common;

use common::agent::agent_dir;
use common::{IMAGE, wait_until};
use picolet::{
    ContainerState, CriTimeouts, SystemClock,
    fakes::{Code, CriMethod as Method, FakeCri, FakeCriHandle, Fault},
    run_daemon_with as run_with,
};
use tokio::sync::Notify;
use tokio::task::LocalSet;
use tokio_util::sync::CancellationToken;

fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: {IMAGE}\n"
    )
}

fn running(fake: &FakeCriHandle, pod: &str) -> bool {
    fake.containers().iter().any(|c| {
        c.state == ContainerState::Running
            && c.labels.get("io.kubernetes.pod.name").map(String::as_str)
                == Some(&format!("{pod}-node1"))
    })
}

#[tokio::test]
async fn a_hung_call_delays_only_its_pod_and_a_runtime_outage_heals() {
    LocalSet::new()
        .run_until(async {
            let (tmp, cfg) = agent_dir("node1");
            std::fs::write(tmp.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
            for name in ["a", "b"] {
                std::fs::write(
                    cfg.pod_manifest_path.join(format!("{name}.yaml")),
                    manifest(name),
                )
                .unwrap();
            }

            // The runtime is down when picolet starts.
            let socket = tmp.path().join("cri.sock");
            let mut fake = FakeCri::start(&socket).await.unwrap();
            fake.preload_image(IMAGE);
            fake.shutdown().await;
            let runtime = fake
                .runtime()
                .unwrap()
                .with_timeouts(CriTimeouts::uniform(Duration::from_secs(2)));
            let shutdown = CancellationToken::new();
            let agent = tokio::task::spawn_local(run_with(
                runtime,
                SystemClock,
                cfg.clone(),
                shutdown.clone(),
                Rc::new(Notify::new()),
            ));
            tokio::time::sleep(Duration::from_millis(500)).await;

            // It comes back; the first RunPodSandbox never answers (the other pod's may
            // answer): one pod waits out the 2 s deadline, the other starts meanwhile.
            fake.inject_times(Method::RunPodSandbox, Fault::Hang, 1);
            fake.restart().await.unwrap();
            wait_until("one pod running while the other's call hangs", 15, || {
                (running(&fake, "a") || running(&fake, "b")).then_some(())
            })
            .await;
            // The hung one is retried after the deadline and the error requeue (10–15 s).
            wait_until(
                "both pods running after the hung call timed out",
                45,
                || (running(&fake, "a") && running(&fake, "b")).then_some(()),
            )
            .await;

            // Failing calls become pod-worker state, never a crash: a container exits while
            // StartContainer fails once; the restart is retried and succeeds.
            fake.inject_times(
                Method::StartContainer,
                Fault::fail(Code::Internal, "boom"),
                1,
            );
            let c = fake.find_container("c").expect("a container");
            fake.exit_container(&c.id, 1);
            wait_until("both pods running again", 30, || {
                (running(&fake, "a") && running(&fake, "b")).then_some(())
            })
            .await;

            shutdown.cancel();
            agent.await.unwrap();
            fake.shutdown().await;
        })
        .await;
}

/// Evented PLEG over the real client and the fake CRI server: with the stream watched no
/// relist runs at idle, a container that exits is restarted through its event, and after
/// a runtime restart (every connection dropped) the stream is opened again and events
/// work as before. A runtime that answers Unimplemented keeps the 1 s relist.
#[tokio::test]
async fn container_events_drive_restarts_and_survive_a_runtime_restart() {
    for evented in [true, false] {
        LocalSet::new()
            .run_until(async {
                let (tmp, cfg) = agent_dir("node1");
                std::fs::write(tmp.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
                std::fs::write(cfg.pod_manifest_path.join("a.yaml"), manifest("a")).unwrap();
                let mut fake = FakeCri::start(tmp.path().join("cri.sock")).await.unwrap();
                fake.preload_image(IMAGE);
                if !evented {
                    fake.inject(
                        Method::GetContainerEvents,
                        Fault::fail(Code::Unimplemented, "unknown method GetContainerEvents"),
                    );
                }
                let runtime = fake
                    .runtime()
                    .unwrap()
                    .with_timeouts(CriTimeouts::uniform(Duration::from_secs(2)));
                let shutdown = CancellationToken::new();
                let agent = tokio::task::spawn_local(run_with(
                    runtime,
                    SystemClock,
                    cfg.clone(),
                    shutdown.clone(),
                    Rc::new(Notify::new()),
                ));
                wait_until("pod a running", 15, || running(&fake, "a").then_some(())).await;
                if evented {
                    wait_until("the event stream", 5, || {
                        (fake.event_streams() == 1).then_some(())
                    })
                    .await;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                fake.clear_calls();
                tokio::time::sleep(Duration::from_secs(3)).await;
                let lists = fake.call_count(Method::ListPodSandbox);
                if evented {
                    assert_eq!(lists, 0, "a relist ran: {:?}", fake.calls());
                } else {
                    assert!(lists >= 2, "{lists} relists in 3 s");
                    assert_eq!(fake.call_count(Method::GetContainerEvents), 0);
                }

                let exit_and_restart = |fake: &FakeCriHandle| {
                    let c = fake.find_container("c").expect("a container");
                    assert!(fake.exit_container(&c.id, 1));
                    c.id
                };
                let old = exit_and_restart(&fake);
                wait_until("the container restarted", 15, || {
                    let c = fake.find_container("c")?;
                    (c.id != old && c.state == ContainerState::Running).then_some(())
                })
                .await;

                if evented {
                    fake.restart().await.unwrap();
                    wait_until("the event stream reopened", 30, || {
                        (fake.event_streams() == 1).then_some(())
                    })
                    .await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let old = exit_and_restart(&fake);
                    wait_until("the container restarted after the runtime's", 15, || {
                        let c = fake.find_container("c")?;
                        (c.id != old && c.state == ContainerState::Running).then_some(())
                    })
                    .await;
                }
                shutdown.cancel();
                agent.await.unwrap();
                fake.shutdown().await;
            })
            .await;
    }
}
