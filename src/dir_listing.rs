//! Directory listings that leave the directory's access time alone.
//!
//! Owns: [`read_dir`], the one way picolet's periodic passes list a directory on disk.
//! Must never: import another module of picolet.
//!
//! On `relatime`, every distribution's default mount option, the first listing of a
//! directory changed since its last listing rewrites its inode's access time: 4 KiB
//! through the journal to the flash (`write_bytes` in `/proc/<pid>/io`). picolet lists the
//! manifest directory every 20 s, the pod log directories at every log rotation and
//! container GC pass, the plugin registry every 10 s; after a GC pass that removed dead
//! containers' logs from 13 pod log directories, that was 52 KiB within the minute, and
//! once a day (relatime's other rule) every directory listed at all. `O_NOATIME` (allowed
//! to the owner and to root) keeps the access time; where it is refused (`EPERM`) the
//! directory is opened as usual. The kubelet lists with Go's `os.ReadDir`, which updates it.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// One entry of a listing (`.` and `..` left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    dir: PathBuf,
    name: OsString,
}

impl Entry {
    pub(crate) fn file_name(&self) -> OsString {
        self.name.clone()
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }

    /// The entry's own metadata, a symbolic link not followed (as `DirEntry::metadata`).
    pub(crate) fn metadata(&self) -> io::Result<std::fs::Metadata> {
        std::fs::symlink_metadata(self.path())
    }
}

/// The entries of `dir`, in the order the file system gives them, its access time kept.
pub(crate) fn read_dir(dir: &Path) -> io::Result<Vec<Entry>> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut d = match Dir::open(dir, flags | OFlag::O_NOATIME, Mode::empty()) {
        Err(nix::errno::Errno::EPERM) => Dir::open(dir, flags, Mode::empty()),
        other => other,
    }
    .map_err(io::Error::from)?;
    let mut out = Vec::new();
    for entry in d.iter() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        out.push(Entry {
            dir: dir.to_path_buf(),
            name: std::ffi::OsStr::from_bytes(name).to_os_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_like_std_and_keeps_the_access_time() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("d");
        std::fs::create_dir(&d).unwrap();
        for n in ["a", "b.yaml", ".hidden"] {
            std::fs::write(d.join(n), n).unwrap();
        }
        std::fs::create_dir(d.join("sub")).unwrap();
        // std's listing first: it updates the access time.
        let mut want: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        want.sort();
        // An access time well in the past, so any update would show.
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let set_atime = |t| {
            let dir = std::fs::File::open(&d).unwrap();
            dir.set_times(std::fs::FileTimes::new().set_accessed(t))
                .unwrap();
        };
        set_atime(old);
        let mut got: Vec<_> = read_dir(&d).unwrap().iter().map(Entry::file_name).collect();
        got.sort();
        assert_eq!(got, want);
        let e = read_dir(&d)
            .unwrap()
            .into_iter()
            .find(|e| e.file_name() == "sub")
            .unwrap();
        assert_eq!(e.path(), d.join("sub"));
        assert!(e.metadata().unwrap().is_dir());
        let atime = std::fs::metadata(&d).unwrap().accessed().unwrap();
        assert_eq!(atime, old, "the listing changed the access time");
        assert_eq!(
            read_dir(&tmp.path().join("missing")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
