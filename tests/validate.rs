//! `picolet validate` as a person runs it (the binary, no picolet running, no root): the
//! real-world manifests are OK with their static names, the hostile corpus gets one line
//! per file naming its problem, and nothing hangs (a FIFO, a directory, a 9.6 MB file).

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::hostile;
use serde_json::Value;

/// Runs `picolet validate ARGS`; a run still going after a minute is a hang.
fn validate(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_picolet"))
        .arg("validate")
        .args(["--hostname-override", "pi"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("picolet validate");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("picolet validate {args:?} hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

fn real_world() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/real-world");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    files
}

#[test]
fn real_world_manifests_are_ok_each_on_its_line() {
    let files = real_world();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let out = validate(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(lines.len(), files.len(), "{text}");
    for (line, file) in lines.iter().zip(&files) {
        assert!(line.starts_with(&format!("{file}: Pod ")), "{line}");
        assert!(
            line.contains("-pi (uid ") && line.ends_with("): OK"),
            "{line}"
        );
    }
    // node-exporter tolerates every taint: ignored on purpose, with the rule's reason.
    assert!(
        text.contains("  ignored  spec.tolerations (scheduling)"),
        "{text}"
    );

    let json = validate(&[&["-o", "json"], args.as_slice()].concat());
    let entries: Vec<Value> = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(entries.len(), files.len());
    for e in &entries {
        assert_eq!(e["kind"], "Pod");
        assert_eq!(e["verdict"], "ok", "{e}");
        assert_eq!(e["uid"].as_str().map(str::len), Some(32), "{e}");
    }
}

#[test]
fn hostile_corpus_gets_one_line_per_file_and_nothing_hangs() {
    let tmp = tempfile::tempdir().unwrap();
    hostile::write_into(tmp.path()).unwrap();
    let mut names: Vec<String> = hostile::corpus()
        .iter()
        .map(|(n, _, _)| n.to_string())
        .collect();
    names.extend(["fifo.yaml".to_string(), "x.yaml".to_string()]);
    let paths: Vec<String> = names
        .iter()
        .map(|n| tmp.path().join(n).to_string_lossy().into_owned())
        .collect();
    let mut args: Vec<&str> = paths.iter().map(String::as_str).collect();
    // A valid pod among them still gets its OK line.
    let files = real_world();
    args.push(&files[0]);
    let out = validate(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(lines.len(), args.len(), "{text}");
    for (path, (_, _, problem)) in paths.iter().zip(hostile::corpus()) {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("{path}: ")))
            .unwrap_or_else(|| panic!("no line for {path}: {text}"));
        assert!(
            line.contains("REJECTED") && line.contains(problem),
            "{line}"
        );
    }
    for special in &paths[paths.len() - 2..] {
        assert!(
            text.contains(&format!("{special}: REJECTED: not a regular file")),
            "{text}"
        );
    }
    assert!(lines.last().unwrap().ends_with("): OK"), "{text}");
}

/// A volume kind picolet does not implement is refused like any refused field, naming the
/// volume and its kind (the same in text and JSON); a typo of a kind is the file's error.
#[test]
fn unsupported_volume_kinds_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let pod = |name: &str, volume: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  volumes: [{{name: data, {volume}}}]\n  containers: [{{name: a, image: busybox}}]\n"
        )
    };
    let nfs = dir.path().join("nfs.yaml");
    std::fs::write(&nfs, pod("nfs", "nfs: {server: x, path: /y}")).unwrap();
    let typo = dir.path().join("typo.yaml");
    std::fs::write(&typo, pod("typo", "hostPth: {path: /y}")).unwrap();
    let (nfs, typo) = (nfs.to_str().unwrap(), typo.to_str().unwrap());
    let out = validate(&[nfs, typo]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "REFUSED\n  refused  spec.volumes[0].nfs of volume \"data\" (network volumes"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "typo.yaml: REJECTED: spec.volumes[0] (data): \"hostPth\" is not a volume type"
        ),
        "{text}"
    );
    let json: Value = serde_json::from_slice(&validate(&["-o", "json", nfs]).stdout).unwrap();
    assert_eq!(json[0]["fields"][0]["volume"], "data");
    assert_eq!(json[0]["fields"][0]["path"], "spec.volumes[0].nfs");
}

/// What a user needs before dropping files in: a directory reads as the file source reads
/// it, the node name is said, a ConfigMap or Secret no file provides is named (the pod would
/// wait; an optional one is not), pod anti-affinity is listed as ignored like tolerations,
/// and an extended resource is warned about (no device plugin).
#[test]
fn a_directory_with_what_the_pods_wait_for() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("app.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: app}\nspec:\n  tolerations: [{operator: Exists}]\n  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: x}]\n  containers:\n  - name: a\n    image: busybox\n    resources: {limits: {nvidia.com/gpu: 1}}\n    envFrom: [{configMapRef: {name: there}}, {configMapRef: {name: maybe, optional: true}}]\n    env: [{name: P, valueFrom: {secretKeyRef: {name: missing, key: k}}}]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("there.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: there}\ndata: {a: b}\n",
    )
    .unwrap();
    std::fs::write(d.join(".hidden.yaml"), "junk").unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    let out = validate(&[d.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pods named for node \"pi\" (--hostname-override)"),
        "{err}"
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(
        lines.len(),
        2,
        "the two files, nothing hidden or below: {text}"
    );
    assert!(
        lines[0].contains("Pod default/app-pi (uid ") && lines[0].ends_with("): WARNED"),
        "{text}"
    );
    assert!(
        lines[1].contains("ConfigMap default/there: used by default/app-pi"),
        "{text}"
    );
    for want in [
        "  waits    for Secret default/missing: in none of these files",
        "  ignored  spec.affinity.podAntiAffinity (scheduling",
        "  ignored  spec.tolerations (scheduling)",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
    // Without the device manager the extended resource is warned about; with it, devices
    // are given (or admission warns that no plugin registered the resource).
    let warned =
        "  warned   spec.containers[0].resources.limits[nvidia.com/gpu] (an extended resource";
    assert_eq!(
        text.contains(warned),
        cfg!(not(feature = "device-plugins")),
        "{text}"
    );
    assert!(
        !text.contains("default/maybe") && !text.contains("for ConfigMap default/there"),
        "{text}"
    );
    let json: Value =
        serde_json::from_slice(&validate(&["-o", "json", d.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(
        json[0]["waitsFor"],
        serde_json::json!(["Secret default/missing"])
    );
    assert_eq!(json[0]["verdict"], "warned");
}
