//! No Secret value leaves picolet: malformed and valid Secrets carrying marker
//! values go through the real `picolet run` binary (file source, sync, image pull secrets,
//! events; the log at trace level), through `picolet validate` (text and JSON), and through
//! the node API (pods, events, the kubelet's `/pods`); no marker shows up anywhere. The
//! runtime is the fake CRI server in this process (feature `fake-cri`), the node API needs
//! feature `apiserver` (`cargo test --all-features`).
#![cfg(all(feature = "fake-cri", feature = "apiserver"))]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{IMAGE, Killed, free_port, wait_until};
use picolet::{
    ContainerState,
    apiserver::{Client, ClientConfig},
    fakes::FakeCri,
};
use serde_json::Value;

/// The values that must never be printed: each appears in a Secret below, as written in the
/// file or (`data`) base64-decoded.
const MARKERS: [&str; 14] = [
    "98765432123",
    "31415.92653",
    "m4rk3rA",
    "m4rk3rB",
    "m4rk3rC",
    "m4rk3rD",
    "12345678901",
    "m4rk3rE",
    "m4rk3rF",
    "77777777777",
    "m4rk3rG",
    "m4rk3rH",
    "m4rk3rI",
    "m4rk3rJ",
];

/// (file name, content): Secrets wrong in every way a value can be, and valid ones a pod
/// uses through env, `envFrom` and `imagePullSecrets`.
fn secret_files() -> Vec<(&'static str, String)> {
    let s = |name: &str, body: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\n{body}\n")
    };
    vec![
        ("int.yaml", s("int", "stringData: {pin: 98765432123}")),
        ("float.yaml", s("float", "stringData: {f: 31415.92653}")),
        // Not base64 (the `!`).
        ("b64.yaml", s("b64", "data: {password: \"m4rk3rA!\"}")),
        ("string.yaml", s("string", "data: m4rk3rB")),
        ("list.yaml", s("list", "stringData: [m4rk3rC]")),
        ("nested.yaml", s("nested", "stringData: {k: {nested: m4rk3rD}}")),
        ("type.yaml", s("type", "type: 12345678901\nstringData: {a: b}")),
        ("key.yaml", s("key", "data: {\"bad key!\": bTRyazNyRQ==}")), // m4rk3rE
        ("bool-key.yaml", s("boolval", "stringData: {on: m4rk3rF, k: [1]}")),
        (
            "json.json",
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"j"},"stringData":{"k":77777777777}}"#
                .to_string(),
        ),
        // A YAML syntax error inside a value.
        ("syntax.yaml", s("syntax", "stringData: {pin: \"m4rk3rG}")),
        // Several documents: a broken Secret beside a good one.
        (
            "multi.yaml",
            format!(
                "{}---\n{}",
                s("multi-bad", "stringData: {x: 1.5e300, y: m4rk3rH, z: [1]}"),
                s("db", "stringData: {password: m4rk3rI}")
            ),
        ),
        // A pull secret whose docker config is not JSON.
        (
            "pull.yaml",
            s(
                "pull",
                "type: kubernetes.io/dockerconfigjson\nstringData: {.dockerconfigjson: '{\"auths\": m4rk3rJ'}",
            ),
        ),
    ]
}

fn pod() -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: app}}
spec:
  imagePullSecrets: [{{name: pull}}, {{name: int}}]
  containers:
  - name: c
    image: registry.local/app:1
    env:
    - name: PASSWORD
      valueFrom: {{secretKeyRef: {{name: db, key: password}}}}
    envFrom:
    - secretRef: {{name: db}}
  - name: d
    image: {IMAGE}
    env:
    - name: PIN
      valueFrom: {{secretKeyRef: {{name: int, key: pin}}}}
"#
    )
}

fn find_markers(what: &str, text: &str) -> Vec<String> {
    MARKERS
        .iter()
        .filter(|m| text.contains(*m))
        .map(|m| format!("{what} carries {m}"))
        .collect()
}

fn validate(dir: &Path, json: bool) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_picolet"));
    cmd.arg("validate").args(["--hostname-override", "node1"]);
    if json {
        cmd.args(["-o", "json"]);
    }
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("ls")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let out = cmd.args(files).output().expect("picolet validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "validate found nothing wrong:\n{text}"
    );
    text
}

#[tokio::test]
async fn no_secret_value_in_logs_validate_events_or_the_node_api() {
    let tmp = tempfile::tempdir().expect("tmp");
    let manifests = tmp.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("mkdir");
    for (name, content) in secret_files() {
        let path = manifests.join(name);
        std::fs::write(&path, content).expect("write");
        // 0600: the readable-file warning is tested elsewhere; here only values matter.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod");
    }
    std::fs::write(manifests.join("app.yaml"), pod()).expect("write pod");

    // 1. validate, text and JSON.
    let mut leaks = Vec::new();
    let text = validate(&manifests, false);
    leaks.extend(find_markers("validate", &text));
    let json = validate(&manifests, true);
    leaks.extend(find_markers("validate -o json", &json));
    // Each broken Secret is named with the field that is wrong.
    for needle in [
        "int.yaml: REJECTED: stringData.pin: invalid type: integer, expected a string",
        "string.yaml: REJECTED: data: invalid type: string, expected a map",
        "b64.yaml: REJECTED: data[\"password\"]: not valid base64",
        "json.json: REJECTED: stringData.k: invalid type: integer, expected a string",
        "type.yaml: REJECTED: type: invalid type: integer, expected a string",
        "multi.yaml (document 1): REJECTED: stringData.x: invalid type: floating point, expected a string",
    ] {
        assert!(
            text.contains(needle),
            "validate does not say {needle:?}:\n{text}"
        );
    }

    // 2. picolet run over the fake CRI, the log at trace level.
    let socket = tmp.path().join("cri.sock");
    let mut fake = FakeCri::start(&socket).await.expect("fake CRI");
    fake.preload_image(IMAGE);
    let root = tmp.path().join("root");
    let stderr_path = tmp.path().join("picolet.stderr");
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_picolet"))
        .arg("run")
        // Not the kubelet's device plugin directory of the machine (a scenario gives its own).
        .args(["--device-plugin-dir", ""])
        .arg("--pod-manifest-path")
        .arg(&manifests)
        .arg("--container-runtime-endpoint")
        .arg(format!("unix://{}", socket.display()))
        .arg("--root-dir")
        .arg(&root)
        .arg("--pod-log-dir")
        .arg(tmp.path().join("logs"))
        .args(["--hostname-override", "node1", "--cgroups-per-qos=false"])
        .args(["--address", "127.0.0.1", "--port", &port.to_string()])
        .env("RUST_LOG", "trace")
        .stdin(Stdio::null())
        .stdout(stderr.try_clone().expect("dup"))
        .stderr(stderr)
        .spawn()
        .expect("picolet run");
    let _picolet = Killed(child);

    // The pod's container `d` runs (its Secret `int` is broken: it waits), `c` pulls its
    // image with the pull secrets.
    let read_log = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    wait_until("picolet reported every broken Secret file", 60, || {
        let log = read_log();
        secret_files()
            .iter()
            .filter(|(n, _)| *n != "pull.yaml")
            .all(|(n, _)| log.contains(n))
            .then_some(())
    })
    .await;
    wait_until("container c running (its image pulled)", 60, || {
        fake.containers()
            .iter()
            .any(|c| c.state == ContainerState::Running)
            .then_some(())
    })
    .await;

    // 3. The node API: the pods, the events, the kubelet's /pods.
    let config = ClientConfig::from_kubeconfig(&root.join("kubeconfig")).expect("kubeconfig");
    let client = Client::new(&config).expect("client");
    let mut answers = Vec::new();
    for path in [
        "/api/v1/pods",
        "/api/v1/events",
        "/pods",
        "/api/v1/namespaces/default/pods/app-node1",
    ] {
        let mut body = None;
        for _ in 0..250 {
            if let Ok(v) = client.get::<Value>(path).await {
                body = Some(v);
                break;
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        let body = body.unwrap_or_else(|| panic!("GET {path} never answered"));
        answers.push((path, body.to_string()));
    }
    let events = &answers[1].1;
    // The container whose Secret is broken waits, with upstream's event.
    assert!(
        events.contains(r#"Error: secret \"int\" not found"#),
        "no event about the pod's broken Secret: {events}"
    );
    for (path, body) in &answers {
        leaks.extend(find_markers(&format!("GET {path}"), body));
    }
    // Let a few more syncs and relists happen, then read the whole log.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = read_log();
    leaks.extend(find_markers("picolet's log", &log));
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "not a trace-level log"
    );
    assert!(leaks.is_empty(), "Secret values leaked: {leaks:#?}");
    fake.shutdown().await;
}
