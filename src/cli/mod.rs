//! The board's own commands, for a console where kubectl does not fit:
//! `picolet validate FILE…` (no running picolet needed) and `picolet get`, `describe pod`,
//! `logs` (kubectl's names, flags and output, as clients of the node API, `local_api`).
//!
//! Owns: their flags ([`parse`]) and running them ([`main`]); [`validate`] is the pure
//! report, `kubectl` the client commands and their printers, [`tabwriter`] Go's column
//! alignment that kubectl's output goes through.
//!
//! Must never: write anywhere but stdout/stderr. `validate` reads only the files named.

pub(crate) mod tabwriter;
pub(crate) mod validate;

#[cfg(feature = "apiserver")]
pub(crate) mod kubectl;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::admission::NodeInfo;
use crate::clock::{Clock, SystemClock};

/// The verbs this module answers (the command line knows them: `options::CLI_VERBS`).
pub(crate) use crate::options::CLI_VERBS as VERBS;

pub(crate) const HELP: &str = "\
USAGE:
    picolet validate [-o json] [--pod-manifest-path DIR] [--hostname-override NAME]
                     [--node-labels k=v,...] FILE|DIR...
        what picolet would do with each manifest (a DIR: the files picolet would read in
        it): OK, or every field refused, warned about or ignored, with its path; which
        pods use each ConfigMap and Secret, and each one a pod waits for that none of the
        files provides. The static pod name and UID are those the file gets in
        --pod-manifest-path on this node (the node name used is said on stderr).
        Exit status 1 if a pod would be refused or a document rejected.

    picolet get pods|nodes|events [NAME] [-n NS | -A] [-o wide|json|yaml|name]
    picolet describe pod NAME [-n NS]
    picolet logs NAME [-n NS] [-c CONTAINER] [-f] [--tail N] [-p] [--timestamps]
        what kubectl prints for the same commands, from this node's API. The kubeconfig is
        found as kubectl finds one: --kubeconfig FILE, else $KUBECONFIG, else
        ROOT-DIR/kubeconfig (written by picolet run; --root-dir [/var/lib/picolet]).
        The namespace is `default` unless -n is given.

    picolet node-shutdown
        for the system's shutdown path (the packages install the hook): asks the running
        picolet, through its node API as the local admin, to stop every pod gracefully, in
        the kubelet's order (shutdownGracePeriod, shutdownGracePeriodCriticalPods), and
        waits until they are down. Never used to stop or upgrade picolet itself.
";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0} (see picolet {1} --help)")]
pub(crate) struct CliError(String, &'static str);

/// The parsed command line of one of [`VERBS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Args {
    pub verb: &'static str,
    pub positional: Vec<String>,
    pub help: bool,
    pub kubeconfig: Option<PathBuf>,
    pub root_dir: Option<PathBuf>,
    pub hostname_override: Option<String>,
    pub node_labels: BTreeMap<String, String>,
    pub pod_manifest_path: Option<PathBuf>,
    #[cfg(feature = "apiserver")]
    pub request: kubectl::Request,
    #[cfg(not(feature = "apiserver"))]
    pub output: String,
}

/// `args`: the whole command line without the program name, verb first.
pub(crate) fn parse(args: &[String]) -> Result<Args, CliError> {
    let verb = VERBS
        .iter()
        .copied()
        .find(|v| args.first().map(String::as_str) == Some(*v))
        .unwrap_or("validate");
    let bad = |m: String| CliError(m, verb);
    let mut a = Args {
        verb,
        ..Args::default()
    };
    let mut output = String::new();
    let mut namespace = None;
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if !arg.starts_with('-') || arg == "-" {
            a.positional.push(arg.clone());
            continue;
        }
        // --flag=value, -n=value, -nVALUE, -n VALUE
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None if !arg.starts_with("--") && arg.len() > 2 => {
                (arg[..2].to_string(), Some(arg[2..].to_string()))
            }
            None => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| rest.next().cloned())
                .ok_or_else(|| bad(format!("flag {flag} needs a value")))
        };
        let boolean = |v: &Option<String>| !matches!(v.as_deref(), Some("false"));
        match flag.as_str() {
            "-h" | "--help" => a.help = true,
            "--kubeconfig" => a.kubeconfig = Some(value()?.into()),
            "--root-dir" => a.root_dir = Some(value()?.into()),
            "--hostname-override" => a.hostname_override = Some(value()?),
            "--pod-manifest-path" => a.pod_manifest_path = Some(value()?.into()),
            "--node-labels" => {
                let labels =
                    crate::options::parse_labels(&value()?).map_err(|e| bad(e.to_string()))?;
                a.node_labels.extend(labels);
            }
            "-o" | "--output" => output = value()?,
            "-n" | "--namespace" => namespace = Some(value()?),
            #[cfg(feature = "apiserver")]
            f => {
                let r = &mut a.request;
                match f {
                    "-A" | "--all-namespaces" => r.all_namespaces = boolean(&inline),
                    "-c" | "--container" => r.container = Some(value()?),
                    "-f" | "--follow" => r.follow = boolean(&inline),
                    "-p" | "--previous" => r.previous = boolean(&inline),
                    "--timestamps" => r.timestamps = boolean(&inline),
                    "--tail" => {
                        let v = value()?;
                        let n: i64 = v
                            .parse()
                            .map_err(|_| bad(format!("--tail: {v:?} is not a number")))?;
                        // kubectl: -1 (the default) means every line.
                        r.tail = (n >= 0).then_some(n);
                    }
                    other => return Err(bad(format!("unknown flag {other}"))),
                }
            }
            #[cfg(not(feature = "apiserver"))]
            other => {
                let _ = boolean;
                return Err(bad(format!("unknown flag {other}")));
            }
        }
    }
    #[cfg(feature = "apiserver")]
    {
        a.request.output = output;
        a.request.namespace = namespace.unwrap_or_else(|| "default".into());
    }
    #[cfg(not(feature = "apiserver"))]
    {
        let _ = namespace;
        a.output = output;
    }
    Ok(a)
}

/// Runs one of [`VERBS`]; the process exit status.
pub fn main(args: &[String]) -> u8 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("picolet: {e}");
            return 2;
        }
    };
    if a.help {
        out(HELP);
        return 0;
    }
    if a.verb == "validate" {
        return run_validate(&a);
    }
    #[cfg(feature = "apiserver")]
    {
        client_main(&a)
    }
    #[cfg(not(feature = "apiserver"))]
    {
        eprintln!(
            "picolet: {} needs a build with the `apiserver` feature",
            a.verb
        );
        2
    }
}

fn run_validate(a: &Args) -> u8 {
    #[cfg(feature = "apiserver")]
    let json = a.request.output == "json";
    #[cfg(not(feature = "apiserver"))]
    let json = a.output == "json";
    if a.positional.is_empty() {
        eprintln!("picolet: validate needs at least one FILE (see picolet validate --help)");
        return 2;
    }
    let node_name = match crate::node::node_name(a.hostname_override.as_deref()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("picolet: {e}");
            return 2;
        }
    };
    let node = NodeInfo {
        labels: crate::node::node_labels(&node_name, &a.node_labels),
        node_name,
        ..NodeInfo::default()
    };
    let dir = a
        .pod_manifest_path
        .clone()
        .unwrap_or_else(|| crate::options::Options::default().pod_manifest_path);
    let max = crate::source::file::FileSourceOptions::default().max_file_size;
    let now = SystemClock.now();
    // Which node name the static pods are named after (`<name>-<node>`): said once, on
    // stderr, so that the report stays one line per file.
    eprintln!(
        "picolet validate: pods named for node {:?} ({})",
        node.node_name,
        if a.hostname_override.is_some() {
            "--hostname-override"
        } else {
            "this host's name; --hostname-override NAME for another board's"
        }
    );
    let mut report = validate::Report::default();
    let mut refs = Vec::new();
    for file in expand_dirs(&a.positional) {
        let file = &file;
        let path = std::path::Path::new(file);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        if crate::source::file::is_ignored_name(&name) {
            report.rejected(
                file,
                "the static pod directory skips this file name (hidden, backup or temporary)"
                    .into(),
            );
            continue;
        }
        match read_limited(path, max) {
            Ok(bytes) => {
                let source_path = dir.join(&name).to_string_lossy().into_owned();
                refs.extend(report.add_file(file, &source_path, &bytes, &node, now));
            }
            Err(e) => report.rejected(file, e.to_string()),
        }
    }
    report.link(&refs);
    if json {
        out(&format!("{}\n", report.json()));
    } else {
        out(&report.text());
    }
    u8::from(report.failed())
}

/// The files to validate: each FILE, and for a DIR the names the file source would read in
/// it (sorted; hidden, backup and temporary names and subdirectories skipped, as in
/// `--pod-manifest-path`). A directory with none is named as such (one line, rejected).
fn expand_dirs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for arg in args {
        let path = std::path::Path::new(arg);
        let Ok(entries) = std::fs::read_dir(path) else {
            out.push(arg.clone());
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !crate::source::file::is_ignored_name(n))
            .collect();
        crate::sort::sort(&mut names);
        if names.is_empty() {
            out.push(arg.clone());
        }
        out.extend(
            names
                .iter()
                .map(|n| path.join(n).to_string_lossy().into_owned()),
        );
    }
    out
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Why [`read_limited`] read no manifest.
#[derive(Debug)]
enum ReadError {
    Io(std::io::Error),
    /// A FIFO, device or directory.
    NotRegular,
    /// Over the limit (the limit).
    TooLarge(u64),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => e.fmt(f),
            ReadError::NotRegular => f.write_str("not a regular file"),
            ReadError::TooLarge(max) => {
                write!(f, "larger than {max} bytes (kubelet: maxConfigLength)")
            }
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads a manifest as the file source does: a regular file, at most `max` bytes, never
/// blocking on a FIFO.
fn read_limited(path: &std::path::Path, max: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(ReadError::Io)?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(ReadError::NotRegular);
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(max));
    }
    Ok(bytes)
}

/// The kubeconfig, found as kubectl finds one: `--kubeconfig`, else the first file of
/// `$KUBECONFIG` that exists, else `<--root-dir>/kubeconfig` (what `picolet run` writes).
/// `Err`: what was tried and why each did not do.
pub(crate) fn find_kubeconfig(
    a: &Args,
    env: Option<std::ffi::OsString>,
) -> Result<PathBuf, Vec<String>> {
    if let Some(k) = &a.kubeconfig {
        return Ok(k.clone());
    }
    let mut tried = Vec::new();
    match env.filter(|v| !v.is_empty()) {
        Some(list) => {
            for p in std::env::split_paths(&list) {
                if p.is_file() {
                    return Ok(p);
                }
                tried.push(format!("$KUBECONFIG's {} (no such file)", p.display()));
            }
        }
        None => tried.push("$KUBECONFIG (unset)".to_string()),
    }
    let root = a
        .root_dir
        .clone()
        .unwrap_or_else(|| crate::options::Options::default().root_dir);
    let p = root.join("kubeconfig");
    if p.is_file() {
        return Ok(p);
    }
    tried.push(format!(
        "{} (no such file{})",
        p.display(),
        if a.root_dir.is_some() {
            ""
        } else {
            "; the default --root-dir"
        }
    ));
    Err(tried)
}

#[cfg(feature = "apiserver")]
fn client_main(a: &Args) -> u8 {
    use crate::kube::{Client, ClientConfig};
    let kubeconfig = match find_kubeconfig(a, std::env::var_os("KUBECONFIG")) {
        Ok(path) => path,
        Err(tried) => {
            eprintln!(
                "picolet: no kubeconfig; tried {}. `picolet run` writes ROOT-DIR/kubeconfig when its node API starts: give --root-dir DIR (or --kubeconfig FILE)",
                tried.join(", ")
            );
            return 1;
        }
    };
    let client = match ClientConfig::from_kubeconfig(&kubeconfig).and_then(|c| Client::new(&c)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("picolet: {}: {e}", kubeconfig.display());
            return 1;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("picolet: cannot start the tokio runtime: {e}");
            return 1;
        }
    };
    let req = &a.request;
    let pos: Vec<&str> = a.positional.iter().map(String::as_str).collect();
    // kubectl accepts `pod/NAME` as well as `pod NAME`.
    let split: Vec<&str> = match pos.first().and_then(|p| p.split_once('/')) {
        Some((r, n)) => [r, n].into_iter().chain(pos[1..].iter().copied()).collect(),
        None => pos,
    };
    let result = rt.block_on(async {
        match (a.verb, split.as_slice()) {
            ("logs", ["pod" | "pods" | "po", name] | [name]) => kubectl::logs(&client, name, req)
                .await
                .map(|()| String::new()),
            ("describe", [resource, name])
                if kubectl::Resource::parse(resource) == Some(kubectl::Resource::Pods) =>
            {
                kubectl::describe_pod(&client, name, req, SystemClock.now()).await
            }
            ("get", [resource, rest @ ..]) if rest.len() <= 1 => {
                match kubectl::Resource::parse(resource) {
                    Some(r) => kubectl::get(&client, r, rest.first().copied(), req).await,
                    None => Err(kubectl::KubectlError::UnknownResource(resource.to_string())),
                }
            }
            ("node-shutdown", []) => client
                .post_empty("/shutdown", std::time::Duration::from_secs(3600))
                .await
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .map_err(kubectl::KubectlError::Shutdown),
            (verb, _) => Err(kubectl::KubectlError::Usage(
                HELP.lines()
                    .find(|l| l.contains(&format!("picolet {verb} ")))
                    .unwrap_or("")
                    .trim(),
            )),
        }
    });
    match result {
        Ok(text) => {
            out(&text);
            0
        }
        Err(e @ kubectl::KubectlError::NoResources { .. }) => {
            eprintln!("{e}");
            0
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_kubeconfig_is_found_as_kubectl_finds_it() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let env_file = t.path().join("env-config");
        std::fs::write(&env_file, "").unwrap();
        let with = |s: &str| parse(&args(s)).unwrap();
        let env =
            |p: &std::path::Path| Some(std::ffi::OsString::from(format!("/nope:{}", p.display())));
        // --kubeconfig wins, whatever it names.
        assert_eq!(
            find_kubeconfig(&with("get pods --kubeconfig /k"), env(&env_file)),
            Ok("/k".into())
        );
        // Then the first existing file of $KUBECONFIG.
        let a = with(&format!("get pods --root-dir {}", root.display()));
        assert_eq!(find_kubeconfig(&a, env(&env_file)), Ok(env_file.clone()));
        // Then the root dir's; without one, what was tried.
        let tried = find_kubeconfig(&a, None).unwrap_err();
        assert_eq!(tried[0], "$KUBECONFIG (unset)");
        assert!(
            tried[1].contains(&root.join("kubeconfig").display().to_string()),
            "{tried:?}"
        );
        std::fs::write(root.join("kubeconfig"), "").unwrap();
        assert_eq!(find_kubeconfig(&a, None), Ok(root.join("kubeconfig")));
        let tried = find_kubeconfig(
            &with("get pods --root-dir /nonexistent"),
            env(&t.path().join("x")),
        )
        .unwrap_err();
        assert_eq!(tried.len(), 3, "{tried:?}");
    }

    #[test]
    fn kubectl_flag_spellings() {
        let a = parse(&args(
            "logs web -n=kube-system -c side --tail=2 -f --timestamps",
        ))
        .unwrap();
        assert_eq!(a.verb, "logs");
        assert_eq!(a.positional, ["web"]);
        #[cfg(feature = "apiserver")]
        {
            let r = &a.request;
            assert_eq!(r.namespace, "kube-system");
            assert_eq!(r.container.as_deref(), Some("side"));
            assert_eq!(r.tail, Some(2));
            assert!(r.follow && r.timestamps && !r.previous);
            let g = parse(&args("get pods -A -owide")).unwrap();
            assert!(g.request.all_namespaces);
            assert_eq!(g.request.output, "wide");
            assert_eq!(g.request.namespace, "default");
            let t = parse(&args("logs web --tail -1")).unwrap();
            assert_eq!(t.request.tail, None);
        }
        assert!(parse(&args("get pods --bogus")).is_err());
        assert!(parse(&args("get pods -n")).is_err());
        let v = parse(&args(
            "validate -o json a.yaml b.yaml --hostname-override n",
        ))
        .unwrap();
        assert_eq!(v.positional, ["a.yaml", "b.yaml"]);
        assert_eq!(v.hostname_override.as_deref(), Some("n"));
    }
}
