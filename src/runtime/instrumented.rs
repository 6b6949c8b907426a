//! A `Runtime` that counts and times every CRI call of the one it wraps (kubelet:
//! `kuberuntime.instrumentedRuntimeService` — `kubelet_runtime_operations_total`,
//! `_errors_total`, `_duration_seconds` by operation type). The relist's calls count as
//! one `relist` operation, which is also the PLEG's relist duration.
//!
//! Costs a clock read and a few `Cell` updates per call; allocates nothing.

use std::rc::Rc;
use std::time::Duration;

use super::credentials::AuthConfig;
use super::{
    ContainerConfig, ContainerEvents, ContainerInfo, ContainerStats, CriError, ExecResult,
    ImageInfo, ListFilter, Lists, PodSandboxStats, RelistDigest, Runtime, RuntimeHealth,
    RuntimeVersion, Sandbox, SandboxConfig, StreamOptions,
};
use crate::metrics::RuntimeMetrics;

#[derive(Clone)]
pub struct Instrumented<R> {
    inner: R,
    metrics: Rc<RuntimeMetrics>,
}

impl<R: Runtime> Instrumented<R> {
    pub fn new(inner: R, metrics: Rc<RuntimeMetrics>) -> Self {
        Instrumented { inner, metrics }
    }

    pub fn metrics(&self) -> &Rc<RuntimeMetrics> {
        &self.metrics
    }

    async fn timed<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, CriError>>,
    ) -> Result<T, CriError> {
        let start = tokio::time::Instant::now();
        let res = call.await;
        let took: Duration = start.elapsed();
        self.metrics.record(operation, took, res.is_ok());
        res
    }
}

impl<R: Runtime> Runtime for Instrumented<R> {
    async fn version(&self) -> Result<RuntimeVersion, CriError> {
        self.timed("version", self.inner.version()).await
    }
    async fn status(&self) -> Result<RuntimeHealth, CriError> {
        self.timed("status", self.inner.status()).await
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> Result<String, CriError> {
        self.timed("run_podsandbox", self.inner.run_pod_sandbox(config))
            .await
    }
    async fn stop_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        self.timed("stop_podsandbox", self.inner.stop_pod_sandbox(id))
            .await
    }
    async fn remove_pod_sandbox(&self, id: &str) -> Result<(), CriError> {
        self.timed("remove_podsandbox", self.inner.remove_pod_sandbox(id))
            .await
    }
    async fn pod_sandbox_status(&self, id: &str) -> Result<Sandbox, CriError> {
        self.timed("podsandbox_status", self.inner.pod_sandbox_status(id))
            .await
    }
    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> Result<Vec<Sandbox>, CriError> {
        self.timed("list_podsandbox", self.inner.list_pod_sandboxes(filter))
            .await
    }
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> Result<String, CriError> {
        self.timed(
            "create_container",
            self.inner.create_container(sandbox_id, config, sandbox),
        )
        .await
    }
    async fn start_container(&self, id: &str) -> Result<(), CriError> {
        self.timed("start_container", self.inner.start_container(id))
            .await
    }
    async fn stop_container(&self, id: &str, timeout: i64) -> Result<(), CriError> {
        self.timed("stop_container", self.inner.stop_container(id, timeout))
            .await
    }
    async fn remove_container(&self, id: &str) -> Result<(), CriError> {
        self.timed("remove_container", self.inner.remove_container(id))
            .await
    }
    async fn list_containers(&self, filter: &ListFilter) -> Result<Vec<ContainerInfo>, CriError> {
        self.timed("list_containers", self.inner.list_containers(filter))
            .await
    }
    async fn container_status(&self, id: &str) -> Result<ContainerInfo, CriError> {
        self.timed("container_status", self.inner.container_status(id))
            .await
    }
    async fn relist(&self, digest: &mut RelistDigest) -> Result<Option<Lists>, CriError> {
        self.timed("relist", self.inner.relist(digest)).await
    }
    async fn container_events(&self) -> Result<ContainerEvents, CriError> {
        self.timed("get_container_events", self.inner.container_events())
            .await
    }
    async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, CriError> {
        self.timed("exec_sync", self.inner.exec_sync(id, cmd, timeout))
            .await
    }
    async fn exec(
        &self,
        id: &str,
        cmd: &[String],
        streams: StreamOptions,
    ) -> Result<String, CriError> {
        self.timed("exec", self.inner.exec(id, cmd, streams)).await
    }
    async fn attach(&self, id: &str, streams: StreamOptions) -> Result<String, CriError> {
        self.timed("attach", self.inner.attach(id, streams)).await
    }
    async fn port_forward(&self, sandbox_id: &str, ports: &[i32]) -> Result<String, CriError> {
        self.timed("port_forward", self.inner.port_forward(sandbox_id, ports))
            .await
    }
    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<ContainerStats>, CriError> {
        self.timed(
            "list_container_stats",
            self.inner.list_container_stats(filter),
        )
        .await
    }
    async fn list_pod_sandbox_stats(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<PodSandboxStats>, CriError> {
        self.timed(
            "list_podsandbox_stats",
            self.inner.list_pod_sandbox_stats(filter),
        )
        .await
    }
    async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, CriError> {
        self.timed("image_status", self.inner.image_status(image))
            .await
    }
    async fn pull_image(
        &self,
        image: &str,
        auth: Option<&AuthConfig>,
        sandbox: &SandboxConfig,
    ) -> Result<String, CriError> {
        self.timed("pull_image", self.inner.pull_image(image, auth, sandbox))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::FakeRuntime;

    #[tokio::test(start_paused = true)]
    async fn counts_calls_and_errors_by_operation() {
        let fake = FakeRuntime::new(crate::clock::TokioClock::new(0));
        let rt = Instrumented::new(fake, Rc::new(RuntimeMetrics::default()));
        rt.version().await.unwrap();
        let _ = rt.container_status("nope").await;
        let mut digest = RelistDigest::default();
        let _ = rt.relist(&mut digest).await;
        let m = rt.metrics();
        assert_eq!(m.total("version"), 1);
        assert_eq!(m.total("container_status"), 1);
        assert_eq!(m.total("relist"), 1);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains(
            "kubelet_runtime_operations_errors_total{operation_type=\"container_status\"} 1"
        ));
    }
}
