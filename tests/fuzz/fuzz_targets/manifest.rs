//! Any bytes through the file source's manifest loader: the pre-scan, the YAML or JSON
//! parser, the typed Pod, defaults, validation, static identity. It must never panic,
//! and (checked by the run's -timeout and -rss_limit_mb) never take long or much memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = picolet::manifest::prescan::check(data);
    let _ = picolet::manifest::load(
        "/etc/kubernetes/manifests/fuzz.yaml",
        data,
        "node1",
        picolet::manifest::SOURCE_FILE,
        1_800_000_000_000_000_000,
    );
});
