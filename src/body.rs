//! The HTTP response body of picolet's servers (the node API, the image mirror): all at
//! once, or streamed from a channel (watches, followed logs, blobs read from an archive).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use hyper::body::{Body, Frame};
use tokio::sync::mpsc;

/// A response body: all at once, or streamed.
pub enum Out {
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

pub fn response(code: StatusCode, content_type: &str, body: Bytes) -> Response<Out> {
    let mut r = Response::new(Out::Full(Some(body)));
    *r.status_mut() = code;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}
