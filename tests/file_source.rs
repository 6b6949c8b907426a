//! The file source against a real directory and real inotify, with short timings.

use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Mutex, Once};
use std::time::Duration;

mod common;

use common::hostile;
use picolet::{FileSource, FileSourceOptions, SourceUpdate, SystemClock};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------
// A tiny logger: tests find their own lines by their (unique) temp directory.

static LINES: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        if record.target().starts_with("picolet") {
            let line = record.args().to_string();
            if let Ok(mut lines) = LINES.lock() {
                lines.push((record.level(), line));
            }
        }
    }
    fn flush(&self) {}
}

fn init_logger() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = log::set_logger(&Capture);
        log::set_max_level(log::LevelFilter::Trace);
    });
}

/// Lines at `level` that mention `needle` (a path under the test's own directory).
fn lines(level: log::Level, needle: &str) -> Vec<String> {
    LINES
        .lock()
        .unwrap()
        .iter()
        .filter(|(l, s)| *l == level && s.contains(needle))
        .map(|(_, s)| s.clone())
        .collect()
}

// ---------------------------------------------------------------------------------------
// Harness

const NODE: &str = "node1";

fn fast() -> FileSourceOptions {
    FileSourceOptions {
        // Long: changes must arrive through inotify, not the periodic re-list.
        relist_interval: Duration::from_secs(30),
        debounce: Duration::from_millis(30),
        watch_retry_initial: Duration::from_millis(20),
        watch_retry_max: Duration::from_millis(80),
        ..FileSourceOptions::default()
    }
}

struct Harness {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    rx: mpsc::Receiver<SourceUpdate>,
    sighup: Rc<Notify>,
    shutdown: CancellationToken,
}

impl Harness {
    /// A source on `<tmp>/manifests`, after `setup` prepared that directory (or not).
    fn start(options: FileSourceOptions, setup: impl FnOnce(&Path)) -> Harness {
        init_logger();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("manifests");
        setup(&dir);
        let (tx, rx) = mpsc::channel(16);
        let sighup = Rc::new(Notify::new());
        let shutdown = CancellationToken::new();
        let source =
            FileSource::new(dir.clone(), NODE.to_string(), SystemClock).with_options(options);
        tokio::task::spawn_local(source.run(tx, sighup.clone(), shutdown.clone()));
        Harness {
            _tmp: tmp,
            dir,
            rx,
            sighup,
            shutdown,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn p(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// The next snapshot, as (name, image) pairs.
    async fn next(&mut self) -> Vec<(String, String)> {
        let update = tokio::time::timeout(Duration::from_secs(10), self.rx.recv())
            .await
            .expect("no snapshot within 10 s")
            .expect("source stopped");
        assert_eq!(update.source, "file");
        summary(&update)
    }

    async fn next_update(&mut self) -> SourceUpdate {
        tokio::time::timeout(Duration::from_secs(10), self.rx.recv())
            .await
            .expect("no snapshot within 10 s")
            .expect("source stopped")
    }

    /// No snapshot for a while.
    async fn quiet(&mut self, ms: u64) {
        if let Ok(update) = tokio::time::timeout(Duration::from_millis(ms), self.rx.recv()).await {
            panic!("unexpected snapshot: {:?}", update.map(|u| summary(&u)));
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn summary(update: &SourceUpdate) -> Vec<(String, String)> {
    update
        .pods
        .iter()
        .map(|p| (p.metadata.name.clone(), p.spec.containers[0].image.clone()))
        .collect()
}

fn pod(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
    )
}

fn want(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, i)| (format!("{n}-{NODE}"), i.to_string()))
        .collect()
}

fn mkdir(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
}

/// Runs a test body on a LocalSet (the source is !Send: it runs on the agent's one thread).
fn local<F: std::future::Future<Output = ()>>(body: impl FnOnce() -> F) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let set = tokio::task::LocalSet::new();
    set.block_on(&rt, body());
}

// ---------------------------------------------------------------------------------------

#[test]
fn add_modify_delete() {
    local(|| async {
        let mut h = Harness::start(fast(), mkdir);
        assert_eq!(
            h.next().await,
            want(&[]),
            "an empty directory is an empty snapshot"
        );

        fs::write(h.path("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));
        h.quiet(150).await;

        fs::write(h.path("web.yaml"), pod("web", "nginx:1.27.1")).unwrap();
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27.1")]));

        fs::write(h.path("db.json"), r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"db"},"spec":{"containers":[{"name":"pg","image":"postgres:16"}]}}"#).unwrap();
        assert_eq!(
            h.next().await,
            want(&[("db", "postgres:16"), ("web", "nginx:1.27.1")])
        );

        fs::remove_file(h.path("web.yaml")).unwrap();
        assert_eq!(h.next().await, want(&[("db", "postgres:16")]));
        h.quiet(150).await;
    });
}

#[test]
fn snapshot_carries_static_identity_and_stays_stable() {
    local(|| async {
        let mut h = Harness::start(fast(), |d| {
            mkdir(d);
            fs::write(d.join("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        });
        let first = h.next_update().await;
        let p = &first.pods[0];
        assert_eq!(p.metadata.name, "web-node1");
        assert_eq!(p.spec.node_name, "node1");
        assert_eq!(p.annotation("kubernetes.io/config.source"), Some("file"));
        assert_eq!(p.annotation("kubernetes.io/config.hash"), Some(p.uid()));
        assert!(p.annotation("kubernetes.io/config.seen").is_some());

        // Touch, rewrite with the same bytes, SIGHUP: nothing changed, nothing sent.
        std::thread::sleep(Duration::from_millis(5));
        fs::write(h.path("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        h.quiet(150).await;
        h.sighup.notify_one();
        h.quiet(150).await;
    });
}

/// No debounce for a writer that is done: with a debounce of a minute (and no periodic
/// re-list), a pod that arrives within the harness's 10 s came from `IN_CLOSE_WRITE` or
/// `IN_MOVED_TO`, not from the quiet-directory timer.
fn debounce_never() -> FileSourceOptions {
    FileSourceOptions {
        relist_interval: Duration::from_secs(600),
        debounce: Duration::from_secs(60),
        ..fast()
    }
}

#[test]
fn a_file_closed_after_three_writes_is_one_pod_at_once() {
    local(|| async {
        let mut h = Harness::start(debounce_never(), mkdir);
        assert_eq!(h.next().await, want(&[]));
        let content = pod("web", "nginx:1.27");
        let (a, rest) = content.split_at(30);
        let (b, c) = rest.split_at(20);
        {
            use std::io::Write;
            let mut f = fs::File::create(h.path("web.yaml")).unwrap();
            for part in [a, b, c] {
                f.write_all(part.as_bytes()).unwrap();
                f.flush().unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
            // Three writes and no close: nothing yet (the debounce is a minute).
        }
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));
        h.quiet(300).await;
    });
}

#[test]
fn a_rename_into_place_is_one_pod_at_once() {
    local(|| async {
        let mut h = Harness::start(debounce_never(), mkdir);
        assert_eq!(h.next().await, want(&[]));
        fs::write(h.path(".web.yaml.tmp"), pod("web", "nginx:1.27")).unwrap();
        h.quiet(200).await;
        fs::rename(h.path(".web.yaml.tmp"), h.path("web.yaml")).unwrap();
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));
        h.quiet(300).await;
    });
}

#[test]
fn a_writer_closing_between_steps_is_neither_logged_nor_churned() {
    local(|| async {
        let mut h = Harness::start(fast(), mkdir);
        assert_eq!(h.next().await, want(&[]));
        // First close: half a manifest (does not parse); second close: the rest.
        let content = pod("web", "nginx:1.27");
        let (a, b) = content.split_at(content.len() / 2);
        fs::write(h.path("web.yaml"), a).unwrap();
        {
            use std::io::Write;
            let mut f = fs::OpenOptions::new()
                .append(true)
                .open(h.path("web.yaml"))
                .unwrap();
            f.write_all(b.as_bytes()).unwrap();
        }
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));
        h.quiet(300).await;
        let p = h.p("web.yaml");
        assert!(
            lines(log::Level::Error, &p).is_empty(),
            "the half-written file was reported: {:?}",
            lines(log::Level::Error, &p)
        );
    });
}

#[test]
fn vim_style_save_is_one_update() {
    local(|| async {
        let mut h = Harness::start(fast(), |d| {
            mkdir(d);
            fs::write(d.join("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        });
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));

        // vim (backupcopy=no): probe file 4913, rename the original to a backup, write the
        // new file (in two writes), remove the backup; a swap file lives alongside.
        fs::write(h.path(".web.yaml.swp"), "swap").unwrap();
        fs::write(h.path("4913"), "").unwrap();
        fs::remove_file(h.path("4913")).unwrap();
        fs::rename(h.path("web.yaml"), h.path("web.yaml~")).unwrap();
        let content = pod("web", "nginx:1.28");
        let (a, b) = content.split_at(40);
        fs::write(h.path("web.yaml"), a).unwrap();
        {
            use std::io::Write;
            let mut f = fs::OpenOptions::new()
                .append(true)
                .open(h.path("web.yaml"))
                .unwrap();
            f.write_all(b.as_bytes()).unwrap();
        }
        fs::remove_file(h.path("web.yaml~")).unwrap();
        fs::remove_file(h.path(".web.yaml.swp")).unwrap();

        assert_eq!(h.next().await, want(&[("web", "nginx:1.28")]));
        h.quiet(200).await;

        // Saving again without changes (new inode, same bytes): no update.
        fs::rename(h.path("web.yaml"), h.path("web.yaml~")).unwrap();
        fs::write(h.path("web.yaml"), &content).unwrap();
        fs::remove_file(h.path("web.yaml~")).unwrap();
        h.quiet(200).await;
    });
}

#[test]
fn install_style_replace_is_no_update() {
    // install(1) and `cp --remove-destination` unlink the manifest, then create and write it
    // again: a removal waits for the debounce (deliberate difference from the kubelet), so
    // the same content put back is no change and its pod is never killed. A long debounce
    // here: the unlink and the write must fall inside it even on a loaded machine.
    local(|| async {
        let options = FileSourceOptions {
            debounce: Duration::from_secs(1),
            ..fast()
        };
        let mut h = Harness::start(options, |d| {
            mkdir(d);
            fs::write(d.join("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        });
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));

        fs::remove_file(h.path("web.yaml")).unwrap();
        fs::write(h.path("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        h.quiet(2500).await;

        // A removal that stays is one update, after the debounce.
        fs::remove_file(h.path("web.yaml")).unwrap();
        assert_eq!(h.next().await, want(&[]));
    });
}

#[test]
fn sed_style_save_is_one_update() {
    local(|| async {
        let mut h = Harness::start(fast(), |d| {
            mkdir(d);
            fs::write(d.join("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        });
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));

        // sed -i: a complete copy in ./sedXXXXXX, then rename over the original.
        fs::write(h.path("sedQ3x9Za"), pod("web", "nginx:1.28")).unwrap();
        fs::rename(h.path("sedQ3x9Za"), h.path("web.yaml")).unwrap();
        assert_eq!(h.next().await, want(&[("web", "nginx:1.28")]));
        h.quiet(200).await;

        // Rename-into-place of a new file written under an ignored name.
        fs::write(h.path(".db.yaml.tmp"), pod("db", "postgres:16")).unwrap();
        h.quiet(150).await;
        fs::rename(h.path(".db.yaml.tmp"), h.path("db.yaml")).unwrap();
        assert_eq!(
            h.next().await,
            want(&[("db", "postgres:16"), ("web", "nginx:1.28")])
        );
    });
}

#[test]
fn ignored_names_subdirs_and_special_files() {
    local(|| async {
        let mut h = Harness::start(fast(), |d| {
            mkdir(d);
            fs::write(d.join("web.yaml"), pod("web", "nginx:1.27")).unwrap();
            for name in [
                ".hidden.yaml",
                "web.yaml~",
                "old.yaml.swp",
                "x.tmp",
                "web.yaml.dpkg-dist",
            ] {
                fs::write(d.join(name), pod(&format!("ignored{}", name.len()), "x")).unwrap();
            }
            mkdir(&d.join("sub"));
            fs::write(d.join("sub/inner.yaml"), pod("inner", "x")).unwrap();
            nix::unistd::mkfifo(&d.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
            std::os::unix::fs::symlink(d.join("web.yaml"), d.join("zz-link.yaml")).unwrap();
            std::os::unix::fs::symlink(d.join("missing.yaml"), d.join("dangling.yaml")).unwrap();
        });
        // The symlink is followed: it yields the same pod name from another file, which is
        // a duplicate of web.yaml (different source path → different UID, same full name).
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));
        let dups = lines(log::Level::Warn, &h.p("zz-link.yaml"));
        assert_eq!(dups.len(), 1, "{dups:?}");
        assert!(dups[0].contains(&h.p("web.yaml")), "{dups:?}");

        // Changes to ignored files and subdirectories do nothing.
        fs::write(h.path(".hidden.yaml"), pod("hidden2", "x")).unwrap();
        fs::write(h.path("web.yaml~"), pod("backup2", "x")).unwrap();
        fs::write(h.path("sub/other.yaml"), pod("other", "x")).unwrap();
        h.quiet(200).await;
        assert!(lines(log::Level::Error, &h.dir.display().to_string()).is_empty());
    });
}

#[test]
fn too_large_file_is_rejected() {
    local(|| async {
        let mut h = Harness::start(fast(), mkdir);
        assert_eq!(h.next().await, want(&[]));
        // A valid manifest padded past 10 MiB with a YAML comment.
        let mut big = pod("big", "x");
        big.push('#');
        big.push_str(&"x".repeat(10 * 1024 * 1024));
        big.push('\n');
        fs::write(h.path("big.yaml"), big).unwrap();
        fs::write(h.path("small.yaml"), pod("small", "x")).unwrap();
        assert_eq!(h.next().await, want(&[("small", "x")]));
        // Reported by the pass that confirms what the fast pass after the close skipped.
        let mut errors = Vec::new();
        for _ in 0..100 {
            errors = lines(log::Level::Error, &h.p("big.yaml"));
            if !errors.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        h.quiet(200).await;
        let errors_now = lines(log::Level::Error, &h.p("big.yaml"));
        assert_eq!(errors_now.len(), 1, "{errors_now:?}");
        assert!(
            errors[0].contains("larger than 10485760 bytes"),
            "{errors:?}"
        );
    });
}

#[test]
fn broken_file_logs_once_and_disturbs_nothing() {
    local(|| async {
        let options = FileSourceOptions {
            relist_interval: Duration::from_millis(40),
            ..fast()
        };
        let mut h = Harness::start(options, |d| {
            mkdir(d);
            fs::write(d.join("a.yaml"), pod("a", "x")).unwrap();
            fs::write(
                d.join("b.yaml"),
                "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec:\n  containers:\n  - name: main\n    ports: [{containerPort: http}]\n",
            )
            .unwrap();
            fs::write(d.join("c.yaml"), pod("c", "y")).unwrap();
        });
        assert_eq!(h.next().await, want(&[("a", "x"), ("c", "y")]));
        // Several re-lists later: still one error line, no new snapshot.
        h.quiet(400).await;
        let errors = lines(log::Level::Error, &h.p("b.yaml"));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with(&format!(
                "{}: spec.containers[0].ports[0].containerPort: invalid type: string \"http\", expected i32",
                h.p("b.yaml")
            )),
            "{errors:?}"
        );
        // Fixing it adds the pod.
        fs::write(h.path("b.yaml"), pod("b", "z")).unwrap();
        assert_eq!(h.next().await, want(&[("a", "x"), ("b", "z"), ("c", "y")]));
    });
}

#[test]
fn broken_after_good_keeps_the_previous_pod() {
    local(|| async {
        let mut h = Harness::start(fast(), |d| {
            mkdir(d);
            fs::write(d.join("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        });
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));

        // A typo: the running pod stays.
        fs::write(
            h.path("web.yaml"),
            pod("web", "nginx:1.28").replace("image:", "imag:"),
        )
        .unwrap();
        h.quiet(250).await;
        let errors = lines(log::Level::Error, &h.p("web.yaml"));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("spec.containers[0].image: required"),
            "{errors:?}"
        );
        assert!(
            errors[0].contains("keeping the previous version of static pod default/web-node1"),
            "{errors:?}"
        );
        // The typo'd field is named as a hint.
        assert!(
            errors[0].contains("(fields picolet does not know: spec.containers[0].imag)"),
            "{errors:?}"
        );

        // Fixed: the new version replaces it.
        fs::write(h.path("web.yaml"), pod("web", "nginx:1.28")).unwrap();
        assert_eq!(h.next().await, want(&[("web", "nginx:1.28")]));

        // Deleting a broken file still removes its (last good) pod.
        fs::write(
            h.path("web.yaml"),
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n",
        )
        .unwrap();
        h.quiet(150).await;
        fs::remove_file(h.path("web.yaml")).unwrap();
        assert_eq!(h.next().await, want(&[]));
    });
}

#[test]
fn missing_directory_is_picked_up_later() {
    local(|| async {
        let mut h = Harness::start(fast(), |_| {});
        assert_eq!(
            h.next().await,
            want(&[]),
            "a missing directory is an empty snapshot"
        );
        let dir = h.dir.display().to_string();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let warns = lines(log::Level::Warn, &dir);
        assert_eq!(warns.len(), 1, "logged once: {warns:?}");

        mkdir(&h.dir);
        fs::write(h.path("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        assert_eq!(h.next().await, want(&[("web", "nginx:1.27")]));

        // The directory goes away (all pods with it) and comes back: watched again.
        fs::remove_dir_all(&h.dir).unwrap();
        assert_eq!(h.next().await, want(&[]));
        mkdir(&h.dir);
        tokio::time::sleep(Duration::from_millis(300)).await;
        fs::write(h.path("db.yaml"), pod("db", "postgres:16")).unwrap();
        assert_eq!(h.next().await, want(&[("db", "postgres:16")]));

        // Replaced by another directory renamed into place: its pods, and watched.
        let staged = h.dir.with_file_name("staged");
        mkdir(&staged);
        fs::write(staged.join("web.yaml"), pod("web", "nginx:1.28")).unwrap();
        fs::remove_dir_all(&h.dir).unwrap();
        fs::rename(&staged, &h.dir).unwrap();
        let mut got = h.next().await;
        if got.is_empty() {
            got = h.next().await; // saw the gap between removal and rename
        }
        assert_eq!(got, want(&[("web", "nginx:1.28")]));
        fs::write(h.path("db.yaml"), pod("db", "postgres:17")).unwrap();
        assert_eq!(
            h.next().await,
            want(&[("db", "postgres:17"), ("web", "nginx:1.28")])
        );
    });
}

#[test]
fn duplicate_names_keep_the_first_file() {
    local(|| async {
        let options = FileSourceOptions {
            relist_interval: Duration::from_millis(40),
            ..fast()
        };
        let mut h = Harness::start(options, |d| {
            mkdir(d);
            fs::write(d.join("a.yaml"), pod("web", "first")).unwrap();
            fs::write(d.join("b.yaml"), pod("web", "second")).unwrap();
        });
        assert_eq!(h.next().await, want(&[("web", "first")]));
        h.quiet(300).await;
        let warns = lines(log::Level::Warn, &h.p("b.yaml"));
        assert_eq!(warns.len(), 1, "warned once: {warns:?}");
        assert!(warns[0].contains(&h.p("a.yaml")), "{warns:?}");

        // The first goes away: the second takes over.
        fs::remove_file(h.path("a.yaml")).unwrap();
        assert_eq!(h.next().await, want(&[("web", "second")]));
    });
}

#[test]
fn unknown_fields_one_debug_line_per_version() {
    local(|| async {
        let options = FileSourceOptions {
            relist_interval: Duration::from_millis(40),
            ..fast()
        };
        let extra = |image: &str| {
            format!(
                "{}  tolerations: [{{operator: Exists}}]\n",
                pod("web", image)
            )
        };
        let mut h = Harness::start(options, |d| {
            mkdir(d);
            fs::write(d.join("web.yaml"), extra("a")).unwrap();
        });
        assert_eq!(h.next().await, want(&[("web", "a")]));
        h.quiet(250).await;
        let debug = |h: &Harness| {
            lines(log::Level::Debug, &h.p("web.yaml"))
                .into_iter()
                .filter(|l| l.contains("spec.tolerations"))
                .count()
        };
        assert_eq!(debug(&h), 1);
        fs::write(h.path("web.yaml"), extra("bb")).unwrap();
        assert_eq!(h.next().await, want(&[("web", "bb")]));
        h.quiet(250).await;
        assert_eq!(debug(&h), 2);
    });
}

/// A folder of hostile files next to valid manifests (issue: one hostile file stalled the
/// node for minutes). Every valid pod is in the first snapshot, each bad file gets exactly
/// one error line naming it and its problem, and nothing else is disturbed. The deep file
/// alone took the YAML parser 95 s before the pre-scan; its rejection now costs a linear
/// pass (figures in BENCHMARKS.md, not asserted here).
#[test]
fn hostile_corpus_is_rejected_file_by_file() {
    local(|| async {
        let options = FileSourceOptions {
            relist_interval: Duration::from_millis(200),
            ..fast()
        };
        let mut h = Harness::start(options, |d| {
            mkdir(d);
            hostile::write_into(d).unwrap();
            fs::write(d.join("good1.yaml"), pod("good1", "nginx:1.27")).unwrap();
            fs::write(d.join("good2.yaml"), pod("good2", "redis:7")).unwrap();
            fs::write(d.join("zzz-good3.yaml"), pod("good3", "busybox:1.36")).unwrap();
        });
        assert_eq!(
            h.next().await,
            want(&[
                ("good1", "nginx:1.27"),
                ("good2", "redis:7"),
                ("good3", "busybox:1.36")
            ])
        );
        // Several re-lists later: one line per bad file, nothing sent again.
        h.quiet(700).await;
        for (file, _, problem) in hostile::corpus() {
            let errors = lines(log::Level::Error, &h.p(file));
            assert_eq!(errors.len(), 1, "{file}: {errors:?}");
            assert!(errors[0].contains(problem), "{file}: {errors:?}");
        }
        // The FIFO and the directory are not manifests: skipped without a word.
        for skipped in ["fifo.yaml", "x.yaml"] {
            let all: Vec<String> = [log::Level::Error, log::Level::Warn]
                .into_iter()
                .flat_map(|l| lines(l, &h.p(skipped)))
                .collect();
            assert!(all.is_empty(), "{skipped}: {all:?}");
        }
    });
}

fn objects(update: &SourceUpdate) -> Vec<String> {
    update
        .objects
        .as_ref()
        .expect("the file source carries its objects")
        .iter()
        .map(|o| {
            let keys: Vec<&str> = o.data.keys().map(String::as_str).collect();
            format!("{}:{}", o.key, keys.join(","))
        })
        .collect()
}

/// A file of several documents: each is handled on its own. A broken one is named with its
/// index and hides nothing; a pod keeps its UID when a ConfigMap joins its file; a Secret in
/// a file others can read gets one WARN.
#[test]
fn documents_of_one_file_stand_on_their_own() {
    local(|| async {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: '1'}\n";
        let mut h = Harness::start(fast(), |d| {
            mkdir(d);
            fs::write(d.join("web.yaml"), pod("web", "nginx:1.27")).unwrap();
        });
        let first = h.next_update().await;
        let uid = first.pods[0].metadata.uid.clone();
        assert!(objects(&first).is_empty());

        // A ConfigMap joins the pod's file, a broken document and a Secret follow it.
        let content = format!(
            "{}---\n{cm}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: bad_name}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: db}}\ndata: {{password: czNjcmV0}}\n---\nkind: Deployment\napiVersion: v1\n",
            pod("web", "nginx:1.27")
        );
        fs::write(h.path("web.yaml"), &content).unwrap();
        let update = h.next_update().await;
        assert_eq!(summary(&update), want(&[("web", "nginx:1.27")]));
        assert_eq!(update.pods[0].metadata.uid, uid, "same UID: not restarted");
        assert_eq!(
            objects(&update),
            ["ConfigMap default/cfg:a", "Secret default/db:password"]
        );
        let errors = lines(log::Level::Error, &h.p("web.yaml"));
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].contains(
                "web.yaml (document 3): metadata.name: \"bad_name\" must be a DNS-1123 subdomain"
            ),
            "{errors:?}"
        );
        assert!(
            errors[1].contains("web.yaml (document 5): kind: must be \"Pod\", \"ConfigMap\" or \"Secret\", found \"Deployment\""),
            "{errors:?}"
        );
        let warns: Vec<String> =
            lines(log::Level::Warn, "holds a Secret but is readable by others")
                .into_iter()
                .filter(|l| l.contains(&h.p("web.yaml")))
                .collect();
        assert_eq!(warns.len(), 1, "{warns:?}");
        assert!(!warns[0].contains("czNjcmV0") && !warns[0].contains("s3cret"));

        // The ConfigMap is edited: a new snapshot with the new data, the pod as it was.
        fs::write(
            h.path("web.yaml"),
            content.replace("{a: '1'}", "{a: '1', b: '2'}"),
        )
        .unwrap();
        let update = h.next_update().await;
        assert_eq!(update.pods[0].metadata.uid, uid);
        assert_eq!(
            objects(&update),
            ["ConfigMap default/cfg:a,b", "Secret default/db:password"]
        );
        // A second file defining the same ConfigMap: the first by name wins, one warning.
        fs::write(h.path("zz.yaml"), cm).unwrap();
        // The next pass logs it; no snapshot (nothing changed). Wait for the line, not a time.
        let needle = "ConfigMap default/cfg is already defined by";
        for _ in 0..100 {
            if !lines(log::Level::Warn, needle).is_empty() {
                break;
            }
            h.quiet(100).await;
        }
        h.quiet(300).await;
        let dups = lines(log::Level::Warn, needle);
        assert_eq!(dups.len(), 1, "{dups:?}");
    });
}

/// The group/world-readable Secret warning: once for every way a file version arrives —
/// present at start, written and closed, renamed into place, chmod'ed readable, edited and
/// still readable — never for a private file, never with a value.
#[test]
fn a_readable_secret_warns_once_however_it_arrives() {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    local(|| async {
        let secret = |name: &str, value: &str| {
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\nstringData: {{password: {value}}}\n"
            )
        };
        let write_mode = |path: &Path, content: &str, mode: u32| {
            use std::io::Write;
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .open(path)
                .unwrap();
            f.write_all(content.as_bytes()).unwrap();
            fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
        };
        let needle = "holds a Secret but is readable by others";
        let warns = |h: &Harness, file: &str| {
            lines(log::Level::Warn, needle)
                .into_iter()
                .filter(|l| l.starts_with(&format!("{}:", h.p(file))))
                .count()
        };
        let mut h = Harness::start(fast(), |d| {
            mkdir(d);
            write_mode(&d.join("start.yaml"), &secret("at-start", "m4rker1"), 0o644);
            write_mode(
                &d.join("private.yaml"),
                &secret("private", "m4rker2"),
                0o600,
            );
        });
        h.next_update().await;
        assert_eq!(warns(&h, "start.yaml"), 1, "present at start");

        // Written and closed (`cat >`): the fast pass after the close takes it.
        write_mode(
            &h.path("written.yaml"),
            &secret("written", "m4rker3"),
            0o644,
        );
        h.next_update().await;
        assert_eq!(warns(&h, "written.yaml"), 1, "written and closed");

        // Renamed into place (`mv`).
        write_mode(&h.path(".moved.tmp"), &secret("moved", "m4rker4"), 0o640);
        fs::rename(h.path(".moved.tmp"), h.path("moved.yaml")).unwrap();
        h.next_update().await;
        assert_eq!(warns(&h, "moved.yaml"), 1, "renamed into place");

        // Edited, still readable: a new version, one more line.
        write_mode(
            &h.path("written.yaml"),
            &secret("written", "m4rker5"),
            0o644,
        );
        h.next_update().await;
        assert_eq!(warns(&h, "written.yaml"), 2, "edited and still readable");

        // chmod of a private file: no new snapshot (same content), so wait for the line.
        assert_eq!(warns(&h, "private.yaml"), 0, "a private file");
        fs::set_permissions(h.path("private.yaml"), fs::Permissions::from_mode(0o604)).unwrap();
        for _ in 0..300 {
            if warns(&h, "private.yaml") > 0 {
                break;
            }
            h.quiet(100).await;
        }
        assert_eq!(warns(&h, "private.yaml"), 1, "chmod'ed readable");
        h.quiet(300).await;
        assert_eq!(warns(&h, "start.yaml"), 1);
        assert_eq!(warns(&h, "moved.yaml"), 1);
        for l in lines(log::Level::Warn, "") {
            assert!(!l.contains("m4rker"), "a Secret value in a log line: {l}");
        }
    });
}
