//! The registration server's transport: just enough HTTP/2 (RFC 9113) to answer the one
//! unary gRPC call a device plugin makes on `kubelet.sock`, `v1beta1.Registration/Register`.
//!
//! Why not hyper's HTTP/2 server with tonic's generated service: the plugins are gRPC-Go
//! clients that dial the socket by its path, so their `:authority` is the path
//! (`/var/lib/kubelet/device-plugins/kubelet.sock`); the h2 crate refuses such a request as
//! malformed (`PROTOCOL_ERROR`, measured with the sample device plugin and
//! generic-device-plugin), and has no switch for it. The socket serves one method, so the
//! request headers are never needed: they are skipped undecoded (no HPACK decoder, no
//! dynamic table), the request message is read from the DATA frames, and the answer is
//! written with static-table and literal header fields only. It is also much smaller than
//! an HTTP/2 server (binary size).
//!
//! Per connection: the server preface (an empty SETTINGS), ACKs of the client's SETTINGS
//! and PINGs, and per stream the DATA up to END_STREAM, then the answer: response headers,
//! one gRPC message and the `grpc-status` trailers, or a Trailers-Only error. Flow control
//! never binds: a request and an answer are a few hundred bytes against 64 KiB windows.
//!
//! Must never: read more than [`MAX_REQUEST`] bytes of one stream, keep more than
//! [`MAX_STREAMS`] streams open on one connection, or keep a silent connection longer than
//! [`IDLE`].

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What one call's handler answers: `Ok` with the encoded reply message, or a gRPC status
/// code and message.
pub(super) type Answer = Result<Vec<u8>, (u8, String)>;

/// A request larger than this is refused (a `RegisterRequest` is ~100 bytes).
const MAX_REQUEST: usize = 64 * 1024;
/// Streams open at once on one connection (a plugin makes one call, then closes).
const MAX_STREAMS: usize = 8;
/// A connection with nothing to read for this long is closed.
const IDLE: Duration = Duration::from_secs(60);

const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;

/// gRPC `INVALID_ARGUMENT` and `INTERNAL`.
pub(super) const INVALID_ARGUMENT: u8 = 3;
pub(super) const INTERNAL: u8 = 13;

/// Serves one connection: each request message (the gRPC frame's payload) goes to `handle`.
pub(super) async fn serve_connection<S, F>(mut io: S, mut handle: F) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    F: FnMut(&[u8]) -> Answer,
{
    let mut preface = [0u8; 24];
    within(io.read_exact(&mut preface)).await?;
    if &preface != PREFACE {
        return Err(invalid("not an HTTP/2 connection"));
    }
    // The server preface: our SETTINGS, all defaults.
    io.write_all(&frame(SETTINGS, 0, 0, &[])).await?;
    // (stream, the request's bytes so far)
    let mut streams: Vec<(u32, Vec<u8>)> = Vec::new();
    loop {
        let mut head = [0u8; 9];
        match within(io.read_exact(&mut head)).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if len > MAX_REQUEST {
            return Err(invalid("frame too large"));
        }
        let mut payload = vec![0u8; len];
        within(io.read_exact(&mut payload)).await?;
        match kind {
            SETTINGS if flags & ACK == 0 => io.write_all(&frame(SETTINGS, ACK, 0, &[])).await?,
            PING if flags & ACK == 0 => io.write_all(&frame(PING, ACK, 0, &payload)).await?,
            GOAWAY => return Ok(()),
            HEADERS | DATA => {
                let i = match streams.iter().position(|(id, _)| *id == stream) {
                    Some(i) => i,
                    None if streams.len() >= MAX_STREAMS => {
                        return Err(invalid("too many streams"));
                    }
                    None => {
                        streams.push((stream, Vec::new()));
                        streams.len() - 1
                    }
                };
                if kind == DATA {
                    let body = unpadded(&payload, flags)?;
                    if streams[i].1.len() + body.len() > MAX_REQUEST {
                        return Err(invalid("request too large"));
                    }
                    streams[i].1.extend_from_slice(body);
                }
                if flags & END_STREAM != 0 {
                    let (_, body) = streams.swap_remove(i);
                    let answer = match grpc_message(&body) {
                        Some(message) => handle(message),
                        None => Err((INTERNAL, "malformed gRPC message".to_string())),
                    };
                    io.write_all(&answer_frames(stream, answer)).await?;
                }
            }
            // CONTINUATION, PRIORITY, RST_STREAM, WINDOW_UPDATE, ACKs: nothing to do.
            _ => {}
        }
    }
}

async fn within<T>(f: impl std::future::Future<Output = std::io::Result<T>>) -> std::io::Result<T> {
    tokio::time::timeout(IDLE, f)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

fn invalid(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why)
}

/// A DATA frame's payload without its padding.
fn unpadded(payload: &[u8], flags: u8) -> std::io::Result<&[u8]> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let pad = usize::from(*payload.first().ok_or_else(|| invalid("bad padding"))?);
    payload
        .get(1..payload.len().saturating_sub(pad))
        .filter(|_| pad < payload.len())
        .ok_or_else(|| invalid("bad padding"))
}

/// The message of a gRPC length-prefixed frame (uncompressed: we never offer compression).
fn grpc_message(body: &[u8]) -> Option<&[u8]> {
    let (&compressed, rest) = body.split_first()?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    (compressed == 0).then(|| rest.get(4..4 + len)).flatten()
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = Vec::with_capacity(9 + len);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// HPACK: a literal header field without indexing, new name (RFC 7541 6.2.2), for the
/// short names and values we send (under 127 bytes: one-byte lengths, no Huffman).
fn literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0);
    for s in [name, value] {
        let s = &s.as_bytes()[..s.len().min(126)];
        out.push(s.len() as u8);
        out.extend_from_slice(s);
    }
}

/// The response headers: `:status: 200` (static table index 8) and the gRPC content type.
fn response_headers(out: &mut Vec<u8>) {
    out.push(0x88);
    literal(out, "content-type", "application/grpc");
}

/// gRPC's percent-encoding of `grpc-message`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The frames of one answer on `stream`.
fn answer_frames(stream: u32, answer: Answer) -> Vec<u8> {
    let mut out = Vec::new();
    match answer {
        Ok(message) => {
            let mut headers = Vec::new();
            response_headers(&mut headers);
            out.extend(frame(HEADERS, END_HEADERS, stream, &headers));
            let mut data = vec![0u8];
            data.extend_from_slice(&(message.len() as u32).to_be_bytes());
            data.extend_from_slice(&message);
            out.extend(frame(DATA, 0, stream, &data));
            let mut trailers = Vec::new();
            literal(&mut trailers, "grpc-status", "0");
            out.extend(frame(HEADERS, END_HEADERS | END_STREAM, stream, &trailers));
        }
        Err((code, message)) => {
            // Trailers-Only.
            let mut headers = Vec::new();
            response_headers(&mut headers);
            literal(&mut headers, "grpc-status", &code.to_string());
            literal(&mut headers, "grpc-message", &percent_encode(&message));
            out.extend(frame(HEADERS, END_HEADERS | END_STREAM, stream, &headers));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_messages() {
        assert_eq!(grpc_message(&[0, 0, 0, 0, 2, 7, 8]), Some(&[7u8, 8][..]));
        assert_eq!(grpc_message(&[1, 0, 0, 0, 0]), None);
        assert_eq!(grpc_message(&[0, 0, 0, 0, 3, 1]), None);
        assert_eq!(unpadded(&[2, 9, 0, 0], PADDED).unwrap(), &[9u8][..]);
        assert!(unpadded(&[5, 9], PADDED).is_err());
        assert_eq!(
            frame(PING, ACK, 0, &[1]),
            vec![0, 0, 1, PING, ACK, 0, 0, 0, 0, 1]
        );
        assert_eq!(percent_encode("a b%\n"), "a b%25%0A");
        let mut h = Vec::new();
        literal(&mut h, "ab", "c");
        assert_eq!(h, vec![0, 2, b'a', b'b', 1, b'c']);
    }

    /// A hostile client: too many open streams, or a frame too large, ends the connection
    /// with an error; nothing is answered, nothing grows past the bounds.
    #[tokio::test]
    async fn hostile_connections_end() {
        async fn run(frames: Vec<u8>) -> std::io::Result<()> {
            let (mut client, server) = tokio::io::duplex(1 << 20);
            client.write_all(PREFACE).await.unwrap();
            client.write_all(&frames).await.unwrap();
            // The end of the client's writing; its reading stays open for the server's frames.
            client.shutdown().await.unwrap();
            let served = serve_connection(server, |_| panic!("no call is complete")).await;
            drop(client);
            served
        }
        let mut many = Vec::new();
        for id in 0..=MAX_STREAMS as u32 {
            many.extend(frame(HEADERS, END_HEADERS, 2 * id + 1, &[0x83]));
        }
        let e = run(many).await.unwrap_err();
        assert_eq!(e.to_string(), "too many streams");
        let mut big = frame(DATA, 0, 1, &[]);
        big[..3].copy_from_slice(&[0x01, 0x00, 0x01]);
        let e = run(big).await.unwrap_err();
        assert_eq!(e.to_string(), "frame too large");
        // A clean end of a connection that called nothing.
        run(frame(SETTINGS, 0, 0, &[])).await.unwrap();
    }
}
