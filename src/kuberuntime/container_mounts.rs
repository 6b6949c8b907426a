//! The mounts the kubelet makes for every container, besides its volumes (kubelet:
//! `makeMounts`): the termination-message file and the managed `/etc/hosts`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::api;
use crate::cri::{Mount, MountPropagation};
use crate::kuberuntime::labels;
use crate::volume::mounts::{MountError, ensure_dir, io_err, pod_dir};

/// Create the file the container's termination message is written to and mount it at
/// `terminationMessagePath` (kubelet: `makeMounts`): `<pod dir>/containers/<name>/<id>`.
/// The termination-message file of one container instance: its restart count in hex.
pub(crate) fn termination_log_file_id(restart_count: u32) -> String {
    format!("{restart_count:08x}")
}

pub(crate) fn termination_log_mount(
    root_dir: &Path,
    pod: &api::Pod,
    container: &api::Container,
    file_id: &str,
) -> Result<Mount, MountError> {
    let dir = pod_dir(root_dir, &pod.metadata.uid)
        .join("containers")
        .join(&container.name);
    ensure_dir(&dir, 0o750)?;
    let file = dir.join(file_id);
    fs::File::create(&file).map_err(io_err("create file", &file))?;
    // world-writable: the container may run as any user
    fs::set_permissions(&file, fs::Permissions::from_mode(0o666))
        .map_err(io_err("chmod", &file))?;
    Ok(Mount {
        container_path: labels::termination_message_path(container).to_string(),
        host_path: file.to_string_lossy().into_owned(),
        readonly: false,
        propagation: MountPropagation::Private,
        ..Default::default()
    })
}

/// kubelet: the cluster domain of the `<hostname>.<subdomain>.<namespace>.svc.<domain>`
/// line (kubelet `--cluster-domain`; picolet has no flag for it yet).
pub(crate) const CLUSTER_DOMAIN: &str = "cluster.local";

/// The node's hosts file, copied for host-network pods.
pub(crate) const NODE_HOSTS_FILE: &str = "/etc/hosts";

/// The kubelet-managed `/etc/hosts` (kubelet: `managedHostsFileContent`,
/// `nodeHostsFileContent`): for a host-network pod the node's own file, else the localhost
/// lines and the pod IP with its hostname (and FQDN with a `subdomain`); then the
/// `hostAliases`.
pub(crate) fn hosts_file(pod: &api::Pod, pod_ip: &str, node_hosts: Option<&str>) -> String {
    let mut out = String::new();
    match node_hosts {
        Some(text) if pod.spec.host_network => {
            out.push_str(text);
            if !text.is_empty() && !text.ends_with('\n') {
                out.push('\n');
            }
        }
        _ => {
            out.push_str(
                "# Kubernetes-managed hosts file.\n\
                 127.0.0.1\tlocalhost\n\
                 ::1\tlocalhost ip6-localhost ip6-loopback\n\
                 fe00::0\tip6-localnet\n\
                 fe00::0\tip6-mcastprefix\n\
                 fe00::1\tip6-allnodes\n\
                 fe00::2\tip6-allrouters\n",
            );
            let hostname = crate::kuberuntime::cri_config::pod_hostname(pod);
            // kubelet: a hostnameOverride has no domain (the subdomain is not used).
            let subdomain = match pod.spec.hostname_override.as_deref() {
                Some(o) if !o.is_empty() => None,
                _ => pod.spec.subdomain.as_deref().filter(|s| !s.is_empty()),
            };
            match subdomain {
                Some(sub) => out.push_str(&format!(
                    "{pod_ip}\t{hostname}.{sub}.{}.svc.{CLUSTER_DOMAIN}\t{hostname}\n",
                    pod.metadata.namespace
                )),
                None => out.push_str(&format!("{pod_ip}\t{hostname}\n")),
            }
        }
    }
    if !pod.spec.host_aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for a in &pod.spec.host_aliases {
            out.push_str(&format!("{}\t{}\n", a.ip, a.hostnames.join("\t")));
        }
    }
    out
}

/// kubelet: `makeMounts`' `/etc/hosts` — written to `<pod dir>/etc-hosts` and mounted in
/// every container that does not mount its own `/etc/hosts`; `None` when the pod has no IP
/// yet (not host network) or the container brings its own.
pub(crate) fn etc_hosts_mount(
    root_dir: &Path,
    pod: &api::Pod,
    container: &api::Container,
    pod_ip: &str,
    node_hosts_path: &Path,
) -> Result<Option<Mount>, MountError> {
    if container
        .volume_mounts
        .iter()
        .any(|m| m.mount_path == "/etc/hosts")
        || (!pod.spec.host_network && pod_ip.is_empty())
    {
        return Ok(None);
    }
    let node_hosts = if pod.spec.host_network {
        Some(fs::read_to_string(node_hosts_path).map_err(io_err("read", node_hosts_path))?)
    } else {
        None
    };
    let text = hosts_file(pod, pod_ip, node_hosts.as_deref());
    let dir = pod_dir(root_dir, &pod.metadata.uid);
    ensure_dir(&dir, 0o750)?;
    let file = dir.join("etc-hosts");
    if fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
        fs::write(&file, &text).map_err(io_err("write", &file))?;
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644))
            .map_err(io_err("chmod", &file))?;
    }
    Ok(Some(Mount {
        container_path: "/etc/hosts".to_string(),
        host_path: file.to_string_lossy().into_owned(),
        readonly: false,
        propagation: MountPropagation::Private,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> api::Pod {
        let mut p = api::Pod::default();
        p.metadata.name = "p".into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = "uid-1".into();
        p
    }

    fn mount(name: &str, at: &str) -> api::VolumeMount {
        api::VolumeMount {
            name: name.into(),
            mount_path: at.into(),
            ..Default::default()
        }
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn container(mounts: Vec<api::VolumeMount>) -> api::Container {
        api::Container {
            name: "c".into(),
            volume_mounts: mounts,
            ..Default::default()
        }
    }

    #[test]
    fn termination_log() {
        let tmp = tempfile::tempdir().unwrap();
        let p = pod();
        let c = container(vec![]);
        let m = termination_log_mount(tmp.path(), &p, &c, "0000abcd").unwrap();
        assert_eq!(m.container_path, "/dev/termination-log");
        let f = tmp.path().join("pods/uid-1/containers/c/0000abcd");
        assert_eq!(m.host_path, f.to_string_lossy());
        assert_eq!(mode(&f), 0o666);
    }

    #[test]
    fn managed_hosts_file() {
        let mut p = pod();
        p.metadata.name = "web".into();
        p.metadata.namespace = "edge".into();
        let text = hosts_file(&p, "10.88.0.7", None);
        assert!(text.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
        assert!(text.ends_with("10.88.0.7\tweb\n"), "{text}");
        p.spec.hostname = Some("db-0".into());
        p.spec.subdomain = Some("db".into());
        p.spec.host_aliases = vec![api::HostAlias {
            ip: "192.0.2.10".into(),
            hostnames: vec!["mqtt.local".into(), "broker".into()],
        }];
        let text = hosts_file(&p, "10.88.0.7", None);
        assert!(
            text.contains("10.88.0.7\tdb-0.db.edge.svc.cluster.local\tdb-0\n"),
            "{text}"
        );
        assert!(
            text.ends_with("\n# Entries added by HostAliases.\n192.0.2.10\tmqtt.local\tbroker\n"),
            "{text}"
        );
        // Conformance: "a pod with subdomain and hostnameOverride fields will have
        // hostnameOverride as hostname": the override alone, no FQDN from the subdomain.
        p.spec.hostname_override = Some("override-host".into());
        let text = hosts_file(&p, "10.88.0.7", None);
        assert!(text.contains("\n10.88.0.7\toverride-host\n"), "{text}");
        p.spec.hostname_override = None;
        p.spec.host_network = true;
        let text = hosts_file(&p, "", Some("127.0.0.1 localhost\n10.0.0.2 pi"));
        assert!(
            text.starts_with("127.0.0.1 localhost\n10.0.0.2 pi\n\n# Entries added"),
            "{text}"
        );
    }

    #[test]
    fn etc_hosts_mount_is_written_once_and_skipped_when_brought() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let p = pod();
        let c = container(vec![]);
        let none = tmp.path().join("no-such-hosts");
        assert!(
            etc_hosts_mount(&root, &p, &c, "", &none).unwrap().is_none(),
            "no IP yet"
        );
        let m = etc_hosts_mount(&root, &p, &c, "10.88.0.7", &none)
            .unwrap()
            .unwrap();
        assert_eq!(m.container_path, "/etc/hosts");
        assert!(
            fs::read_to_string(&m.host_path)
                .unwrap()
                .contains("10.88.0.7")
        );
        let own = container(vec![mount("cfg", "/etc/hosts")]);
        assert!(
            etc_hosts_mount(&root, &p, &own, "10.88.0.7", &none)
                .unwrap()
                .is_none()
        );
    }
}
