//! The node API's responses: the body type (whole or streamed) and the `metav1.Status`
//! and JSON answers every route gives. Shared by the routes (`server`) and the streaming
//! proxy (`stream`), which import it and not each other.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use hyper::body::{Body, Frame};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::json::object;

/// A response body: all at once, or streamed (watches, followed logs).
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

/// A `metav1.Status` failure (kubectl prints `Error from server (Reason): message`).
pub fn status_error(code: StatusCode, reason: &str, message: &str) -> Response<Out> {
    let body = object(&mut [
        ("kind", "Status".into()),
        ("apiVersion", "v1".into()),
        ("metadata", object(&mut [])),
        ("status", "Failure".into()),
        ("message", message.into()),
        ("reason", reason.into()),
        ("code", code.as_u16().into()),
    ]);
    json_response(code, &body)
}

pub fn not_found(kind: &str, name: &str) -> Response<Out> {
    let mut r = object(&mut [
        ("kind", "Status".into()),
        ("apiVersion", "v1".into()),
        ("metadata", object(&mut [])),
        ("status", "Failure".into()),
        ("message", format!("{kind} \"{name}\" not found").into()),
        ("reason", "NotFound".into()),
        ("code", 404.into()),
        (
            "details",
            object(&mut [("name", name.into()), ("kind", kind.into())]),
        ),
    ]);
    if kind.is_empty() {
        r["message"] = "the server could not find the requested resource".into();
        r["details"] = object(&mut []);
    }
    json_response(StatusCode::NOT_FOUND, &r)
}

pub fn json_response(code: StatusCode, body: &Value) -> Response<Out> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    response(code, "application/json", Bytes::from(bytes))
}

pub fn response(code: StatusCode, content_type: &str, body: Bytes) -> Response<Out> {
    let mut r = Response::new(Out::Full(Some(body)));
    *r.status_mut() = code;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}
