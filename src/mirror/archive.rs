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
//! The archive itself may be gzip-compressed (`docker save | gzip`, read through the system's
//! gzip); other compressions are refused by name.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::path::Path;

use serde_json::Value;

use super::tar::{self, Kind, Skip};

pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// Small JSON members are read during the one pass over the archive (manifests, indexes,
/// configs); larger ones are blobs served by ranged reads.
const CAPTURE_MAX: u64 = 256 * 1024;
/// All captured bytes of one archive, at most (a corrupt or hostile archive of many small
/// files is refused, not held).
const CAPTURE_TOTAL_MAX: u64 = 16 * 1024 * 1024;

/// Where a blob's bytes are in the (decompressed) archive stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub digest: String,
    pub media_type: String,
    pub bytes: Vec<u8>,
}

/// Why an archive serves nothing (the log line names the file and says this).
#[derive(Debug)]
pub(crate) enum ArchiveError {
    /// Opening, reading or decompressing the archive failed.
    Io(io::Error),
    /// The blocking read was cancelled or panicked.
    Task(tokio::task::JoinError),
    /// Compressed with something other than gzip: `(name, the command that decompresses)`.
    Compressed(&'static str, &'static str),
    /// Too many small members to be an image archive.
    TooManySmallFiles,
    /// Neither an OCI image layout nor a `docker save` archive.
    NotAnImage,
    /// A JSON member (`index.json`, `manifest.json`, a config) is malformed.
    Json(String, serde_json::Error),
    /// `manifest.json` is not a list.
    NotAList,
    /// `manifest.json` names a config the archive does not hold.
    ConfigMissing(String),
    /// The config is larger than a config is read.
    ConfigTooLarge(String),
    /// `(config, layers in manifest.json, diff_ids in the config)` differ in number.
    LayerCount(String, usize, usize),
    /// `manifest.json` names a layer the archive does not hold.
    LayerMissing(String),
    /// `(config, diff_id)`: a diff_id that is not a digest.
    BadDiffId(String, String),
}

impl std::fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiveError::Io(e) => write!(f, "{e}"),
            ArchiveError::Task(e) => write!(f, "{e}"),
            ArchiveError::Compressed(name, how) => {
                write!(f, "compressed with {name}: not read (decompress it: {how})")
            }
            ArchiveError::TooManySmallFiles => write!(
                f,
                "more than {CAPTURE_TOTAL_MAX} bytes of small files: not an image archive"
            ),
            ArchiveError::NotAnImage => f.write_str(
                "neither an OCI image layout (oci-layout, index.json) nor a docker save archive \
                 (manifest.json)",
            ),
            ArchiveError::Json(file, e) => write!(f, "{file}: {e}"),
            ArchiveError::NotAList => f.write_str("manifest.json: not a list of images"),
            ArchiveError::ConfigMissing(config) => {
                write!(f, "manifest.json: Config {config:?} not in the archive")
            }
            ArchiveError::ConfigTooLarge(config) => {
                write!(f, "{config}: too large for an image config")
            }
            ArchiveError::LayerCount(config, layers, diff_ids) => write!(
                f,
                "{config}: {layers} layers in manifest.json, {diff_ids} diff_ids in the config"
            ),
            ArchiveError::LayerMissing(path) => {
                write!(f, "manifest.json: layer {path} not in the archive")
            }
            ArchiveError::BadDiffId(config, diff_id) => {
                write!(f, "{config}: bad diff_id {diff_id:?}")
            }
        }
    }
}

impl std::error::Error for ArchiveError {}

impl From<io::Error> for ArchiveError {
    fn from(e: io::Error) -> Self {
        ArchiveError::Io(e)
    }
}

/// What one archive serves.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Archive {
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
pub(crate) fn read(path: &Path) -> Result<Archive, ArchiveError> {
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let mut magic = [0u8; 6];
    let n = f.read(&mut magic)?;
    f.rewind()?;
    let magic = &magic[..n];
    if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Err(ArchiveError::Compressed("zstd", "zstd -d"));
    }
    if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z']) {
        return Err(ArchiveError::Compressed("xz", "xz -d"));
    }
    if magic.starts_with(b"BZh") {
        return Err(ArchiveError::Compressed("bzip2", "bunzip2"));
    }
    let gzip = magic.starts_with(&[0x1f, 0x8b]);
    let members = if gzip {
        scan(&mut super::gzip::Reader::open(path)?)
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

fn scan<R: Skip>(r: &mut R) -> Result<tar::Table, ArchiveError> {
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
    })?;
    if over {
        return Err(ArchiveError::TooManySmallFiles);
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

/// The JSON of the small files, read as `Value`s (one copy of serde_json's parser, no
/// derive per shape: binary size).
fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn array(v: &Value, key: &str) -> Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The archive's members understood as an image layout.
fn layout(members: tar::Table) -> Result<Archive, ArchiveError> {
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
        Err(ArchiveError::NotAnImage)
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
) -> Result<Archive, ArchiveError> {
    let index: Value = serde_json::from_slice(index.unwrap_or_default())
        .map_err(|e| ArchiveError::Json("index.json".into(), e))?;
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
        .and_then(|m| serde_json::from_slice::<Value>(m).ok())
        .and_then(|v| v.as_array().cloned())
        .map(|v| v.iter().map(|e| strings(e.get("RepoTags"))).collect())
        .unwrap_or_default();
    for (i, d) in array(&index, "manifests").iter().enumerate() {
        let digest = str_at(d, "digest");
        if !add_manifest(&mut a, files, digest, str_at(d, "mediaType"), 0) {
            a.notes.push(format!("{digest}: not in the archive"));
            continue;
        }
        let annotation = |k: &str| {
            d.get("annotations")
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
        };
        let mut names: Vec<String> = Vec::new();
        if let Some(n) = annotation("io.containerd.image.name") {
            names.push(n.to_string());
        } else if let Some(n) = annotation("org.opencontainers.image.ref.name")
            && (n.contains('/') || n.contains(':'))
        {
            names.push(n.to_string());
        } else if let Some(tags) = docker_tags.get(i) {
            names.extend(tags.iter().cloned());
        }
        if names.is_empty() {
            a.notes.push(format!("image {digest} has no name"));
        }
        for n in names {
            match normalise(&n) {
                Some(n) => a.tags.push((n, digest.to_string())),
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
    let Ok(peek) = serde_json::from_slice::<Value>(&bytes) else {
        return false;
    };
    let children = peek.get("manifests").and_then(Value::as_array);
    let media_type = match (str_at(&peek, "mediaType"), media_type, children) {
        (m, _, _) if !m.is_empty() => m.to_string(),
        (_, m, _) if !m.is_empty() => m.to_string(),
        (_, _, Some(_)) => OCI_INDEX.to_string(),
        _ => OCI_MANIFEST.to_string(),
    };
    let children: Vec<(String, String)> = children
        .map(|c| {
            c.iter()
                .map(|d| {
                    (
                        str_at(d, "digest").to_string(),
                        str_at(d, "mediaType").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    a.manifests.push(Manifest {
        digest: digest.to_string(),
        media_type,
        bytes,
    });
    if depth < 2 {
        for (digest, media_type) in children {
            // A multi-platform index names manifests the archive may not hold (only the
            // platform saved): those are simply not served.
            add_manifest(a, files, &digest, &media_type, depth + 1);
        }
    }
    true
}

fn docker(files: &Files, manifest: &[u8]) -> Result<Archive, ArchiveError> {
    let entries: Value = serde_json::from_slice(manifest)
        .map_err(|e| ArchiveError::Json("manifest.json".into(), e))?;
    let entries = entries.as_array().ok_or(ArchiveError::NotAList)?;
    let mut a = Archive::default();
    for e in entries {
        let config_path = str_at(e, "Config");
        let layer_paths = strings(e.get("Layers"));
        let (config_loc, config) = files
            .get(&tar::normalise(config_path))
            .ok_or_else(|| ArchiveError::ConfigMissing(config_path.into()))?;
        let config = config
            .as_deref()
            .ok_or_else(|| ArchiveError::ConfigTooLarge(config_path.into()))?;
        let cfg: Value = serde_json::from_slice(config)
            .map_err(|err| ArchiveError::Json(config_path.into(), err))?;
        let diff_ids = strings(cfg.get("rootfs").and_then(|r| r.get("diff_ids")));
        if diff_ids.len() != layer_paths.len() {
            return Err(ArchiveError::LayerCount(
                config_path.into(),
                layer_paths.len(),
                diff_ids.len(),
            ));
        }
        let config_digest = format!("sha256:{}", super::sha256_hex(config));
        a.blobs.push((config_digest.clone(), *config_loc));
        let mut layers = String::new();
        for (path, diff_id) in layer_paths.iter().zip(&diff_ids) {
            let (loc, _) = files
                .get(&tar::normalise(path))
                .ok_or_else(|| ArchiveError::LayerMissing(path.clone()))?;
            if blob_path(diff_id).is_none() {
                return Err(ArchiveError::BadDiffId(config_path.into(), diff_id.clone()));
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
        for t in strings(e.get("RepoTags")) {
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

/// Docker's normalisation of an image name to `registry/repository:tag`, as the runtime
/// names images (`busybox` → `docker.io/library/busybox:latest`). `None` for a name with a
/// digest and no tag, or an empty one.
pub(crate) fn normalise(name: &str) -> Option<String> {
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
