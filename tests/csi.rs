//! CSI node plugins: the agent (over the in-memory runtime) against the fake CSI plugin
//! (`picolet::fakes::FakeCsiPlugin`: real tonic servers on unix sockets, the registration socket in
//! `<root-dir>/plugins_registry`). Registration, the exact publish request, unpublish on
//! deletion, a publish that fails twice, a plugin that restarts or goes away. Real time
//! (socket I/O), so every wait is a bounded poll and every check is on lasting state.

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

mod common;

use common::agent::{agent_dir, running_ids, start_with_events};
use common::{IMAGE, wait_until};
use picolet::{
    TokioClock,
    fakes::{CsiCall as Call, FakeCsiPlugin, FakeRuntime},
    protos::csi as proto,
    protos::csi::volume_capability,
    run_daemon_with as run_with,
};
use tokio::sync::Notify;
use tokio::task::LocalSet;
use tokio_util::sync::CancellationToken;

const DRIVER: &str = "fake.csi.example.com";

fn pod_manifest(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  serviceAccountName: app
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: {IMAGE}
    volumeMounts: [{{name: certs, mountPath: /certs}}]
  volumes:
  - name: certs
    csi:
      driver: {DRIVER}
      readOnly: true
      fsType: ext4
      volumeAttributes: {{issuer: ca}}
      nodePublishSecretRef: {{name: creds}}
"#
    )
}

const SECRET: &str =
    "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\nstringData: {token: s3cret}\n";

fn write_secret(dir: &Path) {
    let path = dir.join("creds.yaml");
    std::fs::write(&path, SECRET).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

fn fake_runtime() -> FakeRuntime {
    let rt = FakeRuntime::new(TokioClock::new(1_800_000_000_000_000_000));
    rt.add_image(IMAGE);
    rt
}

fn pod_uid(rt: &FakeRuntime, name: &str) -> Option<String> {
    rt.sandboxes()
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.uid)
}

#[tokio::test]
async fn registration_publish_restart_and_unpublish() {
    LocalSet::new()
        .run_until(async {
            let (tmp, cfg) = agent_dir("node1");
            std::fs::write(tmp.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
            // The plugin is there before picolet: found by the first scan.
            let registry = cfg.agent.root_dir.join("plugins_registry");
            std::fs::create_dir_all(&registry).unwrap();
            let endpoint = tmp.path().join("plugin.sock");
            let mut plugin = FakeCsiPlugin::start(DRIVER, &registry, &endpoint)
                .await
                .unwrap();
            write_secret(&cfg.pod_manifest_path);
            let manifest = cfg.pod_manifest_path.join("web.yaml");
            std::fs::write(&manifest, pod_manifest("web")).unwrap();

            let rt = fake_runtime();
            let shutdown = CancellationToken::new();
            let agent = tokio::task::spawn_local(run_with(
                rt.clone(),
                TokioClock::new(1_800_000_000_000_000_000),
                cfg.clone(),
                shutdown.clone(),
                Rc::new(Notify::new()),
            ));

            // 1. Registration: GetInfo, the Node service's info and capabilities, the status.
            wait_until("the plugin registered", 20, || {
                (plugin.registrations() == 1).then_some(())
            })
            .await;
            let calls = plugin.calls();
            assert_eq!(
                calls[..4],
                [
                    Call::GetInfo,
                    Call::NodeGetInfo,
                    Call::NodeGetCapabilities,
                    Call::NotifyRegistrationStatus {
                        registered: true,
                        error: String::new()
                    }
                ],
                "{calls:?}"
            );

            // 2. The pod starts after its volume was published, with the kubelet's request.
            wait_until("the pod running", 30, || {
                (!running_ids(&rt).is_empty()).then_some(())
            })
            .await;
            let uid = pod_uid(&rt, "web-node1").expect("the pod's sandbox");
            let target = cfg
                .agent
                .root_dir
                .join(format!("pods/{uid}/volumes/kubernetes.io~csi/certs/mount"));
            let publishes = plugin.publishes();
            assert_eq!(publishes.len(), 1, "one publish: {:?}", plugin.calls());
            let want = proto::NodePublishVolumeRequest {
                volume_id: picolet::csi_volume_handle(&uid, "certs"),
                publish_context: BTreeMap::new(),
                staging_target_path: String::new(),
                target_path: target.to_string_lossy().into_owned(),
                volume_capability: Some(proto::VolumeCapability {
                    access_mode: Some(volume_capability::AccessMode {
                        mode: volume_capability::access_mode::Mode::SingleNodeWriter as i32,
                    }),
                    access_type: Some(volume_capability::AccessType::Mount(
                        volume_capability::MountVolume {
                            fs_type: "ext4".into(),
                            mount_flags: vec![],
                        },
                    )),
                }),
                readonly: true,
                secrets: BTreeMap::from([("token".into(), "s3cret".into())]),
                volume_context: [
                    ("issuer", "ca"),
                    ("csi.storage.k8s.io/ephemeral", "true"),
                    ("csi.storage.k8s.io/pod.name", "web-node1"),
                    ("csi.storage.k8s.io/pod.namespace", "default"),
                    ("csi.storage.k8s.io/pod.uid", uid.as_str()),
                    ("csi.storage.k8s.io/serviceAccount.name", "app"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            };
            assert_eq!(publishes[0], want);
            assert!(
                publishes[0].volume_id.starts_with("csi-") && publishes[0].volume_id.len() == 68
            );
            assert_eq!(
                std::fs::read_to_string(target.join("volume-id")).unwrap(),
                want.volume_id
            );
            let vol_data = std::fs::read_to_string(target.with_file_name("vol_data.json")).unwrap();
            assert!(vol_data.contains(DRIVER), "{vol_data}");

            // 3. The plugin restarts (new sockets): registered again.
            plugin.restart().await.unwrap();
            wait_until("the plugin registered again", 30, || {
                (plugin.registrations() == 2).then_some(())
            })
            .await;

            // 4. The plugin goes away; the pod is deleted: its containers stop, but the
            // volume cannot be unpublished, so the pod directory stays.
            plugin.stop();
            std::fs::remove_file(&manifest).unwrap();
            wait_until("the pod's containers stopped", 60, || {
                running_ids(&rt).is_empty().then_some(())
            })
            .await;
            assert!(plugin.unpublishes().is_empty());
            assert!(
                target.join("volume-id").exists(),
                "the volume stays published"
            );

            // 5. The plugin is back: the volume is unpublished, then the directory removed.
            plugin.restart().await.unwrap();
            let pod_dir = cfg.agent.root_dir.join("pods").join(&uid);
            wait_until("the pod directory removed", 90, || {
                (!pod_dir.exists()).then_some(())
            })
            .await;
            let unpublishes = plugin.unpublishes();
            assert_eq!(
                unpublishes.first(),
                Some(&proto::NodeUnpublishVolumeRequest {
                    volume_id: want.volume_id.clone(),
                    target_path: want.target_path.clone(),
                }),
                "{unpublishes:?}"
            );
            assert_eq!(plugin.publishes().len(), 1, "no publish after the first");

            shutdown.cancel();
            agent.await.unwrap();
            plugin.stop();
        })
        .await;
}

#[tokio::test]
async fn a_failing_publish_keeps_the_pod_waiting_and_is_retried() {
    LocalSet::new()
        .run_until(async {
            let (tmp, cfg) = agent_dir("node1");
            std::fs::write(tmp.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
            write_secret(&cfg.pod_manifest_path);
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), pod_manifest("web")).unwrap();
            let rt = fake_runtime();
            let agent = start_with_events(&rt, TokioClock::new(1_800_000_000_000_000_000), &cfg);

            // The plugin comes after picolet: found through the directory watch.
            let registry = cfg.agent.root_dir.join("plugins_registry");
            wait_until("picolet created the registry directory", 10, || {
                registry.is_dir().then_some(())
            })
            .await;
            let endpoint = tmp.path().join("plugin.sock");
            let plugin = FakeCsiPlugin::start(DRIVER, &registry, &endpoint)
                .await
                .unwrap();
            plugin.fail_publishes(2);

            // Before the third publish no container ever runs.
            wait_until("the third publish", 90, || {
                let n = plugin.publishes().len();
                if n < 3 {
                    assert!(
                        rt.containers().is_empty(),
                        "a container was created before its volume was published"
                    );
                }
                (n >= 3).then_some(())
            })
            .await;
            wait_until("the pod running", 30, || {
                (!running_ids(&rt).is_empty()).then_some(())
            })
            .await;
            let failed: Vec<String> = agent
                .recorder
                .list()
                .iter()
                .filter(|e| e.reason == "FailedMount")
                .map(|e| e.message.clone())
                .collect();
            assert!(
                failed.iter().any(
                    |m| m.contains("MountVolume.SetUp failed for volume \"certs\"")
                        && m.contains("fake publish failure")
                ),
                "{failed:?}"
            );
            assert_eq!(plugin.publishes().len(), 3);

            agent.shutdown.cancel();
            agent.handle.await.unwrap();
            plugin.stop();
        })
        .await;
}
