//! The node API's responses: the body type (whole or streamed) and the `metav1.Status`
//! and JSON answers every route gives. Shared by the routes (`server`) and the streaming
//! proxy (`stream`), which import it and not each other.

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::Value;

use crate::json::object;

pub(crate) use crate::http1::{Out, response};

/// A `metav1.Status` failure (kubectl prints `Error from server (Reason): message`).
pub(super) fn status_error(code: StatusCode, reason: &str, message: &str) -> Response<Out> {
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

pub(super) fn not_found(kind: &str, name: &str) -> Response<Out> {
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

pub(super) fn json_response(code: StatusCode, body: &Value) -> Response<Out> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    response(code, "application/json", Bytes::from(bytes))
}
