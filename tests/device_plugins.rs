//! The device manager against a fake device plugin (a tonic `v1beta1.DevicePlugin` server on
//! a socket of a temporary plugin directory, as a real plugin serves it): registration,
//! ListAndWatch, Allocate (reused by a restarted container), a device turning unhealthy, the
//! plugin restarting and registering again, and picolet (the manager) restarting with its
//! checkpoint. Every wait polls for a condition with a generous deadline.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use picolet::{
    ActivePods, DEVICE_CHECKPOINT_FILE as CHECKPOINT_FILE, DeviceError,
    DeviceResources as Resources, KUBELET_SOCKET, ResourceCount, StartedDeviceManager as Started,
    protos::device_plugin as proto,
    protos::device_plugin::device_plugin_server::{DevicePlugin, DevicePluginServer},
    start_device_manager,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

const R: &str = "example.com/dev";
const DEADLINE: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Calls {
    allocate: Vec<Vec<String>>,
    pre_start: Vec<Vec<String>>,
    preferred: usize,
}

#[derive(Clone)]
struct Fake {
    devices: watch::Sender<Vec<(String, bool)>>,
    calls: Arc<Mutex<Calls>>,
    /// Stopping ends the streams too (a plugin that exits closes them).
    stop: CancellationToken,
}

type DeviceStream =
    Pin<Box<dyn futures_util::Stream<Item = Result<proto::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Fake {
    async fn get_device_plugin_options(
        &self,
        _: Request<proto::Empty>,
    ) -> Result<Response<proto::DevicePluginOptions>, Status> {
        Ok(Response::new(proto::DevicePluginOptions {
            pre_start_required: true,
            get_preferred_allocation_available: true,
        }))
    }

    type ListAndWatchStream = DeviceStream;

    async fn list_and_watch(
        &self,
        _: Request<proto::Empty>,
    ) -> Result<Response<DeviceStream>, Status> {
        let rx = self.devices.subscribe();
        let stop = self.stop.clone();
        let stream = futures_util::stream::unfold((rx, true), move |(mut rx, first)| {
            let stop = stop.clone();
            async move {
                if !first {
                    tokio::select! {
                        _ = stop.cancelled() => return None,
                        r = rx.changed() => r.ok()?,
                    }
                }
                let list = rx.borrow_and_update().clone();
                let devices = list
                    .into_iter()
                    .map(|(id, healthy)| proto::Device {
                        id,
                        health: if healthy { "Healthy" } else { "Unhealthy" }.into(),
                        topology: None,
                    })
                    .collect();
                Some((Ok(proto::ListAndWatchResponse { devices }), (rx, false)))
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<proto::PreferredAllocationRequest>,
    ) -> Result<Response<proto::PreferredAllocationResponse>, Status> {
        self.calls.lock().unwrap().preferred += 1;
        // Prefers the last available devices.
        let container_responses = request
            .into_inner()
            .container_requests
            .into_iter()
            .map(|c| {
                let n = c.allocation_size as usize;
                let ids = c.available_device_i_ds;
                proto::ContainerPreferredAllocationResponse {
                    device_i_ds: ids[ids.len().saturating_sub(n)..].to_vec(),
                }
            })
            .collect();
        Ok(Response::new(proto::PreferredAllocationResponse {
            container_responses,
        }))
    }

    async fn allocate(
        &self,
        request: Request<proto::AllocateRequest>,
    ) -> Result<Response<proto::AllocateResponse>, Status> {
        let mut container_responses = Vec::new();
        for c in request.into_inner().container_requests {
            self.calls
                .lock()
                .unwrap()
                .allocate
                .push(c.devices_ids.clone());
            container_responses.push(proto::ContainerAllocateResponse {
                envs: [("FAKE_DEVICES".to_string(), c.devices_ids.join(","))].into(),
                mounts: vec![proto::Mount {
                    container_path: "/opt/fake".into(),
                    host_path: "/opt/fake-host".into(),
                    read_only: true,
                }],
                devices: c
                    .devices_ids
                    .iter()
                    .map(|id| proto::DeviceSpec {
                        container_path: format!("/dev/fake-{id}"),
                        host_path: format!("/dev/fake-{id}"),
                        permissions: "rw".into(),
                    })
                    .collect(),
                annotations: [("fake.example.com/ids".to_string(), c.devices_ids.join(","))].into(),
                cdi_devices: c
                    .devices_ids
                    .iter()
                    .map(|id| proto::CdiDevice {
                        name: format!("example.com/dev={id}"),
                    })
                    .collect(),
            });
        }
        Ok(Response::new(proto::AllocateResponse {
            container_responses,
        }))
    }

    async fn pre_start_container(
        &self,
        request: Request<proto::PreStartContainerRequest>,
    ) -> Result<Response<proto::PreStartContainerResponse>, Status> {
        self.calls
            .lock()
            .unwrap()
            .pre_start
            .push(request.into_inner().devices_ids);
        Ok(Response::new(proto::PreStartContainerResponse {}))
    }
}

/// Serves the fake on `socket` until `stop`.
fn serve(mut fake: Fake, socket: &Path, stop: CancellationToken) {
    fake.stop = stop.clone();
    let _ = std::fs::remove_file(socket);
    let listener = tokio::net::UnixListener::bind(socket).unwrap();
    let incoming = futures_util::stream::unfold(listener, |l| async move {
        let conn = l.accept().await.map(|(io, _)| io);
        Some((conn, l))
    });
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(
                DevicePluginServer::new(fake),
                incoming,
                stop.cancelled_owned(),
            )
            .await
            .unwrap();
    });
}

/// A plugin's `Register` call on the manager's socket.
async fn register(dir: &Path, endpoint: &str) -> Result<(), Status> {
    let path = dir.join(KUBELET_SOCKET);
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(s))
            }
        }))
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let mut client = RegistrationClient::new(channel);
    client
        .register(proto::RegisterRequest {
            version: "v1beta1".into(),
            endpoint: endpoint.into(),
            resource_name: R.into(),
            options: Some(proto::DevicePluginOptions {
                pre_start_required: true,
                get_preferred_allocation_available: true,
            }),
        })
        .await
        .map(|_| ())
}

use proto::registration_client::RegistrationClient;

async fn wait_for(rx: &mut watch::Receiver<Resources>, want: ResourceCount) {
    let got = tokio::time::timeout(DEADLINE, rx.wait_for(|r| find(r) == Some(want)))
        .await
        .is_ok();
    assert!(got, "resources never became {want:?}: {:?}", *rx.borrow());
}

fn find(r: &Resources) -> Option<ResourceCount> {
    r.iter().find(|(n, _)| n == R).map(|(_, c)| *c)
}

fn count(capacity: i64, allocatable: i64) -> ResourceCount {
    ResourceCount {
        capacity,
        allocatable,
    }
}

fn start(dir: &Path, active: watch::Receiver<ActivePods>, stop: &CancellationToken) -> Started {
    start_device_manager(dir, active, stop.child_token()).expect("the device manager starts")
}

fn requests(n: usize) -> Vec<(String, usize)> {
    vec![(R.to_string(), n)]
}

#[tokio::test(flavor = "current_thread")]
async fn register_allocate_unhealthy_and_restarts() {
    let local = tokio::task::LocalSet::new();
    local.run_until(scenario()).await;
}

async fn scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().join("device-plugins");
    // A stale socket of an earlier run: removed at start.
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("old.sock"), "").unwrap();
    let (active_tx, active) = watch::channel::<ActivePods>(None);
    let stop = CancellationToken::new();
    let m = start(&dir, active.clone(), &stop);
    assert!(!dir.join("old.sock").exists());
    assert!(dir.join(KUBELET_SOCKET).exists());
    let mut resources = m.resources.clone();

    // A plugin with two devices registers.
    let (devices, _) = watch::channel(vec![("a".to_string(), true), ("b".to_string(), true)]);
    let calls = Arc::new(Mutex::new(Calls::default()));
    let fake = Fake {
        devices: devices.clone(),
        calls: Arc::clone(&calls),
        stop: CancellationToken::new(),
    };
    let plugin_stop = CancellationToken::new();
    serve(fake.clone(), &dir.join("dp-1.sock"), plugin_stop.clone());
    register(&dir, "dp-1.sock").await.unwrap();
    wait_for(&mut resources, count(2, 2)).await;

    // Bad registrations are refused with the kubelet's messages.
    let err = register(&dir, "../escape.sock").await.unwrap_err();
    assert!(err.message().contains("invalid endpoint"), "{err:?}");

    // Allocate: the plugin's preference (the last device), its answer for the container.
    let got = m
        .handle
        .container_devices("pod-1", "app", requests(1))
        .await
        .unwrap();
    assert_eq!(calls.lock().unwrap().allocate, vec![vec!["b".to_string()]]);
    assert_eq!(calls.lock().unwrap().preferred, 1);
    assert_eq!(got.envs["FAKE_DEVICES"], "b");
    assert_eq!(got.devices[0].host_path, "/dev/fake-b");
    assert_eq!(got.cdi_devices, vec!["example.com/dev=b".to_string()]);
    assert_eq!(got.annotations["fake.example.com/ids"], "b");
    assert_eq!(got.mounts[0].container_path, "/opt/fake");
    // A restarted container gets the same devices, with no new Allocate; PreStartContainer
    // before every start.
    let again = m
        .handle
        .container_devices("pod-1", "app", requests(1))
        .await
        .unwrap();
    assert_eq!(again, got);
    assert_eq!(calls.lock().unwrap().allocate.len(), 1);
    assert_eq!(calls.lock().unwrap().pre_start.len(), 2);
    // A resource no plugin registered: nothing, no error.
    let none = m
        .handle
        .container_devices("pod-1", "side", vec![("vendor.io/x".to_string(), 1)])
        .await
        .unwrap();
    assert!(none.is_empty());
    // Not enough free devices: the kubelet's message.
    let err = m
        .handle
        .container_devices("pod-2", "app", requests(2))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        DeviceError::Unavailable {
            resource: R.into(),
            requested: 2,
            available: 1
        }
    );

    // A device turns unhealthy: it leaves allocatable.
    devices.send_replace(vec![("a".to_string(), false), ("b".to_string(), true)]);
    wait_for(&mut resources, count(2, 1)).await;
    let err = m
        .handle
        .container_devices("pod-2", "app", requests(1))
        .await
        .unwrap_err();
    assert!(
        matches!(err, DeviceError::Unavailable { available: 0, .. }),
        "{err:?}"
    );
    devices.send_replace(vec![("a".to_string(), true), ("b".to_string(), true)]);
    wait_for(&mut resources, count(2, 2)).await;

    // The plugin stops: its devices are unhealthy. It comes back on a new socket and
    // registers again: healthy again, and pod-1 keeps "b".
    plugin_stop.cancel();
    wait_for(&mut resources, count(2, 0)).await;
    let plugin_stop = CancellationToken::new();
    serve(fake.clone(), &dir.join("dp-2.sock"), plugin_stop.clone());
    register(&dir, "dp-2.sock").await.unwrap();
    wait_for(&mut resources, count(2, 2)).await;
    let got2 = m
        .handle
        .container_devices("pod-2", "app", requests(1))
        .await
        .unwrap();
    assert_eq!(got2.envs["FAKE_DEVICES"], "a");

    // The loop publishes the active pods (an admitted pod before its first sync): pod-2 is
    // gone, its device is free again for pod-3.
    active_tx.send_replace(Some(BTreeSet::from([
        "pod-1".to_string(),
        "pod-3".to_string(),
    ])));
    let got3 = tokio::time::timeout(DEADLINE, async {
        loop {
            match m
                .handle
                .container_devices("pod-3", "app", requests(1))
                .await
            {
                Ok(d) => return d,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("pod-2's device is freed");
    assert_eq!(got3.envs["FAKE_DEVICES"], "a");

    // picolet restarts: the manager starts again on the same directory. The plugin's
    // socket is removed (so it registers again), the checkpoint kept: pod-1 and pod-3 keep
    // their devices; the resource reads 0 until the plugin registers.
    stop.cancel();
    plugin_stop.cancel();
    assert!(dir.join(CHECKPOINT_FILE).exists());
    let stop = CancellationToken::new();
    let m = start(&dir, active.clone(), &stop);
    assert!(!dir.join("dp-2.sock").exists());
    let mut resources = m.resources.clone();
    assert_eq!(find(&m.resources.borrow()), Some(count(0, 0)));
    let kept = m
        .handle
        .container_devices("pod-1", "app", requests(1))
        .await
        .unwrap();
    assert_eq!(kept, got);
    let plugin_stop = CancellationToken::new();
    serve(fake.clone(), &dir.join("dp-3.sock"), plugin_stop.clone());
    register(&dir, "dp-3.sock").await.unwrap();
    wait_for(&mut resources, count(2, 2)).await;
    // Both devices are held (pod-1: b, pod-3: a).
    let err = m
        .handle
        .container_devices("pod-4", "app", requests(1))
        .await
        .unwrap_err();
    assert!(
        matches!(err, DeviceError::Unavailable { available: 0, .. }),
        "{err:?}"
    );
    assert_eq!(calls.lock().unwrap().allocate.len(), 3);
    stop.cancel();
    plugin_stop.cancel();
}
