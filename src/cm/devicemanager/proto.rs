//! The generated device plugin API `v1beta1` (`proto/k8s.io/kubelet/pkg/apis/deviceplugin/
//! v1beta1/api.proto`): messages, the `DevicePlugin` client picolet calls plugins with, and
//! the servers — `Registration` (picolet's) and `DevicePlugin` (the tests' fake plugin).
//! Its types stay inside `cm::devicemanager`.

#![allow(
    missing_docs,
    unreachable_pub,
    unused_qualifications,
    clippy::all,
    clippy::pedantic,
    clippy::nursery,
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags
)]

include!(concat!(env!("OUT_DIR"), "/v1beta1.rs"));
