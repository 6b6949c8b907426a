//! A gzip stream decompressed as it is read (RFC 1952 framing over miniz_oxide's raw
//! inflate), for archives written by `docker save | gzip`. Concatenated members (pigz,
//! `cat a.gz b.gz`) are read as one stream. The CRC is not checked: every blob served is
//! checked against its digest by the runtime that pulls it.

use std::io::{self, Read};

use miniz_oxide::inflate::stream::{InflateState, inflate};
use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

use super::tar::Skip;

const IN_BUF: usize = 32 * 1024;

pub struct Reader<R: Read> {
    inner: R,
    state: Box<InflateState>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Inside a member's deflate data (its header read).
    in_member: bool,
    eof: bool,
}

impl<R: Read> Reader<R> {
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            state: InflateState::new_boxed(DataFormat::Raw),
            buf: vec![0u8; IN_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            in_member: false,
            eof: false,
        }
    }

    /// Refills the input buffer when empty; `false` at the end of the input.
    fn fill(&mut self) -> io::Result<bool> {
        if self.start < self.end {
            return Ok(true);
        }
        self.start = 0;
        self.end = loop {
            match self.inner.read(&mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        };
        Ok(self.end > 0)
    }

    fn byte(&mut self) -> io::Result<u8> {
        if !self.fill()? {
            return Err(bad("truncated gzip header"));
        }
        self.start += 1;
        Ok(self.buf[self.start - 1])
    }

    fn skip_in(&mut self, mut n: usize) -> io::Result<()> {
        while n > 0 {
            if !self.fill()? {
                return Err(bad("truncated gzip header"));
            }
            let k = n.min(self.end - self.start);
            self.start += k;
            n -= k;
        }
        Ok(())
    }

    fn zero_terminated(&mut self) -> io::Result<()> {
        while self.byte()? != 0 {}
        Ok(())
    }

    /// A member's header (RFC 1952 2.3); `false` at a clean end of input between members.
    fn header(&mut self) -> io::Result<bool> {
        if !self.fill()? {
            return Ok(false);
        }
        let (id1, id2, cm, flg) = (self.byte()?, self.byte()?, self.byte()?, self.byte()?);
        if (id1, id2) != (0x1f, 0x8b) {
            return Err(bad("not gzip data after a gzip member"));
        }
        if cm != 8 {
            return Err(bad("gzip: unknown compression method"));
        }
        self.skip_in(6)?; // MTIME, XFL, OS
        if flg & 0x04 != 0 {
            let len = usize::from(self.byte()?) | usize::from(self.byte()?) << 8;
            self.skip_in(len)?;
        }
        if flg & 0x08 != 0 {
            self.zero_terminated()?;
        }
        if flg & 0x10 != 0 {
            self.zero_terminated()?;
        }
        if flg & 0x02 != 0 {
            self.skip_in(2)?;
        }
        self.state.reset(DataFormat::Raw);
        Ok(true)
    }
}

fn bad(m: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.to_string())
}

impl<R: Read> Read for Reader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            if self.eof {
                return Ok(0);
            }
            if !self.in_member {
                if !self.header()? {
                    self.eof = true;
                    return Ok(0);
                }
                self.in_member = true;
            }
            let more = self.fill()?;
            let r = inflate(
                &mut self.state,
                &self.buf[self.start..self.end],
                out,
                MZFlush::None,
            );
            self.start += r.bytes_consumed;
            match r.status {
                Ok(MZStatus::StreamEnd) => {
                    // CRC32 and ISIZE follow; then maybe another member.
                    self.skip_in(8)
                        .map_err(|_| io::Error::new(io::ErrorKind::UnexpectedEof, "truncated"))?;
                    self.in_member = false;
                    if r.bytes_written > 0 {
                        return Ok(r.bytes_written);
                    }
                }
                Ok(_) | Err(MZError::Buf) => {
                    if r.bytes_written > 0 {
                        return Ok(r.bytes_written);
                    }
                    if !more && r.bytes_consumed == 0 {
                        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "truncated"));
                    }
                }
                Err(_) => return Err(bad("corrupt gzip data")),
            }
        }
    }
}

impl<R: Read> Skip for Reader<R> {
    fn skip(&mut self, mut n: u64) -> io::Result<()> {
        let mut scratch = [0u8; 8192];
        while n > 0 {
            let want = usize::try_from(n.min(scratch.len() as u64)).unwrap_or(scratch.len());
            let k = self.read(&mut scratch[..want])?;
            if k == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "truncated"));
            }
            n -= k as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `printf 'hello, picolet\n' | gzip -9n | xxd -i` (FNAME off), and the same twice.
    fn gz(data: &[u8]) -> Vec<u8> {
        let mut child = std::process::Command::new("gzip")
            .arg("-c")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("gzip");
        use std::io::Write;
        child.stdin.take().unwrap().write_all(data).unwrap();
        let out = child.wait_with_output().unwrap();
        out.stdout
    }

    #[test]
    fn reads_members_and_skips() {
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut two = gz(&data);
        two.extend(gz(b"tail"));
        let mut r = Reader::new(&two[..]);
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        let mut want = data.clone();
        want.extend_from_slice(b"tail");
        assert_eq!(out, want);

        let mut r = Reader::new(&two[..]);
        r.skip(500_000).unwrap();
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, want[500_000..]);
    }

    #[test]
    fn truncated_and_corrupt() {
        let data = vec![7u8; 100_000];
        let g = gz(&data);
        let mut out = Vec::new();
        let err = Reader::new(&g[..g.len() / 2])
            .read_to_end(&mut out)
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
        let mut bad = g.clone();
        for b in &mut bad[12..40] {
            *b ^= 0x5a;
        }
        assert!(Reader::new(&bad[..]).read_to_end(&mut out).is_err());
    }
}
