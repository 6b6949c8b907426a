//! Compiles the CRI proto (`proto/`) into Rust without a `protoc` binary: `protox` parses it
//! into a `FileDescriptorSet`, `tonic-prost-build` generates the prost messages, the client,
//! and the server (compiled only with the `fake-cri` feature, see `src/runtime/fake_cri.rs`).
//! The output, `$OUT_DIR/runtime.v1.rs`, is included by `src/runtime/cri.rs` only.

const PROTO_ROOT: &str = "proto";
const CRI_PROTO: &str = "proto/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={CRI_PROTO}");
    println!("cargo:rerun-if-changed=build.rs");

    let descriptors = protox::compile([CRI_PROTO], [PROTO_ROOT])?;

    tonic_prost_build::configure()
        .build_client(true)
        // The server is generated always but compiled only for the fake CRI server, so the
        // release binary never links tonic's server side.
        .build_server(true)
        .server_mod_attribute(".", r#"#[cfg(feature = "fake-cri")]"#)
        // We dial a unix socket ourselves: no `connect()` helpers, no tonic `transport`.
        .build_transport(false)
        // Domain types use BTreeMap for labels/annotations: no conversion needed.
        .btree_map(".")
        .compile_fds(descriptors)?;
    Ok(())
}
