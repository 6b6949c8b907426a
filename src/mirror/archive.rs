//! One image archive read into what the mirror serves: its tags, its manifests (small, kept
//! as bytes) and where each blob lies in the archive (served later by ranged reads, never
//! loaded). Two layouts, as `docker save` and the OCI tools write them:
//!
//! - **OCI image layout** (`oci-layout`, `index.json`, `blobs/<alg>/<hex>`: `docker save`
//!   since Docker 25, `skopeo copy … oci-archive:`, `podman save --format oci-archive`,
//!   `ctr images export`): the names come from `index.json`'s annotations
//!   (`io.containerd.image.name`, else `org.opencontainers.image.ref.name` when it is a whole
//!   reference) or, failing that, from a Docker `manifest.json`'s `RepoTags`.
//! - **Docker's older `docker save`** (`manifest.json` with `Config`, `RepoTags`, `Layers`:
//!   `<id>/layer.tar`): there is no manifest in it, so one is made (OCI, uncompressed layers,
//!   each layer's digest its `diff_id` from the config) — the same bytes every time, so the
//!   same digest for the same archive.
//!
//! The archive itself may be gzip-compressed (`docker save | gzip`); other compressions are
//! refused by name.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::path::Path;

use serde::Deserialize;

use super::tar::{self, Kind, Skip};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// Small JSON members are read during the one pass over the archive (manifests, indexes,
/// configs); larger ones are blobs served by ranged reads.
const CAPTURE_MAX: u64 = 256 * 1024;
/// All captured bytes of one archive, at most (a corrupt or hostile archive of many small
/// files is refused, not held).
const CAPTURE_TOTAL_MAX: u64 = 16 * 1024 * 1024;

/// Where a blob's bytes are in the (decompressed) archive stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub digest: String,
    pub media_type: String,
    pub bytes: Vec<u8>,
}

/// What one archive serves.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Archive {
    pub gzip: bool,
    /// `(registry/repository:tag, manifest digest)`, normalised as the runtime names them
    /// (`busybox` → `docker.io/library/busybox:latest`).
    pub tags: Vec<(String, String)>,
    pub manifests: Vec<Manifest>,
    /// Every blob by digest (manifests included).
    pub blobs: Vec<(String, Loc)>,
    /// What was skipped, for the log line (`image … has no name`).
    pub notes: Vec<String>,
}

/// Reads the archive at `path`: one pass over it (decompressing a gzip one), the small JSON
/// members kept until the layout is understood. The error says what is wrong, for a log
/// line that names the file.
pub fn read(path: &Path) -> Result<Archive, String> {
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut magic = [0u8; 6];
    let n = f.read(&mut magic).map_err(|e| e.to_string())?;
    f.rewind().map_err(|e| e.to_string())?;
    let magic = &magic[..n];
    if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Err("compressed with zstd: not read (decompress it: zstd -d)".into());
    }
    if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z']) {
        return Err("compressed with xz: not read (decompress it: xz -d)".into());
    }
    if magic.starts_with(b"BZh") {
        return Err("compressed with bzip2: not read (decompress it: bunzip2)".into());
    }
    let gzip = magic.starts_with(&[0x1f, 0x8b]);
    let members = if gzip {
        scan(&mut super::gzip::Reader::new(BufReader::new(f)))
    } else {
        scan(&mut PlainFile {
            r: BufReader::with_capacity(64 * 1024, f),
            pos: 0,
            len,
        })
    }?;
    let mut a = layout(members)?;
    a.gzip = gzip;
    Ok(a)
}

fn scan<R: Skip>(r: &mut R) -> Result<tar::Table, String> {
    let mut captured = 0u64;
    let mut over = false;
    let members = tar::members(r, |p, size| {
        let wanted = size <= CAPTURE_MAX
            && (p.ends_with(".json") || p.starts_with("blobs/") || p == "oci-layout");
        if wanted {
            captured += size;
            over |= captured > CAPTURE_TOTAL_MAX;
        }
        wanted && !over
    })
    .map_err(|e| e.to_string())?;
    if over {
        return Err(format!(
            "more than {CAPTURE_TOTAL_MAX} bytes of small files: not an image archive"
        ));
    }
    Ok(members)
}

/// A plain archive: skipping is a seek; a member running past the file's end is truncation.
struct PlainFile {
    r: BufReader<File>,
    pos: u64,
    len: u64,
}

impl Read for PlainFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.r.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Skip for PlainFile {
    fn skip(&mut self, n: u64) -> io::Result<()> {
        if self.pos + n > self.len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "truncated"));
        }
        self.r
            .seek_relative(i64::try_from(n).map_err(|_| io::ErrorKind::InvalidData)?)?;
        self.pos += n;
        Ok(())
    }
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    annotations: HashMap<String, String>,
}

#[derive(Deserialize)]
struct IndexJson {
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct DockerEntry {
    #[serde(rename = "Config")]
    config: String,
    #[serde(rename = "RepoTags", default)]
    repo_tags: Option<Vec<String>>,
    #[serde(rename = "Layers", default)]
    layers: Vec<String>,
}

#[derive(Deserialize)]
struct ImageConfig {
    rootfs: RootFs,
}

#[derive(Deserialize)]
struct RootFs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

/// The archive's members understood as an image layout.
fn layout(members: tar::Table) -> Result<Archive, String> {
    let mut files: HashMap<String, (Loc, Option<Vec<u8>>)> = HashMap::new();
    let mut links: Vec<(String, String)> = Vec::new();
    for (m, data) in members {
        match m.kind {
            Kind::File => {
                files.insert(
                    m.path,
                    (
                        Loc {
                            offset: m.offset,
                            size: m.size,
                        },
                        data,
                    ),
                );
            }
            Kind::Link(to) => links.push((m.path, to)),
            Kind::Other => {}
        }
    }
    // Links (docker save shares identical layers this way) point at a file's data.
    for (path, to) in links {
        if let Some((loc, _)) = files.get(&to) {
            let loc = *loc;
            files.entry(path).or_insert((loc, None));
        }
    }
    let json = |path: &str| files.get(path).and_then(|(_, d)| d.as_deref());
    if files.contains_key("oci-layout") && files.contains_key("index.json") {
        oci(&files, json("index.json"), json("manifest.json"))
    } else if let Some(m) = json("manifest.json") {
        docker(&files, m)
    } else {
        Err(
            "neither an OCI image layout (oci-layout, index.json) nor a docker save archive \
             (manifest.json)"
                .into(),
        )
    }
}

type Files = HashMap<String, (Loc, Option<Vec<u8>>)>;

fn blob_path(digest: &str) -> Option<String> {
    let (alg, hex) = digest.split_once(':')?;
    let ok = !alg.is_empty()
        && !hex.is_empty()
        && alg.bytes().all(|b| b.is_ascii_alphanumeric())
        && hex.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| format!("blobs/{alg}/{hex}"))
}

fn oci(
    files: &Files,
    index: Option<&[u8]>,
    docker_manifest: Option<&[u8]>,
) -> Result<Archive, String> {
    let index: IndexJson = serde_json::from_slice(index.unwrap_or_default())
        .map_err(|e| format!("index.json: {e}"))?;
    let mut a = Archive::default();
    for (path, (loc, _)) in files {
        if let Some(rest) = path.strip_prefix("blobs/")
            && let Some((alg, hex)) = rest.split_once('/')
            && !hex.contains('/')
        {
            a.blobs.push((format!("{alg}:{hex}"), *loc));
        }
    }
    crate::sort::sort_by_key(&mut a.blobs, |(d, _)| d.clone());
    // Docker 25+ writes a manifest.json beside index.json, in the same order: its RepoTags
    // name an index entry that has no name annotation.
    let docker_tags: Vec<Vec<String>> = docker_manifest
        .and_then(|m| serde_json::from_slice::<Vec<DockerEntry>>(m).ok())
        .map(|v| {
            v.into_iter()
                .map(|e| e.repo_tags.unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    for (i, d) in index.manifests.iter().enumerate() {
        if !add_manifest(&mut a, files, &d.digest, &d.media_type, 0) {
            a.notes.push(format!("{}: not in the archive", d.digest));
            continue;
        }
        let mut names: Vec<String> = Vec::new();
        if let Some(n) = d.annotations.get("io.containerd.image.name") {
            names.push(n.clone());
        } else if let Some(n) = d.annotations.get("org.opencontainers.image.ref.name")
            && (n.contains('/') || n.contains(':'))
        {
            names.push(n.clone());
        } else if let Some(tags) = docker_tags.get(i) {
            names.extend(tags.iter().cloned());
        }
        if names.is_empty() {
            a.notes.push(format!("image {} has no name", d.digest));
        }
        for n in names {
            match normalise(&n) {
                Some(n) => a.tags.push((n, d.digest.clone())),
                None => a.notes.push(format!("image name {n:?} is not a tag")),
            }
        }
    }
    Ok(a)
}

/// Keeps the manifest (or index) `digest` and, for an index, those of its manifests present
/// in the archive. `false` when it is not in the archive or not JSON.
fn add_manifest(a: &mut Archive, files: &Files, digest: &str, media_type: &str, depth: u8) -> bool {
    if a.manifests.iter().any(|m| m.digest == digest) {
        return true;
    }
    let Some(bytes) = blob_path(digest).and_then(|p| files.get(&p)?.1.clone()) else {
        return false;
    };
    #[derive(Deserialize)]
    struct Peek {
        #[serde(rename = "mediaType", default)]
        media_type: String,
        #[serde(default)]
        manifests: Option<Vec<Descriptor>>,
    }
    let Ok(peek) = serde_json::from_slice::<Peek>(&bytes) else {
        return false;
    };
    let media_type = match (peek.media_type.as_str(), media_type, &peek.manifests) {
        (m, _, _) if !m.is_empty() => m.to_string(),
        (_, m, _) if !m.is_empty() => m.to_string(),
        (_, _, Some(_)) => OCI_INDEX.to_string(),
        _ => OCI_MANIFEST.to_string(),
    };
    a.manifests.push(Manifest {
        digest: digest.to_string(),
        media_type,
        bytes,
    });
    if depth < 2 {
        for d in peek.manifests.unwrap_or_default() {
            // A multi-platform index names manifests the archive may not hold (only the
            // platform saved): those are simply not served.
            add_manifest(a, files, &d.digest, &d.media_type, depth + 1);
        }
    }
    true
}

fn docker(files: &Files, manifest: &[u8]) -> Result<Archive, String> {
    let entries: Vec<DockerEntry> =
        serde_json::from_slice(manifest).map_err(|e| format!("manifest.json: {e}"))?;
    let mut a = Archive::default();
    for e in entries {
        let (config_loc, config) = files
            .get(&tar::normalise(&e.config))
            .ok_or_else(|| format!("manifest.json: {} not in the archive", e.config))?;
        let config = config
            .as_deref()
            .ok_or_else(|| format!("{}: too large for an image config", e.config))?;
        let cfg: ImageConfig =
            serde_json::from_slice(config).map_err(|err| format!("{}: {err}", e.config))?;
        if cfg.rootfs.diff_ids.len() != e.layers.len() {
            return Err(format!(
                "{}: {} layers in manifest.json, {} diff_ids in the config",
                e.config,
                e.layers.len(),
                cfg.rootfs.diff_ids.len()
            ));
        }
        let config_digest = format!("sha256:{}", super::sha256_hex(config));
        a.blobs.push((config_digest.clone(), *config_loc));
        let mut layers = String::new();
        for (path, diff_id) in e.layers.iter().zip(&cfg.rootfs.diff_ids) {
            let (loc, _) = files
                .get(&tar::normalise(path))
                .ok_or_else(|| format!("manifest.json: layer {path} not in the archive"))?;
            if blob_path(diff_id).is_none() {
                return Err(format!("{}: bad diff_id {diff_id:?}", e.config));
            }
            // Older docker save writes layers uncompressed: the digest is the diff_id.
            a.blobs.push((diff_id.clone(), *loc));
            if !layers.is_empty() {
                layers.push(',');
            }
            layers.push_str(&format!(
                r#"{{"mediaType":"{OCI_LAYER_TAR}","digest":"{diff_id}","size":{}}}"#,
                loc.size
            ));
        }
        let bytes = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"{OCI_CONFIG}","digest":"{config_digest}","size":{}}},"layers":[{layers}]}}"#,
            config_loc.size
        )
        .into_bytes();
        let digest = format!("sha256:{}", super::sha256_hex(&bytes));
        for t in e.repo_tags.unwrap_or_default() {
            match normalise(&t) {
                Some(n) => a.tags.push((n, digest.clone())),
                None => a.notes.push(format!("image name {t:?} is not a tag")),
            }
        }
        if !a.manifests.iter().any(|m| m.digest == digest) {
            a.manifests.push(Manifest {
                digest,
                media_type: OCI_MANIFEST.to_string(),
                bytes,
            });
        }
    }
    crate::sort::sort_by_key(&mut a.blobs, |(d, _)| d.clone());
    a.blobs.dedup_by(|x, y| x.0 == y.0);
    Ok(a)
}

/// Whether `media_type` is one of a manifest or an index (what `/manifests/` serves).
pub fn is_manifest_type(media_type: &str) -> bool {
    matches!(
        media_type,
        OCI_INDEX | OCI_MANIFEST | DOCKER_LIST | DOCKER_MANIFEST
    )
}

/// Docker's normalisation of an image name to `registry/repository:tag`, as the runtime
/// names images (`busybox` → `docker.io/library/busybox:latest`). `None` for a name with a
/// digest and no tag, or an empty one.
pub fn normalise(name: &str) -> Option<String> {
    let name = name.trim();
    let (name, by_digest) = match name.split_once('@') {
        Some((n, _)) => (n, true),
        None => (name, false),
    };
    let (domain, rest) = match name.split_once('/') {
        Some((d, r)) if d.contains('.') || d.contains(':') || d == "localhost" => {
            (super::registry_alias(d), r.to_string())
        }
        _ => ("docker.io", name.to_string()),
    };
    let (repo, tag) = match rest.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r.to_string(), t),
        _ if by_digest => return None,
        _ => (rest.clone(), "latest"),
    };
    if repo.is_empty() || tag.is_empty() {
        return None;
    }
    let repo = if domain == "docker.io" && !repo.contains('/') {
        format!("library/{repo}")
    } else {
        repo
    };
    Some(format!("{domain}/{repo}:{tag}"))
}
