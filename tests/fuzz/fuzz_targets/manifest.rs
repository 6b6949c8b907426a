//! Any bytes through what the file source does with a file: the pre-scan, the YAML or JSON
//! parser, each document as a Pod (typed, defaults, validation, static identity), a
//! ConfigMap or a Secret (its values decoded, its errors redacted), and `load` (one pod per
//! file, the HTTP source's and `validate`'s path). It must never panic, and (checked by the
//! run's -timeout and -rss_limit_mb) never take long or much memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = picolet::prescan_manifest(data);
    let _ = picolet::load_manifest(
        "/etc/kubernetes/manifests/fuzz.yaml",
        data,
        "node1",
        picolet::SOURCE_FILE,
        1_800_000_000_000_000_000,
    );
    let _ = picolet::load_manifest_documents(
        "/etc/kubernetes/manifests/fuzz.yaml",
        data,
        "node1",
        picolet::SOURCE_FILE,
        1_800_000_000_000_000_000,
    );
});
