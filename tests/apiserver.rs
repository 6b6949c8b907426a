//! The API server client against the mock API server: typed calls, watches, TLS and
//! credentials from a kubeconfig, and the faults an edge link produces.

use std::path::{Path, PathBuf};
use std::time::Duration;

use picolet::apiserver::mock::{MockApiServer, MockTls};
use picolet::apiserver::types::{ObjectList, WatchEvent};
use picolet::apiserver::{
    ApiError, Client, ClientConfig, DeleteOptions, PatchKind, WatchStream, pod_path, query,
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

use picolet::apiserver::node::{NodeAgent, NodeOptions};
use picolet::clock::SystemClock;
use picolet::runtime::RuntimeHealth;
use picolet::runtime::fake::FakeRuntime;
use tokio_util::sync::CancellationToken;

fn fast_node_options(name: &str) -> NodeOptions {
    let mut o = NodeOptions::new(name);
    o.status_update_frequency = Duration::from_millis(100);
    o.status_report_frequency = Duration::from_secs(3);
    o.lease_renew_interval = Duration::from_millis(100);
    o.labels = [("example.com/role".to_string(), "edge".to_string())].into();
    o
}

async fn wait_until<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
