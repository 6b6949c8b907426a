//! The CRI client: [`Runtime`] over gRPC (tonic + prost) on a unix socket
//! (kubelet: `remote_runtime.go`, `remote_image.go`).
//!
//! Owns: the generated CRI code (module `proto`, quarantined here with its lint allows), the
//! channel to the runtime's socket, per-call deadlines, the mapping of gRPC failures to
//! [`CriError`], and the conversions between domain types and CRI messages.
//!
//! Must never: let a prost type out of `cri::client` / `cri::fake_cri`, retry a call
//! (failures are returned; the pod worker backs off), or hold state between calls besides
//! the channel.
//!
//! Connecting is lazy: [`CriRuntime::connect`] only checks the endpoint. The socket is dialled
//! on the first call and re-dialled on the call after a connection breaks, so picolet can
//! start before containerd and survives containerd restarts; while the runtime is away every
//! call fails fast with [`CriError::Unavailable`].
//!
//! Deadlines (kubelet: `runtimeRequestTimeout` = 2 min) are enforced here with
//! `tokio::time::timeout` and also sent as the gRPC deadline, so the runtime can give up too.
//! A call that does not answer in time is [`CriError::Timeout`].

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Channel;

use crate::cri::{
    ContainerConfig, ContainerInfo, ContainerSecurity, ContainerState, CriError, ExecResult,
    ImageInfo, ListFilter, Mount, MountPropagation, NamespaceMode, NamespaceOptions, ProfileKind,
    Protocol, RelistDigest, Runtime, RuntimeHealth, RuntimeVersion, Sandbox, SandboxConfig,
    SandboxState, SecurityProfile, StreamOptions,
};

crate::grpc::generated_module! {
    /// The generated CRI v1 messages, clients and (with feature `fake-cri`) servers.
    /// Visible to `cri::fake_cri` only.
    pub(super) mod proto {
        include!(concat!(env!("OUT_DIR"), "/runtime.v1.rs"));
    }
}

use proto::image_service_client::ImageServiceClient;
use proto::runtime_service_client::RuntimeServiceClient;

/// A streaming call's answer must carry a URL.
fn stream_url(method: &'static str, url: String) -> Result<String, CriError> {
    if url.is_empty() {
        return Err(invalid(method, "the response has no url"));
    }
    Ok(url)
}

/// kubelet: `maxMsgSize` — 16 MiB in both directions.
pub(crate) const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// The API version string the client announces in `Version` (kubelet: `kubeRuntimeAPIVersion`).
const KUBE_RUNTIME_API_VERSION: &str = "0.1.0";

/// Per-call deadlines. `Default` is the kubelet's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CriTimeouts {
    /// Mutating calls: RunPodSandbox, StopPodSandbox, RemovePodSandbox, CreateContainer,
    /// StartContainer, RemoveContainer, RemoveImage (kubelet: `runtimeRequestTimeout`, 2 min).
    /// StopContainer gets its own grace `timeout` on top, ExecSync its command timeout.
    pub request: Duration,
    /// Read-only calls: Version, Status, PodSandboxStatus, ListPodSandbox, ListContainers,
    /// ContainerStatus, ImageStatus, ListImages, ImageFsInfo (10 s).
    pub query: Duration,
    /// PullImage (10 min).
    pub pull_image: Duration,
}

impl Default for CriTimeouts {
    fn default() -> Self {
        CriTimeouts {
            request: Duration::from_secs(2 * 60),
            query: Duration::from_secs(10),
            pull_image: Duration::from_secs(10 * 60),
        }
    }
}

impl CriTimeouts {
    /// The same deadline for every call; for tests.
    pub fn uniform(timeout: Duration) -> Self {
        CriTimeouts {
            request: timeout,
            query: timeout,
            pull_image: timeout,
        }
    }
}

pub(crate) use crate::cri::ImageFsUsage;

/// A CRI runtime reached over a unix socket. Cheap to clone: clones share one channel.
#[derive(Debug, Clone)]
pub struct CriRuntime {
    runtime: RuntimeServiceClient<Channel>,
    /// The same channel, for the relist's calls whose answers are kept undecoded.
    channel: Channel,
    images: ImageServiceClient<Channel>,
    timeouts: CriTimeouts,
    socket: Arc<Path>,
    /// kubelet: the instrumented runtime service — every call counted and timed.
    metrics: Option<std::sync::Arc<crate::metrics::RuntimeMetrics>>,
}

/// `unix:///run/containerd/containerd.sock` or `/run/containerd/containerd.sock` → the path
/// (kubelet: `util.GetAddressAndDialer`, which also still accepts a bare path).
pub(crate) fn parse_endpoint(endpoint: &str) -> Result<PathBuf, CriError> {
    let bad = |reason: &str| CriError::BadEndpoint {
        endpoint: endpoint.to_string(),
        reason: reason.to_string(),
    };
    let path = if let Some(rest) = endpoint.strip_prefix("unix://") {
        rest
    } else if endpoint.contains("://") {
        return Err(bad("only unix:// endpoints are supported"));
    } else {
        endpoint
    };
    if path.is_empty() {
        return Err(bad("empty socket path"));
    }
    if !path.starts_with('/') {
        return Err(bad("the socket path must be absolute"));
    }
    Ok(PathBuf::from(path))
}

impl CriRuntime {
    /// Prepares a client for `endpoint` (see [`parse_endpoint`]) with the kubelet's
    /// deadlines. Does not dial: the first call does, and the call after a broken
    /// connection dials again.
    ///
    /// # Panics
    /// Outside a tokio runtime: the channel spawns its worker task on the current one.
    pub fn connect(endpoint: &str) -> Result<CriRuntime, CriError> {
        let socket: Arc<Path> = Arc::from(parse_endpoint(endpoint)?);
        let channel = crate::grpc::unix_channel(Arc::clone(&socket));
        let runtime = RuntimeServiceClient::new(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        let images = ImageServiceClient::new(channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        Ok(CriRuntime {
            runtime,
            channel,
            images,
            timeouts: CriTimeouts::default(),
            socket,
            metrics: None,
        })
    }

    /// Counts and times every call into `metrics` (`/metrics` of the node API).
    #[must_use]
    pub fn with_metrics(mut self, metrics: std::sync::Arc<crate::metrics::RuntimeMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Replaces the deadlines (tests use short ones).
    #[must_use]
    pub fn with_timeouts(mut self, timeouts: CriTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    pub fn timeouts(&self) -> CriTimeouts {
        self.timeouts
    }

    /// The socket this client dials.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }
}

impl CriRuntime {
    /// The relist's two unfiltered list calls, their answers kept as bytes: when the digest
    /// of both equals the last one, nothing is decoded (the idle case, every second).
    async fn relist_lists(
        &self,
        digest: &mut RelistDigest,
    ) -> Result<Option<crate::cri::Lists>, CriError> {
        let timeout = self.timeouts.query;
        let sandboxes_req = proto::ListPodSandboxRequest {
            filter: Some(proto::PodSandboxFilter::default()),
        };
        let containers_req = proto::ListContainersRequest {
            filter: Some(proto::ContainerFilter::default()),
        };
        let sandboxes = self
            .raw_unary(
                "ListPodSandbox",
                LIST_POD_SANDBOX_PATH,
                sandboxes_req,
                timeout,
            )
            .await?;
        let containers = self
            .raw_unary(
                "ListContainers",
                LIST_CONTAINERS_PATH,
                containers_req,
                timeout,
            )
            .await?;
        let now = (list_digest(&sandboxes), list_digest(&containers));
        if digest.0 == Some(now) {
            return Ok(None);
        }
        use prost::Message as _;
        let sandboxes = proto::ListPodSandboxResponse::decode(sandboxes)
            .map_err(|e| invalid("ListPodSandbox", e.to_string()))?;
        let containers = proto::ListContainersResponse::decode(containers)
            .map_err(|e| invalid("ListContainers", e.to_string()))?;
        digest.0 = Some(now);
        Ok(Some((
            sandboxes.items.into_iter().map(sandbox_from_list).collect(),
            containers
                .containers
                .into_iter()
                .map(container_from_list)
                .collect(),
        )))
    }
}

/// One unary call of the runtime or the image service (kubelet: each remote service
/// method's context with its timeout, the call, the error wrapped): the request carries
/// the deadline, the call is counted and its failure mapped (see [`unary`]).
macro_rules! call {
    ($self:ident, $service:ident, $rpc:ident, $method:expr, $timeout:ident, $req:expr) => {{
        let timeout = $self.timeouts.$timeout;
        let mut client = $self.$service.clone();
        unary(
            $self.metrics.as_deref(),
            $method,
            timeout,
            client.$rpc(request($req, timeout)),
        )
        .await
    }};
}

impl Runtime for CriRuntime {
    /// The two unfiltered list calls with their answers kept as bytes: when the digest of
    /// both equals the last one, nothing is decoded (the idle case, every second).
    async fn relist(
        &self,
        digest: &mut RelistDigest,
    ) -> Result<Option<crate::cri::Lists>, CriError> {
        let start = tokio::time::Instant::now();
        let res = self.relist_lists(digest).await;
        // kubelet: `kubelet_pleg_relist_duration_seconds` — the relist's CRI part.
        record(
            self.metrics.as_deref(),
            crate::metrics::RELIST,
            start,
            res.is_ok(),
        );
        res
    }

    /// The stream's opening waits for the runtime's answer up to the query deadline; the
    /// stream itself has none (no gRPC deadline is sent: it lasts as long as the connection).
    ///
    /// containerd 2.x (and 1.7) and CRI-O send the response headers with the first event, not
    /// when the stream is accepted (grpc-go sends them with the first message unless the
    /// handler calls `SendHeader`; CRI-O's `GetContainerEvents` does not): an idle runtime
    /// leaves the opening unanswered. A refusal
    /// (containerd 1.6's Unimplemented, a connection refused) comes at once, so an opening
    /// still unanswered at the deadline is taken as accepted, and its answer is awaited by
    /// the stream's first poll (kubelet: grpc-go's `GetContainerEvents` returns the client
    /// stream without waiting for headers either).
    async fn container_events(&self) -> Result<crate::cri::ContainerEvents, CriError> {
        use futures_util::StreamExt as _;
        const METHOD: &str = "GetContainerEvents";
        let timeout = self.timeouts.query;
        let mut client = self.runtime.clone();
        let mut open: CallFuture<'static, tonic::codec::Streaming<proto::ContainerEventResponse>> =
            Box::pin(async move {
                client
                    .get_container_events(tonic::Request::new(proto::GetEventsRequest {}))
                    .await
            });
        let start = tokio::time::Instant::now();
        let items = match tokio::time::timeout(timeout, &mut open).await {
            Ok(answer) => {
                let res = answer.map_err(|status| map_status(METHOD, timeout, &status));
                record(self.metrics.as_deref(), METHOD, start, res.is_ok());
                res?.into_inner().left_stream()
            }
            Err(_elapsed) => {
                log::debug!("{METHOD}: no answer within {timeout:?}: taken as accepted");
                futures_util::stream::once(async move {
                    match open.await {
                        Ok(response) => response.into_inner().left_stream(),
                        Err(status) => {
                            futures_util::stream::once(async move { Err(status) }).right_stream()
                        }
                    }
                })
                .flatten()
                .right_stream()
            }
        };
        Ok(items
            .map(move |item| match item {
                Ok(event) => Ok(container_event(event)),
                Err(status) => Err(map_status(METHOD, timeout, &status)),
            })
            .boxed_local())
    }

    async fn version(&self) -> Result<RuntimeVersion, CriError> {
        const METHOD: &str = "Version";
        let req = proto::VersionRequest {
            version: KUBE_RUNTIME_API_VERSION.to_string(),
        };
        let resp = call!(self, runtime, version, METHOD, query, req)?;
        Ok(RuntimeVersion {
            runtime_name: resp.runtime_name,
            runtime_version: resp.runtime_version,
            runtime_api_version: resp.runtime_api_version,
        })
    }

    async fn status(&self) -> Result<RuntimeHealth, CriError> {
        const METHOD: &str = "Status";
        let req = proto::StatusRequest { verbose: false };
        let resp = call!(self, runtime, status, METHOD, query, req)?;
        let conditions = resp.status.map(|s| s.conditions).unwrap_or_default();
        let mut health = runtime_health(&conditions);
        if !resp.runtime_handlers.is_empty() {
            health.userns_handlers = Some(
                resp.runtime_handlers
                    .into_iter()
                    .filter(|h| h.features.as_ref().is_some_and(|f| f.user_namespaces))
                    .map(|h| h.name)
                    .collect(),
            );
        }
        Ok(health)
    }

    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, CriError> {
        const METHOD: &str = "RunPodSandbox";
        let req = proto::RunPodSandboxRequest {
            config: Some(sandbox_config(config)),
            runtime_handler: config.runtime_handler.clone(),
        };
        let resp = call!(self, runtime, run_pod_sandbox, METHOD, request, req)?;
        // kubelet: "PodSandboxId is not set for sandbox"
        non_empty(METHOD, resp.pod_sandbox_id, "pod_sandbox_id")
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        const METHOD: &str = "StopPodSandbox";
        let req = proto::StopPodSandboxRequest {
            pod_sandbox_id: id.to_string(),
        };
        call!(self, runtime, stop_pod_sandbox, METHOD, request, req)?;
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        const METHOD: &str = "RemovePodSandbox";
        let req = proto::RemovePodSandboxRequest {
            pod_sandbox_id: id.to_string(),
        };
        call!(self, runtime, remove_pod_sandbox, METHOD, request, req)?;
        Ok(())
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<Sandbox, CriError> {
        const METHOD: &str = "PodSandboxStatus";
        let req = proto::PodSandboxStatusRequest {
            pod_sandbox_id: id.to_string(),
            verbose: false,
        };
        let resp = call!(self, runtime, pod_sandbox_status, METHOD, query, req)?;
        let status = resp
            .status
            .ok_or_else(|| invalid(METHOD, "the response has no status"))?;
        sandbox_from_status(METHOD, status)
    }

    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> Result<Vec<Sandbox>, CriError> {
        const METHOD: &str = "ListPodSandbox";
        let req = proto::ListPodSandboxRequest {
            filter: Some(proto::PodSandboxFilter {
                id: filter.sandbox_id.clone().unwrap_or_default(),
                state: None,
                label_selector: filter.labels.clone(),
            }),
        };
        let resp = call!(self, runtime, list_pod_sandbox, METHOD, query, req)?;
        Ok(resp.items.into_iter().map(sandbox_from_list).collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> Result<String, CriError> {
        const METHOD: &str = "CreateContainer";
        let req = proto::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            config: Some(container_config(config)),
            sandbox_config: Some(sandbox_config(sandbox)),
        };
        let resp = call!(self, runtime, create_container, METHOD, request, req)?;
        // kubelet: "ContainerId is not set for container"
        non_empty(METHOD, resp.container_id, "container_id")
    }

    async fn start_container(&self, id: &str) -> Result<(), CriError> {
        const METHOD: &str = "StartContainer";
        let req = proto::StartContainerRequest {
            container_id: id.to_string(),
        };
        call!(self, runtime, start_container, METHOD, request, req)?;
        Ok(())
    }

    async fn stop_container(&self, id: &str, timeout: i64) -> Result<(), CriError> {
        const METHOD: &str = "StopContainer";
        // kubelet: the deadline is runtimeRequestTimeout + the grace period.
        let grace = Duration::from_secs(u64::try_from(timeout).unwrap_or(0));
        let deadline = self.timeouts.request.saturating_add(grace);
        let mut client = self.runtime.clone();
        let req = proto::StopContainerRequest {
            container_id: id.to_string(),
            timeout,
        };
        unary(
            self.metrics.as_deref(),
            METHOD,
            deadline,
            client.stop_container(request(req, deadline)),
        )
        .await?;
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<(), CriError> {
        const METHOD: &str = "RemoveContainer";
        let req = proto::RemoveContainerRequest {
            container_id: id.to_string(),
        };
        call!(self, runtime, remove_container, METHOD, request, req)?;
        Ok(())
    }

    async fn list_containers(&self, filter: &ListFilter) -> Result<Vec<ContainerInfo>, CriError> {
        const METHOD: &str = "ListContainers";
        let req = proto::ListContainersRequest {
            filter: Some(proto::ContainerFilter {
                id: String::new(),
                state: None,
                pod_sandbox_id: filter.sandbox_id.clone().unwrap_or_default(),
                label_selector: filter.labels.clone(),
            }),
        };
        let resp = call!(self, runtime, list_containers, METHOD, query, req)?;
        Ok(resp
            .containers
            .into_iter()
            .map(container_from_list)
            .collect())
    }

    async fn container_status(&self, id: &str) -> Result<ContainerInfo, CriError> {
        const METHOD: &str = "ContainerStatus";
        let req = proto::ContainerStatusRequest {
            container_id: id.to_string(),
            verbose: false,
        };
        let resp = call!(self, runtime, container_status, METHOD, query, req)?;
        let status = resp
            .status
            .ok_or_else(|| invalid(METHOD, "the response has no status"))?;
        container_from_status(METHOD, status)
    }

    /// One verbose status call (containerd and CRI-O name the PID under `info`), then the
    /// process opened and checked (see [`crate::cri::process`]). Not running: `Unknown`.
    async fn exit_handle(
        &self,
        id: &str,
        sandbox: bool,
    ) -> Result<crate::cri::process::ExitHandle, CriError> {
        let timeout = self.timeouts.query;
        let mut client = self.runtime.clone();
        let (running, info) = if sandbox {
            let req = proto::PodSandboxStatusRequest {
                pod_sandbox_id: id.to_string(),
                verbose: true,
            };
            let resp = unary(
                self.metrics.as_deref(),
                "PodSandboxStatus",
                timeout,
                client.pod_sandbox_status(request(req, timeout)),
            )
            .await?;
            let ready = resp
                .status
                .is_some_and(|s| s.state == proto::PodSandboxState::SandboxReady as i32);
            (ready, resp.info)
        } else {
            let req = proto::ContainerStatusRequest {
                container_id: id.to_string(),
                verbose: true,
            };
            let resp = unary(
                self.metrics.as_deref(),
                "ContainerStatus",
                timeout,
                client.container_status(request(req, timeout)),
            )
            .await?;
            let running = resp
                .status
                .is_some_and(|s| s.state == proto::ContainerState::ContainerRunning as i32);
            (running, resp.info)
        };
        Ok(match crate::cri::process::verbose_pid(&info) {
            Some(pid) if running => crate::cri::process::open(pid, Some(id)),
            _ => crate::cri::process::ExitHandle::Unknown,
        })
    }

    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, CriError> {
        const METHOD: &str = "ExecSync";
        // The runtime counts whole seconds; round up so a 500 ms probe is not "forever" (0).
        let seconds = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
        // kubelet: the deadline is the command's timeout + runtimeRequestTimeout.
        let deadline = self.timeouts.request.saturating_add(timeout);
        let mut client = self.runtime.clone();
        let req = proto::ExecSyncRequest {
            container_id: id.to_string(),
            cmd: cmd.to_vec(),
            timeout: i64::try_from(seconds).unwrap_or(i64::MAX),
        };
        let started = tokio::time::Instant::now();
        let resp = match unary(
            self.metrics.as_deref(),
            METHOD,
            deadline,
            client.exec_sync(request(req, deadline)),
        )
        .await
        {
            Ok(resp) => resp,
            // The runtime gave up on the command (containerd: DeadlineExceeded) before our
            // deadline: report the command's timeout (kubelet: exec.NewTimeoutError).
            Err(CriError::Timeout { .. }) if started.elapsed() < deadline => {
                return Err(CriError::Timeout {
                    method: METHOD,
                    timeout,
                });
            }
            Err(e) => return Err(e),
        };
        Ok(ExecResult {
            exit_code: resp.exit_code,
            stdout: resp.stdout,
            stderr: resp.stderr,
        })
    }

    async fn exec(
        &self,
        id: &str,
        cmd: &[String],
        streams: StreamOptions,
    ) -> Result<String, CriError> {
        const METHOD: &str = "Exec";
        // kubelet: `GetExec` — the runtime only prepares the session; the URL is one-shot.
        let req = proto::ExecRequest {
            container_id: id.to_string(),
            cmd: cmd.to_vec(),
            tty: streams.tty,
            stdin: streams.stdin,
            stdout: streams.stdout,
            stderr: streams.stderr && !streams.tty,
        };
        let resp = call!(self, runtime, exec, METHOD, request, req)?;
        stream_url(METHOD, resp.url)
    }

    async fn attach(&self, id: &str, streams: StreamOptions) -> Result<String, CriError> {
        const METHOD: &str = "Attach";
        let req = proto::AttachRequest {
            container_id: id.to_string(),
            stdin: streams.stdin,
            tty: streams.tty,
            stdout: streams.stdout,
            stderr: streams.stderr && !streams.tty,
        };
        let resp = call!(self, runtime, attach, METHOD, request, req)?;
        stream_url(METHOD, resp.url)
    }

    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> Result<String, CriError> {
        const METHOD: &str = "PortForward";
        let req = proto::PortForwardRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            port: ports.to_vec(),
        };
        let resp = call!(self, runtime, port_forward, METHOD, request, req)?;
        stream_url(METHOD, resp.url)
    }

    async fn list_images(&self) -> Result<Vec<ImageInfo>, CriError> {
        const METHOD: &str = "ListImages";
        let timeout = self.timeouts.query;
        let mut client = self.images.clone();
        let resp = unary(
            self.metrics.as_deref(),
            METHOD,
            timeout,
            client.list_images(request(proto::ListImagesRequest { filter: None }, timeout)),
        )
        .await?;
        resp.images
            .into_iter()
            .map(|image| image_info(METHOD, image))
            .collect()
    }

    async fn remove_image(&self, image: &str) -> Result<(), CriError> {
        const METHOD: &str = "RemoveImage";
        let req = proto::RemoveImageRequest {
            image: Some(image_spec(image)),
        };
        call!(self, images, remove_image, METHOD, request, req)?;
        Ok(())
    }

    async fn image_fs_info(&self) -> Result<Vec<ImageFsUsage>, CriError> {
        const METHOD: &str = "ImageFsInfo";
        let timeout = self.timeouts.query;
        let mut client = self.images.clone();
        let resp = unary(
            self.metrics.as_deref(),
            METHOD,
            timeout,
            client.image_fs_info(request(proto::ImageFsInfoRequest {}, timeout)),
        )
        .await?;
        Ok(resp
            .image_filesystems
            .into_iter()
            .map(|fs| ImageFsUsage {
                timestamp: fs.timestamp,
                mountpoint: fs.fs_id.map(|id| id.mountpoint).unwrap_or_default(),
                used_bytes: fs.used_bytes.map(|v| v.value).unwrap_or_default(),
                inodes_used: fs.inodes_used.map(|v| v.value).unwrap_or_default(),
            })
            .collect())
    }

    async fn update_container_resources(
        &self,
        id: &str,
        resources: &crate::cri::Resources,
    ) -> Result<(), CriError> {
        const METHOD: &str = "UpdateContainerResources";
        let req = proto::UpdateContainerResourcesRequest {
            container_id: id.to_string(),
            linux: Some(linux_resources(resources)),
        };
        call!(
            self,
            runtime,
            update_container_resources,
            METHOD,
            request,
            req
        )?;
        Ok(())
    }

    async fn reopen_container_log(&self, id: &str) -> Result<(), CriError> {
        const METHOD: &str = "ReopenContainerLog";
        let req = proto::ReopenContainerLogRequest {
            container_id: id.to_string(),
        };
        call!(self, runtime, reopen_container_log, METHOD, request, req)?;
        Ok(())
    }

    async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, CriError> {
        const METHOD: &str = "ImageStatus";
        let timeout = self.timeouts.query;
        let mut client = self.images.clone();
        let req = proto::ImageStatusRequest {
            image: Some(image_spec(image)),
            verbose: false,
        };
        match unary(
            self.metrics.as_deref(),
            METHOD,
            timeout,
            client.image_status(request(req, timeout)),
        )
        .await
        {
            Ok(resp) => resp.image.map(|i| image_info(METHOD, i)).transpose(),
            // The CRI answers "absent" with an empty response; some runtimes say NotFound.
            Err(CriError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&crate::cri::credentials::AuthConfig>,
        sandbox: &SandboxConfig,
    ) -> Result<String, CriError> {
        const METHOD: &str = "PullImage";
        let req = proto::PullImageRequest {
            image: Some(image_spec(image)),
            auth: auth.map(|a| proto::AuthConfig {
                username: a.username.clone(),
                password: a.password.clone(),
                auth: a.auth.clone(),
                server_address: a.server_address.clone(),
                identity_token: a.identity_token.clone(),
            }),
            sandbox_config: Some(sandbox_config(sandbox)),
        };
        let resp = call!(self, images, pull_image, METHOD, pull_image, req)?;
        // kubelet: "imageRef of image %q is not set"
        non_empty(METHOD, resp.image_ref, "image_ref")
    }

    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<crate::cri::ContainerStats>, CriError> {
        const METHOD: &str = "ListContainerStats";
        let req = proto::ListContainerStatsRequest {
            filter: Some(proto::ContainerStatsFilter {
                id: String::new(),
                pod_sandbox_id: filter.sandbox_id.clone().unwrap_or_default(),
                label_selector: filter.labels.clone(),
            }),
        };
        let resp = call!(self, runtime, list_container_stats, METHOD, query, req)?;
        Ok(resp.stats.into_iter().map(container_stats).collect())
    }

    async fn list_pod_sandbox_stats(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<crate::cri::PodSandboxStats>, CriError> {
        const METHOD: &str = "ListPodSandboxStats";
        let req = proto::ListPodSandboxStatsRequest {
            filter: Some(proto::PodSandboxStatsFilter {
                id: filter.sandbox_id.clone().unwrap_or_default(),
                label_selector: filter.labels.clone(),
            }),
        };
        let resp = call!(self, runtime, list_pod_sandbox_stats, METHOD, query, req)?;
        Ok(resp.stats.into_iter().map(pod_sandbox_stats).collect())
    }
}

// ---------------------------------------------------------------------------------------
// Calls and errors
// ---------------------------------------------------------------------------------------

const LIST_POD_SANDBOX_PATH: &str = "/runtime.v1.RuntimeService/ListPodSandbox";
const LIST_CONTAINERS_PATH: &str = "/runtime.v1.RuntimeService/ListContainers";

impl CriRuntime {
    /// One unary RuntimeService call whose answer is handed back as its protobuf bytes.
    async fn raw_unary<Req: prost::Message + Send + Sync + 'static>(
        &self,
        method: &'static str,
        path: &'static str,
        req: Req,
        timeout: Duration,
    ) -> Result<prost::bytes::Bytes, CriError> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE);
        let call = async {
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::unknown(format!("Service was not ready: {e}")))?;
            let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
            grpc.unary(request(req, timeout), path, RawCodec::<Req>::default())
                .await
        };
        unary(self.metrics.as_deref(), method, timeout, call).await
    }
}

/// A codec that encodes a prost request and leaves the answer undecoded.
struct RawCodec<Req>(std::marker::PhantomData<fn(Req)>);

impl<Req> Default for RawCodec<Req> {
    fn default() -> Self {
        RawCodec(std::marker::PhantomData)
    }
}

struct RawEncoder<Req>(std::marker::PhantomData<fn(Req)>);
struct RawDecoder;

impl<Req: prost::Message + Send + 'static> tonic::codec::Codec for RawCodec<Req> {
    type Encode = Req;
    type Decode = prost::bytes::Bytes;
    type Encoder = RawEncoder<Req>;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        RawEncoder(std::marker::PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawDecoder
    }
}

impl<Req: prost::Message> tonic::codec::Encoder for RawEncoder<Req> {
    type Item = Req;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Req,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        item.encode(dst)
            .map_err(|e| tonic::Status::internal(e.to_string()))
    }
}

impl tonic::codec::Decoder for RawDecoder {
    type Item = prost::bytes::Bytes;
    type Error = tonic::Status;

    /// A list answer of a few dozen pods is tens of KiB: one buffer of that size instead of
    /// growing the default 8 KiB one several times per call.
    fn buffer_settings(&self) -> tonic::codec::BufferSettings {
        tonic::codec::BufferSettings::new(64 * 1024, 64 * 1024)
    }

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<prost::bytes::Bytes>, tonic::Status> {
        use prost::bytes::Buf as _;
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// An order-independent digest of a list answer: each list item is digested on its own
/// and the digests are summed, so the same items in another order (the runtime iterates a
/// map) give the same digest. Inside an item, each field is hashed on its own and summed
/// too: containerd 1.6 marshals the label and annotation maps in Go's random map order,
/// so the same item comes as different bytes from one list to the next. (Fields that are
/// repeated for real — not maps — do not occur in list items.) Bytes that are not
/// well-formed protobuf are hashed whole.
fn list_digest(bytes: &[u8]) -> u64 {
    // Each item: the sum of its fields' hashes, mixed, so that fields of different items
    // do not add up alike.
    let item = |b: &[u8]| {
        let inner = fields_sum(b, hash_bytes).unwrap_or_else(|| hash_bytes(b));
        finish(inner ^ (b.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    };
    fields_sum(bytes, |field| {
        // The field's payload (a list item), after its key and length.
        match payload(field) {
            Some(p) => item(p),
            None => hash_bytes(field),
        }
    })
    .unwrap_or_else(|| hash_bytes(bytes))
}

/// The sum of `hash` over the top-level fields of protobuf `bytes` (each field with its
/// key), and their count folded in; `None` if the bytes are not well-formed.
fn fields_sum(bytes: &[u8], hash: impl Fn(&[u8]) -> u64) -> Option<u64> {
    let mut i = 0;
    let mut sum = 0u64;
    let mut count = 0u64;
    while i < bytes.len() {
        let start = i;
        let key = varint(bytes, &mut i)?;
        let end = match key & 7 {
            0 => varint(bytes, &mut i).map(|_| i),
            1 => Some(i + 8),
            2 => varint(bytes, &mut i)
                .and_then(|n| usize::try_from(n).ok())
                .and_then(|n| i.checked_add(n)),
            5 => Some(i + 4),
            _ => None,
        }?;
        if end > bytes.len() {
            return None;
        }
        sum = sum.wrapping_add(hash(&bytes[start..end]));
        count += 1;
        i = end;
    }
    Some(sum ^ count.wrapping_mul(0xff51_afd7_ed55_8ccd))
}

/// The payload of a length-delimited field (`field` = key, length, payload).
fn payload(field: &[u8]) -> Option<&[u8]> {
    let mut i = 0;
    let key = varint(field, &mut i)?;
    if key & 7 != 2 {
        return None;
    }
    varint(field, &mut i)?;
    field.get(i..)
}

fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i)?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Eight bytes at a time (this runs over every list answer, every second), then a final
/// mix so that summing stays sensitive to each field's bits.
fn hash_bytes(b: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (b.len() as u64).wrapping_mul(K);
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        let mut x = [0u8; 8];
        x.copy_from_slice(w);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(x)).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    h = (h.rotate_left(23) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    finish(h)
}

/// splitmix64's finalizer.
fn finish(mut h: u64) -> u64 {
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

/// A request carrying `timeout` as its gRPC deadline.
fn request<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    req.set_timeout(timeout);
    req
}

/// Runs one call under `timeout` and maps its failure.
/// One unary call with its deadline, counted. The call's future (tonic's, holding the
/// request) is boxed as soon as it is made: an `async fn` keeps its argument and the
/// future it awaits in separate slots, so taking it by value made every caller's future
/// hold two copies of it — a SyncPod's future was ~20 kB, ~15 kB of it `CreateContainer`'s
/// two. Boxed, it lives on the heap only while the call runs.
fn unary<'a, T: 'a>(
    metrics: Option<&'a crate::metrics::RuntimeMetrics>,
    method: &'static str,
    timeout: Duration,
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>> + Send + 'a,
) -> impl Future<Output = Result<T, CriError>> + 'a {
    unary_boxed(metrics, method, timeout, Box::pin(call))
}

type CallFuture<'a, T> =
    std::pin::Pin<Box<dyn Future<Output = Result<tonic::Response<T>, tonic::Status>> + Send + 'a>>;

async fn unary_boxed<T>(
    metrics: Option<&crate::metrics::RuntimeMetrics>,
    method: &'static str,
    timeout: Duration,
    call: CallFuture<'_, T>,
) -> Result<T, CriError> {
    let start = tokio::time::Instant::now();
    let res = match tokio::time::timeout(timeout, call).await {
        Err(_elapsed) => Err(CriError::Timeout { method, timeout }),
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(map_status(method, timeout, &status)),
    };
    record(metrics, method, start, res.is_ok());
    res
}

/// One call into the counters (not generic: one copy however many calls).
fn record(
    metrics: Option<&crate::metrics::RuntimeMetrics>,
    method: &'static str,
    start: tokio::time::Instant,
    ok: bool,
) {
    if let Some(m) = metrics {
        m.record(method, start.elapsed(), ok);
    }
}

/// tonic's text for a request its server side cancelled at the gRPC deadline.
const TONIC_TIMEOUT_EXPIRED: &str = "Timeout expired";

/// containerd's answer to any CRI call while its CRI plugin is starting.
const CONTAINERD_NOT_INITIALIZED: &str = "server is not initialized yet";

/// `tonic::Status` → `CriError`. containerd answers a missing container, sandbox or image
/// with `NotFound` (its `errdefs.ErrNotFound` becomes `codes.NotFound`).
pub(crate) fn map_status(
    method: &'static str,
    timeout: Duration,
    status: &tonic::Status,
) -> CriError {
    use tonic::Code;
    let message = status.message().to_string();
    match status.code() {
        Code::NotFound => CriError::NotFound { method, message },
        Code::Unimplemented => CriError::Unimplemented { method, message },
        Code::Unavailable => CriError::Unavailable { method, message },
        Code::DeadlineExceeded => CriError::Timeout { method, timeout },
        Code::Cancelled if message.contains(TONIC_TIMEOUT_EXPIRED) => {
            CriError::Timeout { method, timeout }
        }
        // A failure of our side of the connection, not an answer: the runtime went away.
        Code::Unknown | Code::Cancelled if is_transport_failure(status) => {
            CriError::Unavailable { method, message }
        }
        // containerd's CRI plugin serves its socket before it has recovered its state, and
        // answers every call in between with this (its `checkInitialized`): the runtime is
        // still coming back, part of the outage rather than a failure of the call.
        Code::Unknown if message == CONTAINERD_NOT_INITIALIZED => {
            CriError::Unavailable { method, message }
        }
        code => CriError::Rpc {
            method,
            code: format!("{code:?}"),
            message,
        },
    }
}

/// Whether tonic made this status up locally from a transport failure rather than receiving
/// it from the runtime: statuses built from an I/O, hyper or h2 error keep that error as
/// their source (a status parsed from the wire has none), e.g. "operation was canceled" for
/// a request queued on a connection that died; and the generated client reports a channel
/// that cannot get ready as "Service was not ready: ...".
fn is_transport_failure(status: &tonic::Status) -> bool {
    use std::error::Error as _;
    status.source().is_some() || status.message().starts_with("Service was not ready")
}

fn invalid(method: &'static str, message: impl Into<String>) -> CriError {
    CriError::InvalidResponse {
        method,
        message: message.into(),
    }
}

fn non_empty(method: &'static str, value: String, field: &str) -> Result<String, CriError> {
    if value.is_empty() {
        Err(invalid(method, format!("{field} is not set")))
    } else {
        Ok(value)
    }
}

// ---------------------------------------------------------------------------------------
// Domain → CRI
// ---------------------------------------------------------------------------------------

fn image_spec(image: &str) -> proto::ImageSpec {
    proto::ImageSpec {
        image: image.to_string(),
        ..Default::default()
    }
}

fn namespace_mode(mode: NamespaceMode) -> proto::NamespaceMode {
    match mode {
        NamespaceMode::Pod => proto::NamespaceMode::Pod,
        NamespaceMode::Container => proto::NamespaceMode::Container,
        NamespaceMode::Node => proto::NamespaceMode::Node,
    }
}

pub(super) fn namespace_option(options: &NamespaceOptions) -> proto::NamespaceOption {
    proto::NamespaceOption {
        network: namespace_mode(options.network).into(),
        pid: namespace_mode(options.pid).into(),
        ipc: namespace_mode(options.ipc).into(),
        target_id: String::new(),
        // kubelet: one mapping of 0.. to the pod's range, the same for users and groups.
        userns_options: options.userns.map(|m| {
            let map = || proto::IdMapping {
                host_id: m.host_id,
                container_id: 0,
                length: m.length,
            };
            proto::UserNamespace {
                mode: proto::NamespaceMode::Pod.into(),
                uids: vec![map()],
                gids: vec![map()],
            }
        }),
    }
}

/// A container's namespaces; an ephemeral container's target (CRI `TARGET`, `target_id`)
/// for its PID namespace.
fn container_namespace_option(s: &ContainerSecurity) -> proto::NamespaceOption {
    let mut o = namespace_option(&s.namespace_options);
    if !s.pid_target.is_empty() {
        o.pid = proto::NamespaceMode::Target.into();
        o.target_id.clone_from(&s.pid_target);
    }
    o
}

fn protocol(p: Protocol) -> proto::Protocol {
    match p {
        Protocol::Tcp => proto::Protocol::Tcp,
        Protocol::Udp => proto::Protocol::Udp,
        Protocol::Sctp => proto::Protocol::Sctp,
    }
}

fn propagation(p: MountPropagation) -> proto::MountPropagation {
    match p {
        MountPropagation::Private => proto::MountPropagation::PropagationPrivate,
        MountPropagation::HostToContainer => proto::MountPropagation::PropagationHostToContainer,
        MountPropagation::Bidirectional => proto::MountPropagation::PropagationBidirectional,
    }
}

fn int64_value(v: Option<i64>) -> Option<proto::Int64Value> {
    v.map(|value| proto::Int64Value { value })
}

/// `SandboxConfig` → CRI `PodSandboxConfig` (kubelet: `generatePodSandboxConfig`).
fn sandbox_config(c: &SandboxConfig) -> proto::PodSandboxConfig {
    proto::PodSandboxConfig {
        metadata: Some(proto::PodSandboxMetadata {
            name: c.name.clone(),
            uid: c.uid.clone(),
            namespace: c.namespace.clone(),
            attempt: c.attempt,
        }),
        hostname: c.hostname.clone(),
        log_directory: c.log_directory.clone(),
        dns_config: c.dns.as_ref().map(|d| proto::DnsConfig {
            servers: d.servers.clone(),
            searches: d.searches.clone(),
            options: d.options.clone(),
        }),
        port_mappings: c
            .port_mappings
            .iter()
            .map(|p| proto::PortMapping {
                protocol: protocol(p.protocol).into(),
                container_port: p.container_port,
                host_port: p.host_port,
                host_ip: p.host_ip.clone(),
            })
            .collect(),
        labels: c.labels.clone(),
        annotations: c.annotations.clone(),
        linux: Some(proto::LinuxPodSandboxConfig {
            cgroup_parent: c.cgroup_parent.clone(),
            security_context: Some(proto::LinuxSandboxSecurityContext {
                namespace_options: Some(namespace_option(&c.namespace_options)),
                privileged: c.privileged,
                seccomp: Some(security_profile(&c.seccomp)),
                ..Default::default()
            }),
            sysctls: c.sysctls.clone(),
        }),
    }
}

/// `ContainerConfig` → CRI `ContainerConfig` (kubelet: `generateContainerConfig`).
fn container_config(c: &ContainerConfig) -> proto::ContainerConfig {
    let s = &c.security;
    let capabilities =
        (!s.add_capabilities.is_empty() || !s.drop_capabilities.is_empty()).then(|| {
            proto::Capability {
                add_capabilities: s.add_capabilities.clone(),
                drop_capabilities: s.drop_capabilities.clone(),
                add_ambient_capabilities: Vec::new(),
            }
        });
    proto::ContainerConfig {
        metadata: Some(proto::ContainerMetadata {
            name: c.name.clone(),
            attempt: c.attempt,
        }),
        // kubelet: generateContainerConfig sets UserSpecifiedImage to the pod's image name.
        // CRI-O: CreateContainer fails without it ("user specified image not specified,
        // cannot verify image signature").
        image: Some(proto::ImageSpec {
            user_specified_image: c.image.clone(),
            ..image_spec(&c.image)
        }),
        command: c.command.clone(),
        args: c.args.clone(),
        working_dir: c.working_dir.clone(),
        envs: c
            .envs
            .iter()
            .map(|(key, value)| proto::KeyValue {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
        mounts: c.mounts.iter().map(mount).collect(),
        devices: c
            .devices
            .iter()
            .map(|d| proto::Device {
                container_path: d.container_path.clone(),
                host_path: d.host_path.clone(),
                permissions: d.permissions.clone(),
            })
            .collect(),
        cdi_devices: c
            .cdi_devices
            .iter()
            .map(|name| proto::CdiDevice { name: name.clone() })
            .collect(),
        labels: c.labels.clone(),
        annotations: c.annotations.clone(),
        log_path: c.log_path.clone(),
        stdin: c.stdin,
        stdin_once: c.stdin_once,
        tty: c.tty,
        linux: Some(proto::LinuxContainerConfig {
            resources: Some(linux_resources(&c.resources)),
            security_context: Some(proto::LinuxContainerSecurityContext {
                capabilities,
                privileged: s.privileged,
                namespace_options: Some(container_namespace_option(s)),
                run_as_user: int64_value(s.run_as_user),
                run_as_group: int64_value(s.run_as_group),
                supplemental_groups: s.supplemental_groups.clone(),
                readonly_rootfs: s.readonly_rootfs,
                no_new_privs: s.no_new_privs,
                seccomp: Some(security_profile(&s.seccomp)),
                apparmor: s.apparmor.as_ref().map(security_profile),
                ..Default::default()
            }),
        }),
    }
}

fn security_profile(p: &SecurityProfile) -> proto::SecurityProfile {
    use proto::security_profile::ProfileType;
    proto::SecurityProfile {
        profile_type: match p.kind {
            ProfileKind::RuntimeDefault => ProfileType::RuntimeDefault,
            ProfileKind::Unconfined => ProfileType::Unconfined,
            ProfileKind::Localhost => ProfileType::Localhost,
        } as i32,
        localhost_ref: p.localhost_ref.clone(),
    }
}

pub(super) fn mount(m: &Mount) -> proto::Mount {
    proto::Mount {
        container_path: m.container_path.clone(),
        host_path: m.host_path.clone(),
        readonly: m.readonly,
        selinux_relabel: false,
        propagation: propagation(m.propagation).into(),
        image: (!m.image.is_empty()).then(|| proto::ImageSpec {
            image: m.image.clone(),
            user_specified_image: m.image_reference.clone(),
            ..Default::default()
        }),
        image_sub_path: m.image_sub_path.clone(),
    }
}

// ---------------------------------------------------------------------------------------
// CRI → domain
// ---------------------------------------------------------------------------------------

pub(super) fn from_namespace_mode(raw: i32) -> NamespaceMode {
    match proto::NamespaceMode::try_from(raw) {
        Ok(proto::NamespaceMode::Container | proto::NamespaceMode::Target) => {
            NamespaceMode::Container
        }
        Ok(proto::NamespaceMode::Node) => NamespaceMode::Node,
        Ok(proto::NamespaceMode::Pod) | Err(_) => NamespaceMode::Pod,
    }
}

fn sandbox_state(raw: i32) -> SandboxState {
    match proto::PodSandboxState::try_from(raw) {
        Ok(proto::PodSandboxState::SandboxReady) => SandboxState::Ready,
        // An unknown state is not ready: the pod gets a new sandbox.
        Ok(proto::PodSandboxState::SandboxNotready) | Err(_) => SandboxState::NotReady,
    }
}

fn container_state(raw: i32) -> ContainerState {
    match proto::ContainerState::try_from(raw) {
        Ok(proto::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(proto::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(proto::ContainerState::ContainerExited) => ContainerState::Exited,
        Ok(proto::ContainerState::ContainerUnknown) | Err(_) => ContainerState::Unknown,
    }
}

fn runtime_health(conditions: &[proto::RuntimeCondition]) -> RuntimeHealth {
    // kubelet: a required condition that is missing counts as not ready.
    let ready = |kind: &str| conditions.iter().any(|c| c.r#type == kind && c.status);
    let message = conditions
        .iter()
        .filter(|c| !c.status)
        .map(|c| format!("{} is false: {}: {}", c.r#type, c.reason, c.message))
        .collect::<Vec<_>>()
        .join("; ");
    RuntimeHealth {
        runtime_ready: ready("RuntimeReady"),
        network_ready: ready("NetworkReady"),
        message,
        userns_handlers: None,
    }
}

fn sandbox_from_list(s: proto::PodSandbox) -> Sandbox {
    let meta = s.metadata.unwrap_or_default();
    Sandbox {
        id: s.id,
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        attempt: meta.attempt,
        state: sandbox_state(s.state),
        created_at: s.created_at,
        labels: s.labels,
        // not in the list message (see the proto): PodSandboxStatus has them
        annotations: Default::default(),
        ip: None,
        network: None,
    }
}

/// kubelet: `verifySandboxStatus` — an id and metadata are required.
fn sandbox_from_status(
    method: &'static str,
    s: proto::PodSandboxStatus,
) -> Result<Sandbox, CriError> {
    let meta = s
        .metadata
        .ok_or_else(|| invalid(method, format!("sandbox {:?} has no metadata", s.id)))?;
    let id = non_empty(method, s.id, "status.id")?;
    let ip = s.network.map(|n| n.ip).filter(|ip| !ip.is_empty());
    let network = s
        .linux
        .and_then(|l| l.namespaces)
        .and_then(|n| n.options)
        .map(|o| from_namespace_mode(o.network));
    Ok(Sandbox {
        id,
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        attempt: meta.attempt,
        state: sandbox_state(s.state),
        created_at: s.created_at,
        labels: s.labels,
        annotations: s.annotations,
        ip,
        network,
    })
}

/// Prefers the digested reference; newer runtimes also give `image_id`.
fn pick_image_ref(image_ref: String, image_id: String) -> String {
    if image_ref.is_empty() {
        image_id
    } else {
        image_ref
    }
}

fn container_from_list(c: proto::Container) -> ContainerInfo {
    let meta = c.metadata.unwrap_or_default();
    ContainerInfo {
        id: c.id,
        sandbox_id: c.pod_sandbox_id,
        name: meta.name,
        attempt: meta.attempt,
        image: c.image.map(|i| i.image).unwrap_or_default(),
        image_ref: pick_image_ref(c.image_ref, c.image_id),
        state: container_state(c.state),
        created_at: c.created_at,
        started_at: 0,
        finished_at: 0,
        exit_code: 0,
        reason: String::new(),
        message: String::new(),
        labels: c.labels,
        // not in the list message (see the proto): ContainerStatus has them
        annotations: Default::default(),
        log_path: String::new(),
    }
}

/// kubelet: `verifyContainerStatus` — an id and metadata are required. The CRI
/// `ContainerStatus` does not carry the sandbox id: `sandbox_id` is empty here.
fn container_from_status(
    method: &'static str,
    s: proto::ContainerStatus,
) -> Result<ContainerInfo, CriError> {
    let meta = s
        .metadata
        .ok_or_else(|| invalid(method, format!("container {:?} has no metadata", s.id)))?;
    let id = non_empty(method, s.id, "status.id")?;
    Ok(ContainerInfo {
        id,
        sandbox_id: String::new(),
        name: meta.name,
        attempt: meta.attempt,
        image: s.image.map(|i| i.image).unwrap_or_default(),
        image_ref: pick_image_ref(s.image_ref, s.image_id),
        state: container_state(s.state),
        created_at: s.created_at,
        started_at: s.started_at,
        finished_at: s.finished_at,
        exit_code: s.exit_code,
        reason: s.reason,
        message: s.message,
        labels: s.labels,
        annotations: s.annotations,
        log_path: s.log_path,
    })
}

/// An event with what of it is well-formed: a sandbox status or container status without
/// the CRI's required fields is left out, not an error (kubelet: evented PLEG ignores an
/// event without a sandbox status; the next relist sees the truth).
fn container_event(e: proto::ContainerEventResponse) -> crate::cri::ContainerEvent {
    use crate::cri::ContainerEventKind as Kind;
    const METHOD: &str = "GetContainerEvents";
    let kind = match proto::ContainerEventType::try_from(e.container_event_type) {
        Ok(proto::ContainerEventType::ContainerCreatedEvent) => Kind::Created,
        Ok(proto::ContainerEventType::ContainerStartedEvent) => Kind::Started,
        Ok(proto::ContainerEventType::ContainerStoppedEvent) => Kind::Stopped,
        Ok(proto::ContainerEventType::ContainerDeletedEvent) => Kind::Deleted,
        Err(_) => Kind::Unknown,
    };
    let sandbox = e
        .pod_sandbox_status
        .and_then(|s| sandbox_from_status(METHOD, s).ok());
    let sandbox_id = sandbox.as_ref().map(|s| s.id.clone()).unwrap_or_default();
    let containers = e
        .containers_statuses
        .into_iter()
        .filter_map(|c| container_from_status(METHOD, c).ok())
        .map(|mut c| {
            c.sandbox_id.clone_from(&sandbox_id);
            c
        })
        .collect();
    crate::cri::ContainerEvent {
        container_id: e.container_id,
        kind,
        created_at: e.created_at,
        sandbox,
        containers,
    }
}

fn cpu_usage(c: proto::CpuUsage) -> crate::cri::CpuUsage {
    crate::cri::CpuUsage {
        timestamp: c.timestamp,
        usage_core_nano_seconds: c.usage_core_nano_seconds.map(|v| v.value),
        usage_nano_cores: c.usage_nano_cores.map(|v| v.value),
    }
}

fn memory_usage(m: proto::MemoryUsage) -> crate::cri::MemoryUsage {
    crate::cri::MemoryUsage {
        timestamp: m.timestamp,
        working_set_bytes: m.working_set_bytes.map(|v| v.value),
        usage_bytes: m.usage_bytes.map(|v| v.value),
        available_bytes: m.available_bytes.map(|v| v.value),
        rss_bytes: m.rss_bytes.map(|v| v.value),
        page_faults: m.page_faults.map(|v| v.value),
        major_page_faults: m.major_page_faults.map(|v| v.value),
    }
}

fn container_stats(s: proto::ContainerStats) -> crate::cri::ContainerStats {
    let attributes = s.attributes.unwrap_or_default();
    let meta = attributes.metadata.unwrap_or_default();
    crate::cri::ContainerStats {
        id: attributes.id,
        name: meta.name,
        attempt: meta.attempt,
        labels: attributes.labels,
        cpu: s.cpu.map(cpu_usage),
        memory: s.memory.map(memory_usage),
    }
}

fn pod_sandbox_stats(s: proto::PodSandboxStats) -> crate::cri::PodSandboxStats {
    let attributes = s.attributes.unwrap_or_default();
    let meta = attributes.metadata.unwrap_or_default();
    let linux = s.linux.unwrap_or_default();
    crate::cri::PodSandboxStats {
        id: attributes.id,
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        labels: attributes.labels,
        cpu: linux.cpu.map(cpu_usage),
        memory: linux.memory.map(memory_usage),
        containers: linux.containers.into_iter().map(container_stats).collect(),
    }
}

fn image_info(method: &'static str, i: proto::Image) -> Result<ImageInfo, CriError> {
    // kubelet: "Id or size of image %q is not set" (a zero size is tolerated here).
    let id = non_empty(method, i.id, "image.id")?;
    // kubelet: getImageUser — the uid if the runtime gives one, else the user name.
    let user = match (i.uid, i.username) {
        (Some(u), _) => crate::cri::ImageUser::Uid(u.value),
        (None, name) if !name.is_empty() => crate::cri::ImageUser::Name(name),
        _ => crate::cri::ImageUser::Unset,
    };
    Ok(ImageInfo {
        id,
        repo_tags: i.repo_tags,
        size: i.size,
        pinned: i.pinned,
        user,
    })
}

fn linux_resources(r: &crate::cri::Resources) -> proto::LinuxContainerResources {
    proto::LinuxContainerResources {
        cpu_period: r.cpu_period,
        cpu_quota: r.cpu_quota,
        cpu_shares: r.cpu_shares,
        memory_limit_in_bytes: r.memory_limit_in_bytes,
        oom_score_adj: r.oom_score_adj,
        memory_swap_limit_in_bytes: r.memory_swap_limit_in_bytes,
        unified: r
            .swap_max
            .map(|v| [("memory.swap.max".to_string(), v.to_string())].into())
            .unwrap_or_default(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn list_digest_ignores_order_and_sees_every_byte() {
        use prost::Message as _;
        let c = |id: &str, state: i32| proto::Container {
            id: id.into(),
            state,
            ..Default::default()
        };
        let bytes = |cs: Vec<proto::Container>| {
            proto::ListContainersResponse { containers: cs }.encode_to_vec()
        };
        let ab = list_digest(&bytes(vec![c("a", 1), c("b", 1)]));
        assert_eq!(ab, list_digest(&bytes(vec![c("b", 1), c("a", 1)])));
        assert_ne!(ab, list_digest(&bytes(vec![c("a", 1), c("b", 2)])));
        assert_ne!(ab, list_digest(&bytes(vec![c("a", 1)])));
        assert_ne!(
            ab,
            list_digest(&bytes(vec![c("a", 1), c("b", 1), c("b", 1)]))
        );
        assert_ne!(list_digest(&[]), list_digest(&bytes(vec![c("", 0)])));
        // containerd 1.6: the same item with its label map in another order.
        let labelled = |labels: &[(&str, &str)]| {
            let mut c = c("a", 1);
            c.labels = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            c
        };
        let map_entry = |k: &str, v: &str| {
            let mut e = Vec::new();
            prost::encoding::string::encode(1, &k.to_string(), &mut e);
            prost::encoding::string::encode(2, &v.to_string(), &mut e);
            e
        };
        let item_with_entries = |entries: &[Vec<u8>]| {
            let mut item = Vec::new();
            prost::encoding::string::encode(1, &"a".to_string(), &mut item);
            for e in entries {
                prost::encoding::bytes::encode(8, e, &mut item);
            }
            let mut list = Vec::new();
            prost::encoding::bytes::encode(1, &item, &mut list);
            list
        };
        let (x, y) = (map_entry("k1", "v1"), map_entry("k2", "v2"));
        assert_eq!(
            list_digest(&item_with_entries(&[x.clone(), y.clone()])),
            list_digest(&item_with_entries(&[y.clone(), x.clone()]))
        );
        assert_ne!(
            list_digest(&item_with_entries(&[x.clone(), y.clone()])),
            list_digest(&item_with_entries(&[x.clone(), map_entry("k2", "v3")]))
        );
        // Two items trading a label are not the same list.
        let two = |a: &[(&str, &str)], b: &[(&str, &str)]| {
            let mut b_item = labelled(b);
            b_item.id = "b".into();
            list_digest(&bytes(vec![labelled(a), b_item]))
        };
        assert_ne!(
            two(&[("x", "1"), ("y", "1")], &[]),
            two(&[("x", "1")], &[("y", "1")])
        );
        // Not protobuf: hashed whole, no panic.
        let _ = list_digest(&[0xff, 0xff, 0xff]);
    }

    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn endpoints() {
        let ok = |e: &str| parse_endpoint(e).map(|p| p.display().to_string());
        assert_eq!(
            ok("unix:///run/containerd/containerd.sock"),
            Ok("/run/containerd/containerd.sock".to_string())
        );
        assert_eq!(
            ok("/run/crio/crio.sock"),
            Ok("/run/crio/crio.sock".to_string())
        );
        for bad in [
            "",
            "unix://",
            "unix://relative.sock",
            "relative.sock",
            "tcp://127.0.0.1:1234",
            "npipe:////./pipe/x",
        ] {
            assert!(
                matches!(parse_endpoint(bad), Err(CriError::BadEndpoint { .. })),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn status_mapping() {
        use tonic::{Code, Status};
        let t = Duration::from_secs(3);
        let map = |s: Status| map_status("M", t, &s);
        assert!(map(Status::not_found("x")).is_not_found());
        assert!(matches!(
            map(Status::unavailable("x")),
            CriError::Unavailable { .. }
        ));
        assert_eq!(
            map(Status::deadline_exceeded("x")),
            CriError::Timeout {
                method: "M",
                timeout: t
            }
        );
        assert!(matches!(
            map(Status::cancelled("Timeout expired")),
            CriError::Timeout { .. }
        ));
        assert!(matches!(
            map(Status::unknown("Service was not ready: transport error")),
            CriError::Unavailable { .. }
        ));
        assert_eq!(
            map(Status::new(Code::FailedPrecondition, "nope")),
            CriError::Rpc {
                method: "M",
                code: "FailedPrecondition".to_string(),
                message: "nope".to_string()
            }
        );
        assert!(matches!(
            map(Status::unknown("failed to create containerd task")),
            CriError::Rpc { .. }
        ));
        // containerd restarting: its CRI plugin answers before it has recovered.
        assert!(matches!(
            map(Status::unknown("server is not initialized yet")),
            CriError::Unavailable { .. }
        ));
        // Made up by tonic from a broken connection (it keeps the cause as the source).
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert!(matches!(
            map(Status::from_error(Box::new(io))),
            CriError::Unavailable { .. }
        ));
        let mut canceled = Status::cancelled("operation was canceled");
        assert!(matches!(map(canceled.clone()), CriError::Rpc { .. }));
        canceled.set_source(std::sync::Arc::new(std::io::Error::other("dispatch gone")));
        assert!(matches!(map(canceled), CriError::Unavailable { .. }));
    }

    #[test]
    fn health_from_conditions() {
        let cond = |t: &str, status: bool| proto::RuntimeCondition {
            r#type: t.to_string(),
            status,
            reason: if status { String::new() } else { "R".into() },
            message: if status { String::new() } else { "m".into() },
        };
        let h = runtime_health(&[cond("RuntimeReady", true), cond("NetworkReady", false)]);
        assert!(h.runtime_ready);
        assert!(!h.network_ready);
        assert_eq!(h.message, "NetworkReady is false: R: m");
        let h = runtime_health(&[]);
        assert!(!h.runtime_ready && !h.network_ready);
    }

    #[test]
    fn sandbox_status_fields() {
        let status = proto::PodSandboxStatus {
            id: "sb".into(),
            metadata: Some(proto::PodSandboxMetadata {
                name: "web".into(),
                uid: "u1".into(),
                namespace: "default".into(),
                attempt: 2,
            }),
            state: proto::PodSandboxState::SandboxNotready.into(),
            created_at: 42,
            network: Some(proto::PodSandboxNetworkStatus {
                ip: "10.88.0.7".into(),
                additional_ips: vec![],
            }),
            linux: Some(proto::LinuxPodSandboxStatus {
                namespaces: Some(proto::Namespace {
                    options: Some(proto::NamespaceOption {
                        network: proto::NamespaceMode::Node.into(),
                        ..Default::default()
                    }),
                }),
            }),
            labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
            annotations: Default::default(),
            runtime_handler: String::new(),
        };
        let s = sandbox_from_status("PodSandboxStatus", status.clone()).expect("valid");
        assert_eq!(s.ip.as_deref(), Some("10.88.0.7"));
        assert_eq!(s.network, Some(NamespaceMode::Node));
        assert_eq!(s.state, SandboxState::NotReady);
        assert_eq!((s.name.as_str(), s.attempt, s.created_at), ("web", 2, 42));

        let no_meta = proto::PodSandboxStatus {
            metadata: None,
            ..status.clone()
        };
        assert!(matches!(
            sandbox_from_status("PodSandboxStatus", no_meta),
            Err(CriError::InvalidResponse { .. })
        ));
        let no_net = proto::PodSandboxStatus {
            network: Some(proto::PodSandboxNetworkStatus::default()),
            linux: None,
            ..status
        };
        let s = sandbox_from_status("PodSandboxStatus", no_net).expect("valid");
        assert_eq!((s.ip, s.network), (None, None));
    }

    #[test]
    fn unknown_enum_values_degrade_safely() {
        assert_eq!(sandbox_state(99), SandboxState::NotReady);
        assert_eq!(container_state(99), ContainerState::Unknown);
        assert_eq!(from_namespace_mode(99), NamespaceMode::Pod);
        assert_eq!(
            from_namespace_mode(proto::NamespaceMode::Target.into()),
            NamespaceMode::Container
        );
    }

    #[test]
    fn create_container_names_the_user_specified_image() {
        let c = ContainerConfig {
            image: "localhost/busybox:edge".into(),
            ..Default::default()
        };
        let image = container_config(&c).image.expect("image");
        assert_eq!(image.image, "localhost/busybox:edge");
        assert_eq!(image.user_specified_image, "localhost/busybox:edge");
    }

    #[test]
    fn capabilities_only_when_given() {
        let mut c = ContainerConfig::default();
        let sc = |c: &ContainerConfig| {
            container_config(c)
                .linux
                .and_then(|l| l.security_context)
                .expect("security context is always sent")
        };
        assert_eq!(sc(&c).capabilities, None);
        c.security.drop_capabilities = vec!["ALL".into()];
        assert_eq!(
            sc(&c).capabilities.map(|c| c.drop_capabilities),
            Some(vec!["ALL".to_string()])
        );
    }
}
