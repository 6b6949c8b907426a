//! Table tests of manifest parsing, defaults, validation and static pod identity.

use picolet::{
    ManifestDocument, ManifestError,
    api::{self, Pod, PodPhase, PullPolicy, Quantity, RestartPolicy},
    apply_defaults, default_pull_policy, image_tag_and_digest, load_manifest,
    load_manifest_documents, make_static, parse_manifest, parse_manifest_document, static_pod_uid,
    validate_pod,
};

const WEB: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  volumes:
  - name: data
    hostPath: {path: /srv/data}
  - name: scratch
    emptyDir: {}
  containers:
  - name: web
    image: nginx:1.27
    ports:
    - {name: http, containerPort: 80}
    env:
    - {name: MODE, value: prod}
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: scratch, mountPath: /tmp}
";

const SEEN: i64 = 1_796_000_000_000_000_000; // 2026-11-30T00:53:20Z

fn web() -> Pod {
    parse_manifest(WEB.as_bytes()).expect("WEB parses")
}

/// The error's single line, and the field paths it names.
fn err_of(r: Result<impl std::fmt::Debug, ManifestError>) -> (String, Vec<String>) {
    let e = r.expect_err("expected an error");
    let fields = e.fields().into_iter().map(String::from).collect();
    (e.to_string(), fields)
}

#[test]
fn parses_yaml_and_json_alike() {
    let yaml = parse_manifest_document(WEB.as_bytes()).unwrap();
    let json = serde_json::to_vec(&yaml.raw).unwrap();
    let from_json = parse_manifest_document(&json).unwrap();
    assert_eq!(yaml.pod, from_json.pod);
    assert_eq!(yaml.raw, from_json.raw);
    assert!(yaml.unknown_fields.is_empty());
    assert_eq!(yaml.pod.spec.containers[0].ports[0].container_port, 80);
}

#[test]
fn parse_errors_name_the_field() {
    // (input, field named, text in the message)
    let table: &[(&str, &str, &str)] = &[
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: a\n    image: x\n    ports:\n    - containerPort: http\n",
            "spec.containers[0].ports[0].containerPort",
            "spec.containers[0].ports[0].containerPort: invalid type: string \"http\", expected i32",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  hostNetwork: yes\n",
            "spec.hostNetwork",
            "write true or false",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  restartPolicy: Sometimes\n",
            "spec.restartPolicy",
            "unknown variant `Sometimes`",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: a\n    resources: {limits: {cpu: true}}\n",
            "spec.containers[0].resources.limits.cpu",
            "expected a quantity",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  volumes:\n  - name: a\n    hostPath: {path: 5}\n",
            "spec.volumes[0].hostPath.path",
            "expected a string",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {version: 1.0}}\n",
            "metadata.labels.version",
            "expected a string",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: a\n    ports:\n    - name: http\n",
            "spec.containers[0].ports[0]",
            "missing field `containerPort`",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  imagePullPolicy: Always\n  containers: {name: a}\n",
            "spec.containers",
            "expected a sequence",
        ),
        (
            "apiVersion: apps/v1\nkind: Deployment\n",
            "apiVersion",
            "apiVersion: must be \"v1\", found \"apps/v1\"",
        ),
        (
            "kind: Pod\n",
            "apiVersion",
            "apiVersion: required (must be \"v1\")",
        ),
        (
            "apiVersion: v1\nkind: PodList\n",
            "kind",
            "kind: must be \"Pod\", found \"PodList\"",
        ),
        ("apiVersion: v1\n", "kind", "kind: required"),
        (
            "{\"apiVersion\": 1, \"kind\": \"Pod\"}",
            "apiVersion",
            "found 1",
        ),
    ];
    for (input, field, text) in table {
        let (msg, fields) = err_of(parse_manifest(input.as_bytes()));
        assert_eq!(fields, vec![field.to_string()], "{input}");
        assert!(msg.contains(text), "{msg:?} should contain {text:?}");
        assert!(!msg.contains('\n'), "one line: {msg:?}");
    }
}

#[test]
fn syntax_and_document_errors() {
    let table: &[(&str, &str)] = &[
        ("", "the file is empty"),
        ("  \n\n", "the file is empty"),
        ("# only a comment\n", "the file is empty"),
        ("---\n---\n", "the file is empty"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n",
            "invalid YAML: ",
        ),
        (
            "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\n",
            "found 2 YAML documents",
        ),
        ("{\"apiVersion\": \"v1\",, }", "invalid JSON: "),
        ("{\"apiVersion\": \"v1\"} trailing", "invalid JSON: "),
        ("- a\n- b\n", "found a list"),
        ("just a string\n", "found a string"),
    ];
    for (input, text) in table {
        let (msg, _) = err_of(parse_manifest(input.as_bytes()));
        assert!(
            msg.contains(text),
            "{input:?}: {msg:?} should contain {text:?}"
        );
    }
    // JSON syntax errors carry line and column.
    let (msg, _) = err_of(parse_manifest(
        b"{\n  \"apiVersion\": \"v1\",\n  \"kind\" \"Pod\"\n}",
    ));
    assert!(msg.contains("line 3 column"), "{msg}");
}

#[test]
fn empty_documents_are_ignored() {
    let doc = format!("---\n{WEB}---\n---\n# trailing comment\n");
    assert_eq!(parse_manifest(doc.as_bytes()).unwrap(), web());
}

#[test]
fn yaml_quirks() {
    let pod = parse_manifest(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers:\n  - name: a\n    image: x\n    env:\n    - {name: A, value: yes}\n    - {name: B, value: '0755'}\n    - {name: C, value: 0755}\n    resources:\n      limits: {cpu: 1, memory: 64Mi}\n      requests: {cpu: 0.5}\n",
    )
    .unwrap();
    let c = &pod.spec.containers[0];
    // YAML 1.2: `yes` and `0755` are strings.
    assert_eq!(c.env[0].value.as_deref(), Some("yes"));
    assert_eq!(c.env[1].value.as_deref(), Some("0755"));
    assert_eq!(c.env[2].value.as_deref(), Some("0755"));
    let r = c.resources.as_ref().unwrap();
    assert_eq!(r.limits["cpu"], Quantity::Int(1));
    assert_eq!(r.limits["memory"], Quantity::Str("64Mi".into()));
    assert_eq!(r.requests["cpu"], Quantity::Float(0.5));
}

#[test]
fn yaml_merge_keys_and_anchors() {
    let pod = parse_manifest(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: m}\nspec:\n  containers:\n  - &base {name: a, image: busybox:1.36, command: [sleep, inf]}\n  - <<: *base\n    name: b\n",
    )
    .unwrap();
    assert_eq!(pod.spec.containers[1].name, "b");
    assert_eq!(pod.spec.containers[1].image, "busybox:1.36");
    assert_eq!(pod.spec.containers[1].command, vec!["sleep", "inf"]);
}

#[test]
fn unknown_fields_are_reported_not_fatal() {
    let parsed = parse_manifest_document(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: web, selfLink: /x, creationTimestamp: null}\nspec:\n  tolerations: [{operator: Exists}]\n  hostNetwork: false\n  containers:\n  - name: a\n    image: b\n    Command: [x]\n    ports: [{containerPort: 1, hostPorts: 2}]\nstatus: {phase: Running, startTime: null}\n",
    )
    .unwrap();
    assert_eq!(
        parsed.unknown_fields,
        vec![
            "metadata.selfLink",
            "spec.containers[0].Command",
            "spec.containers[0].ports[0].hostPorts",
            "spec.tolerations",
        ]
    );
    // Other volume kinds are modelled (and rejected by validation), not "unknown".
    let parsed = parse_manifest_document(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  volumes: [{name: c, configMap: {name: x}}]\n",
    )
    .unwrap();
    assert!(parsed.unknown_fields.is_empty());
}

#[test]
fn defaults() {
    let mut pod = parse_manifest(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: d}\nspec:\n  hostNetwork: true\n  volumes:\n  - {name: h, hostPath: {path: /x}}\n  - {name: e}\n  initContainers:\n  - {name: i, image: busybox}\n  containers:\n  - name: a\n    image: nginx:1.27\n    ports: [{containerPort: 80}, {containerPort: 53, protocol: UDP, hostPort: 0}]\n",
    )
    .unwrap();
    apply_defaults(&mut pod);
    let once = pod.clone();
    apply_defaults(&mut pod);
    assert_eq!(pod, once, "idempotent");

    assert_eq!(pod.metadata.namespace, "default");
    assert_eq!(pod.spec.restart_policy, Some(RestartPolicy::Always));
    assert_eq!(pod.spec.termination_grace_period_seconds, Some(30));
    assert_eq!(pod.spec.dns_policy.as_deref(), Some("ClusterFirst"));
    let c = &pod.spec.containers[0];
    assert_eq!(c.image_pull_policy, Some(PullPolicy::IfNotPresent));
    assert_eq!(
        c.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    assert_eq!(c.ports[0].protocol.as_deref(), Some("TCP"));
    assert_eq!(c.ports[1].protocol.as_deref(), Some("UDP"));
    // hostNetwork: hostPort defaults to containerPort.
    assert_eq!(c.ports[0].host_port, Some(80));
    assert_eq!(c.ports[1].host_port, Some(53));
    let i = &pod.spec.init_containers[0];
    assert_eq!(i.image_pull_policy, Some(PullPolicy::Always));
    assert_eq!(
        i.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(
        pod.spec.volumes[0]
            .host_path
            .as_ref()
            .unwrap()
            .type_
            .as_deref(),
        Some("")
    );
    // A volume without a source is an emptyDir.
    assert!(pod.spec.volumes[1].empty_dir.is_some());

    // Set values are kept.
    let mut pod = parse_manifest(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: d, namespace: edge}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 5\n  dnsPolicy: Default\n  containers:\n  - {name: a, image: nginx, imagePullPolicy: Never}\n",
    )
    .unwrap();
    apply_defaults(&mut pod);
    assert_eq!(pod.metadata.namespace, "edge");
    assert_eq!(pod.spec.restart_policy, Some(RestartPolicy::Never));
    assert_eq!(pod.spec.termination_grace_period_seconds, Some(5));
    assert_eq!(pod.spec.dns_policy.as_deref(), Some("Default"));
    assert_eq!(
        pod.spec.containers[0].image_pull_policy,
        Some(PullPolicy::Never)
    );
}

#[test]
fn pull_policy_from_image_reference() {
    use PullPolicy::{Always, IfNotPresent};
    let table = [
        ("nginx", Always),
        ("nginx:latest", Always),
        ("nginx:1.27", IfNotPresent),
        ("docker.io/library/nginx", Always),
        ("registry.local:5000/app", Always), // a port, not a tag
        ("registry.local:5000/app:v2", IfNotPresent),
        ("registry.local:5000/team/app:latest", Always),
        ("nginx@sha256:0123456789abcdef", IfNotPresent),
        ("registry.local:5000/app@sha256:0123", IfNotPresent),
        ("nginx:1.27@sha256:0123", IfNotPresent),
        ("nginx:latest@sha256:0123", Always), // upstream: the tag decides
    ];
    for (image, want) in table {
        assert_eq!(default_pull_policy(image), want, "{image}");
    }
    assert_eq!(
        image_tag_and_digest("h:5000/a/b:c@sha256:x"),
        (Some("c"), true)
    );
    assert_eq!(image_tag_and_digest("h:5000/a/b"), (None, false));
}

/// ContainerRestartRules: a container's own restartPolicy (any container) and its rules
/// are valid, as the apiserver has them since 1.35.
#[test]
fn container_restart_policy_and_rules_are_valid() {
    let mut pod = web();
    apply_defaults(&mut pod);
    pod.spec.restart_policy = Some(RestartPolicy::Never);
    pod.spec.containers[0].restart_policy = Some(RestartPolicy::Never);
    pod.spec.containers[0].restart_policy_rules = vec![restart_rule("Restart", "NotIn")];
    let mut init = pod.spec.containers[0].clone();
    init.name = "init".into();
    init.restart_policy = Some(RestartPolicy::OnFailure);
    pod.spec.init_containers.push(init);
    validate_pod(&pod).expect("valid");
}

#[test]
fn validation_names_every_field() {
    type Mutate = fn(&mut Pod);
    // (mutation of a valid pod, field, text in the message)
    let table: &[(Mutate, &str, &str)] = &[
        (|p| p.metadata.name.clear(), "metadata.name", "required"),
        (
            |p| p.metadata.name = "Web".into(),
            "metadata.name",
            "\"Web\" must be a DNS-1123 subdomain",
        ),
        (
            |p| p.metadata.name = "a".repeat(254),
            "metadata.name",
            "DNS-1123 subdomain",
        ),
        (
            |p| p.metadata.namespace = "kube.system".into(),
            "metadata.namespace",
            "DNS-1123 label",
        ),
        (
            |p| p.spec.containers.clear(),
            "spec.containers",
            "at least one container",
        ),
        (
            |p| p.spec.containers[0].name.clear(),
            "spec.containers[0].name",
            "required",
        ),
        (
            |p| p.spec.containers[0].name = "my_web".into(),
            "spec.containers[0].name",
            "DNS-1123 label",
        ),
        (
            |p| {
                let mut c = p.spec.containers[0].clone();
                c.volume_mounts.clear();
                p.spec.init_containers.push(c);
            },
            "spec.containers[0].name",
            "duplicate container name \"web\" (also spec.initContainers[0])",
        ),
        (
            |p| p.spec.containers[0].image.clear(),
            "spec.containers[0].image",
            "required",
        ),
        (
            |p| p.spec.containers[0].image = " nginx".into(),
            "spec.containers[0].image",
            "whitespace",
        ),
        (
            |p| p.spec.volumes[1].name = "data".into(),
            "spec.volumes[1].name",
            "duplicate volume name \"data\"",
        ),
        (
            |p| p.spec.volumes[1].name = "Data".into(),
            "spec.volumes[1].name",
            "DNS-1123 label",
        ),
        (
            |p| {
                p.spec.volumes[1].empty_dir = None;
                p.spec.volumes[1]
                    .other
                    .insert("hostPth".into(), serde_json::json!({"path": "/x"}));
            },
            "spec.volumes[1] (scratch)",
            "spec.volumes[1] (scratch): \"hostPth\" is not a volume type (supported: hostPath, emptyDir, configMap, secret, downwardAPI, projected, csi, image)",
        ),
        (
            |p| {
                p.spec.volumes[1].empty_dir = None;
                p.spec.volumes[1].csi = Some(api::CsiVolumeSource::default());
            },
            "spec.volumes[1].csi.driver",
            "spec.volumes[1].csi.driver: required",
        ),
        (
            |p| {
                p.spec.volumes[1].empty_dir = None;
                p.spec.volumes[1].csi = Some(api::CsiVolumeSource {
                    driver: "-bad".into(),
                    node_publish_secret_ref: Some(api::LocalObjectReference { name: "".into() }),
                    ..Default::default()
                });
            },
            "spec.volumes[1].csi.driver",
            "must start and end with an alphanumeric character",
        ),
        (
            |p| {
                p.spec.volumes[1].empty_dir = None;
                p.spec.volumes[1].csi = Some(api::CsiVolumeSource {
                    driver: "secrets-store.csi.k8s.io".into(),
                    node_publish_secret_ref: Some(api::LocalObjectReference { name: "".into() }),
                    ..Default::default()
                });
            },
            "spec.volumes[1].csi.nodePublishSecretRef.name",
            "spec.volumes[1].csi.nodePublishSecretRef.name: required",
        ),
        (
            |p| {
                p.spec.volumes[1].empty_dir = None;
                p.spec.volumes[1].config_map = Some(api::ConfigMapVolumeSource::default());
            },
            "spec.volumes[1].configMap.name",
            "spec.volumes[1].configMap.name: required",
        ),
        (
            |p| {
                p.spec.volumes[1].empty_dir = None;
                p.spec.volumes[1].secret = Some(api::SecretVolumeSource {
                    secret_name: "db".into(),
                    items: vec![api::KeyToPath {
                        key: "k".into(),
                        path: "../etc/passwd".into(),
                        mode: None,
                    }],
                    ..Default::default()
                });
            },
            "spec.volumes[1].secret.items[0].path",
            "\"../etc/passwd\" must not contain '..'",
        ),
        (
            |p| {
                p.spec.volumes[1].empty_dir = None;
                p.spec.volumes[1].downward_api = Some(api::DownwardApiVolumeSource {
                    items: vec![api::DownwardApiVolumeFile {
                        path: "node".into(),
                        field_ref: Some(api::ObjectFieldSelector {
                            field_path: "spec.nodeName".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    default_mode: Some(0o1777),
                });
            },
            "spec.volumes[1].downwardAPI.defaultMode",
            "must be a file mode between 0 and 0777",
        ),
        (
            |p| {
                p.spec.volumes[1].host_path = Some(api::HostPathVolumeSource {
                    path: "/x".into(),
                    type_: None,
                })
            },
            "spec.volumes[1] (scratch)",
            "more than one volume type (found hostPath, emptyDir)",
        ),
        (
            |p| p.spec.volumes[0].host_path.as_mut().unwrap().path = "srv/data".into(),
            "spec.volumes[0].hostPath.path",
            "must be an absolute path",
        ),
        (
            |p| p.spec.volumes[0].host_path.as_mut().unwrap().path = "/srv/../etc".into(),
            "spec.volumes[0].hostPath.path",
            "'..'",
        ),
        (
            |p| p.spec.volumes[0].host_path.as_mut().unwrap().type_ = Some("Dir".into()),
            "spec.volumes[0].hostPath.type",
            "unsupported value \"Dir\"",
        ),
        (
            |p| p.spec.volumes[1].empty_dir.as_mut().unwrap().medium = Some("Disk".into()),
            "spec.volumes[1].emptyDir.medium",
            "unsupported value",
        ),
        (
            |p| p.spec.containers[0].volume_mounts[0].name = "nope".into(),
            "spec.containers[0].volumeMounts[0].name",
            "volume \"nope\" is not declared in spec.volumes",
        ),
        (
            |p| p.spec.containers[0].volume_mounts[0].mount_path = "data".into(),
            "spec.containers[0].volumeMounts[0].mountPath",
            "must be an absolute path",
        ),
        (
            |p| p.spec.containers[0].volume_mounts[1].mount_path = "/data".into(),
            "spec.containers[0].volumeMounts[1].mountPath",
            "already mounted by spec.containers[0].volumeMounts[0]",
        ),
        (
            |p| p.spec.containers[0].volume_mounts[0].sub_path = Some("../x".into()),
            "spec.containers[0].volumeMounts[0].subPath",
            "relative path",
        ),
        (
            |p| p.spec.containers[0].ports[0].container_port = 0,
            "spec.containers[0].ports[0].containerPort",
            "between 1 and 65535, found 0",
        ),
        (
            |p| p.spec.containers[0].ports[0].container_port = 65536,
            "spec.containers[0].ports[0].containerPort",
            "between 1 and 65535",
        ),
        (
            |p| p.spec.containers[0].ports[0].host_port = Some(70000),
            "spec.containers[0].ports[0].hostPort",
            "between 1 and 65535",
        ),
        (
            |p| {
                p.spec.host_network = true;
                p.spec.containers[0].ports[0].host_port = Some(8080);
            },
            "spec.containers[0].ports[0].hostPort",
            "must equal containerPort (80) when hostNetwork is true, found 8080",
        ),
        (
            |p| p.spec.containers[0].ports[0].protocol = Some("tcp".into()),
            "spec.containers[0].ports[0].protocol",
            "unsupported value \"tcp\"",
        ),
        (
            |p| {
                let port = p.spec.containers[0].ports[0].clone();
                p.spec.containers[0].ports.push(api::ContainerPort {
                    container_port: 81,
                    ..port
                });
            },
            "spec.containers[0].ports[1].name",
            "duplicate port name \"http\" (also spec.containers[0].ports[0])",
        ),
        (
            |p| p.spec.containers[0].ports[0].name = Some("8080".into()),
            "spec.containers[0].ports[0].name",
            "IANA service name",
        ),
        (
            |p| p.spec.containers[0].env[0].name = "A=B".into(),
            "spec.containers[0].env[0].name",
            "without '='",
        ),
        (
            |p| p.spec.containers[0].env[0].name.clear(),
            "spec.containers[0].env[0].name",
            "required",
        ),
        (
            |p| {
                p.spec.containers[0].env_from.push(api::EnvFromSource {
                    prefix: "APP=".into(),
                    ..Default::default()
                })
            },
            "spec.containers[0].envFrom[0].prefix",
            "\"APP=\" must be printable ASCII without '='",
        ),
        (
            |p| p.spec.containers[0].env[0].value_from = Some(serde_json::json!({"fieldRef": {}})),
            "spec.containers[0].env[0].valueFrom",
            "together with value",
        ),
        (
            |p| p.spec.termination_grace_period_seconds = Some(-1),
            "spec.terminationGracePeriodSeconds",
            ">= 0, found -1",
        ),
        (
            |p| p.spec.active_deadline_seconds = Some(0),
            "spec.activeDeadlineSeconds",
            "> 0",
        ),
        (
            |p| p.spec.dns_policy = Some("Cluster".into()),
            "spec.dnsPolicy",
            "unsupported value",
        ),
        (
            |p| p.spec.dns_policy = Some("None".into()),
            "spec.dnsConfig",
            "required when dnsPolicy is None",
        ),
        (
            |p| {
                p.spec.containers[0].restart_policy_rules = vec![restart_rule("Restart", "In")];
            },
            "spec.containers[0].restartPolicy",
            "must specify restartPolicy when restart rules are used",
        ),
        (
            |p| {
                let c = &mut p.spec.containers[0];
                c.restart_policy = Some(RestartPolicy::Never);
                c.restart_policy_rules = vec![restart_rule("Restart", "Gt")];
            },
            "spec.containers[0].restartPolicyRules[0].exitCodes.operator",
            "unsupported value \"Gt\"",
        ),
        (
            |p| {
                let mut c = p.spec.containers[0].clone();
                c.name = "init".into();
                c.restart_policy = Some(RestartPolicy::OnFailure);
                c.restart_policy_rules = vec![restart_rule("Stop", "In")];
                p.spec.init_containers.push(c);
            },
            "spec.initContainers[0].restartPolicyRules[0].action",
            "unsupported value \"Stop\"",
        ),
        (
            |p| {
                let c = &mut p.spec.containers[0];
                c.restart_policy = Some(RestartPolicy::Never);
                c.restart_policy_rules = vec![picolet::api::ContainerRestartRule {
                    action: "Restart".into(),
                    exit_codes: None,
                }];
            },
            "spec.containers[0].restartPolicyRules[0].exitCodes",
            "required",
        ),
        (
            |p| p.spec.containers[0].termination_message_policy = Some("Always".into()),
            "spec.containers[0].terminationMessagePolicy",
            "unsupported value",
        ),
    ];
    let mut base = web();
    apply_defaults(&mut base);
    validate_pod(&base).expect("the base pod is valid");
    for (i, (mutate, field, text)) in table.iter().enumerate() {
        let mut pod = base.clone();
        mutate(&mut pod);
        let (msg, fields) = err_of(validate_pod(&pod));
        // The first problem is the one provoked (others may follow from it).
        assert_eq!(fields[0], *field, "case {i}: {msg}");
        assert!(
            msg.contains(text),
            "case {i}: {msg:?} should contain {text:?}"
        );
    }

    // Several problems are all reported, each with its field.
    let mut pod = base.clone();
    pod.spec.containers[0].image.clear();
    pod.spec.containers[0].ports[0].container_port = 0;
    let (msg, fields) = err_of(validate_pod(&pod));
    assert_eq!(
        fields,
        vec![
            "spec.containers[0].image",
            "spec.containers[0].ports[0].containerPort"
        ]
    );
    assert_eq!(
        msg,
        "spec.containers[0].image: required; spec.containers[0].ports[0].containerPort: must be between 1 and 65535, found 0"
    );

    // A sidecar (restartable init container) is fine.
    let mut pod = base.clone();
    let mut c = pod.spec.containers[0].clone();
    c.name = "sidecar".into();
    c.restart_policy = Some(RestartPolicy::Always);
    pod.spec.init_containers.push(c);
    validate_pod(&pod).unwrap();
}

#[test]
fn static_identity() {
    let parsed = parse_manifest_document(WEB.as_bytes()).unwrap();
    let path = "/etc/kubernetes/manifests/web.yaml";
    let pod = make_static(
        parsed.pod.clone(),
        &parsed.raw,
        "Edge-01",
        "file",
        path,
        SEEN,
    );
    assert_eq!(pod.metadata.name, "web-edge-01");
    assert_eq!(pod.metadata.namespace, "default");
    assert_eq!(pod.spec.node_name, "Edge-01");
    assert_eq!(pod.status.as_ref().unwrap().phase, Some(PodPhase::Pending));
    assert_eq!(pod.metadata.uid.len(), 32);
    assert!(
        pod.metadata
            .uid
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(pod.annotation(api::ANNOTATION_CONFIG_HASH), Some(pod.uid()));
    assert_eq!(pod.annotation(api::ANNOTATION_CONFIG_SOURCE), Some("file"));
    assert_eq!(
        pod.annotation(api::ANNOTATION_CONFIG_SEEN),
        Some("2026-11-30T00:53:20Z")
    );
    assert_eq!(pod.metadata.labels["app"], "web");
    assert!(pod.is_static());

    // Golden value: this hash must never change (a change restarts every static pod).
    assert_eq!(
        static_pod_uid(&parsed.raw, "Edge-01", "file", path),
        pod.metadata.uid
    );
    assert_eq!(pod.metadata.uid, GOLDEN_UID);

    let uid = |raw: &serde_json::Value, node: &str, source: &str, path: &str| {
        static_pod_uid(raw, node, source, path)
    };
    let base = uid(&parsed.raw, "Edge-01", "file", path);
    // Key order, YAML vs JSON, and the seen stamp do not matter.
    let reordered: serde_json::Value = serde_json::from_str(
        &serde_json::to_string(&parsed.raw)
            .unwrap()
            .replace("\"apiVersion\":\"v1\",", ""),
    )
    .map(|mut v: serde_json::Value| {
        v["apiVersion"] = "v1".into();
        v
    })
    .unwrap();
    assert_eq!(uid(&reordered, "Edge-01", "file", path), base);
    let later = make_static(
        parsed.pod.clone(),
        &parsed.raw,
        "Edge-01",
        "file",
        path,
        SEEN + 1_000_000_000_000,
    );
    assert_eq!(later.metadata.uid, base);
    // Node, source, path and content all do.
    assert_ne!(uid(&parsed.raw, "edge-02", "file", path), base);
    assert_ne!(uid(&parsed.raw, "Edge-01", "http", path), base);
    assert_ne!(
        uid(
            &parsed.raw,
            "Edge-01",
            "file",
            "/etc/kubernetes/manifests/web2.yaml"
        ),
        base
    );
    let mut edited = parsed.raw.clone();
    edited["spec"]["containers"][0]["image"] = "nginx:1.28".into();
    assert_ne!(uid(&edited, "Edge-01", "file", path), base);
    let mut int_vs_string = parsed.raw.clone();
    int_vs_string["spec"]["containers"][0]["ports"][0]["containerPort"] = "80".into();
    assert_ne!(uid(&int_vs_string, "Edge-01", "file", path), base);

    // metadata.uid wins; a status in the manifest is replaced.
    let mut with_uid = parsed.pod.clone();
    with_uid.metadata.uid = "my-uid".into();
    with_uid.metadata.namespace = "edge".into();
    with_uid.status = Some(api::PodStatus {
        phase: Some(PodPhase::Running),
        ..Default::default()
    });
    let pod = make_static(with_uid, &parsed.raw, "n", "http", "http://x/pod", 0);
    assert_eq!(pod.metadata.uid, "my-uid");
    assert_eq!(pod.metadata.namespace, "edge");
    assert_eq!(pod.annotation(api::ANNOTATION_CONFIG_HASH), Some("my-uid"));
    assert_eq!(pod.annotation(api::ANNOTATION_CONFIG_SOURCE), Some("http"));
    assert_eq!(
        pod.annotation(api::ANNOTATION_CONFIG_SEEN),
        None,
        "no stamp for an unknown time"
    );
    assert_eq!(
        pod.status,
        Some(api::PodStatus {
            phase: Some(PodPhase::Pending),
            ..Default::default()
        })
    );
}

const GOLDEN_UID: &str = "44255d613ed1a194732fb6a1a088d5c0";

#[test]
fn load_ties_it_together() {
    let path = "/etc/kubernetes/manifests/web.yaml";
    let loaded = load_manifest(path, WEB.as_bytes(), "node1", "file", SEEN).unwrap();
    assert_eq!(loaded.pod.metadata.name, "web-node1");
    assert_eq!(loaded.pod.spec.restart_policy, Some(RestartPolicy::Always));
    assert_eq!(
        loaded.pod.spec.containers[0].image_pull_policy,
        Some(PullPolicy::IfNotPresent)
    );
    assert!(loaded.unknown_fields.is_empty());
    validate_pod(&loaded.pod).unwrap();

    let table: &[(&str, &str)] = &[
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: web\n",
            "/etc/kubernetes/manifests/web.yaml: spec.containers[0].image: required",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {generateName: web-}\nspec:\n  containers:\n  - {name: web, image: x}\n",
            "/etc/kubernetes/manifests/web.yaml: metadata.name: required (static pods cannot use metadata.generateName)",
        ),
        (
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - {name: web, image: x}\n",
            "/etc/kubernetes/manifests/web.yaml: metadata.name: required",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: Web}\nspec:\n  containers:\n  - {name: web, image: x}\n",
            "/etc/kubernetes/manifests/web.yaml: metadata.name: \"Web-node1\" must be a DNS-1123 subdomain",
        ),
        (
            "apiVersion: v1\nkind: Deployment\n",
            "/etc/kubernetes/manifests/web.yaml: kind: must be \"Pod\", found \"Deployment\"; picolet runs static pods only",
        ),
        ("", "/etc/kubernetes/manifests/web.yaml: the file is empty"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: web, imgae: nginx}\n",
            "/etc/kubernetes/manifests/web.yaml: spec.containers[0].image: required (fields picolet does not know: spec.containers[0].imgae)",
        ),
    ];
    for (input, want) in table {
        let e = load_manifest(path, input.as_bytes(), "node1", "file", SEEN).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with(want), "{msg:?} should start with {want:?}");
        assert!(matches!(e, ManifestError::InFile { .. }));
        assert!(!matches!(e.inner(), ManifestError::InFile { .. }));
    }
}

fn data(name: &str) -> (String, Vec<u8>) {
    let path = format!("{}/tests/data/manifests/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn real_world_manifests_load() {
    let (path, bytes) = data("etcd.yaml");
    let loaded = load_manifest(&path, &bytes, "pi-4", "file", SEEN).unwrap();
    let pod = &loaded.pod;
    assert_eq!(pod.full_name(), "kube-system/etcd-pi-4");
    assert!(pod.spec.host_network);
    assert!(pod.spec.containers[0].liveness_probe.is_some());
    assert!(
        loaded.unknown_fields.is_empty(),
        "status: {{}} and creationTimestamp: null are not reported: {:?}",
        loaded.unknown_fields
    );
    let seccomp = pod
        .spec
        .security_context
        .as_ref()
        .unwrap()
        .seccomp_profile
        .as_ref();
    assert_eq!(
        seccomp.unwrap().type_,
        "RuntimeDefault",
        "kubeadm's etcd asks for it"
    );

    let (path, bytes) = data("sensor.json");
    let loaded = load_manifest(&path, &bytes, "pi-4", "file", SEEN).unwrap();
    let c = &loaded.pod.spec.containers[0];
    assert_eq!(
        c.image_pull_policy,
        Some(PullPolicy::Always),
        "no tag behind a registry port"
    );
    assert_eq!(
        c.resources.as_ref().unwrap().limits["cpu"],
        Quantity::Float(0.5)
    );
    assert!(
        loaded.unknown_fields.is_empty(),
        "{:?}",
        loaded.unknown_fields
    );

    let (path, bytes) = data("with-configmap.yaml");
    let loaded = load_manifest(&path, &bytes, "pi-4", "file", SEEN).unwrap();
    assert_eq!(
        loaded.pod.spec.volumes[1].config_map.as_ref().unwrap().name,
        "nginx-conf"
    );
    assert!(loaded.pod.spec.volumes[1].empty_dir.is_none());
}

/// The API's acronym spellings (`hostPID`, `hostIPC`, `ports[].hostIP`) reach the model:
/// they used to be silently dropped (serde's camelCase reads `hostPid`, `hostIpc`,
/// `hostIp`), so node-exporter ran in its own PID namespace and a port meant for 127.0.0.1
/// was published on every interface.
#[test]
fn acronym_fields_are_read_as_the_api_spells_them() {
    let parsed = parse_manifest_document(
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: ne}\nspec:\n  hostPID: true\n  hostIPC: true\n  hostNetwork: true\n  containers:\n  - name: a\n    image: b\n    ports: [{containerPort: 9100, hostPort: 9100, hostIP: 127.0.0.1}]\n",
    )
    .unwrap();
    assert!(parsed.pod.spec.host_pid && parsed.pod.spec.host_ipc);
    assert_eq!(
        parsed.pod.spec.containers[0].ports[0].host_ip.as_deref(),
        Some("127.0.0.1")
    );
    assert!(
        parsed.unknown_fields.is_empty(),
        "{:?}",
        parsed.unknown_fields
    );
    // and are written back the same way (the apiserver reads mirror pods and statuses)
    let json = serde_json::to_value(&parsed.pod).unwrap();
    assert_eq!(json["spec"]["hostPID"], true);
    assert_eq!(json["spec"]["hostIPC"], true);
    assert_eq!(
        json["spec"]["containers"][0]["ports"][0]["hostIP"],
        "127.0.0.1"
    );
}

/// What `helm template` leaves: bare keys (YAML null) for every list and map it had nothing
/// for. Upstream reads them as empty; so does picolet, for the pod and for the ConfigMap and
/// Secret beside it, and nothing is reported as unknown.
#[test]
fn bare_keys_from_helm_template_read_as_empty() {
    let file = "\
apiVersion: v1
kind: Pod
metadata:
  name: frigate
  labels:
  annotations:
spec:
  nodeSelector:
  volumes:
  imagePullSecrets:
  initContainers:
  hostAliases:
  tolerations:
  affinity:
  securityContext:
  containers:
  - name: frigate
    image: busybox
    command:
    args:
    env:
    envFrom:
    ports:
    volumeMounts:
    resources:
    securityContext:
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
  labels:
data:
binaryData:
---
apiVersion: v1
kind: Secret
metadata: {name: s}
data:
stringData:
";
    let docs = load_manifest_documents("/m/frigate.yaml", file.as_bytes(), "n", "file", SEEN)
        .expect("the file reads");
    assert_eq!(docs.len(), 3);
    for d in &docs {
        assert!(d.is_ok(), "{:?}", d.as_ref().err().map(ToString::to_string));
    }
    let Ok(ManifestDocument::Pod(loaded)) = &docs[0] else {
        panic!("not a pod");
    };
    assert!(
        loaded.unknown_fields.is_empty(),
        "{:?}",
        loaded.unknown_fields
    );
    let c = &loaded.pod.spec.containers[0];
    assert!(c.env_from.is_empty() && c.command.is_empty() && c.ports.is_empty());
    assert!(loaded.pod.spec.volumes.is_empty() && loaded.pod.spec.init_containers.is_empty());
    // The same in JSON.
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j","labels":null},
        "spec":{"volumes":null,"containers":[{"name":"c","image":"busybox","env":null,"envFrom":null}]}}"#;
    load_manifest("/m/j.json", json.as_bytes(), "n", "file", SEEN).expect("null in JSON reads");
}

fn restart_rule(action: &str, operator: &str) -> picolet::api::ContainerRestartRule {
    picolet::api::ContainerRestartRule {
        action: action.into(),
        exit_codes: Some(picolet::api::ContainerRestartRuleOnExitCodes {
            operator: operator.into(),
            values: vec![42],
        }),
    }
}

/// Image volumes (KEP-4639): decoded, the pull policy defaulted from the reference as a
/// container's, a missing reference named, and another volume type beside it refused.
#[test]
fn image_volumes_decode_default_and_validate() {
    let parsed = |text: String| {
        let mut p = parse_manifest(text.as_bytes()).expect("parses");
        apply_defaults(&mut p);
        p
    };
    let checked = |text: String| {
        let mut p = parse_manifest(text.as_bytes())?;
        apply_defaults(&mut p);
        validate_pod(&p).map(|()| p)
    };
    let doc = |volume: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: ml}}\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n    volumeMounts:\n    - {{name: models, mountPath: /models, subPath: v2}}\n  volumes:\n  - {volume}\n"
        )
    };
    let p = parsed(doc(
        "{name: models, image: {reference: 'quay.io/acme/models:v2'}}",
    ));
    let iv = p.spec.volumes[0].image.as_ref().expect("image volume");
    assert_eq!(iv.reference, "quay.io/acme/models:v2");
    assert_eq!(iv.pull_policy, Some(PullPolicy::IfNotPresent));
    let p = parsed(doc(
        "{name: models, image: {reference: quay.io/acme/models}}",
    ));
    assert_eq!(
        p.spec.volumes[0].image.as_ref().unwrap().pull_policy,
        Some(PullPolicy::Always)
    );
    let p = parsed(doc(
        "{name: models, image: {reference: 'quay.io/acme/models:v2', pullPolicy: Never}}",
    ));
    assert_eq!(
        p.spec.volumes[0].image.as_ref().unwrap().pull_policy,
        Some(PullPolicy::Never)
    );

    let (msg, fields) = err_of(checked(doc("{name: models, image: {}}")));
    assert_eq!(fields, ["spec.volumes[0].image.reference"], "{msg}");
    assert!(msg.contains("required"), "{msg}");
    let (msg, _) = err_of(checked(doc(
        "{name: models, image: {reference: x}, emptyDir: {}}",
    )));
    assert!(
        msg.contains("more than one volume type (found emptyDir, image)"),
        "{msg}"
    );
    let (msg, fields) = err_of(checked(doc(
        "{name: models, image: {reference: x, pullPolicy: Sometimes}}",
    )));
    assert!(msg.contains("Sometimes"), "{msg} {fields:?}");
}

/// Pod-level resources (KEP-2837): requests defaulted as the apiserver does
/// (`defaultPodRequests`), and the consistency rules of `validatePodResources`.
#[test]
fn pod_level_resources_default_and_validate() {
    let checked = |resources: &str, container: &str| {
        let text = format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  resources: {resources}\n  containers:\n  - name: c\n    image: busybox:1.36\n    resources: {container}\n"
        );
        let mut p = parse_manifest(text.as_bytes())?;
        apply_defaults(&mut p);
        validate_pod(&p).map(|()| p)
    };
    let q = |p: &Pod, name: &str| p.spec.resources.as_ref().unwrap().requests[name].as_string();
    // Limits only: requests default to them; a container request wins for its resource.
    let p = checked("{limits: {cpu: '1', memory: 256Mi}}", "{}").expect("valid");
    assert_eq!(
        (q(&p, "cpu"), q(&p, "memory")),
        ("1".into(), "256Mi".into())
    );
    let p = checked(
        "{limits: {cpu: '1', memory: 256Mi}}",
        "{requests: {cpu: 250m}}",
    )
    .expect("valid");
    assert_eq!(
        (q(&p, "cpu"), q(&p, "memory")),
        ("250m".into(), "256Mi".into())
    );
    // Requests only: nothing defaulted.
    let p = checked("{requests: {cpu: 500m}}", "{}").expect("valid");
    assert_eq!(p.spec.resources.as_ref().unwrap().requests.len(), 1);

    for (resources, container, field, text) in [
        (
            "{limits: {cpu: '1', nvidia.com/gpu: '1'}}",
            "{}",
            "spec.resources.limits.nvidia.com/gpu",
            "unsupported resource",
        ),
        (
            "{limits: {memory: lots}}",
            "{}",
            "spec.resources.limits.memory",
            "expected a quantity",
        ),
        (
            "{requests: {cpu: '2'}, limits: {cpu: '1'}}",
            "{}",
            "spec.resources.requests.cpu",
            "2000m must be less than or equal to the cpu limit of 1000m",
        ),
        (
            "{requests: {memory: 64Mi}}",
            "{requests: {memory: 128Mi}}",
            "spec.resources.requests.memory",
            "must be greater than or equal to the containers' aggregated requests of 134217728",
        ),
        (
            "{limits: {cpu: 500m}}",
            "{limits: {cpu: '1'}}",
            "spec.containers[0].resources.limits.cpu",
            "1000m must be less than or equal to the pod-level cpu limit of 500m",
        ),
    ] {
        let (msg, fields) = err_of(checked(resources, container));
        assert!(
            fields.iter().any(|f| f == field),
            "{resources}: {msg} {fields:?}"
        );
        assert!(msg.contains(text), "{resources}: {msg}");
    }
}
