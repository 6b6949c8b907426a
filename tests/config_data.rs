//! Config data end to end over the fake runtime (paused time, real inotify): local ConfigMap
//! and Secret documents in the static pod directory feed env and volumes; a pod that
//! references a missing object waits in `CreateContainerConfigError` and starts once the
//! object appears; editing a ConfigMap rewrites the mounted files of the running container
//! without restarting it. The same scenario runs on a real containerd in `tests/e2e.rs`.

use std::time::Duration;

mod common;

use common::agent::settle;

use common::IMAGE;
use common::agent::{agent_dir, start_with_events};
use picolet::{TokioClock, fakes::FakeRuntime};
use tokio::task::LocalSet;

fn let_inotify_deliver() {
    std::thread::sleep(Duration::from_millis(300));
}

/// Virtual seconds after a file is written: past the file source's 20 s re-list, so a test
/// does not depend on inotify delivering within the real 300 ms (on a loaded machine it may
/// not); paused time makes the wait cost nothing.
const SAFETY: u64 = 25;

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: IMAGE
    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: app-config, key: greeting}}
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: db, key: password}}
    - name: MAYBE
      valueFrom: {configMapKeyRef: {name: nowhere, key: x, optional: true}}
    envFrom:
    - prefix: CFG_
      configMapRef: {name: app-config}
    - configMapRef: {name: app-config}
    volumeMounts:
    - {name: config, mountPath: /etc/app}
    - {name: info, mountPath: /etc/podinfo}
  volumes:
  - name: config
    configMap:
      name: app-config
      items: [{key: app.conf, path: app.conf, mode: 0400}]
  - name: info
    downwardAPI:
      items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]
"#;

fn config_map(conf: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app-config}}\ndata:\n  greeting: hello\n  app.conf: \"{conf}\"\n  1bad: skipped\n"
    )
}

const SECRET: &str =
    "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: s3cret}\n";

#[tokio::test(start_paused = true)]
async fn a_pod_waits_for_its_config_map_then_follows_its_edits() {
    LocalSet::new()
        .run_until(async {
            let _ = env_logger::builder().is_test(true).try_init();
            let (tmp, cfg) = agent_dir("node1");
            let dir = cfg.pod_manifest_path.clone();
            std::fs::write(dir.join("web.yaml"), POD.replace("IMAGE", IMAGE)).unwrap();
            let clock = TokioClock::new(1_800_000_000_000_000_000);
            let rt = FakeRuntime::new(clock);
            rt.add_image(IMAGE);
            let mut agent = start_with_events(&rt, clock, &cfg);
            settle(3).await;

            // 1. Nothing to read yet: the container waits (the volume first: FailedMount).
            assert!(rt.running("app").is_empty());
            let status = agent
                .statuses()
                .remove("web-node1")
                .expect("a status for web");
            let waiting = status.container_statuses[0]
                .state
                .waiting
                .clone()
                .expect("waiting");
            assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
            assert!(
                waiting
                    .message
                    .as_deref()
                    .unwrap()
                    .contains("configmap \"app-config\" not found"),
                "{waiting:?}"
            );

            // 2. The ConfigMap arrives, not the Secret: CreateContainerConfigError.
            std::fs::write(dir.join("config.yaml"), config_map("a=1")).unwrap();
            let_inotify_deliver();
            settle(SAFETY).await;
            assert!(rt.running("app").is_empty());
            let status = agent
                .statuses()
                .remove("web-node1")
                .expect("a status for web");
            let waiting = status.container_statuses[0].state.waiting.clone().unwrap();
            assert_eq!(
                (waiting.reason.as_deref(), waiting.message.as_deref()),
                (
                    Some("CreateContainerConfigError"),
                    Some("secret \"db\" not found")
                )
            );

            // 3. The Secret arrives: the container starts with its env.
            std::fs::write(dir.join("secret.yaml"), SECRET).unwrap();
            let_inotify_deliver();
            settle(SAFETY).await;
            let ids = rt.running("app");
            assert_eq!(ids.len(), 1, "{:?}", rt.containers());
            let config = rt.container_config(&ids[0]).unwrap();
            let env = |k: &str| {
                config
                    .envs
                    .iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
            };
            assert_eq!(env("GREETING").as_deref(), Some("hello"));
            assert_eq!(env("PASSWORD").as_deref(), Some("s3cret"));
            assert_eq!(env("CFG_greeting").as_deref(), Some("hello"));
            assert_eq!(env("CFG_app.conf").as_deref(), Some("a=1"));
            assert_eq!(env("CFG_1bad").as_deref(), Some("skipped"));
            // kubelet 1.37: every envFrom key, also one a shell could not name.
            assert_eq!(env("1bad").as_deref(), Some("skipped"));
            assert_eq!(env("greeting").as_deref(), Some("hello"));
            assert_eq!(env("MAYBE"), None, "optional and missing: no variable");
            // The volumes, mounted read-only.
            let mount = config
                .mounts
                .iter()
                .find(|m| m.container_path == "/etc/app")
                .unwrap();
            assert!(mount.readonly);
            let conf = std::path::Path::new(&mount.host_path).join("app.conf");
            assert_eq!(std::fs::read_to_string(&conf).unwrap(), "a=1");
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777,
                0o400
            );
            let info = config
                .mounts
                .iter()
                .find(|m| m.container_path == "/etc/podinfo")
                .unwrap();
            let labels =
                std::fs::read_to_string(std::path::Path::new(&info.host_path).join("labels"));
            assert!(labels.is_ok(), "{labels:?}");

            // 4. The ConfigMap is edited: the file changes, the container keeps running.
            std::fs::write(dir.join("config.yaml"), config_map("a=2")).unwrap();
            let_inotify_deliver();
            settle(SAFETY).await;
            assert_eq!(std::fs::read_to_string(&conf).unwrap(), "a=2");
            assert_eq!(rt.running("app"), ids, "not restarted");

            // 5. The ConfigMap goes away: the running container keeps its last files.
            std::fs::remove_file(dir.join("config.yaml")).unwrap();
            let_inotify_deliver();
            settle(SAFETY).await;
            assert_eq!(std::fs::read_to_string(&conf).unwrap(), "a=2");
            assert_eq!(rt.running("app"), ids);

            agent.stop().await;
            drop(tmp);
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_and_its_config_map_in_one_file_start_together() {
    LocalSet::new()
        .run_until(async {
            let _ = env_logger::builder().is_test(true).try_init();
            let (_tmp, cfg) = agent_dir("node1");
            let file = format!(
                "{}---\n{}---\n{SECRET}",
                config_map("x=1"),
                POD.replace("IMAGE", IMAGE)
            );
            std::fs::write(cfg.pod_manifest_path.join("all.yaml"), file).unwrap();
            let clock = TokioClock::new(1_800_000_000_000_000_000);
            let rt = FakeRuntime::new(clock);
            rt.add_image(IMAGE);
            let agent = start_with_events(&rt, clock, &cfg);
            settle(3).await;
            assert_eq!(rt.running("app").len(), 1, "{:?}", rt.containers());
            agent.stop().await;
        })
        .await;
}

/// kubelet: `cleanupOrphanedPodDirs`. picolet stopped between a pod's end and its cleanup:
/// at the next start the pod's directory (its volumes) is removed; a wanted pod's is kept.
#[tokio::test(start_paused = true)]
async fn orphaned_pod_directories_are_removed_after_a_restart() {
    LocalSet::new()
        .run_until(async {
            let (_tmp, cfg) = agent_dir("node1");
            let orphan = cfg
                .agent
                .root_dir
                .join("pods/0123abcd/volumes/kubernetes.io~configmap/c");
            std::fs::create_dir_all(&orphan).unwrap();
            std::fs::write(orphan.join("f"), "x").unwrap();
            let clock = TokioClock::new(1_800_000_000_000_000_000);
            let rt = FakeRuntime::new(clock);
            rt.add_image(IMAGE);
            let pod = POD.replace("IMAGE", IMAGE);
            let file = format!("{}---\n{}---\n{SECRET}", config_map("x=1"), pod);
            std::fs::write(cfg.pod_manifest_path.join("all.yaml"), file).unwrap();
            let agent = start_with_events(&rt, clock, &cfg);
            settle(3).await;
            assert_eq!(rt.running("app").len(), 1);
            // The blocking pool works in real time.
            let gone = cfg.agent.root_dir.join("pods/0123abcd");
            // Up to 30 s of real time: a loaded machine's blocking pool may be slow.
            for _ in 0..1500 {
                if !gone.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(!gone.exists(), "the orphan's directory is still there");
            let left: Vec<_> = std::fs::read_dir(cfg.agent.root_dir.join("pods"))
                .unwrap()
                .collect();
            assert_eq!(left.len(), 1, "the running pod's directory is kept");
            agent.stop().await;
        })
        .await;
}
