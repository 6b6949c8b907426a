//! Compiles the protos (`proto/`) into Rust without a `protoc` binary: `protox` parses them
//! into a `FileDescriptorSet`, `tonic-prost-build` generates the prost messages, the clients,
//! and the servers (compiled only with the `fake-cri` feature, see `src/cri/fake_cri.rs`
//! and the grpc probe tests). The outputs: `$OUT_DIR/runtime.v1.rs` (the CRI), included by
//! `src/cri/client.rs` only, and `$OUT_DIR/grpc.health.v1.rs` (the gRPC health protocol),
//! included by `src/probe/grpc.rs` only; `$OUT_DIR/csi.v1.rs` (the CSI Node service) and
//! `$OUT_DIR/pluginregistration.rs` (the kubelet's plugin registration), included by
//! `src/csi/proto.rs` only (their servers: the fake CSI plugin of the tests).

const PROTO_ROOT: &str = "proto";
const CRI_PROTO: &str = "proto/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto";
const HEALTH_PROTO: &str = "proto/grpc/health/v1/health.proto";
const CSI_PROTO: &str = "proto/github.com/container-storage-interface/spec/csi.proto";
const REGISTRATION_PROTO: &str = "proto/k8s.io/kubelet/pkg/apis/pluginregistration/v1/api.proto";
const DEVICE_PLUGIN_PROTO: &str = "proto/k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={CRI_PROTO}");
    println!("cargo:rerun-if-changed={HEALTH_PROTO}");
    println!("cargo:rerun-if-changed={CSI_PROTO}");
    println!("cargo:rerun-if-changed={REGISTRATION_PROTO}");
    println!("cargo:rerun-if-changed={DEVICE_PLUGIN_PROTO}");
    println!("cargo:rerun-if-changed=build.rs");

    let descriptors = protox::compile(
        [CRI_PROTO, HEALTH_PROTO, CSI_PROTO, REGISTRATION_PROTO],
        [PROTO_ROOT],
    )?;

    tonic_prost_build::configure()
        .build_client(true)
        // The servers are generated always but compiled only with `fake-cri` (the fake CRI
        // server, the grpc probe tests), so the release binary never links tonic's server side.
        .build_server(true)
        .server_mod_attribute(".", r#"#[cfg(feature = "fake-cri")]"#)
        // We dial ourselves (the CRI's unix socket, the probed pod's TCP port): no `connect()`
        // helpers, no tonic `transport`.
        .build_transport(false)
        // Domain types use BTreeMap for labels/annotations: no conversion needed.
        .btree_map(".")
        // tonic-prost's codec with 1 KiB first buffers instead of 8 KiB (src/grpc.rs).
        .codec_path("crate::grpc::SmallBufferCodec")
        .compile_fds(descriptors)?;

    // The device plugin API (`$OUT_DIR/v1beta1.rs`, included by `src/cm/devicemanager/proto.rs`
    // only, itself compiled only with the `device-plugins` feature): the messages and the
    // `DevicePlugin` client picolet calls plugins with; the servers are generic code used
    // only by the tests (the `DevicePlugin` fake, a `Registration` client's peer): picolet
    // answers `Register` itself (`cm/devicemanager/registration.rs`).
    let descriptors = protox::compile([DEVICE_PLUGIN_PROTO], [PROTO_ROOT])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .btree_map(".")
        .codec_path("crate::grpc::SmallBufferCodec")
        .compile_fds(descriptors)?;

    // Static musl executables are linked without RELRO. musl applies PT_GNU_RELRO only in
    // its dynamic linker (ldso/dynlink.c); a static executable's start code (`__init_libc`:
    // TLS and auxv only) never mprotects it, so the segment protects nothing there — while GNU
    // ld pads the file to end it on a max-page-size boundary (64 KiB on aarch64): up to 64 KiB
    // of zeros in the binary (51,304 B in the aarch64 release build when this was added).
    // Glibc builds (tests, `cargo run` on the host) and a musl build made dynamic with
    // `-C target-feature=-crt-static` keep their RELRO. (Cargo does not list `crt-static` in
    // CARGO_CFG_TARGET_FEATURE: musl targets are static unless the flags say otherwise.)
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("musl");
    let dynamic = std::env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|f| f.contains("-crt-static"));
    if musl && !dynamic {
        // Through the C compiler driver (.cargo/config.toml's linker; cross-rs's too), after
        // rustc's own `-z relro`.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,norelro");
    }

    // The aarch64 release binary drops its DWARF unwind tables (.eh_frame, .eh_frame_hdr:
    // 627 KB, a sixth of the binary). The release profile has panic = "abort", so nothing
    // ever unwinds; the tables only fed the backtrace of a panic, and the release binary is
    // stripped: `RUST_BACKTRACE=1` printed no frame already, `=full` bare addresses. The
    // panic message with its file:line is printed as before. The one piece kept is
    // crtbegin.o's (its frame registration refers to it). Set PICOLET_KEEP_UNWIND_TABLES=1
    // to keep them (a crash to debug with the unstripped build's symbols).
    // (`rustc -C force-unwind-tables=no` does not do it: under fat LTO the tables stay.)
    println!("cargo:rerun-if-env-changed=PICOLET_KEEP_UNWIND_TABLES");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let keep = std::env::var_os("PICOLET_KEEP_UNWIND_TABLES").is_some_and(|v| v != "0");
    // The 32-bit ARM builds (armv7, armv6) unwind with the ARM EHABI tables instead
    // (.ARM.exidx, .ARM.extab: 47 KB of the armv6 binary); the same reasoning drops them.
    // With no table the unwinder finds no frame: a panic prints its message and file:line
    // and aborts, as before.
    let discard = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        // (script, sections discarded, whether .eh_frame_hdr goes too)
        Ok("aarch64") => Some((
            "no-eh-frame.ld",
            "EXCLUDE_FILE(*crtbegin.o *crtend.o) *(.eh_frame)",
            true,
        )),
        Ok("arm") => Some((
            "no-exidx.ld",
            "*(.ARM.exidx .ARM.exidx.* .ARM.extab .ARM.extab.*)",
            false,
        )),
        _ => None,
    };
    if let Some((file, sections, eh_frame_hdr)) = discard
        && musl
        && !dynamic
        && release
        && !keep
    {
        let script = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join(file);
        std::fs::write(
            &script,
            format!("SECTIONS\n{{\n  /DISCARD/ : {{ {sections} }}\n}}\nINSERT AFTER .text;\n"),
        )?;
        if eh_frame_hdr {
            println!("cargo:rustc-link-arg-bins=-Wl,--no-eh-frame-hdr");
        }
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
    Ok(())
}
