//! A gzip-compressed archive (`docker save | gzip`) read through the system's `gzip -dc`
//! (busybox has it on every board): picolet carries no inflate code (~25 KB on ARMv6, over
//! the size budget). One process per pass over the archive: the index's, and each blob's
//! (a seek in a gzip stream is a read from its start). The CRC is gzip's to check.

use std::io::{self, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use super::tar::Skip;

pub(super) struct Reader {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Reader {
    pub(super) fn open(path: &Path) -> io::Result<Reader> {
        let mut child = Command::new("gzip")
            .arg("-dc")
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("gzip-compressed, and gzip(1) cannot be run ({e}): decompress it"),
                )
            })?;
        let out = child.stdout.take().ok_or(io::ErrorKind::BrokenPipe)?;
        Ok(Reader {
            child,
            out: BufReader::with_capacity(64 * 1024, out),
        })
    }
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.out.read(buf)?;
        if n == 0 && !buf.is_empty() {
            // The end: gzip says whether the data was whole.
            let status = self.child.wait()?;
            if !status.success() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "truncated or corrupt gzip data",
                ));
            }
        }
        Ok(n)
    }
}

impl Skip for Reader {
    fn skip(&mut self, n: u64) -> io::Result<()> {
        let copied = io::copy(&mut (&mut self.out).take(n), &mut io::sink())?;
        if copied < n {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "truncated"));
        }
        Ok(())
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // A reader dropped early (a client gone, a bad archive): gzip must not linger.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gz(dir: &Path, name: &str, data: &[u8]) -> std::path::PathBuf {
        let plain = dir.join(name);
        std::fs::write(&plain, data).unwrap();
        let st = Command::new("gzip").arg("-f").arg(&plain).status().unwrap();
        assert!(st.success());
        dir.join(format!("{name}.gz"))
    }

    #[test]
    fn reads_and_skips() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let g = gz(dir.path(), "a", &data);
        let mut out = Vec::new();
        Reader::open(&g).unwrap().read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
        let mut r = Reader::open(&g).unwrap();
        r.skip(500_000).unwrap();
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, data[500_000..]);
        // Dropped halfway: no gzip left behind (Drop waits for it).
        let mut r = Reader::open(&g).unwrap();
        r.skip(10).unwrap();
        drop(r);
    }

    #[test]
    fn truncated_and_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let g = gz(dir.path(), "b", &vec![7u8; 100_000]);
        let bytes = std::fs::read(&g).unwrap();
        std::fs::write(&g, &bytes[..bytes.len() / 2]).unwrap();
        let mut out = Vec::new();
        let err = Reader::open(&g).unwrap().read_to_end(&mut out).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    }
}
