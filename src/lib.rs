//! picolet — a kubelet for edge devices.
//!
//! picolet turns *desired* pods into *running* containers on one small node, the way the
//! upstream kubelet does, in one small binary on one thread (tokio `current_thread`).
//!
//! ```text
//!  sources (full snapshots)        merge              desired view         one worker per UID
//!  ┌──────────────┐           ┌─────────────┐      ┌─────────────┐      ┌───────────────────┐
//!  │ file (inotify│──snapshot─▶ pod_config  │─────▶│ pod_manager │─────▶│ pod_workers       │
//!  │ + 20 s relist)│          │ PodUpdate   │      │ by UID/name │      │ Sync → Terminating│
//!  └──────────────┘           │ ADD/UPDATE/ │      └─────────────┘      │  → Terminated     │
//!   + http, api (apiserver)   │ DELETE/...  │                           └─────────┬─────────┘
//!                             └─────────────┘                                     │ plan + sync
//!        relist every 1 s (PLEG) ◀──────────────── runtime ◀──────────────────────┘
//!                                                  (CRI over a unix socket: containerd, CRI-O)
//! ```
//!
//! Layers: every module imports only modules of lower layers (the table below, checked
//! against the code by `tests/house.rs`: a module's imports are a subset of its line, and
//! a line names only modules of lower layers). A module never imports the module that
//! wires it (`daemon`), messages that cross layers live in `messages`, and each manager
//! that talks to the apiserver sits beside what it manages, over the leaf client `kube`.
//!
//! ```text
//! layer  module        may import
//! 0      api           -
//! 0      http1         -
//! 0      clock         -
//! 0      grpc          -
//! 0      json          -
//! 0      metrics       -
//! 0      dir_listing   -
//! 0      mem_trim      -
//! 0      sort          -
//! 0      local_tasks   -
//! 1      checkpoint    api
//! 1      cri           api clock grpc metrics
//! 1      kube          api clock
//! 1      mirror        dir_listing http1 local_tasks sort
//! 1      pod_manager   api mem_trim sort
//! 1      pod_workers   api local_tasks mem_trim metrics sort
//! 1      qos           api
//! 1      x509          api clock
//! 2      allocation    api checkpoint qos sort
//! 2      certificate   api checkpoint clock kube x509
//! 2      cm            api grpc local_tasks qos sort
//! 2      config_data   api checkpoint clock kube local_tasks sort
//! 2      eviction      api cri dir_listing local_tasks qos sort
//! 2      images        clock cri local_tasks sort
//! 2      probe         api clock grpc kube
//! 2      recorder      api clock json kube
//! 3      fieldpath     api config_data qos
//! 3      manifest      api clock config_data qos sort
//! 3      messages      api config_data
//! 3      node          api clock cm cri eviction kube local_tasks qos sort
//! 3      options       api cm eviction images qos
//! 4      admission     api manifest qos
//! 4      log_rotation  clock cri dir_listing local_tasks messages sort
//! 4      pod_config    api messages
//! 4      source        api checkpoint clock config_data dir_listing kube local_tasks manifest messages recorder sort
//! 4      status        allocation api clock config_data cri kube local_tasks messages pod_manager qos sort
//! 4      volume        api clock config_data cri dir_listing fieldpath grpc local_tasks sort
//! 5      kuberuntime   allocation api clock cm config_data cri dir_listing fieldpath log_rotation probe qos recorder sort volume
//! 6      local_api     api checkpoint clock cm cri eviction http1 json kube kuberuntime local_tasks manifest mem_trim messages metrics node recorder sort x509
//! 6      pleg          cri kuberuntime local_tasks sort
//! 6      prober        api clock cri kuberuntime local_tasks mem_trim metrics probe recorder status
//! 7      cli           admission clock config_data kube local_api manifest node options sort source
//! 7      pod_sync      allocation api clock cri kuberuntime mem_trim messages pleg pod_workers prober recorder status
//! 8      agent         admission allocation api clock cm config_data cri dir_listing eviction images kuberuntime local_tasks log_rotation manifest mem_trim messages metrics node pleg pod_config pod_manager pod_sync pod_workers prober qos recorder sort status volume
//! 9      daemon        admission agent certificate checkpoint clock cm config_data cri eviction images kube kuberuntime local_api local_tasks log_rotation messages metrics mirror node options pleg prober qos recorder source status volume
//! ```
//!
//! Fakes: one per external boundary, and each boundary's fake is one model with thin
//! fronts. containerd: `cri::fake_containerd` (the in-memory containerd: state, IDs,
//! injected clock, events, stats) ← `cri::fake` (a `Runtime`, called directly, paused
//! time) and `cri::fake_cri` (feature `fake-cri`: a CRI gRPC server that only decodes,
//! calls the model, encodes, and adds transport faults). The API server: `kube::mock`
//! (feature `mock-apiserver`). CSI: `volume::csi::fake` (feature `fake-cri`). Time:
//! `clock::TokioClock`.
//!
//! Layout — what each module owns (its own docs say what it must never do). Every module
//! is private to the crate but [`api`], the Kubernetes types; the library's API is the
//! `pub use` block at the end of this file (what `main.rs`, the tests and the benches use),
//! grouped by concern, with the facades [`apiserver`], [`node_api`], [`manifest_fields`],
//! [`protos`] and [`fakes`] (the test doubles, behind their features):
//! - [`api`]          the Kubernetes types (the `v1/Pod` subset, ConfigMap, Secret; `cluster`: Node, Lease, lists, watch events, `Status`) and the Pod decoder, nothing else
//! - `clock`          injected wall-clock time
//! - `http1`          the HTTP/1 server side of the node API and the image mirror: one connection loop over boxed I/O and handler (one copy of hyper's server: binary size), the response body
//! - `grpc`           the protobuf codec of the generated gRPC code and the unix-socket channel
//! - `json`           JSON objects built out of line, for `json!` at many keys (binary size)
//! - `metrics`        Prometheus text rendering and the agent's counters
//! - `mem_trim`         giving memory back after a burst (sparse maps, heap trim)
//! - `sort`           stable sorting with one copy of the sort code (binary size)
//! - `local_tasks`           spawning the agent's tasks with one copy of tokio's task code (binary size); the wake-up grid their periodic passes share (idle CPU)
//! - `checkpoint`     (feature `apiserver`) the last-seen API pods and objects on disk (offline autonomy)
//! - `cri`            the CRI boundary: the `Runtime` trait, its types, the tonic client, the fakes
//! - `kube`           (feature `apiserver`) the apiserver client: HTTP(S), kubeconfig, typed calls, watches
//! - `pod_manager`    the desired pods, by UID and by full name
//! - `pod_workers`    the per-pod lifecycle state machine and its scheduling
//! - `qos`            QoS class, OOM score and swap of a pod (pure)
//! - `x509`           (feature `apiserver`) DER: the X.509 certificates and PKCS#10 requests picolet makes and reads
//! - `mirror`         (feature `image-mirror`) the image mirror: a read-only OCI distribution endpoint over a directory of image archives (air-gapped nodes)
//! - `allocation`     in-place resize: the pods' allocated cpu and memory (checkpointed), what containers were created with, the resize conditions
//! - `certificate`    (feature `apiserver`) TLS bootstrap, client and serving certificate rotation by CSR
//! - `cm`             the container manager's cgroups: kubepods, QoS and pod cgroups, allocatable; `cm::devicemanager` (feature `device-plugins`): device plugins' registration, devices and Allocate
//! - `config_data`    ConfigMaps/Secrets of the node (local files, and the apiserver's watches)
//! - `eviction`       the eviction manager: thresholds, pressure conditions, ranking, measuring
//! - `images`         the image manager's GC: unused images go, least recently used first
//! - `probe`          the network probe and hook handlers (tcpSocket, httpGet, grpc)
//! - `recorder`       Kubernetes Events of what picolet did to pods (a bounded ring), and their sink
//! - `fieldpath`      values pod fields give containers and volumes: subscripts, resourceFieldRef, `$(VAR)`
//! - `manifest`       pre-scan (cost limits), parse, default, validate a manifest; static pod identity
//! - `messages`       messages between layers (source snapshots, pod events) and the coalescing mailbox
//! - `node`           node facts and checks; the Node object, its status and Lease (cluster mode)
//! - `options`        command-line flags and config file
//! - `admission`      the kubelet's admit handlers (node selector, affinity, resources, max pods)
//! - `log_rotation`           the container log manager: rotates running containers' logs
//! - `pod_config`     PodConfig: merges source snapshots into ordered `PodUpdate`s
//! - `source`         pod sources: the static pod directory; the apiserver and `--manifest-url`
//! - `status`         pod status from runtime state; its sync to the apiserver (cluster mode)
//! - `volume`         the host side of volumes: pod directories, mounts, data volumes, CSI
//! - `kuberuntime`    the runtime manager: labels, plan, CRI configs, sync, hooks, container GC
//! - `local_api`      (feature `apiserver`) the node's own API, which the real kubectl uses
//! - `pleg`           the PLEG's relist and the runtime's container events
//! - `prober`         the probe manager: one worker task per probe, results by container ID
//! - `cli`            the board's commands: `validate`, `get`, `describe pod`, `logs`
//! - `pod_sync`       the pod syncer the pod workers call, and the pod state (cache, back-offs, statuses) the loop owns and answers its requests from
//! - `agent`          the one event loop; it owns pod state and starts no long-running task
//! - `daemon`         wiring: builds everything from the options and spawns every task

// No production function over 120 lines (clippy.toml): a long flow reads as its numbered
// steps, each a named function. Tests (cfg(test), tests/) and the fakes are left out.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]
// What is not exported below is `pub(crate)`: the front door stays the only door.
#![warn(unreachable_pub)]
// A build without some of the default features leaves parts of the others' code unused
// (device plugins' model without `device-plugins`, the CLI's tables without `apiserver`)
// or unexported: dead code and visibility are checked where every feature is on (CI's
// clippy `--all-features`).
#![cfg_attr(
    not(all(
        feature = "apiserver",
        feature = "image-mirror",
        feature = "device-plugins"
    )),
    allow(dead_code, unused_imports, unreachable_pub)
)]

mod admission;
mod agent;
mod allocation;
/// The Kubernetes types (`v1/Pod` and its parts, `cluster`'s objects): one public
/// vocabulary, shared by the library, the binary and the tests, so the module is the API.
pub mod api;
#[cfg(feature = "apiserver")]
mod certificate;
#[cfg(feature = "apiserver")]
mod checkpoint;
mod cli;
mod clock;
mod cm;
mod config_data;
mod cri;
mod daemon;
mod dir_listing;
mod eviction;
mod fieldpath;
mod grpc;
#[cfg(any(feature = "apiserver", feature = "image-mirror"))]
mod http1;
mod images;
mod json;
#[cfg(feature = "apiserver")]
mod kube;
mod kuberuntime;
#[cfg(feature = "apiserver")]
mod local_api;
mod local_tasks;
mod log_rotation;
mod manifest;
mod mem_trim;
mod messages;
mod metrics;
#[cfg(feature = "image-mirror")]
mod mirror;
mod node;
mod options;
mod pleg;
mod pod_config;
mod pod_manager;
mod pod_sync;
mod pod_workers;
mod probe;
mod prober;
mod qos;
mod recorder;
mod sort;
mod source;
mod status;
mod volume;
#[cfg(feature = "apiserver")]
mod x509;

// The runtime boundary: the CRI `Runtime` trait, its domain types, the gRPC client.
pub use cri::client::{CriRuntime, CriTimeouts};
pub use cri::credentials::AuthConfig as RegistryAuth;
pub use cri::{
    ContainerConfig, ContainerEvent, ContainerEventKind, ContainerEvents, ContainerInfo,
    ContainerSecurity, ContainerState, CriError, Device, DnsConfig, ExecResult, IdMapping,
    ListFilter, Mount, MountPropagation, NamespaceMode, NamespaceOptions, PortMapping, ProfileKind,
    Protocol, RelistDigest, Resources, Runtime, RuntimeHealth, Sandbox, SandboxConfig,
    SandboxState, SecurityProfile, StreamOptions,
};
// What the runtime manager asks of the runtime for a pod: its CRI configs and labels.
pub use kuberuntime::cri_config::{
    NodeParams, SandboxParams, container_config, parse_resolv_conf, sandbox_config,
};
pub use kuberuntime::labels::{POD_NAMESPACE_LABEL, POD_UID_LABEL};

// The daemon (wiring from the options), the agent (the event loop) and their messages.
pub use agent::{AgentConfig, EvictionConfig, TERMINATION_STEPS_IN_FLIGHT};
#[cfg(feature = "apiserver")]
pub use daemon::start_apiserver_mode;
pub use daemon::{
    DaemonConfig, Extensions, cri_runtime, new_recorder, run as run_daemon,
    run_with as run_daemon_with, run_with_extensions as run_daemon_with_extensions,
};
pub use messages::{PodEvent, PodEventReceiver, SourceUpdate, pod_events};

// The command line: flags and config file, the board's commands.
pub use cli::main as cli_main;
pub use options::{Command, Options, build_features, help as options_help, parse as parse_options};

// Time: the injected clock and the RFC 3339 stamps.
pub use clock::{Clock, SystemClock, TokioClock, parse_rfc3339, rfc3339, rfc3339_nanos};

// Manifests: pre-scan, parse, default, validate, static pod identity; admission.
pub use admission::{NodeInfo, admit as admit_pod};
pub use manifest::prescan::check as prescan_manifest;
pub use manifest::{
    Document as ManifestDocument, ManifestError, SOURCE_FILE, apply_defaults, default_pull_policy,
    image_tag_and_digest, load as load_manifest, load_documents as load_manifest_documents,
    make_static, parse as parse_manifest, parse_document as parse_manifest_document,
    static_pod_uid, validate as validate_pod,
};

// Pod sources and the offline checkpoint of the API's pods.
#[cfg(feature = "apiserver")]
pub use checkpoint::Checkpoint;
#[cfg(feature = "apiserver")]
pub use source::apiserver::{ApiSource, ApiSourceOptions};
pub use source::file::{FileSource, FileSourceOptions};
#[cfg(feature = "apiserver")]
pub use source::http::{HttpSource, HttpSourceOptions};

// The node: facts and start-up checks, its Node object and Lease.
#[cfg(feature = "apiserver")]
pub use node::status::{NodeAgent, NodeOptions};
pub use node::{
    Preflight, Verdict as PreflightVerdict, detect_cgroups, node_labels, node_name, parse_meminfo,
};

// The managers: cgroups, devices, eviction, logs, metrics, events, status, volumes, mirror.
#[cfg(feature = "device-plugins")]
pub use cm::devicemanager::manager::{
    ActivePods, Started as StartedDeviceManager, check_dir as check_device_plugin_dir,
    start as start_device_manager,
};
pub use cm::devicemanager::{
    CHECKPOINT_FILE as DEVICE_CHECKPOINT_FILE, DEFAULT_DIR as DEVICE_PLUGIN_DIR, DeviceError,
    KUBELET_SOCKET, ResourceCount, Resources as DeviceResources,
};
pub use cm::manager::PodCgroupsConfig;
pub use cm::{
    CgroupDriver, CgroupVersion, Layout as CgroupLayout, V1_CONTROLLERS, kubepods_resources,
    split_root as split_cgroup_root,
};
pub use eviction::observe::{FsStats, Sources as EvictionSources, memory_available};
pub use eviction::{Conditions as PressureConditions, parse_thresholds};
pub use log_rotation::LogRotatePolicy;
pub use metrics::{AgentMetrics, RELIST as RELIST_OPERATION, RuntimeMetrics};
#[cfg(feature = "image-mirror")]
pub use mirror::runtime_uses_mirror;
pub use recorder::Recorder;
#[cfg(feature = "apiserver")]
pub use recorder::event_sink::{EventSink, EventSinkOptions, SinkStats as EventSinkStats};
#[cfg(feature = "apiserver")]
pub use status::status_sync::StatusSyncer;
pub use volume::csi::{is_mounted, volume_handle as csi_volume_handle};

/// The apiserver client: typed calls, watches, kubeconfig.
#[cfg(feature = "apiserver")]
pub mod apiserver {
    pub use crate::kube::{
        ApiError, Client, ClientConfig, DeleteOptions, HttpClient, PatchKind, WatchStream,
        clock_problem, pod_path, query,
    };
}

/// The node's own API (what `kubectl logs`, `exec` and `get --raw` reach on the node).
#[cfg(feature = "apiserver")]
pub mod node_api {
    pub use crate::local_api::auth::{AuthConfig, Mode};
    pub use crate::local_api::certs::{Subject as CertSubject, generate as generate_cert};
    pub use crate::local_api::server::{Api, serve_plain};
    pub use crate::local_api::token::Token;
    pub use crate::local_api::view::View;
    pub use crate::local_api::{LocalApiOptions, Sources, start};
}

/// The manifest field policy: which `v1.Pod` fields picolet honours, warns on or refuses.
pub mod manifest_fields {
    pub use crate::manifest::fields::{
        Policy, RULES, Unknown, classify_unknown, findings, markdown_table, normalize, rule_for,
    };
}

/// The generated protobuf code the tests speak to picolet's gRPC clients and servers with.
pub mod protos {
    #[cfg(feature = "device-plugins")]
    pub use crate::cm::devicemanager::proto as device_plugin;
    pub use crate::volume::csi::proto as csi;
}

/// The test doubles (features `fakes`, `fake-cri`, `mock-apiserver`): never in a release build.
pub mod fakes {
    #[cfg(any(test, feature = "fakes"))]
    pub use crate::clock::JumpClock;
    #[cfg(any(test, feature = "fakes"))]
    pub use crate::cri::fake::{Call as RuntimeCall, FakeRuntime, Method as RuntimeMethod};
    #[cfg(feature = "fake-cri")]
    pub use crate::cri::fake_cri::{
        Code, FakeCri, FakeCriHandle, Fault, Method as CriMethod, STREAM_BASE,
    };
    #[cfg(feature = "mock-apiserver")]
    pub use crate::kube::mock::{MockApiServer, MockTls};
    #[cfg(feature = "fake-cri")]
    pub use crate::volume::csi::fake::{Call as CsiCall, FakeCsiPlugin};
}
