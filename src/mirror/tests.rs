//! The archive formats and the server's answers, on archives made here.

use super::archive::{self, OCI_MANIFEST};
use super::tar::tests::{archive as tar_of, entry};
use super::*;

fn sha(b: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(b))
}

fn blob_entry(bytes: &[u8]) -> (String, Vec<u8>) {
    let d = sha(bytes);
    let path = format!("blobs/sha256/{}", &d[7..]);
    (d, entry(&path, b'0', "", bytes))
}

/// An OCI layout archive with one image: (archive bytes, manifest digest, layer digest).
fn oci_archive(name_annotation: &str, layer: &[u8]) -> (Vec<u8>, String, String) {
    let config =
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let (cd, ce) = blob_entry(config);
    let (ld, le) = blob_entry(layer);
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{cd}","size":{}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{ld}","size":{}}}]}}"#,
        config.len(),
        layer.len()
    );
    let (md, me) = blob_entry(manifest.as_bytes());
    let index = format!(
        r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"{OCI_MANIFEST}","digest":"{md}","size":{},"annotations":{{{name_annotation}}}}}]}}"#,
        manifest.len()
    );
    let tar = tar_of(&[
        entry("oci-layout", b'0', "", br#"{"imageLayoutVersion":"1.0.0"}"#),
        entry("blobs/", b'5', "", b""),
        ce,
        le,
        me,
        entry("index.json", b'0', "", index.as_bytes()),
    ]);
    (tar, md, ld)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn names_are_normalised_as_the_runtime_names_images() {
    for (raw, want) in [
        ("busybox", Some("docker.io/library/busybox:latest")),
        ("busybox:1.36", Some("docker.io/library/busybox:1.36")),
        ("user/app:2", Some("docker.io/user/app:2")),
        (
            "index.docker.io/library/nginx:1",
            Some("docker.io/library/nginx:1"),
        ),
        (
            "registry.k8s.io/pause:3.10",
            Some("registry.k8s.io/pause:3.10"),
        ),
        ("localhost:5000/a/b:c", Some("localhost:5000/a/b:c")),
        ("localhost/x", Some("localhost/x:latest")),
        ("busybox@sha256:abcd", None),
        ("busybox:1@sha256:abcd", Some("docker.io/library/busybox:1")),
        ("", None),
    ] {
        assert_eq!(archive::normalise(raw).as_deref(), want, "{raw:?}");
    }
}

#[test]
fn oci_layout_archive() {
    let (tar, md, ld) = oci_archive(
        r#""io.containerd.image.name":"docker.io/library/busybox:1.36","org.opencontainers.image.ref.name":"1.36""#,
        b"layer bytes",
    );
    let dir = tempfile::tempdir().unwrap();
    let a = archive::read(&write(dir.path(), "bb.tar", &tar)).unwrap();
    assert_eq!(
        a.tags,
        vec![("docker.io/library/busybox:1.36".to_string(), md.clone())]
    );
    assert_eq!(a.manifests.len(), 1);
    assert_eq!(a.manifests[0].media_type, OCI_MANIFEST);
    assert_eq!(sha(&a.manifests[0].bytes), md);
    assert_eq!(a.blobs.len(), 3);
    let (_, loc) = a.blobs.iter().find(|(d, _)| *d == ld).unwrap();
    assert_eq!(
        &tar[loc.offset as usize..(loc.offset + loc.size) as usize],
        b"layer bytes"
    );
    assert!(!a.gzip);

    // ref.name alone: a whole reference names it, a bare tag does not.
    let (tar, _, _) = oci_archive(
        r#""org.opencontainers.image.ref.name":"quay.io/x/y:2""#,
        b"l",
    );
    let a = archive::read(&write(dir.path(), "y.tar", &tar)).unwrap();
    assert_eq!(a.tags[0].0, "quay.io/x/y:2");
    let (tar, md, _) = oci_archive(r#""org.opencontainers.image.ref.name":"2""#, b"l");
    let a = archive::read(&write(dir.path(), "z.tar", &tar)).unwrap();
    assert!(a.tags.is_empty());
    assert_eq!(a.notes, vec![format!("image {md} has no name")]);
}

#[test]
fn gzip_archive_reads_the_same() {
    let (tar, md, _) = oci_archive(
        r#""io.containerd.image.name":"docker.io/library/a:1""#,
        &[9u8; 5000],
    );
    let dir = tempfile::tempdir().unwrap();
    let plain = write(dir.path(), "a.tar", &tar);
    let out = std::process::Command::new("gzip")
        .arg("-kc")
        .arg(&plain)
        .output()
        .unwrap();
    let a = archive::read(&write(dir.path(), "a.tar.gz", &out.stdout)).unwrap();
    assert!(a.gzip);
    assert_eq!(a.tags[0].1, md);
    let b = archive::read(&plain).unwrap();
    assert_eq!(
        (a.blobs.clone(), a.manifests.clone()),
        (b.blobs, b.manifests)
    );
}

/// Older `docker save`: a manifest is made, uncompressed layers by their diff_ids, a
/// linked (shared) layer followed.
#[test]
fn docker_save_archive() {
    let layer = tar_of(&[entry("etc/hostname", b'0', "", b"board\n")]);
    let diff = sha(&layer);
    let config = format!(
        r#"{{"architecture":"arm64","os":"linux","rootfs":{{"type":"layers","diff_ids":["{diff}","{diff}"]}}}}"#
    );
    let cd = sha(config.as_bytes());
    let manifest = format!(
        r#"[{{"Config":"{}.json","RepoTags":["app:1","registry.local:5000/app:1"],"Layers":["aaa/layer.tar","bbb/layer.tar"]}}]"#,
        &cd[7..]
    );
    let tar = tar_of(&[
        entry(&format!("{}.json", &cd[7..]), b'0', "", config.as_bytes()),
        entry("aaa/layer.tar", b'0', "", &layer),
        entry("bbb/layer.tar", b'2', "../aaa/layer.tar", b""),
        entry("manifest.json", b'0', "", manifest.as_bytes()),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let a = archive::read(&write(dir.path(), "app.tar", &tar)).unwrap();
    let names: Vec<&str> = a.tags.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        names,
        ["docker.io/library/app:1", "registry.local:5000/app:1"]
    );
    let m = &a.manifests[0];
    assert_eq!(sha(&m.bytes), a.tags[0].1);
    let v: serde_json::Value = serde_json::from_slice(&m.bytes).unwrap();
    assert_eq!(v["config"]["digest"], cd.as_str());
    assert_eq!(v["layers"][1]["digest"], diff.as_str());
    assert_eq!(v["layers"][0]["size"], layer.len());
    assert_eq!(
        v["layers"][0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar"
    );
    // The same archive gives the same manifest, byte for byte.
    let again = archive::read(&write(dir.path(), "copy.tar", &tar)).unwrap();
    assert_eq!(again.manifests, a.manifests);
}

#[test]
fn broken_archives_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let (tar, _, _) = oci_archive(r#""io.containerd.image.name":"a:1""#, &[1u8; 3000]);
    for (name, bytes, want) in [
        ("cut.tar", tar[..2000].to_vec(), "truncated"),
        (
            "text.tar",
            b"hello, this is not a tar".repeat(40),
            "checksum",
        ),
        ("empty.tar", vec![0u8; 1024], "neither an OCI image layout"),
        ("x.tar.zst", vec![0x28, 0xb5, 0x2f, 0xfd, 0, 0], "zstd"),
        (
            "noindex.tar",
            tar_of(&[
                entry("oci-layout", b'0', "", b"{}"),
                entry("index.json", b'0', "", b"["),
            ]),
            "index.json:",
        ),
    ] {
        let err = archive::read(&write(dir.path(), name, &bytes))
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{name}: {err}");
    }
}

async fn get(
    index: &Index,
    method: &str,
    uri: &str,
    range: Option<&str>,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut b = http::Request::builder().method(method).uri(uri);
    if let Some(r) = range {
        b = b.header("range", r);
    }
    let req = b.body(()).unwrap();
    let r = server::handle(index, &req);
    let code = r.status().as_u16();
    let headers = r
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
        .collect();
    let body = match r.into_body() {
        crate::http1::Out::Full(b) => b.map(|b| b.to_vec()).unwrap_or_default(),
        crate::http1::Out::Stream(mut rx) => {
            let mut out = Vec::new();
            while let Some(b) = rx.recv().await {
                out.extend_from_slice(&b);
            }
            out
        }
    };
    (code, headers, body)
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn the_server_answers_as_a_registry() {
    let dir = tempfile::tempdir().unwrap();
    let layer: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    let (tar, md, ld) = oci_archive(
        r#""io.containerd.image.name":"registry.k8s.io/pause:3.10""#,
        &layer,
    );
    write(dir.path(), "pause.tar", &tar);
    let (tar, bd, _) = oci_archive(
        r#""io.containerd.image.name":"docker.io/library/busybox:1.36""#,
        b"bb",
    );
    write(dir.path(), "bb.tar", &tar);
    let index = std::cell::RefCell::new(Index::default());
    rescan(&index, dir.path()).await;
    let index = index.into_inner();
    {
        let (code, h, body) = get(&index, "GET", "/v2/", None).await;
        assert_eq!((code, body.as_slice()), (200, &b"{}"[..]));
        assert_eq!(
            header(&h, "docker-distribution-api-version"),
            Some("registry/2.0")
        );

        // containerd's ns=, CRI-O's path prefix, Docker Hub by default.
        for uri in [
            "/v2/pause/manifests/3.10?ns=registry.k8s.io",
            "/v2/registry.k8s.io/pause/manifests/3.10",
        ] {
            let (code, h, body) = get(&index, "GET", uri, None).await;
            assert_eq!(code, 200, "{uri}");
            assert_eq!(header(&h, "content-type"), Some(OCI_MANIFEST));
            assert_eq!(header(&h, "docker-content-digest"), Some(md.as_str()));
            assert_eq!(sha(&body), md);
        }
        for uri in [
            "/v2/library/busybox/manifests/1.36",
            "/v2/library/busybox/manifests/1.36?ns=docker.io",
            "/v2/docker.io/library/busybox/manifests/1.36",
            "/v2/busybox/manifests/1.36?ns=registry-1.docker.io",
        ] {
            let (code, h, _) = get(&index, "GET", uri, None).await;
            assert_eq!(
                (code, header(&h, "docker-content-digest")),
                (200, Some(bd.as_str())),
                "{uri}"
            );
        }
        // By digest; HEAD has the headers, no body.
        let (code, h, body) = get(
            &index,
            "HEAD",
            &format!("/v2/pause/manifests/{md}?ns=registry.k8s.io"),
            None,
        )
        .await;
        assert_eq!((code, body.len()), (200, 0));
        assert_eq!(
            header(&h, "content-length").map(str::to_string),
            Some(index.manifest(&md).unwrap().bytes.len().to_string())
        );

        // Unknown: the distribution API's errors.
        let (code, _, body) = get(
            &index,
            "GET",
            "/v2/pause/manifests/9.9?ns=registry.k8s.io",
            None,
        )
        .await;
        assert_eq!(code, 404);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["errors"][0]["code"], "MANIFEST_UNKNOWN");
        let (code, _, body) = get(&index, "GET", "/v2/nginx/manifests/1?ns=docker.io", None).await;
        assert_eq!(code, 404);
        assert!(String::from_utf8_lossy(&body).contains("NAME_UNKNOWN"));
        let (code, _, body) = get(
            &index,
            "GET",
            &format!("/v2/x/blobs/sha256:{}", "0".repeat(64)),
            None,
        )
        .await;
        assert_eq!(code, 404);
        assert!(String::from_utf8_lossy(&body).contains("BLOB_UNKNOWN"));

        // Blobs whole and by range (a resumed pull).
        let uri = format!("/v2/pause/blobs/{ld}?ns=registry.k8s.io");
        let (code, h, body) = get(&index, "GET", &uri, None).await;
        assert_eq!((code, body.len()), (200, layer.len()));
        assert_eq!(body, layer);
        assert_eq!(header(&h, "accept-ranges"), Some("bytes"));
        let (code, h, body) = get(&index, "GET", &uri, Some("bytes=100000-")).await;
        assert_eq!(code, 206);
        assert_eq!(body, layer[100_000..]);
        assert_eq!(
            header(&h, "content-range"),
            Some("bytes 100000-199999/200000")
        );
        let (code, _, body) = get(&index, "GET", &uri, Some("bytes=10-19")).await;
        assert_eq!((code, body.as_slice()), (206, &layer[10..20]));
        let (code, _, body) = get(&index, "GET", &uri, Some("bytes=-5")).await;
        assert_eq!((code, body.as_slice()), (206, &layer[199_995..]));
        let (code, h, _) = get(&index, "GET", &uri, Some("bytes=300000-")).await;
        assert_eq!(code, 416);
        assert_eq!(header(&h, "content-range"), Some("bytes */200000"));

        // Read-only.
        for m in ["PUT", "POST", "DELETE", "PATCH"] {
            let (code, h, body) = get(&index, m, "/v2/pause/manifests/3.10", None).await;
            assert_eq!(code, 405, "{m}");
            assert_eq!(header(&h, "allow"), Some("GET, HEAD"));
            assert!(String::from_utf8_lossy(&body).contains("UNSUPPORTED"));
        }
        let (code, _, body) = get(
            &index,
            "GET",
            "/v2/pause/tags/list?ns=registry.k8s.io",
            None,
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(
            String::from_utf8_lossy(&body),
            r#"{"name":"pause","tags":["3.10"]}"#
        );
        let (code, _, _) = get(&index, "GET", "/v3/", None).await;
        assert_eq!(code, 404);
    }
}

/// Two archives with one tag: the newer serves it; an archive replaced is read again; a
/// broken one serves nothing and the rest still serve.
#[tokio::test]
async fn the_directory_rules() {
    let dir = tempfile::tempdir().unwrap();
    let (old, old_md, _) = oci_archive(
        r#""io.containerd.image.name":"docker.io/library/a:1""#,
        b"old",
    );
    let (new, new_md, _) = oci_archive(
        r#""io.containerd.image.name":"docker.io/library/a:1""#,
        b"new",
    );
    let p_old = write(dir.path(), "old.tar", &old);
    let p_new = write(dir.path(), "new.tar", &new);
    let t = |secs| std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    std::fs::File::options()
        .write(true)
        .open(&p_old)
        .unwrap()
        .set_modified(t(1_000))
        .unwrap();
    std::fs::File::options()
        .write(true)
        .open(&p_new)
        .unwrap()
        .set_modified(t(2_000))
        .unwrap();
    write(dir.path(), "broken.tar", b"junk");
    write(dir.path(), ".hidden.tar", &old);
    write(dir.path(), "copying.tar.part", &old);
    let index = std::cell::RefCell::new(Index::default());
    rescan(&index, dir.path()).await;
    assert_eq!(
        index.borrow().tag("docker.io/library/a:1").unwrap().digest,
        new_md
    );
    assert!(
        index.borrow().manifest(&old_md).is_some(),
        "by digest from any archive"
    );
    assert_eq!(index.borrow().entries.len(), 3);

    // The older one made newer: it serves the tag now.
    std::fs::File::options()
        .write(true)
        .open(&p_old)
        .unwrap()
        .set_modified(t(3_000))
        .unwrap();
    rescan(&index, dir.path()).await;
    assert_eq!(
        index.borrow().tag("docker.io/library/a:1").unwrap().digest,
        old_md
    );
    std::fs::remove_file(&p_old).unwrap();
    rescan(&index, dir.path()).await;
    assert_eq!(
        index.borrow().tag("docker.io/library/a:1").unwrap().digest,
        new_md
    );
    assert!(index.borrow().manifest(&old_md).is_none());
}

#[test]
fn picolet_check_reads_the_runtimes_configuration() {
    let etc = tempfile::tempdir().unwrap();
    let e = etc.path();
    let addr = "127.0.0.1:10261";
    let w = |rel: &str, text: &str| {
        let p = e.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    // containerd 1.6 without config_path: what to add to config.toml.
    let err = runtime_uses_mirror("containerd", "1.6.20~ds1", addr, e)
        .unwrap_err()
        .to_string();
    assert!(err.contains("config_path"), "{err}");
    // containerd 2.x reads /etc/containerd/certs.d by default.
    let err = runtime_uses_mirror("containerd", "v2.4.2", addr, e)
        .unwrap_err()
        .to_string();
    assert!(err.contains("_default/hosts.toml"), "{err}");
    w(
        "containerd/certs.d/_default/hosts.toml",
        "[host.\"http://127.0.0.1:10261\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
    );
    assert!(runtime_uses_mirror("containerd", "v2.4.2", addr, e).is_ok());
    // 1.6 with config_path set (a commented one does not count).
    w(
        "containerd/config.toml",
        &format!(
            "# config_path = \"/nowhere\"\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"{}\"\n",
            e.join("containerd/certs.d").display()
        ),
    );
    let ok = runtime_uses_mirror("containerd", "1.6.20", addr, e).unwrap();
    assert!(ok.contains("hosts.toml"), "{ok}");
    // CRI-O: a drop-in naming the mirror.
    let err = runtime_uses_mirror("cri-o", "1.36.3", addr, e)
        .unwrap_err()
        .to_string();
    assert!(err.contains("50-picolet-mirror.conf"), "{err}");
    w(
        "containers/registries.conf.d/50-picolet-mirror.conf",
        "[[registry]]\nprefix = \"docker.io\"\nlocation = \"docker.io\"\n[[registry.mirror]]\nlocation = \"127.0.0.1:10261/docker.io\"\ninsecure = true\n",
    );
    assert!(runtime_uses_mirror("cri-o", "1.36.3", addr, e).is_ok());
}
