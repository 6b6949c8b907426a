//! A fake CSI node plugin for tests (feature `fake-cri`): a tonic `csi.v1.Node` server on
//! one unix socket and a `pluginregistration.Registration` server on another, in the
//! plugin registration directory, as a real node plugin and its node-driver-registrar
//! sidecar serve them. Records every call (the publish request whole, secrets included:
//! tests compare it), fails the next publishes on request, and restarts (both sockets
//! removed and served again).
//!
//! A publish creates the target directory and either bind-mounts a source directory on it
//! (`with_bind_source`, as a real driver; needs root) or writes a file `volume-id` into it;
//! an unpublish unmounts and removes the target.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tonic::codegen::http;
use tonic::{Request, Response, Status};

use super::proto;
use super::proto::node_server::{Node, NodeServer};
use super::proto::registration::registration_server::{Registration, RegistrationServer};
use super::proto::registration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};

/// One call the fake received.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    GetInfo,
    NotifyRegistrationStatus { registered: bool, error: String },
    NodeGetInfo,
    NodeGetCapabilities,
    Publish(proto::NodePublishVolumeRequest),
    Unpublish(proto::NodeUnpublishVolumeRequest),
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<Call>,
    fail_publish: usize,
    bind_source: Option<PathBuf>,
}

#[derive(Clone)]
struct Service {
    name: String,
    endpoint: PathBuf,
    state: Arc<Mutex<State>>,
}

impl Service {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The fake plugin. Dropping it stops serving (the sockets stay until `stop`).
pub struct FakeCsiPlugin {
    service: Service,
    registration_socket: PathBuf,
    stop: CancellationToken,
}

impl FakeCsiPlugin {
    /// Serves driver `name`: the Node service on `endpoint`, the registration service on
    /// `<registry_dir>/<name>-reg.sock`.
    pub async fn start(
        name: &str,
        registry_dir: &Path,
        endpoint: &Path,
    ) -> std::io::Result<FakeCsiPlugin> {
        let service = Service {
            name: name.to_string(),
            endpoint: endpoint.to_path_buf(),
            state: Arc::default(),
        };
        let mut fake = FakeCsiPlugin {
            service,
            registration_socket: registry_dir.join(format!("{name}-reg.sock")),
            stop: CancellationToken::new(),
        };
        fake.serve()?;
        Ok(fake)
    }

    fn serve(&mut self) -> std::io::Result<()> {
        self.stop = CancellationToken::new();
        // The Node service first: a registration socket that appears is answered at once.
        let node = bind(&self.service.endpoint)?;
        spawn_server(
            NodeServer::new(self.service.clone()),
            node,
            self.stop.clone(),
        );
        let reg = bind(&self.registration_socket)?;
        spawn_server(
            RegistrationServer::new(self.service.clone()),
            reg,
            self.stop.clone(),
        );
        Ok(())
    }

    /// Publishes bind-mount `source` on the target (root only) instead of writing a file.
    pub fn with_bind_source(self, source: &Path) -> Self {
        self.service.state().bind_source = Some(source.to_path_buf());
        self
    }

    /// The next `n` publishes fail with `Internal`.
    pub fn fail_publishes(&self, n: usize) {
        self.service.state().fail_publish = n;
    }

    pub fn calls(&self) -> Vec<Call> {
        self.service.state().calls.clone()
    }

    pub fn publishes(&self) -> Vec<proto::NodePublishVolumeRequest> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Publish(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    pub fn unpublishes(&self) -> Vec<proto::NodeUnpublishVolumeRequest> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Unpublish(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// Registered: a `NotifyRegistrationStatus` with `plugin_registered` came, this many.
    pub fn registrations(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    Call::NotifyRegistrationStatus {
                        registered: true,
                        ..
                    }
                )
            })
            .count()
    }

    pub fn registration_socket(&self) -> &Path {
        &self.registration_socket
    }

    /// Stops serving and removes both sockets (a plugin that exits cleanly).
    pub fn stop(&self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(&self.registration_socket);
        let _ = std::fs::remove_file(&self.service.endpoint);
    }

    /// Stops and serves again on new sockets (the call log is kept).
    pub async fn restart(&mut self) -> std::io::Result<()> {
        self.stop();
        // Let the servers drop their listeners.
        tokio::task::yield_now().await;
        self.serve()
    }
}

impl Drop for FakeCsiPlugin {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn bind(path: &Path) -> std::io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    UnixListener::bind(path)
}

fn spawn_server<S>(service: S, listener: UnixListener, stop: CancellationToken)
where
    S: tonic::codegen::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let incoming = futures_util::stream::unfold(listener, |listener| async move {
        let conn = listener.accept().await.map(|(io, _)| io);
        Some((conn, listener))
    });
    tokio::spawn(async move {
        let server = tonic::transport::Server::builder().serve_with_incoming_shutdown(
            service,
            incoming,
            stop.cancelled_owned(),
        );
        if let Err(e) = server.await {
            log::warn!("fake CSI plugin server failed: {e}");
        }
    });
}

#[tonic::async_trait]
impl Registration for Service {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        self.state().calls.push(Call::GetInfo);
        Ok(Response::new(PluginInfo {
            r#type: super::registration::CSI_PLUGIN.into(),
            name: self.name.clone(),
            endpoint: self.endpoint.to_string_lossy().into_owned(),
            supported_versions: vec!["1.0.0".into()],
        }))
    }

    async fn notify_registration_status(
        &self,
        req: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let req = req.into_inner();
        self.state().calls.push(Call::NotifyRegistrationStatus {
            registered: req.plugin_registered,
            error: req.error,
        });
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

#[tonic::async_trait]
impl Node for Service {
    async fn node_publish_volume(
        &self,
        req: Request<proto::NodePublishVolumeRequest>,
    ) -> Result<Response<proto::NodePublishVolumeResponse>, Status> {
        let req = req.into_inner();
        let bind_source = {
            let mut st = self.state();
            st.calls.push(Call::Publish(req.clone()));
            if st.fail_publish > 0 {
                st.fail_publish -= 1;
                return Err(Status::internal("fake publish failure"));
            }
            st.bind_source.clone()
        };
        let target = Path::new(&req.target_path);
        let internal = |e: std::io::Error| Status::internal(format!("{}: {e}", target.display()));
        std::fs::create_dir_all(target).map_err(internal)?;
        match bind_source {
            Some(src) if !super::is_mounted(target) => {
                nix::mount::mount(
                    Some(&src),
                    target,
                    None::<&str>,
                    nix::mount::MsFlags::MS_BIND,
                    None::<&str>,
                )
                .map_err(|e| internal(e.into()))?;
            }
            Some(_) => {}
            None => std::fs::write(target.join("volume-id"), &req.volume_id).map_err(internal)?,
        }
        Ok(Response::new(proto::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<proto::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<proto::NodeUnpublishVolumeResponse>, Status> {
        let req = req.into_inner();
        self.state().calls.push(Call::Unpublish(req.clone()));
        let target = Path::new(&req.target_path);
        let internal = |e: std::io::Error| Status::internal(format!("{}: {e}", target.display()));
        if super::is_mounted(target) {
            nix::mount::umount(target).map_err(|e| internal(e.into()))?;
        }
        match std::fs::remove_dir_all(target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(internal(e)),
        }
        Ok(Response::new(proto::NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<proto::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<proto::NodeGetCapabilitiesResponse>, Status> {
        self.state().calls.push(Call::NodeGetCapabilities);
        Ok(Response::new(proto::NodeGetCapabilitiesResponse {
            capabilities: Vec::new(),
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<proto::NodeGetInfoRequest>,
    ) -> Result<Response<proto::NodeGetInfoResponse>, Status> {
        self.state().calls.push(Call::NodeGetInfo);
        Ok(Response::new(proto::NodeGetInfoResponse {
            node_id: "fake-node".into(),
            max_volumes_per_node: 0,
            accessible_topology: None,
        }))
    }
}
