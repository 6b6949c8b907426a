//! The HTTP/1 server side of picolet's servers (the node API, the image mirror): the
//! response body — all at once, or streamed from a channel (watches, followed logs, blobs
//! read from an archive) — and the connection loop, [`serve`].
//!
//! Binary size: hyper's server is generic over the connection's I/O and the service; each
//! pair of types is a copy of its state machine (~50 KB on ARMv6). Every server of picolet
//! goes through [`serve`] with a boxed I/O and a boxed handler, so there is one copy.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::mpsc;

/// A connection's byte stream (TCP, TLS over TCP, a test's duplex pipe).
pub(crate) trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The next connection on `listener`, or `None` once `shutdown` is cancelled. A failed
/// accept (EMFILE and the like) is a warning naming `who` and a short wait, not a spin.
pub(crate) async fn accept(
    listener: &tokio::net::TcpListener,
    shutdown: &tokio_util::sync::CancellationToken,
    who: &str,
) -> Option<(tokio::net::TcpStream, std::net::SocketAddr)> {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            accepted = listener.accept() => match accepted {
                Ok(a) => return Some(a),
                Err(e) => {
                    log::warn!("{who}: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

/// What answers each request of a connection.
pub(crate) type Handler =
    Rc<dyn Fn(Request<Incoming>) -> Pin<Box<dyn Future<Output = Response<Out>>>>>;

/// HTTP/1 on one connection until it ends or fails: each request's headers within
/// `header_timeout`, at most `max_buf` bytes of them; upgrades allowed (a handler that
/// answers `101` takes the connection over with `hyper::upgrade::on`).
pub(crate) async fn serve(
    io: Box<dyn Io>,
    handler: Handler,
    header_timeout: Duration,
    max_buf: usize,
) -> Result<(), hyper::Error> {
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let fut = handler(req);
        async move { Ok::<_, Infallible>(fut.await) }
    });
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_buf_size(max_buf)
        .serve_connection(TokioIo::new(io), svc)
        .with_upgrades()
        .await
}

/// A response body: all at once, or streamed.
pub(crate) enum Out {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

impl Body for Out {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Out::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Out::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Out::Full(None))
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            Out::Full(Some(b)) => hyper::body::SizeHint::with_exact(b.len() as u64),
            Out::Full(None) => hyper::body::SizeHint::with_exact(0),
            Out::Stream(_) => hyper::body::SizeHint::default(),
        }
    }
}

pub(crate) fn response(code: StatusCode, content_type: &str, body: Bytes) -> Response<Out> {
    let mut r = Response::new(Out::Full(Some(body)));
    *r.status_mut() = code;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}
