//! The agent over the real CRI client against the fake CRI gRPC server, with faults: a
//! call that never answers, a runtime that is down at start, a runtime restart. Real time
//! (socket I/O and client deadlines), so every wait here is a bounded poll.

use std::rc::Rc;
use std::time::Duration;

mod common;

use common::agent::agent_dir;
use common::{IMAGE, wait_until};
use picolet::clock::SystemClock;
use picolet::daemon::run_with;
use picolet::runtime::ContainerState;
use picolet::runtime::cri::CriTimeouts;
use picolet::runtime::fake_cri::{Code, FakeCri, FakeCriHandle, Fault, Method};
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
