//! Reading a tar stream's member table: each member's path, where its data starts in the
//! (decompressed) stream and its size. ustar, GNU long names (`L`) and pax headers (`x`:
//! `path`, `size`) are read; links are kept as links. Data is never read here except for
//! the members the caller asks to capture (small JSON files), so an archive of any size
//! costs one pass and a table.

use std::io::{self, Read};

/// One member of the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Member {
    /// Normalised: no leading `./` or `/`.
    pub path: String,
    /// Offset of the data in the (decompressed) stream.
    pub offset: u64,
    pub size: u64,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    /// A symbolic or hard link to this path (normalised, relative to the archive's root).
    Link(String),
    Other,
}

/// The member table, with the captured members' bytes.
pub(super) type Table = Vec<(Member, Option<Vec<u8>>)>;

/// A stream that can skip ahead (a plain file seeks, a decompressor reads and drops).
pub(super) trait Skip: Read {
    fn skip(&mut self, n: u64) -> io::Result<()>;
}

/// Reads the whole member table of `r`. `capture(path, size)` says whether a member's data
/// is wanted as bytes (returned beside it); anything else is skipped. Errors name what is
/// wrong (`truncated`, `bad header checksum`) and where.
pub(super) fn members<R: Skip>(
    r: &mut R,
    mut capture: impl FnMut(&str, u64) -> bool,
) -> io::Result<Table> {
    let mut out = Vec::new();
    let mut pos: u64 = 0;
    let mut long_name: Option<String> = None;
    let mut pax_path: Option<String> = None;
    let mut pax_size: Option<u64> = None;
    let mut header = [0u8; 512];
    loop {
        if !read_full(r, &mut header)? {
            // A stream that ends without the two zero blocks: accepted when it ends on a
            // header boundary (some writers omit them).
            return Ok(out);
        }
        pos += 512;
        if header.iter().all(|&b| b == 0) {
            return Ok(out);
        }
        if !checksum_ok(&header) {
            return Err(invalid(format!(
                "bad tar header checksum at byte {}",
                pos - 512
            )));
        }
        let typeflag = header[156];
        let mut size = match pax_size.take() {
            Some(s) => s,
            None => octal(&header[124..136])
                .ok_or_else(|| invalid(format!("bad tar size field at byte {}", pos - 512)))?,
        };
        if matches!(typeflag, b'1' | b'2' | b'3' | b'4' | b'5' | b'6') {
            size = 0; // links, devices, directories, fifos carry no data
        }
        let padded = size.div_ceil(512) * 512;
        match typeflag {
            b'L' | b'x' | b'g' => {
                if size > 64 * 1024 {
                    return Err(invalid(format!("tar extended header of {size} bytes")));
                }
                let mut data = vec![0u8; padded as usize];
                if !read_full(r, &mut data)? {
                    return Err(truncated());
                }
                pos += padded;
                data.truncate(size as usize);
                match typeflag {
                    b'L' => long_name = Some(cstr(&data)),
                    b'x' => {
                        let (p, s) = pax(&data);
                        pax_path = p;
                        pax_size = s;
                    }
                    _ => {} // global pax header: nothing picolet needs
                }
                continue;
            }
            _ => {}
        }
        let raw = match (pax_path.take(), long_name.take()) {
            (Some(p), _) | (None, Some(p)) => p,
            (None, None) => {
                let name = cstr(&header[0..100]);
                let prefix = if &header[257..262] == b"ustar" {
                    cstr(&header[345..500])
                } else {
                    String::new()
                };
                if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                }
            }
        };
        let path = normalise(&raw);
        let kind = match typeflag {
            b'0' | 0 | b'7' => Kind::File,
            b'1' => Kind::Link(normalise(&cstr(&header[157..257]))),
            b'2' => Kind::Link(resolve(&path, &cstr(&header[157..257]))),
            _ => Kind::Other,
        };
        let data = if kind == Kind::File && capture(&path, size) {
            let mut data = vec![0u8; padded as usize];
            if !read_full(r, &mut data)? {
                return Err(truncated());
            }
            data.truncate(size as usize);
            Some(data)
        } else {
            r.skip(padded).map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    truncated()
                } else {
                    e
                }
            })?;
            None
        };
        out.push((
            Member {
                path,
                offset: pos,
                size,
                kind,
            },
            data,
        ));
        pos += padded;
    }
}

fn truncated() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "truncated")
}

fn invalid(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m)
}

/// Fills `buf`; `false` at a clean end of stream before its first byte.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) if n == 0 => return Ok(false),
            Ok(0) => return Err(truncated()),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn checksum_ok(h: &[u8; 512]) -> bool {
    let Some(want) = octal(&h[148..156]) else {
        return false;
    };
    let sum: u64 = h
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u64::from(b)
            }
        })
        .sum();
    sum == want
}

/// An octal field (NUL/space padded), or GNU's base-256 form (high bit set).
fn octal(f: &[u8]) -> Option<u64> {
    if f.first().is_some_and(|b| b & 0x80 != 0) {
        return f[1..].iter().try_fold(u64::from(f[0] & 0x7f), |a, &b| {
            a.checked_mul(256).map(|a| a | u64::from(b))
        });
    }
    let s = std::str::from_utf8(f).ok()?;
    let s = s.trim_matches(|c: char| c == '\0' || c == ' ');
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// pax records `LEN key=value\n`: `path` and `size`.
fn pax(data: &[u8]) -> (Option<String>, Option<u64>) {
    let (mut path, mut size) = (None, None);
    let mut rest = data;
    while !rest.is_empty() {
        let Some(sp) = rest.iter().position(|&b| b == b' ') else {
            break;
        };
        let Some(len) = std::str::from_utf8(&rest[..sp])
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
        else {
            break;
        };
        if len <= sp + 1 || len > rest.len() {
            break;
        }
        let rec = &rest[sp + 1..len];
        let rec = rec.strip_suffix(b"\n").unwrap_or(rec);
        if let Some(eq) = rec.iter().position(|&b| b == b'=') {
            let v = String::from_utf8_lossy(&rec[eq + 1..]).into_owned();
            match &rec[..eq] {
                b"path" => path = Some(v),
                b"size" => size = v.parse().ok(),
                _ => {}
            }
        }
        rest = &rest[len..];
    }
    (path, size)
}

/// `./a//b/` → `a/b`.
pub(super) fn normalise(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

/// A symlink's target, relative to the link's directory unless absolute.
fn resolve(link: &str, target: &str) -> String {
    if target.starts_with('/') {
        return normalise(target);
    }
    match link.rfind('/') {
        Some(i) => normalise(&format!("{}/{target}", &link[..i])),
        None => normalise(target),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A plain reader with a skip that reads and drops.
    pub(crate) struct Plain<'a>(pub &'a [u8]);
    impl Read for Plain<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0.read(buf)
        }
    }
    impl Skip for Plain<'_> {
        fn skip(&mut self, n: u64) -> io::Result<()> {
            let n = usize::try_from(n).unwrap();
            if n > self.0.len() {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "eof"));
            }
            self.0 = &self.0[n..];
            Ok(())
        }
    }

    /// A ustar header (and padded data) for tests.
    pub(crate) fn entry(name: &str, typeflag: u8, link: &str, data: &[u8]) -> Vec<u8> {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(b"0000644");
        h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
        h[136..147].copy_from_slice(b"00000000000");
        h[156] = typeflag;
        h[157..157 + link.len()].copy_from_slice(link.as_bytes());
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        let mut out = h.to_vec();
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }

    pub(crate) fn archive(entries: &[Vec<u8>]) -> Vec<u8> {
        let mut out: Vec<u8> = entries.concat();
        out.extend_from_slice(&[0u8; 1024]);
        out
    }

    #[test]
    fn members_offsets_links_and_captures() {
        let long = "blobs/".to_string() + &"x".repeat(120);
        let tar = archive(&[
            entry("./manifest.json", b'0', "", b"[1]"),
            entry("a/", b'5', "", b""),
            entry("a/layer.tar", b'0', "", &[7u8; 700]),
            entry("b/layer.tar", b'2', "../a/layer.tar", b""),
            entry("././@LongLink", b'L', "", long.as_bytes()),
            entry("ignored", b'0', "", b"{}"),
        ]);
        let got = members(&mut Plain(&tar), |p, _| p.ends_with(".json") || p == long).unwrap();
        let view: Vec<_> = got
            .iter()
            .map(|(m, d)| (m.path.as_str(), m.offset, m.size, m.kind.clone(), d.clone()))
            .collect();
        assert_eq!(
            view,
            vec![
                ("manifest.json", 512, 3, Kind::File, Some(b"[1]".to_vec())),
                ("a", 1536, 0, Kind::Other, None),
                ("a/layer.tar", 2048, 700, Kind::File, None),
                (
                    "b/layer.tar",
                    3584,
                    0,
                    Kind::Link("a/layer.tar".into()),
                    None
                ),
                (long.as_str(), 5120, 2, Kind::File, Some(b"{}".to_vec())),
            ]
        );
        // The data is where the table says.
        assert_eq!(tar[2048..2748], [7u8; 700]);
    }

    #[test]
    fn pax_path_and_size() {
        let rec = |k: &str, v: &str| {
            let body = format!(" {k}={v}\n");
            let mut len = body.len() + 1;
            if format!("{len}{body}").len() != len {
                len += 1;
            }
            format!("{len}{body}")
        };
        let data = rec("path", "blobs/sha256/abc") + &rec("size", "3");
        let tar = archive(&[
            entry("PaxHeaders/x", b'x', "", data.as_bytes()),
            entry("short", b'0', "", b"abc"),
        ]);
        let got = members(&mut Plain(&tar), |_, _| true).unwrap();
        assert_eq!(got[0].0.path, "blobs/sha256/abc");
        assert_eq!(got[0].1.as_deref(), Some(&b"abc"[..]));
    }

    #[test]
    fn broken_archives_say_what() {
        let good = archive(&[entry("a", b'0', "", &[1u8; 2000])]);
        let err = members(&mut Plain(&good[..1024]), |_, _| false).unwrap_err();
        assert_eq!(err.to_string(), "truncated");
        let err = members(&mut Plain(&good[..1024]), |_, _| true).unwrap_err();
        assert_eq!(err.to_string(), "truncated");
        let mut bad = good.clone();
        bad[0] = b'z';
        let err = members(&mut Plain(&bad), |_, _| false).unwrap_err();
        assert_eq!(err.to_string(), "bad tar header checksum at byte 0");
        // Not a tar at all.
        let err = members(&mut Plain(&[b'{'; 600]), |_, _| false).unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
        // Ends on a header boundary without the zero blocks: accepted.
        let cut = &good[..good.len() - 1024];
        assert_eq!(members(&mut Plain(cut), |_, _| false).unwrap().len(), 1);
    }

    #[test]
    fn octal_fields() {
        assert_eq!(octal(b"0000644\0"), Some(0o644));
        assert_eq!(octal(b"   12 \0"), Some(10));
        assert_eq!(octal(&[0x80, 0, 0, 0, 0, 0, 1, 0]), Some(256));
        assert_eq!(octal(b"9\0"), None);
    }
}
