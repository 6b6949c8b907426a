//! The API server client against the mock API server: typed calls, watches, TLS and
//! credentials from a kubeconfig, and the faults an edge link produces.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

use common::{IMAGE, phase, wait_until};
use picolet::{
    api::cluster::{ObjectList, WatchEvent},
    apiserver::{
        ApiError, Client, ClientConfig, DeleteOptions, PatchKind, WatchStream, pod_path, query,
    },
    fakes::{MockApiServer, MockTls},
};
use serde_json::{Value, json};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tls")
        .join(name)
}

fn pod_json(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}})
}

fn plain_client(mock: &MockApiServer) -> Client {
    let mut cfg = ClientConfig::new(mock.url());
    cfg.timeout = Duration::from_secs(2);
    Client::new(&cfg).unwrap()
}

async fn next_event(w: &mut WatchStream) -> Result<WatchEvent, ApiError> {
    tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .expect("a watch event within 5 s")
        .expect("the watch is still open")
}

#[tokio::test]
async fn typed_calls_against_the_mock() {
    let mock = MockApiServer::start_new().await.unwrap();
    let client = plain_client(&mock);

    let created: Value = client
        .create(&pod_path("default", None), &pod_json("web", "pi-1"))
        .await
        .unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    client
        .create::<_, Value>(&pod_path("default", None), &pod_json("other", "pi-2"))
        .await
        .unwrap();
    let err = client
        .create::<_, Value>(&pod_path("default", None), &pod_json("web", "pi-1"))
        .await
        .unwrap_err();
    assert!(err.is_already_exists(), "{err}");

    let got: Value = client.get(&pod_path("default", Some("web"))).await.unwrap();
    assert_eq!(got["metadata"]["uid"], uid.as_str());
    let missing: Option<Value> = client
        .get_opt(&pod_path("default", Some("nope")))
        .await
        .unwrap();
    assert!(missing.is_none());

    let list: ObjectList = client
        .get(&format!(
            "/api/v1/pods{}",
            query(&[("fieldSelector", "spec.nodeName=pi-1")])
        ))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(!list.metadata.resource_version.is_empty());

    // Status: strategic merge with the UID precondition.
    let patched: Value = client
        .patch(
            &format!("{}/status", pod_path("default", Some("web"))),
            PatchKind::StrategicMerge,
            &json!({"metadata": {"uid": uid}, "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .await
        .unwrap();
    assert_eq!(patched["status"]["phase"], "Running");
    let err = client
        .patch::<Value>(
            &format!("{}/status", pod_path("default", Some("web"))),
            PatchKind::StrategicMerge,
            &json!({"metadata": {"uid": "someone-else"}, "status": {"phase": "Failed"}}),
        )
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let rec = mock.requests();
    let last = rec.last().unwrap();
    assert_eq!(last.content_type, "application/strategic-merge-patch+json");

    // Delete: wrong UID is refused; graceful deletion marks the pod; grace 0 removes it.
    let err = client
        .delete(
            &pod_path("default", Some("web")),
            &DeleteOptions {
                grace_period_seconds: Some(0),
                uid: Some("wrong".into()),
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    client
        .delete(
            &pod_path("default", Some("web")),
            &DeleteOptions {
                grace_period_seconds: Some(5),
                uid: Some(uid.clone()),
            },
        )
        .await
        .unwrap();
    let pod = mock.pod("default", "web").unwrap();
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 5);
    assert!(pod["metadata"]["deletionTimestamp"].is_string());
    client
        .delete(
            &pod_path("default", Some("web")),
            &DeleteOptions {
                grace_period_seconds: Some(0),
                uid: Some(uid),
            },
        )
        .await
        .unwrap();
    assert!(mock.pod("default", "web").is_none());
    let err = client
        .delete(&pod_path("default", Some("web")), &DeleteOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn watch_resume_bookmarks_gone_and_bad_lines() {
    let mock = MockApiServer::start_new().await.unwrap();
    let client = plain_client(&mock);
    mock.create_pod(pod_json("a", "pi-1")).unwrap();
    let list: ObjectList = client.get("/api/v1/pods").await.unwrap();
    let rv = list.metadata.resource_version.clone();

    let path = |rv: &str| {
        format!(
            "/api/v1/pods{}",
            query(&[
                ("fieldSelector", "spec.nodeName=pi-1"),
                ("resourceVersion", rv),
                ("allowWatchBookmarks", "true"),
                ("watch", "true"),
            ])
        )
    };
    let mut w = client.watch(&path(&rv)).await.unwrap();
    mock.create_pod(pod_json("other-node", "pi-2")).unwrap();
    mock.create_pod(pod_json("b", "pi-1")).unwrap();
    let ev = next_event(&mut w).await.unwrap();
    assert_eq!(ev.type_, "ADDED");
    assert_eq!(
        ev.object["metadata"]["name"], "b",
        "the field selector holds"
    );
    mock.bookmark();
    let ev = next_event(&mut w).await.unwrap();
    assert_eq!(ev.type_, "BOOKMARK");
    let bookmark_rv = ev.object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    mock.inject_watch_line("{this is not json");
    let err = next_event(&mut w).await.unwrap_err();
    assert!(matches!(err, ApiError::Decode { .. }), "{err}");
    mock.delete_pod("default", "b", Some(0)).unwrap();
    let ev = next_event(&mut w).await.unwrap();
    assert_eq!(ev.type_, "DELETED", "the stream goes on after a bad line");

    // A dropped watch ends with an error; resuming from the bookmark replays what was missed.
    mock.drop_watches();
    let end = tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .unwrap();
    assert!(matches!(end, None | Some(Err(_))), "{end:?}");
    let mut w = client.watch(&path(&bookmark_rv)).await.unwrap();
    let ev = next_event(&mut w).await.unwrap();
    assert_eq!(
        (ev.type_.as_str(), ev.object["metadata"]["name"].as_str()),
        ("DELETED", Some("b"))
    );

    // History compacted: resuming gets a 410 as an ERROR event.
    mock.compact();
    let mut w = client.watch(&path(&bookmark_rv)).await.unwrap();
    let ev = next_event(&mut w).await.unwrap();
    assert_eq!(ev.type_, "ERROR");
    assert_eq!(ev.object["code"], 410);

    // timeoutSeconds ends a watch cleanly.
    let mut w = client
        .watch(&format!(
            "/api/v1/pods{}",
            query(&[("watch", "true"), ("timeoutSeconds", "1")])
        ))
        .await
        .unwrap();
    let first = next_event(&mut w).await.unwrap();
    assert_eq!(
        first.type_, "ADDED",
        "no resourceVersion: synthetic ADDED first"
    );
    let mut ended = false;
    for _ in 0..5 {
        match tokio::time::timeout(Duration::from_secs(3), w.next()).await {
            Ok(None) => {
                ended = true;
                break;
            }
            Ok(Some(_)) => continue,
            Err(_) => break,
        }
    }
    assert!(ended, "the watch ends after timeoutSeconds");
}

#[tokio::test]
async fn faults_errors_slow_answers_and_a_server_that_goes_away() {
    let mock = MockApiServer::start_new().await.unwrap();
    let client = plain_client(&mock);
    mock.fail_next(1, 500);
    let err = client.get::<Value>("/api/v1/pods").await.unwrap_err();
    assert_eq!(err.code(), Some(500), "{err}");
    client.get::<Value>("/api/v1/pods").await.unwrap();

    mock.set_delay(Duration::from_secs(3));
    let err = client.get::<Value>("/api/v1/pods").await.unwrap_err();
    assert!(matches!(err, ApiError::Timeout { .. }), "{err}");
    mock.set_delay(Duration::ZERO);

    mock.stop();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = client.get::<Value>("/api/v1/pods").await.unwrap_err();
    assert!(
        matches!(err, ApiError::Connect { .. } | ApiError::Body { .. }),
        "{err}"
    );
    mock.start().await.unwrap();
    let list: ObjectList = client.get("/api/v1/pods").await.unwrap();
    assert!(list.items.is_empty());
}

#[tokio::test]
async fn https_with_kubeconfig_token_and_ca() {
    let tls = MockTls {
        cert_pem: std::fs::read(data("server.crt")).unwrap(),
        key_pem: std::fs::read(data("server.key")).unwrap(),
        client_ca_pem: None,
    };
    let mock = MockApiServer::start_tls(tls).await.unwrap();
    mock.require_token("s3cret");
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");

    mock.write_kubeconfig(&kc, Some("s3cret"), Some(&data("ca.crt")))
        .unwrap();
    let client = Client::new(&ClientConfig::from_kubeconfig(&kc).unwrap()).unwrap();
    let list: ObjectList = client.get("/api/v1/pods").await.unwrap();
    assert!(list.items.is_empty());

    // Wrong token: 401.
    mock.write_kubeconfig(&kc, Some("wrong"), Some(&data("ca.crt")))
        .unwrap();
    let client = Client::new(&ClientConfig::from_kubeconfig(&kc).unwrap()).unwrap();
    let err = client.get::<Value>("/api/v1/pods").await.unwrap_err();
    assert_eq!(err.code(), Some(401), "{err}");

    // A CA that did not sign the server certificate: the handshake fails.
    mock.write_kubeconfig(&kc, Some("s3cret"), Some(&data("client-ca.crt")))
        .unwrap();
    let client = Client::new(&ClientConfig::from_kubeconfig(&kc).unwrap()).unwrap();
    let err = client.get::<Value>("/api/v1/pods").await.unwrap_err();
    assert!(matches!(err, ApiError::Connect { .. }), "{err}");

    // insecure-skip-tls-verify, only because it is set.
    std::fs::write(
        &kc,
        format!(
            "current-context: m\nclusters: [{{name: c, cluster: {{server: '{}', insecure-skip-tls-verify: true}}}}]\ncontexts: [{{name: m, context: {{cluster: c, user: u}}}}]\nusers: [{{name: u, user: {{token: s3cret}}}}]\n",
            mock.url()
        ),
    )
    .unwrap();
    let client = Client::new(&ClientConfig::from_kubeconfig(&kc).unwrap()).unwrap();
    client.get::<Value>("/api/v1/pods").await.unwrap();
}

/// A board whose clock is not set (before the server certificate's notBefore, as a board
/// without an RTC in 1970): the handshake fails, and the error says why, with both times —
/// the sentence picolet's one "is the clock set?" line carries.
#[tokio::test]
async fn a_clock_before_the_servers_certificate_is_named() {
    let year_2100 = 4_102_444_800_i64 * 1_000_000_000;
    let g = picolet::node_api::generate_cert(
        &picolet::node_api::CertSubject {
            node_name: "apiserver".into(),
            dns_names: vec![],
            ips: vec![],
        },
        year_2100,
    )
    .unwrap();
    let tls = MockTls {
        cert_pem: g.chain_pem.into_bytes(),
        key_pem: g.key_pem.into_bytes(),
        client_ca_pem: None,
    };
    let mock = MockApiServer::start_tls(tls).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &g.ca_pem).unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, Some(&ca)).unwrap();
    let client = Client::new(&ClientConfig::from_kubeconfig(&kc).unwrap()).unwrap();
    let err = client.get::<Value>("/api/v1/pods").await.unwrap_err();
    assert!(matches!(err, ApiError::Connect { .. }), "{err}");
    let problem =
        picolet::apiserver::clock_problem(&err).unwrap_or_else(|| panic!("not named: {err}"));
    assert!(
        problem.contains("the server's certificate is valid only from 2099-12-31T23:00:00Z"),
        "{problem}"
    );
    // Anything else is not a clock problem.
    mock.stop();
    let err = client.get::<Value>("/api/v1/pods").await.unwrap_err();
    assert_eq!(picolet::apiserver::clock_problem(&err), None, "{err}");
}

#[tokio::test]
async fn https_with_a_client_certificate() {
    let tls = MockTls {
        cert_pem: std::fs::read(data("server.crt")).unwrap(),
        key_pem: std::fs::read(data("server.key")).unwrap(),
        client_ca_pem: Some(std::fs::read(data("client-ca.crt")).unwrap()),
    };
    let mock = MockApiServer::start_tls(tls).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    let write = |with_cert: bool| {
        let user = if with_cert {
            format!(
                "{{client-certificate: {}, client-key: {}}}",
                data("client.crt").display(),
                data("client.key").display()
            )
        } else {
            "{}".to_string()
        };
        std::fs::write(
            &kc,
            format!(
                "current-context: m\nclusters: [{{name: c, cluster: {{server: '{}', certificate-authority: {}, tls-server-name: kubernetes}}}}]\ncontexts: [{{name: m, context: {{cluster: c, user: u}}}}]\nusers: [{{name: u, user: {user}}}]\n",
                mock.url(),
                data("ca.crt").display()
            ),
        )
        .unwrap();
    };
    write(true);
    let client = Client::new(&ClientConfig::from_kubeconfig(&kc).unwrap()).unwrap();
    client.get::<Value>("/api/v1/pods").await.unwrap();
    write(false);
    let client = Client::new(&ClientConfig::from_kubeconfig(&kc).unwrap()).unwrap();
    let err = client.get::<Value>("/api/v1/pods").await.unwrap_err();
    assert!(
        matches!(err, ApiError::Connect { .. } | ApiError::Body { .. }),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// Node and lease

use picolet::{NodeAgent, NodeOptions, RuntimeHealth, SystemClock, fakes::FakeRuntime};
use tokio_util::sync::CancellationToken;

fn fast_node_options(name: &str) -> NodeOptions {
    let mut o = NodeOptions::new(name);
    o.status_update_frequency = Duration::from_millis(100);
    o.status_report_frequency = Duration::from_secs(3);
    o.lease_renew_interval = Duration::from_millis(100);
    o.labels = [("example.com/role".to_string(), "edge".to_string())].into();
    o
}

fn count(mock: &MockApiServer, method: &str, path: &str) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

#[tokio::test]
async fn node_registers_reports_status_and_renews_its_lease() {
    let mock = MockApiServer::start_new().await.unwrap();
    let runtime = FakeRuntime::new(SystemClock);
    let (uid_tx, mut uid_rx) = tokio::sync::watch::channel(None);
    mock.fail_matching(http::Method::POST, "/api/v1/nodes", 2, 500);
    let agent = NodeAgent::new(
        plain_client(&mock),
        runtime.clone(),
        SystemClock,
        fast_node_options("pi-1"),
        uid_tx,
    );
    let shutdown = CancellationToken::new();
    let local = tokio::task::LocalSet::new();
    local.spawn_local(agent.run(shutdown.clone()));
    local
        .run_until(async {
            // Registered despite two 500s; the UID is published.
            tokio::time::timeout(Duration::from_secs(5), uid_rx.wait_for(|u| u.is_some()))
                .await
                .unwrap()
                .unwrap();
            let uid = uid_rx.borrow().clone().unwrap();
            let node = mock.node("pi-1").unwrap();
            assert_eq!(node["metadata"]["uid"], uid.as_str());
            let labels = &node["metadata"]["labels"];
            assert_eq!(labels["kubernetes.io/hostname"], "pi-1");
            assert_eq!(labels["kubernetes.io/os"], "linux");
            assert!(labels["kubernetes.io/arch"].is_string());
            assert_eq!(labels["example.com/role"], "edge");

            let ready = |mock: &MockApiServer| {
                mock.node("pi-1").and_then(|n| {
                    n["status"]["conditions"]
                        .as_array()?
                        .iter()
                        .find(|c| c["type"] == "Ready")
                        .map(|c| c["status"].as_str().unwrap_or("").to_string())
                })
            };
            wait_until("Ready=True", 5, || {
                (ready(&mock).as_deref() == Some("True")).then_some(())
            })
            .await;
            let node = mock.node("pi-1").unwrap();
            assert_eq!(node["status"]["capacity"]["pods"], "110");
            assert!(
                node["status"]["nodeInfo"]["kubeletVersion"]
                    .as_str()
                    .unwrap()
                    .contains("picolet")
            );

            // The lease exists, is owned by the Node, and is renewed.
            let lease = wait_until("the lease", 5, || mock.lease("kube-node-lease", "pi-1")).await;
            assert_eq!(lease["spec"]["holderIdentity"], "pi-1");
            assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
            assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], uid.as_str());
            let first = lease["spec"]["renewTime"].as_str().unwrap().to_string();
            wait_until("a renewal", 5, || {
                let l = mock.lease("kube-node-lease", "pi-1")?;
                (l["spec"]["renewTime"].as_str()? != first).then_some(())
            })
            .await;

            // Status is PATCHed only when it changes (or every 3 s here): at most one or
            // two idle patches in a second while ticks run every 100 ms.
            mock.clear_requests();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let status_path = "/api/v1/nodes/pi-1/status";
            assert!(count(&mock, "PATCH", status_path) <= 1);
            runtime.set_health(RuntimeHealth {
                runtime_ready: true,
                network_ready: false,
                message: "cni not initialised".into(),
                userns_handlers: None,
            });
            wait_until("Ready=False", 5, || {
                (ready(&mock).as_deref() == Some("False")).then_some(())
            })
            .await;

            // A deleted Node is registered again.
            mock.delete_node("pi-1");
            wait_until("re-registration", 5, || mock.node("pi-1")).await;
            tokio::time::timeout(
                Duration::from_secs(5),
                uid_rx.wait_for(|u| u.as_deref() != Some(uid.as_str())),
            )
            .await
            .unwrap()
            .unwrap();
        })
        .await;
    shutdown.cancel();
}

// ---------------------------------------------------------------------------------------
// API source

use picolet::{ApiSource, ApiSourceOptions, Checkpoint, SourceUpdate};

fn fast_source_options() -> ApiSourceOptions {
    ApiSourceOptions {
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        watch_timeout: Duration::from_secs(60),
        initial_list_timeout: Duration::from_millis(500),
        ..ApiSourceOptions::default()
    }
}

fn pod_names(u: &SourceUpdate) -> Vec<String> {
    u.pods.iter().map(|p| p.metadata.name.clone()).collect()
}

async fn snapshot(rx: &mut tokio::sync::mpsc::Receiver<SourceUpdate>) -> SourceUpdate {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a snapshot within 5 s")
        .expect("the source is running")
}

async fn no_snapshot(rx: &mut tokio::sync::mpsc::Receiver<SourceUpdate>, ms: u64) {
    if let Ok(Some(u)) = tokio::time::timeout(Duration::from_millis(ms), rx.recv()).await {
        panic!("unexpected snapshot {:?}", pod_names(&u));
    }
}

fn list_count(mock: &MockApiServer) -> usize {
    mock.requests()
        .iter()
        .filter(|r| {
            r.method == "GET" && r.path == "/api/v1/pods" && !r.query.contains("watch=true")
        })
        .count()
}

fn spawn_source(
    local: &tokio::task::LocalSet,
    mock: &MockApiServer,
    root: Option<&Path>,
    opts: ApiSourceOptions,
) -> (tokio::sync::mpsc::Receiver<SourceUpdate>, CancellationToken) {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let stop = CancellationToken::new();
    let cp = root.map(|r| Checkpoint::new(r, "pi-1"));
    let src = ApiSource::new(plain_client(mock), "pi-1".into(), cp).with_options(opts);
    local.spawn_local(src.run(tx, stop.clone()));
    (rx, stop)
}

#[tokio::test]
async fn api_source_lists_watches_resumes_and_relists() {
    let mock = MockApiServer::start_new().await.unwrap();
    mock.create_pod(pod_json("a", "pi-1")).unwrap();
    mock.create_pod(pod_json("elsewhere", "pi-2")).unwrap();
    let local = tokio::task::LocalSet::new();
    let dir = tempfile::tempdir().unwrap();
    let (mut rx, stop) = spawn_source(&local, &mock, Some(dir.path()), fast_source_options());
    local
        .run_until(async {
            let u = snapshot(&mut rx).await;
            assert_eq!(u.source, "api");
            assert_eq!(pod_names(&u), ["a"]);
            wait_until("a watch", 5, || (mock.watch_count() == 1).then_some(())).await;

            mock.create_pod(pod_json("b", "pi-1")).unwrap();
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["a", "b"]);

            // Graceful deletion shows as a deletionTimestamp, grace 0 removes the pod.
            mock.delete_pod("default", "b", Some(30)).unwrap();
            let u = snapshot(&mut rx).await;
            assert!(u.pods[1].metadata.deletion_timestamp.is_some());
            mock.delete_pod("default", "b", Some(0)).unwrap();
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["a"]);

            // Bad input: one log line each, the stream goes on.
            mock.inject_watch_line("{not json at all");
            mock.inject_watch_line(
                &json!({"type": "ADDED", "object": pod_json("intruder", "pi-2")}).to_string(),
            );
            mock.inject_watch_line(
                &json!({"type": "ADDED", "object": {"metadata": {"name": "bad", "namespace": "default"},
                        "spec": {"nodeName": "pi-1", "containers": 7}}})
                .to_string(),
            );
            mock.create_pod(pod_json("c", "pi-1")).unwrap();
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["a", "c"]);

            // A dropped watch resumes from the resourceVersion: no relist, nothing missed.
            mock.drop_watches();
            mock.create_pod(pod_json("d", "pi-1")).unwrap();
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["a", "c", "d"]);
            assert_eq!(list_count(&mock), 1);
            let resumed = mock
                .requests()
                .into_iter()
                .rev()
                .find(|r| r.query.contains("watch=true"))
                .unwrap();
            assert!(resumed.query.contains("resourceVersion="), "{resumed:?}");
            assert!(resumed.query.contains("allowWatchBookmarks=true"));
            assert!(resumed.query.contains("spec.nodeName%3Dpi-1"));

            // History compacted while disconnected: 410 → relist, and the set converges.
            mock.stop();
            mock.delete_pod("default", "a", Some(0)).unwrap();
            mock.compact();
            mock.start().await.unwrap();
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["c", "d"]);
            assert_eq!(list_count(&mock), 2);

            // 500s on the list and the watch: back-off, then it converges.
            mock.drop_watches();
            mock.fail_next(3, 500);
            mock.create_pod(pod_json("e", "pi-1")).unwrap();
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["c", "d", "e"]);
        })
        .await;
    stop.cancel();
    // The checkpoint holds the last set.
    let mut cp = Checkpoint::new(dir.path(), "pi-1");
    let pods = cp.load().unwrap().unwrap();
    assert_eq!(pods.len(), 3);
}

#[tokio::test]
async fn api_source_offline_start_uses_the_checkpoint_then_reconciles() {
    let mock = MockApiServer::start_new().await.unwrap();
    mock.create_pod(pod_json("a", "pi-1")).unwrap();
    mock.create_pod(pod_json("b", "pi-1")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            // A first run writes the checkpoint.
            let (mut rx, stop) =
                spawn_source(&local, &mock, Some(dir.path()), fast_source_options());
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["a", "b"]);
            stop.cancel();
            let written = std::fs::metadata(dir.path().join("checkpoints/api-pods.json"))
                .unwrap()
                .modified()
                .unwrap();

            // The apiserver goes away; a new run delivers the checkpoint.
            mock.stop();
            let (mut rx, stop) =
                spawn_source(&local, &mock, Some(dir.path()), fast_source_options());
            let u = snapshot(&mut rx).await;
            assert_eq!(pod_names(&u), ["a", "b"]);
            no_snapshot(&mut rx, 500).await;
            let again = std::fs::metadata(dir.path().join("checkpoints/api-pods.json"))
                .unwrap()
                .modified()
                .unwrap();
            assert_eq!(
                written, again,
                "delivering the checkpoint does not rewrite it"
            );

            // Back: the list reconciles (b was deleted meanwhile).
            mock.delete_pod("default", "b", Some(0)).unwrap();
            mock.start().await.unwrap();
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["a"]);
            stop.cancel();

            // No checkpoint and no apiserver: nothing is sent ("api" stays unseen).
            mock.stop();
            let empty = tempfile::tempdir().unwrap();
            let (mut rx, stop) =
                spawn_source(&local, &mock, Some(empty.path()), fast_source_options());
            no_snapshot(&mut rx, 1500).await;
            mock.start().await.unwrap();
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["a"]);
            stop.cancel();
        })
        .await;
}

#[tokio::test]
async fn api_source_a_list_too_large_is_refused_and_retried() {
    let mock = MockApiServer::start_new().await.unwrap();
    for i in 0..50 {
        mock.create_pod(pod_json(&format!("p{i:02}"), "pi-1"))
            .unwrap();
    }
    let local = tokio::task::LocalSet::new();
    let opts = ApiSourceOptions {
        max_list_bytes: 4096,
        ..fast_source_options()
    };
    let (mut rx, stop) = spawn_source(&local, &mock, None, opts);
    local
        .run_until(async {
            no_snapshot(&mut rx, 800).await;
            assert!(list_count(&mock) >= 2, "retried with back-off");
        })
        .await;
    stop.cancel();
}

// ---------------------------------------------------------------------------------------
// The whole agent in apiserver mode, over the fake runtime

use common::agent::{agent_config, running_ids};
use picolet::{
    ContainerState, Options, run_daemon_with_extensions as run_with_extensions,
    start_apiserver_mode,
};

fn api_pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"nodeName": node, "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "app", "image": IMAGE,
                                    "command": ["sh", "-c", "sleep 1000"]}]}})
}

fn static_manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: app\n    image: {IMAGE}\n"
    )
}

struct ApiAgent {
    shutdown: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

fn start_api_agent(rt: &FakeRuntime, dir: &Path, kubeconfig: &Path) -> ApiAgent {
    let opts = Options {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        pod_manifest_path: dir.join("manifests"),
        root_dir: dir.join("root"),
        pod_log_dir: dir.join("logs"),
        resolv_conf: dir.join("resolv.conf"),
        hostname_override: Some("pi-1".into()),
        ..Options::default()
    };
    let cfg = agent_config(dir, "pi-1");
    let shutdown = CancellationToken::new();
    let rt = rt.clone();
    let stop = shutdown.clone();
    let handle = tokio::task::spawn_local(async move {
        let ext = start_apiserver_mode(&opts, &cfg.agent, rt.clone(), SystemClock, None, &stop)
            .expect("apiserver mode starts");
        run_with_extensions(
            rt,
            SystemClock,
            cfg,
            ext,
            stop,
            std::rc::Rc::new(tokio::sync::Notify::new()),
        )
        .await
    });
    ApiAgent { shutdown, handle }
}

impl ApiAgent {
    async fn stop(self) {
        self.shutdown.cancel();
        self.handle.await.unwrap();
    }
}

fn running_in(rt: &FakeRuntime, pod_name: &str) -> usize {
    let sandboxes: Vec<String> = rt
        .sandboxes()
        .into_iter()
        .filter(|s| s.name == pod_name && s.state == picolet::SandboxState::Ready)
        .map(|s| s.id)
        .collect();
    rt.containers()
        .into_iter()
        .filter(|c| c.state == ContainerState::Running && sandboxes.contains(&c.sandbox_id))
        .count()
}

#[tokio::test]
async fn agent_in_apiserver_mode_runs_reports_mirrors_and_deletes() {
    let mock = MockApiServer::start_new().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    std::fs::write(
        dir.path().join("manifests/static.yaml"),
        static_manifest("static"),
    )
    .unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let rt = FakeRuntime::new(SystemClock);
    rt.add_image(IMAGE);
    mock.create_pod(api_pod("web", "pi-1")).unwrap();
    mock.create_pod(api_pod("not-mine", "pi-2")).unwrap();

    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let agent = start_api_agent(&rt, dir.path(), &kc);

            // The API pod runs and its status reaches the apiserver.
            wait_until("web running in the runtime", 10, || {
                (running_in(&rt, "web") == 1).then_some(())
            })
            .await;
            let web = wait_until("web Running in the apiserver", 10, || {
                mock.pod("default", "web").filter(|p| phase(p) == "Running")
            })
            .await;
            assert_eq!(web["status"]["containerStatuses"][0]["name"], "app");
            assert!(web["status"]["containerStatuses"][0]["state"]["running"].is_object());
            let status_patch = mock
                .requests()
                .into_iter()
                .find(|r| r.path == "/api/v1/namespaces/default/pods/web/status")
                .unwrap();
            assert_eq!(status_patch.method, "PATCH");
            assert_eq!(
                status_patch.body["metadata"]["uid"], web["metadata"]["uid"],
                "the UID is the precondition"
            );
            assert_eq!(running_in(&rt, "not-mine"), 0);

            // The node and its lease.
            let node = wait_until("the node", 10, || mock.node("pi-1")).await;
            let node_uid = node["metadata"]["uid"].as_str().unwrap().to_string();
            wait_until("the lease", 10, || mock.lease("kube-node-lease", "pi-1")).await;

            // The static pod runs, and shows as a mirror pod owned by the Node, with status.
            wait_until("static pod running", 10, || {
                (running_in(&rt, "static-pi-1") == 1).then_some(())
            })
            .await;
            let mirror = wait_until("the mirror pod Running", 15, || {
                mock.pod("default", "static-pi-1")
                    .filter(|p| phase(p) == "Running")
            })
            .await;
            assert!(mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_string());
            assert_eq!(
                mirror["metadata"]["ownerReferences"],
                json!([{"apiVersion": "v1", "kind": "Node", "name": "pi-1",
                        "uid": node_uid, "controller": true}])
            );
            let mirror_uid = mirror["metadata"]["uid"].as_str().unwrap().to_string();
            assert_eq!(running_in(&rt, "static-pi-1"), 1, "a mirror pod never runs");

            // The kubelet's events of both pods reach the apiserver (the static pod's under
            // the name picolet runs it by).
            for (pod, ns) in [("web", "default"), ("static-pi-1", "default")] {
                let started = wait_until("a Started event", 10, || {
                    mock.events()
                        .into_iter()
                        .find(|e| e["reason"] == "Started" && e["involvedObject"]["name"] == pod)
                })
                .await;
                assert_eq!(started["metadata"]["namespace"], ns);
                assert_eq!(
                    started["involvedObject"]["fieldPath"],
                    "spec.containers{app}"
                );
                assert_eq!(
                    started["source"],
                    json!({"component": "kubelet", "host": "pi-1"})
                );
                assert_eq!(started["message"], "Started container app");
            }
            assert_eq!(
                rt.sandboxes()
                    .iter()
                    .filter(|s| s.name == "static-pi-1")
                    .count(),
                1
            );

            // Idle: a reconcile pass (10 s) finds nothing to send; only the lease moves.
            mock.clear_requests();
            tokio::time::sleep(Duration::from_secs(11)).await;
            let writes: Vec<String> = mock
                .requests()
                .into_iter()
                .filter(|r| r.method != "GET" && !r.path.contains("/leases/"))
                .map(|r| format!("{} {}", r.method, r.path))
                .collect();
            assert!(writes.is_empty(), "writes at idle: {writes:?}");

            // A mirror pod deleted by a user comes back (the static pod keeps running).
            mock.delete_pod("default", "static-pi-1", Some(0)).unwrap();
            wait_until("the mirror pod re-created", 15, || {
                mock.pod("default", "static-pi-1")
                    .filter(|p| p["metadata"]["uid"] != mirror_uid.as_str())
            })
            .await;
            assert_eq!(running_in(&rt, "static-pi-1"), 1);

            // Graceful deletion: the containers stop, then the object is deleted.
            mock.delete_pod("default", "web", Some(5)).unwrap();
            wait_until("web stopped", 10, || {
                (running_in(&rt, "web") == 0).then_some(())
            })
            .await;
            wait_until("web deleted from the apiserver", 10, || {
                mock.pod("default", "web").is_none().then_some(())
            })
            .await;
            let delete = mock
                .requests()
                .into_iter()
                .rev()
                .find(|r| r.method == "DELETE" && r.path.ends_with("/pods/web"))
                .unwrap();
            assert_eq!(delete.body["gracePeriodSeconds"], 0);
            assert!(delete.body["preconditions"]["uid"].is_string());

            // The static pod goes: its mirror pod goes too.
            std::fs::remove_file(dir.path().join("manifests/static.yaml")).unwrap();
            wait_until("the mirror pod deleted", 40, || {
                mock.pod("default", "static-pi-1").is_none().then_some(())
            })
            .await;
            agent.stop().await;
        })
        .await;
}

#[tokio::test]
async fn agent_keeps_api_pods_through_an_outage_and_a_restart() {
    let mock = MockApiServer::start_new().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let rt = FakeRuntime::new(SystemClock);
    rt.add_image(IMAGE);
    mock.create_pod(api_pod("a", "pi-1")).unwrap();
    mock.create_pod(api_pod("b", "pi-1")).unwrap();

    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let agent = start_api_agent(&rt, dir.path(), &kc);
            wait_until("a and b running", 10, || {
                (running_in(&rt, "a") == 1 && running_in(&rt, "b") == 1).then_some(())
            })
            .await;
            let before = running_ids(&rt);

            // The apiserver goes away: nothing stops.
            mock.stop();
            tokio::time::sleep(Duration::from_secs(3)).await;
            assert_eq!(running_ids(&rt), before);

            // picolet restarts while it is gone: the checkpoint keeps both pods, untouched.
            agent.stop().await;
            let agent = start_api_agent(&rt, dir.path(), &kc);
            tokio::time::sleep(Duration::from_secs(8)).await;
            assert_eq!(
                running_ids(&rt),
                before,
                "nothing restarted, nothing killed"
            );

            // Back, with b deleted meanwhile: a keeps running, b is stopped.
            mock.delete_pod("default", "b", Some(0)).unwrap();
            mock.start().await.unwrap();
            wait_until("b stopped", 40, || {
                (running_in(&rt, "b") == 0).then_some(())
            })
            .await;
            assert_eq!(running_in(&rt, "a"), 1);
            let a = running_ids(&rt);
            assert!(
                a.iter().all(|id| before.contains(id)),
                "a was not restarted"
            );
            agent.stop().await;
        })
        .await;
}

#[tokio::test]
async fn no_apiserver_and_no_checkpoint_static_pods_still_start() {
    // k3s#1686: a static pod must not wait for an apiserver that is not there.
    let mock = MockApiServer::start_new().await.unwrap();
    mock.stop();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    std::fs::write(dir.path().join("manifests/s.yaml"), static_manifest("s")).unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let rt = FakeRuntime::new(SystemClock);
    rt.add_image(IMAGE);
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let agent = start_api_agent(&rt, dir.path(), &kc);
            wait_until("the static pod running", 10, || {
                (running_in(&rt, "s-pi-1") == 1).then_some(())
            })
            .await;
            agent.stop().await;
        })
        .await;
}

// ---------------------------------------------------------------------------------------
// HTTP source

use picolet::{HttpSource, HttpSourceOptions, apiserver::HttpClient};

#[tokio::test]
async fn http_source_pod_podlist_errors_and_identical_bytes() {
    let mock = MockApiServer::start_new().await.unwrap();
    let pod = static_manifest("web");
    mock.set_document("/manifests", 200, &pod);
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let stop = CancellationToken::new();
    let src = HttpSource::new(
        HttpClient::new(None, None).unwrap(),
        format!("{}/manifests", mock.url()),
        &[("X-Edge-Token".into(), "abc".into())],
        "pi-1".into(),
        SystemClock,
    )
    .unwrap()
    .with_options(HttpSourceOptions {
        period: Duration::from_millis(100),
        ..HttpSourceOptions::default()
    });
    let local = tokio::task::LocalSet::new();
    local.spawn_local(src.run(tx, stop.clone()));
    local
        .run_until(async {
            let u = snapshot(&mut rx).await;
            assert_eq!(u.source, "http");
            assert_eq!(pod_names(&u), ["web-pi-1"]);
            let req = mock.requests().into_iter().last().unwrap();
            assert!(
                req.headers
                    .contains(&("x-edge-token".to_string(), "abc".to_string())),
                "{:?}",
                req.headers
            );
            // Identical bytes: no snapshot.
            no_snapshot(&mut rx, 400).await;
            // Errors keep the pods (no snapshot), a PodList replaces them.
            mock.set_document("/manifests", 500, "oops");
            no_snapshot(&mut rx, 400).await;
            mock.set_document(
                "/manifests",
                200,
                &json!({"kind": "PodList", "apiVersion": "v1", "items": [
                    {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": IMAGE}]}},
                    {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "image": IMAGE}]}}
                ]})
                .to_string(),
            );
            assert_eq!(pod_names(&snapshot(&mut rx).await), ["a-pi-1", "b-pi-1"]);
            mock.set_document("/manifests", 200, "");
            assert!(snapshot(&mut rx).await.pods.is_empty());
        })
        .await;
    stop.cancel();
}

// ---------------------------------------------------------------------------------------
// Status syncer on its own

use picolet::{
    PodEvent, StatusSyncer,
    api::{Pod, PodPhase, PodStatus},
};
use std::sync::Arc;

fn status_patches(mock: &MockApiServer, name: &str) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| {
            r.method == "PATCH"
                && r.path == format!("/api/v1/namespaces/default/pods/{name}/status")
        })
        .map(|r| r.body)
        .collect()
}

#[tokio::test]
async fn status_syncer_retries_coalesces_and_keeps_terminal_phases() {
    let mock = MockApiServer::start_new().await.unwrap();
    let created = mock.create_pod(api_pod("job", "pi-1")).unwrap();
    let mut pod: Pod = serde_json::from_value(created).unwrap();
    pod.metadata
        .annotations
        .insert("kubernetes.io/config.source".into(), "api".into());
    let pod = Arc::new(pod);
    let (tx, rx) = picolet::pod_events();
    let (_uid_tx, uid_rx) = tokio::sync::watch::channel(Some("node-uid".to_string()));
    let syncer = StatusSyncer::new(plain_client(&mock), "pi-1".into(), uid_rx, rx)
        .with_reconcile_period(Duration::from_millis(300));
    let stop = CancellationToken::new();
    let local = tokio::task::LocalSet::new();
    local.spawn_local(syncer.run(stop.clone()));
    let status = |phase: PodPhase, reason: &str| {
        std::sync::Arc::new(PodStatus {
            phase: Some(phase),
            reason: Some(reason.into()),
            ..PodStatus::default()
        })
    };
    local
        .run_until(async {
            tx.send(PodEvent::Pods {
                pods: vec![Arc::clone(&pod)],
                mirrors: vec![],
                sources_ready: true,
            });
            // Two changes queued together: only the latest goes out.
            mock.fail_next(2, 500);
            tx.send(PodEvent::Status {
                pod: Arc::clone(&pod),
                status: status(PodPhase::Pending, "first"),
            });
            tx.send(PodEvent::Status {
                pod: Arc::clone(&pod),
                status: status(PodPhase::Running, "second"),
            });
            // The 500s are retried by the reconcile pass.
            wait_until("Running in the apiserver", 5, || {
                mock.pod("default", "job")
                    .filter(|p| phase(p) == "Running")
                    .map(|_| ())
            })
            .await;
            assert!(
                status_patches(&mock, "job")
                    .iter()
                    .all(|b| b["status"]["reason"] == "second"),
                "coalesced: the first status never went out"
            );

            // The apiserver says Succeeded: a later non-terminal status does not undo it.
            let mut succeeded = Pod::clone(&pod);
            succeeded.status = Some(std::sync::Arc::unwrap_or_clone(status(
                PodPhase::Succeeded,
                "done",
            )));
            let succeeded = Arc::new(succeeded);
            tx.send(PodEvent::Pods {
                pods: vec![Arc::clone(&succeeded)],
                mirrors: vec![],
                sources_ready: true,
            });
            mock.clear_requests();
            tx.send(PodEvent::Status {
                pod: Arc::clone(&succeeded),
                status: status(PodPhase::Running, "late"),
            });
            wait_until("a status patch", 5, || status_patches(&mock, "job").pop()).await;
            let sent = status_patches(&mock, "job").pop().unwrap();
            assert_eq!(sent["status"]["phase"], "Succeeded", "{sent}");
            assert_eq!(sent["metadata"]["uid"], pod.uid());
        })
        .await;
    stop.cancel();
}

/// Cluster mode: a readiness probe's verdict reaches the apiserver as the pod's `Ready` and
/// `ContainersReady` conditions and the container's `ready`, both ways.
#[tokio::test]
async fn readiness_reaches_the_apiserver() {
    let mock = MockApiServer::start_new().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let rt = FakeRuntime::new(SystemClock);
    rt.add_image(IMAGE);
    rt.set_exec_result("app", 1, "not yet");
    let mut pod = api_pod("web", "pi-1");
    pod["spec"]["containers"][0]["readinessProbe"] =
        json!({"exec": {"command": ["ready"]}, "periodSeconds": 1, "failureThreshold": 1});
    mock.create_pod(pod).unwrap();
    let ready = |p: &Value, type_: &str| -> String {
        p["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
            .and_then(|c| c["status"].as_str())
            .unwrap_or_default()
            .to_string()
    };

    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let agent = start_api_agent(&rt, dir.path(), &kc);
            let web = wait_until("web Running, not Ready, in the apiserver", 15, || {
                mock.pod("default", "web")
                    .filter(|p| phase(p) == "Running" && ready(p, "Ready") == "False")
            })
            .await;
            assert_eq!(web["status"]["containerStatuses"][0]["ready"], false);

            rt.set_exec_result("app", 0, "");
            let web = wait_until("web Ready in the apiserver", 15, || {
                mock.pod("default", "web")
                    .filter(|p| ready(p, "Ready") == "True")
            })
            .await;
            assert_eq!(ready(&web, "ContainersReady"), "True");
            assert_eq!(web["status"]["containerStatuses"][0]["ready"], true);
            assert_eq!(web["status"]["containerStatuses"][0]["started"], true);

            rt.set_exec_result("app", 1, "down");
            wait_until("web not Ready again", 15, || {
                mock.pod("default", "web")
                    .filter(|p| ready(p, "Ready") == "False")
            })
            .await;
            assert_eq!(running_in(&rt, "web"), 1, "readiness never restarts");
            agent.stop().await;
        })
        .await;
}

/// Cluster mode config data: a pod with a configMap volume, a secret env and the
/// projected `kube-api-access-*` volume every admitted pod carries runs; the token file holds
/// the token the mock issued for this pod; an update of the ConfigMap in the apiserver
/// reaches the file; deleting the pod cleans its directory (tmpfs included).
#[tokio::test]
async fn api_pods_get_config_maps_secrets_and_service_account_tokens() {
    let mock = MockApiServer::start_new().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let rt = FakeRuntime::new(SystemClock);
    rt.add_image(IMAGE);
    mock.put_object(
        "configmaps",
        json!({"metadata": {"name": "app", "namespace": "default"}, "data": {"app.conf": "v=1"}}),
    );
    mock.put_object(
        "configmaps",
        json!({"metadata": {"name": "kube-root-ca.crt", "namespace": "default"},
               "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n"}}),
    );
    mock.put_object(
        "secrets",
        json!({"metadata": {"name": "db", "namespace": "default"}, "data": {"password": "czNjcmV0"}}),
    );
    let mut pod = api_pod("web", "pi-1");
    pod["spec"]["containers"][0]["env"] = json!([{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]);
    pod["spec"]["containers"][0]["volumeMounts"] = json!([
        {"name": "config", "mountPath": "/etc/app"},
        {"name": "kube-api-access-x1y2z", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
    ]);
    // As the apiserver's ServiceAccount admission adds it.
    pod["spec"]["volumes"] = json!([
        {"name": "config", "configMap": {"name": "app"}},
        {"name": "kube-api-access-x1y2z", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ]}}
    ]);
    let created = mock.create_pod(pod).unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let pod_dir = dir.path().join("root/pods").join(&uid);

    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let agent = start_api_agent(&rt, dir.path(), &kc);
            wait_until("web running", 20, || (running_in(&rt, "web") == 1).then_some(())).await;
            let id = rt.running("app")[0].clone();
            let config = rt.container_config(&id).unwrap();
            let password = config.envs.iter().find(|(k, _)| k == "PASSWORD");
            assert_eq!(password.map(|(_, v)| v.as_str()), Some("s3cret"));
            let sa = pod_dir.join("volumes/kubernetes.io~projected/kube-api-access-x1y2z");
            let token = std::fs::read_to_string(sa.join("token")).unwrap();
            assert_eq!(token, format!("mock-token.default.default.web.{uid}.1"));
            assert_eq!(std::fs::read_to_string(sa.join("namespace")).unwrap(), "default");
            assert!(std::fs::read_to_string(sa.join("ca.crt")).unwrap().starts_with("-----BEGIN"));
            // The TokenRequest was bound to the pod.
            let req = mock
                .requests()
                .into_iter()
                .find(|r| r.path.ends_with("/serviceaccounts/default/token"))
                .unwrap();
            assert_eq!(req.body["spec"]["boundObjectRef"]["uid"], json!(uid));
            assert_eq!(req.body["spec"]["expirationSeconds"], 3607);
            // Single-object watches, as the kubelet's Watch strategy. Each starts after its
            // object's first list answered: wait for them, do not catch them.
            wait_until("a watch of the ConfigMap and one of the Secret", 15, || {
                let watched: Vec<String> = mock
                    .requests()
                    .into_iter()
                    .filter(|r| r.query.contains("watch=true") && !r.path.ends_with("/pods"))
                    .map(|r| r.path)
                    .collect();
                (watched.iter().any(|p| p.ends_with("/configmaps"))
                    && watched.iter().any(|p| p.ends_with("/secrets")))
                .then_some(())
            })
            .await;

            // The ConfigMap changes in the apiserver: the file follows, no restart.
            mock.put_object(
                "configmaps",
                json!({"metadata": {"name": "app", "namespace": "default"}, "data": {"app.conf": "v=2"}}),
            );
            let conf = pod_dir.join("volumes/kubernetes.io~configmap/config/app.conf");
            wait_until("the new ConfigMap in the volume", 15, || {
                (std::fs::read_to_string(&conf).ok()? == "v=2").then_some(())
            })
            .await;
            assert_eq!(rt.running("app"), vec![id]);
            // The checkpoint holds the objects, privately.
            let cp = dir.path().join("root/checkpoints/objects.json");
            wait_until("the objects checkpoint", 10, || cp.exists().then_some(())).await;
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&cp).unwrap().permissions().mode() & 0o777, 0o600);

            // Deleted: stopped, and its directory (with the tmpfs) removed.
            mock.delete_pod("default", "web", Some(0)).unwrap();
            wait_until("the pod directory removed", 20, || (!pod_dir.exists()).then_some(())).await;
            agent.stop().await;
        })
        .await;
}

/// Offline autonomy for config data: the apiserver goes away, picolet restarts, the pod's
/// container crashes — it is recreated with its env from the objects checkpoint.
#[tokio::test]
async fn a_crashed_container_gets_its_secret_env_from_the_checkpoint_while_offline() {
    let mock = MockApiServer::start_new().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let rt = FakeRuntime::new(SystemClock);
    rt.add_image(IMAGE);
    mock.put_object(
        "secrets",
        json!({"metadata": {"name": "db", "namespace": "default"}, "stringData": {}, "data": {"password": "czNjcmV0"}}),
    );
    let mut pod = api_pod("web", "pi-1");
    pod["spec"]["containers"][0]["env"] = json!([{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]);
    mock.create_pod(pod).unwrap();
    let env_of = |id: &str| {
        rt.container_config(id)
            .and_then(|c| c.envs.into_iter().find(|(k, _)| k == "PASSWORD"))
            .map(|(_, v)| v)
    };

    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let agent = start_api_agent(&rt, dir.path(), &kc);
            wait_until("web running", 20, || {
                (running_in(&rt, "web") == 1).then_some(())
            })
            .await;
            let first = rt.running("app")[0].clone();
            assert_eq!(env_of(&first).as_deref(), Some("s3cret"));
            let cp = dir.path().join("root/checkpoints/objects.json");
            wait_until("the objects checkpoint", 10, || cp.exists().then_some(())).await;

            mock.stop();
            agent.stop().await;
            let agent = start_api_agent(&rt, dir.path(), &kc);
            tokio::time::sleep(Duration::from_secs(2)).await;
            rt.exit_container(&first, 1);
            let second = wait_until("the container recreated while offline", 30, || {
                rt.running("app").into_iter().find(|id| *id != first)
            })
            .await;
            assert_eq!(env_of(&second).as_deref(), Some("s3cret"));
            agent.stop().await;
        })
        .await;
}

/// kubelet: the service informer and makeEnvironmentVariables — an API pod's container
/// gets the Service variables of its namespace and default/kubernetes's, listed from
/// /api/v1/services.
#[tokio::test]
async fn an_api_pods_container_gets_the_service_variables() {
    let mock = MockApiServer::start_new().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let rt = FakeRuntime::new(SystemClock);
    rt.add_image(IMAGE);
    let service = |ns: &str, name: &str, ip: &str, port: i32| {
        json!({"metadata": {"name": name, "namespace": ns},
               "spec": {"clusterIP": ip, "ports": [{"port": port, "protocol": "TCP"}]}})
    };
    mock.put_object(
        "services",
        service("default", "kubernetes", "10.0.0.1", 443),
    );
    mock.put_object(
        "services",
        service("default", "fooservice", "10.0.0.7", 8765),
    );
    mock.put_object("services", service("elsewhere", "other", "10.0.0.9", 80));
    mock.create_pod(api_pod("web", "pi-1")).unwrap();
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let agent = start_api_agent(&rt, dir.path(), &kc);
            let id = wait_until("web running", 20, || rt.running("app").into_iter().next()).await;
            let envs = rt.container_config(&id).unwrap().envs;
            let get = |k: &str| envs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
            assert_eq!(get("FOOSERVICE_SERVICE_HOST"), Some("10.0.0.7"));
            assert_eq!(get("FOOSERVICE_PORT"), Some("tcp://10.0.0.7:8765"));
            assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("443"));
            assert_eq!(get("OTHER_SERVICE_HOST"), None);
            agent.stop().await;
        })
        .await;
}

/// A token is refreshed before it ages (80 % of its lifetime) and the new one reaches the
/// mounted file of the running container.
#[tokio::test]
async fn service_account_tokens_are_refreshed_into_the_volume() {
    let mock = MockApiServer::start_new().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    let kc = dir.path().join("kubeconfig");
    mock.write_kubeconfig(&kc, None, None).unwrap();
    let rt = FakeRuntime::new(SystemClock);
    rt.add_image(IMAGE);
    let mut pod = api_pod("web", "pi-1");
    pod["spec"]["serviceAccountName"] = json!("robot");
    pod["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "token", "mountPath": "/var/run/secrets/tokens"}]);
    // A short-lived token (2 s): refreshed after 1.6 s.
    pod["spec"]["volumes"] = json!([{"name": "token", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 2, "audience": "vault", "path": "vault-token"}}
    ]}}]);
    let created = mock.create_pod(pod).unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let pod_dir = dir.path().join("root/pods").join(&uid);
    let file = pod_dir.join("volumes/kubernetes.io~projected/token/vault-token");

    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let agent = start_api_agent(&rt, dir.path(), &kc);
            wait_until("web running", 20, || {
                (running_in(&rt, "web") == 1).then_some(())
            })
            .await;
            let first = std::fs::read_to_string(&file).unwrap();
            assert!(
                first.starts_with(&format!("mock-token.default.robot.web.{uid}.")),
                "{first}"
            );
            let req = mock
                .requests()
                .into_iter()
                .find(|r| r.path.ends_with("/serviceaccounts/robot/token"))
                .unwrap();
            assert_eq!(req.body["spec"]["audiences"], json!(["vault"]));
            let id = rt.running("app");
            let second = wait_until("a refreshed token in the file", 15, || {
                std::fs::read_to_string(&file).ok().filter(|t| *t != first)
            })
            .await;
            assert!(
                second.starts_with("mock-token.default.robot.web."),
                "{second}"
            );
            assert_eq!(rt.running("app"), id, "not restarted");
            mock.delete_pod("default", "web", Some(0)).unwrap();
            wait_until("the pod directory removed", 20, || {
                (!pod_dir.exists()).then_some(())
            })
            .await;
            agent.stop().await;
        })
        .await;
}

// ---- the event sink

use picolet::{EventSink, EventSinkOptions, Recorder, TokioClock};

const EVENT_T0: i64 = 1_796_000_000 * 1_000_000_000;

/// A client for paused-time tests: its deadline never fires while the (real) loopback
/// I/O is in flight and virtual time jumps ahead.
fn patient_client(mock: &MockApiServer) -> Client {
    let mut cfg = ClientConfig::new(mock.url());
    cfg.timeout = Duration::from_secs(3600);
    Client::new(&cfg).unwrap()
}

fn event_pod(name: &str) -> picolet::api::Pod {
    let mut p = picolet::api::Pod::default();
    p.metadata.name = name.into();
    p.metadata.namespace = "default".into();
    p.metadata.uid = format!("uid-{name}");
    p
}

fn start_sink(
    mock: &MockApiServer,
    options: EventSinkOptions,
) -> (
    Recorder,
    std::rc::Rc<picolet::EventSinkStats>,
    CancellationToken,
) {
    let recorder = Recorder::new("pi-1", 100).with_clock(TokioClock::new(EVENT_T0));
    let sink = EventSink::new(patient_client(mock), recorder.clone()).with_options(options);
    let stats = sink.stats();
    let shutdown = CancellationToken::new();
    tokio::task::spawn_local(sink.run(shutdown.clone()));
    (recorder, stats, shutdown)
}

#[tokio::test(start_paused = true)]
async fn event_sink_posts_new_events_and_patches_aggregated_ones() {
    let mock = MockApiServer::start_new().await.unwrap();
    tokio::task::LocalSet::new()
        .run_until(async {
            let (recorder, stats, shutdown) = start_sink(&mock, EventSinkOptions::default());
            let pod = event_pod("web-pi-1");
            let fp = Some("spec.containers{web}");
            let back_off =
                "Back-off restarting failed container web in pod web-pi-1_default(uid-web-pi-1)";
            recorder.normal(
                &pod,
                fp,
                "Pulled",
                "Container image \"nginx\" already present on machine",
            );
            recorder.warning(&pod, fp, "BackOff", back_off);
            wait_until("two events", 10, || {
                (mock.events().len() == 2).then_some(())
            })
            .await;
            let name = recorder.list()[1].name.clone();
            assert_eq!(name, format!("web-pi-1.{:x}", EVENT_T0 + 1));
            let e = mock.event("default", &name).unwrap();
            assert_eq!(e["reason"], "BackOff");
            assert_eq!(e["type"], "Warning");
            assert_eq!(e["count"], 1);
            assert_eq!(e["involvedObject"]["uid"], "uid-web-pi-1");
            assert_eq!(e["reportingInstance"], "pi-1");

            // The same event 10 s later: one PATCH, count 2.
            tokio::time::advance(Duration::from_secs(10)).await;
            recorder.warning(&pod, fp, "BackOff", back_off);
            let e = wait_until("count 2", 10, || {
                mock.event("default", &name).filter(|e| e["count"] == 2)
            })
            .await;
            assert_eq!(
                e["lastTimestamp"].as_str(),
                picolet::rfc3339(EVENT_T0 + 10_000_000_000).as_deref()
            );
            assert_eq!(
                e["firstTimestamp"].as_str(),
                picolet::rfc3339(EVENT_T0).as_deref()
            );
            let patches: Vec<_> = mock
                .requests()
                .into_iter()
                .filter(|r| r.method == "PATCH")
                .collect();
            assert_eq!(patches.len(), 1);
            assert_eq!(
                patches[0].path,
                format!("/api/v1/namespaces/default/events/{name}")
            );
            assert_eq!(
                patches[0].content_type,
                "application/strategic-merge-patch+json"
            );
            assert_eq!(patches[0].body["count"], 2);
            assert_eq!(patches[0].body["message"], back_off);
            assert_eq!(count(&mock, "POST", "/api/v1/namespaces/default/events"), 2);

            // The apiserver dropped it (its TTL): the PATCH's 404 makes it a fresh POST.
            mock.delete_event("default", &name);
            recorder.warning(&pod, fp, "BackOff", back_off);
            let e = wait_until("re-created", 10, || mock.event("default", &name)).await;
            assert_eq!(e["count"], 3);
            assert_eq!(
                (
                    stats.created.get(),
                    stats.patched.get(),
                    stats.dropped.get()
                ),
                (3, 1, 0)
            );
            shutdown.cancel();
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn event_sink_drops_and_counts_events_while_the_apiserver_is_away() {
    let mock = MockApiServer::start_new().await.unwrap();
    tokio::task::LocalSet::new()
        .run_until(async {
            let (recorder, stats, shutdown) = start_sink(&mock, EventSinkOptions::default());
            let pod = event_pod("web-pi-1");
            recorder.normal(&pod, None, "A", "before");
            wait_until("the first event", 10, || {
                (mock.events().len() == 1).then_some(())
            })
            .await;

            mock.stop();
            for i in 0..5 {
                recorder.normal(&pod, None, "A", format!("away {i}"));
            }
            wait_until("5 dropped", 10, || (stats.dropped.get() == 5).then_some(())).await;
            assert_eq!(mock.events().len(), 1);

            mock.start().await.unwrap();
            // Past the back-off after the failure, the next event goes through.
            tokio::time::advance(Duration::from_secs(2)).await;
            recorder.normal(&pod, None, "A", "back");
            wait_until("the event after the outage", 10, || {
                mock.events().into_iter().find(|e| e["message"] == "back")
            })
            .await;
            assert_eq!(
                stats.dropped.get(),
                5,
                "nothing was queued, nothing more dropped"
            );
            assert_eq!(mock.events().len(), 2);
            shutdown.cancel();
        })
        .await;
}

/// client-go `recordEvent`: an event the apiserver rejects (here a plain 403 for one
/// namespace, as for a namespace being terminated when the e2e suites delete a test's) is
/// dropped alone; the next event, of another namespace, goes at once — no outage, no
/// back-off.
#[tokio::test(start_paused = true)]
async fn event_sink_drops_a_rejected_event_alone() {
    let mock = MockApiServer::start_new().await.unwrap();
    tokio::task::LocalSet::new()
        .run_until(async {
            let (recorder, stats, shutdown) = start_sink(&mock, EventSinkOptions::default());
            let mut gone = event_pod("old-pi-1");
            gone.metadata.namespace = "gone".into();
            mock.fail_matching(http::Method::POST, "/namespaces/gone/events", 2, 403);
            recorder.normal(&gone, None, "Killing", "Stopping container c");
            recorder.normal(
                &event_pod("web-pi-1"),
                None,
                "Started",
                "Started container web",
            );
            recorder.normal(&gone, None, "Killing", "Stopping container d");
            let e = wait_until("the other namespace's event", 10, || {
                mock.events().into_iter().find(|e| e["reason"] == "Started")
            })
            .await;
            assert_eq!(e["metadata"]["namespace"], "default");
            wait_until("both rejected", 10, || {
                (stats.rejected.get() == 2).then_some(())
            })
            .await;
            assert_eq!((stats.created.get(), stats.dropped.get()), (1, 2));
            assert_eq!(count(&mock, "POST", "/api/v1/namespaces/gone/events"), 2);
            shutdown.cancel();
        })
        .await;
}

#[tokio::test(start_paused = true)]
async fn event_sink_honours_its_rate_limit() {
    let mock = MockApiServer::start_new().await.unwrap();
    tokio::task::LocalSet::new()
        .run_until(async {
            let options = EventSinkOptions {
                qps: 10.0,
                burst: 5,
                ..EventSinkOptions::default()
            };
            let (recorder, stats, shutdown) = start_sink(&mock, options);
            let pod = event_pod("web-pi-1");
            let t0 = tokio::time::Instant::now();
            for i in 0..25 {
                recorder.normal(&pod, None, "R", format!("event {i}"));
            }
            // Never more than the burst plus 10 a second (virtual time).
            loop {
                let n = mock.events().len();
                let allowed = 5.0 + 10.0 * t0.elapsed().as_secs_f64() + 1.0;
                assert!((n as f64) <= allowed, "{n} events after {:?}", t0.elapsed());
                if n == 25 {
                    break;
                }
                assert!(t0.elapsed() < Duration::from_secs(30), "only {n} events");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // 20 beyond the burst at 10 a second: at least 2 s.
            assert!(
                t0.elapsed() >= Duration::from_millis(1990),
                "{:?}",
                t0.elapsed()
            );
            assert_eq!((stats.created.get(), stats.dropped.get()), (25, 0));
            shutdown.cancel();
        })
        .await;
}
