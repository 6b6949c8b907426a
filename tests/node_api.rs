//! The node API in-process, over the fake runtime and real loopback sockets: what it serves
//! through picolet's own HTTPS client (JSON pods, the Table kubectl asks for, a watch),
//! that it refuses a wrong token, and that slow or hostile clients never delay pod work.
//! (The real kubectl against the real binary is e2e scenario `m_node_api`.)

mod common;

use std::time::Duration;
use tokio::io::AsyncWriteExt as _;

use picolet::apiserver::{Client, ClientConfig};
use picolet::clock::TokioClock;
use picolet::local_api::{self, LocalApiOptions};
use picolet::runtime::fake::FakeRuntime;
use serde_json::Value;
use tokio::task::LocalSet;

use common::IMAGE;
use common::agent::agent_dir;

fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: {name}}}}}\nspec:\n  \
         containers:\n  - {{name: app, image: {IMAGE}, command: [sleep, '1000']}}\n"
    )
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

struct Node {
    shutdown: tokio_util::sync::CancellationToken,
    handle: tokio::task::JoinHandle<()>,
    client: Client,
    opts: LocalApiOptions,
}

/// The agent and the node API over the fake runtime, as `daemon::run` wires them.
async fn start(dir: &std::path::Path, cfg: &picolet::agent::AgentConfig) -> Node {
    start_with(dir, cfg, None).await
}

async fn start_with(
    dir: &std::path::Path,
    cfg: &picolet::agent::AgentConfig,
    client_ca: Option<&std::path::Path>,
) -> Node {
    let clock = TokioClock::new(1_800_000_000_000_000_000);
    let rt = FakeRuntime::new(clock);
    rt.add_image(IMAGE);
    let opts = LocalApiOptions {
        node_name: cfg.node_name.clone(),
        address: "127.0.0.1".parse().expect("ip"),
        port: free_port(),
        cert_dir: dir.join("root/pki"),
        tls_cert_file: None,
        tls_private_key_file: None,
        client_ca_file: client_ca.map(std::path::Path::to_path_buf),
        kubeconfig_path: dir.join("root/kubeconfig"),
        node_ip: None,
        pod_log_dir: cfg.pod_log_dir.clone(),
        labels: cfg.node_labels.clone(),
        max_pods: 110,
        allocatable: Default::default(),
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let metrics = std::rc::Rc::new(picolet::metrics::AgentMetrics::default());
    let sources = local_api::Sources {
        agent_metrics: Some(std::rc::Rc::clone(&metrics)),
        ..Default::default()
    };
    let events =
        local_api::start(&opts, rt.clone(), clock, sources, &shutdown).expect("node API starts");
    let ext = picolet::daemon::Extensions {
        events: Some(events),
        metrics: Some(metrics),
        ..Default::default()
    };
    let handle = tokio::task::spawn_local(picolet::daemon::run_with_extensions(
        rt,
        clock,
        cfg.clone(),
        ext,
        shutdown.clone(),
        std::rc::Rc::new(tokio::sync::Notify::new()),
    ));
    let config = ClientConfig::from_kubeconfig(&opts.kubeconfig_path).expect("kubeconfig");
    let client = Client::new(&config).expect("client");
    // The listener is bound by a task of its own: wait until it answers.
    for _ in 0..500 {
        if client.get::<Value>("/api").await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Node {
        shutdown,
        handle,
        client,
        opts,
    }
}

async fn running_pods(client: &Client) -> Vec<String> {
    let list: Value = match client.get("/api/v1/pods").await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("GET /api/v1/pods: {e}");
            return vec![];
        }
    };
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|p| common::phase(p) == "Running")
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

async fn wait_running(client: &Client, name: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !running_pods(client).await.iter().any(|n| n == name) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never Running in the node API"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn serves_pods_nodes_and_refuses_a_wrong_token() {
    LocalSet::new()
        .run_until(async {
            let (tmp, cfg) = agent_dir("node1");
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web")).unwrap();
            let node = start(tmp.path(), &cfg).await;
            wait_running(&node.client, "web-node1").await;

            let pod: Value = node
                .client
                .get("/api/v1/namespaces/default/pods/web-node1")
                .await
                .expect("get pod");
            assert_eq!(pod["kind"], "Pod");
            assert_eq!(pod["spec"]["nodeName"], "node1");
            assert!(pod["metadata"]["creationTimestamp"].is_string());
            let missing = node
                .client
                .get::<Value>("/api/v1/namespaces/default/pods/nope")
                .await
                .unwrap_err();
            assert_eq!(missing.code(), Some(404), "{missing}");
            let selected: Value = node
                .client
                .get("/api/v1/pods?labelSelector=app%3Dother")
                .await
                .unwrap();
            assert_eq!(selected["items"], Value::Array(vec![]));
            let bad = node
                .client
                .get::<Value>("/api/v1/pods?fieldSelector=spec.containers%3Dx")
                .await
                .unwrap_err();
            assert_eq!(bad.code(), Some(400), "{bad}");
            let nodes: Value = node.client.get("/api/v1/nodes").await.unwrap();
            assert_eq!(nodes["items"][0]["metadata"]["name"], "node1");
            let discovery: Value = node.client.get("/api/v1").await.unwrap();
            assert!(discovery["resources"].to_string().contains("\"pods/log\""));
            // `/metrics`: the pod workers' syncs (the pod's creation at least).
            let metrics = node.client.get_bytes("/metrics", 1 << 20).await.unwrap();
            let metrics = String::from_utf8_lossy(&metrics);
            assert!(
                metrics.contains(
                    "kubelet_pod_worker_duration_seconds_count{operation_type=\"create\"} "
                ),
                "{metrics}"
            );
            assert!(
                metrics.contains("# TYPE prober_probe_total counter"),
                "{metrics}"
            );
            let secrets = node
                .client
                .get::<Value>("/api/v1/secrets")
                .await
                .unwrap_err();
            assert_eq!(secrets.code(), Some(403));

            // A watch from now: a new pod arrives as ADDED.
            let rv = node.client.get::<Value>("/api/v1/pods").await.unwrap()["metadata"]
                ["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string();
            let mut watch = node
                .client
                .watch(&format!("/api/v1/pods?watch=true&resourceVersion={rv}"))
                .await
                .expect("watch");
            std::fs::write(cfg.pod_manifest_path.join("db.yaml"), manifest("db")).unwrap();
            let added = tokio::time::timeout(Duration::from_secs(30), async {
                while let Some(ev) = watch.next().await {
                    let ev = ev.expect("watch event");
                    if ev.type_ == "ADDED" && ev.object["metadata"]["name"] == "db-node1" {
                        return true;
                    }
                }
                false
            })
            .await;
            assert_eq!(added, Ok(true), "the new pod never arrived on the watch");

            // A wrong token gets 401 and no data; the kubeconfig is 0600.
            let text = std::fs::read_to_string(&node.opts.kubeconfig_path).unwrap();
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&node.opts.kubeconfig_path)
                    .unwrap()
                    .permissions(),
            );
            assert_eq!(mode & 0o777, 0o600);
            let token = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("token: "))
                .unwrap()
                .to_string();
            let wrong = tmp.path().join("wrong");
            std::fs::write(&wrong, text.replace(&token, &"0".repeat(64))).unwrap();
            let other = Client::new(&ClientConfig::from_kubeconfig(&wrong).unwrap()).unwrap();
            let denied = other.get::<Value>("/api/v1/pods").await.unwrap_err();
            assert_eq!(denied.code(), Some(401), "{denied}");

            node.shutdown.cancel();
            node.handle.await.unwrap();
        })
        .await;
}

/// 200 slow clients at once (connected and silent, or stuck in the middle of their
/// headers): a manifest written meanwhile still starts its pod, and once they are gone the
/// API answers again. Bounded: the clients are dropped after the pod ran.
#[tokio::test]
async fn slow_clients_never_delay_pod_work() {
    LocalSet::new()
        .run_until(async {
            let (tmp, cfg) = agent_dir("node1");
            let node = start(tmp.path(), &cfg).await;
            let addr = format!("127.0.0.1:{}", node.opts.port);
            let mut slow = Vec::new();
            for i in 0..200 {
                // Async connects: the server's accept loop runs meanwhile, as it would
                // with clients elsewhere (a blocking connect would stall this one thread
                // once the accept queue is full).
                let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await else {
                    continue;
                };
                if i % 2 == 0 {
                    // Half a TLS ClientHello's record header, then nothing.
                    let _ = s.write_all(&[0x16, 0x03, 0x01]).await;
                }
                slow.push(s);
            }
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web")).unwrap();
            // The pod starts: seen through the runtime, not the (busy) API.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                let running = node_runtime_running(&tmp).await;
                if running {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the pod did not start while 200 slow clients were connected"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            drop(slow);
            wait_running(&node.client, "web-node1").await;
            node.shutdown.cancel();
            node.handle.await.unwrap();
        })
        .await;
}

/// Whether the pod's container log directory exists: the fake runtime's container was
/// created (the agent did its work).
async fn node_runtime_running(tmp: &tempfile::TempDir) -> bool {
    std::fs::read_dir(tmp.path().join("logs"))
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().contains("web-node1"))
        })
        .unwrap_or(false)
}

/// `--client-ca-file`: a client certificate the CA signed is admitted without the token
/// (the apiserver's kubelet-client certificate); one from another CA is not. The
/// certificates are made with the `openssl` command (skipped without it).
#[tokio::test]
async fn a_client_certificate_of_the_client_ca_is_admitted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = tmp.path();
    let openssl = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .current_dir(d)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    std::fs::write(
        d.join("client.ext"),
        "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n",
    )
    .unwrap();
    let curve = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let made = ["ca", "other-ca"].iter().all(|ca| {
        openssl(
            &[
                &["req", "-x509"][..],
                &curve,
                &[
                    "-keyout",
                    &format!("{ca}.key"),
                    "-out",
                    &format!("{ca}.crt"),
                ],
                &["-days", "2", "-subj", &format!("/CN={ca}")],
                &["-addext", "basicConstraints=critical,CA:TRUE"],
                &["-addext", "keyUsage=critical,keyCertSign"],
            ]
            .concat(),
        )
    }) && ["ca", "other-ca"].iter().all(|ca| {
        openssl(
            &[
                &["req"][..],
                &curve,
                &["-keyout", &format!("{ca}-client.key"), "-out", "client.csr"],
                &["-subj", "/CN=kube-apiserver-kubelet-client"],
            ]
            .concat(),
        ) && openssl(&[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "client.ext",
            "-out",
            &format!("{ca}-client.crt"),
        ])
    });
    if !made {
        eprintln!("SKIPPED: no openssl to make the client certificates");
        return;
    }
    LocalSet::new()
        .run_until(async {
            let (_agent_tmp, cfg) = agent_dir("node1");
            std::fs::write(cfg.pod_manifest_path.join("web.yaml"), manifest("web")).unwrap();
            let node = start_with(d, &cfg, Some(&d.join("ca.crt"))).await;
            wait_running(&node.client, "web-node1").await;
            let text = std::fs::read_to_string(&node.opts.kubeconfig_path).unwrap();
            let token_line = text
                .lines()
                .find(|l| l.trim_start().starts_with("token:"))
                .unwrap()
                .to_string();
            let with_cert = |ca: &str| {
                let user = format!(
                    "    client-certificate: {}\n    client-key: {}",
                    d.join(format!("{ca}-client.crt")).display(),
                    d.join(format!("{ca}-client.key")).display()
                );
                let path = d.join(format!("{ca}.kubeconfig"));
                std::fs::write(&path, text.replace(&token_line, &user)).unwrap();
                Client::new(&ClientConfig::from_kubeconfig(&path).unwrap()).unwrap()
            };
            let pods: Value = with_cert("ca")
                .get("/api/v1/pods")
                .await
                .expect("the client CA's certificate is admitted");
            assert_eq!(pods["items"][0]["metadata"]["name"], "web-node1");
            // Another CA's certificate: the handshake fails (rustls checks the chain).
            assert!(
                with_cert("other-ca")
                    .get::<Value>("/api/v1/pods")
                    .await
                    .is_err()
            );
            // No certificate and no token: 401.
            let path = d.join("anonymous.kubeconfig");
            std::fs::write(&path, text.replace(&token_line, "    {}")).unwrap();
            let anonymous = Client::new(&ClientConfig::from_kubeconfig(&path).unwrap()).unwrap();
            let denied = anonymous.get::<Value>("/api/v1/pods").await.unwrap_err();
            assert_eq!(denied.code(), Some(401), "{denied}");
            node.shutdown.cancel();
            node.handle.await.unwrap();
        })
        .await;
}
