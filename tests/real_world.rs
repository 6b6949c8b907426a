//! The real-world manifests of `examples/real-world/` (written after the upstream
//! projects' published manifests) load through the file source's loader, pass admission,
//! and the README says, per manifest, what picolet does with each field it does not fully
//! implement — generated here from the field policy (`PICOLET_BLESS=1` rewrites it).

#[path = "common/readme.rs"]
mod readme;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use picolet::{NodeInfo, admit_pod, load_manifest, manifest_fields};

const SEEN: i64 = 1_800_000_000_000_000_000;

fn node() -> NodeInfo {
    NodeInfo {
        node_name: "pi".into(),
        labels: picolet::node_labels("pi", &BTreeMap::new()),
        cpu_milli: 4000,
        memory_bytes: 4 << 30,
        max_pods: 110,
        sysctls: Default::default(),
    }
}

/// Per file: the README lines describing it.
fn report() -> BTreeMap<String, Vec<String>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/real-world");
    let mut out = BTreeMap::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 6, "{names:?}");
    for name in names {
        let path = format!("examples/real-world/{name}");
        let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
        let loaded = load_manifest(&path, &bytes, "pi", "file", SEEN)
            .unwrap_or_else(|e| panic!("{path} does not load: {e}"));
        let mut lines = Vec::new();
        for u in manifest_fields::classify_unknown(&loaded.unknown_fields) {
            match u {
                manifest_fields::Unknown::Ignored(p) => {
                    let why = manifest_fields::rule_for(&manifest_fields::normalize(&p))
                        .map_or("", |r| r.why);
                    lines.push(format!("`{p}`: ignored ({why})"));
                }
                manifest_fields::Unknown::NotUpstream(p) => {
                    panic!("{path}: {p} is not a v1.Pod field")
                }
            }
        }
        let verdict = admit_pod(&loaded.pod, &node(), &[]);
        if let Some(r) = &verdict.rejection {
            panic!("{path}: rejected: {}: {}", r.reason, r.message);
        }
        for w in &verdict.warnings {
            lines.push(format!("`{}`: warned — {}", w.path, w.why));
        }
        out.insert(name, lines);
    }
    out
}

fn markdown(report: &BTreeMap<String, Vec<String>>) -> String {
    let mut s = String::new();
    for (name, lines) in report {
        let _ = writeln!(s, "- `{name}`:");
        if lines.is_empty() {
            let _ = writeln!(s, "  every field implemented.");
        }
        for l in lines {
            let _ = writeln!(s, "  - {l}");
        }
    }
    s
}

#[test]
fn real_world_manifests_load_and_the_readme_says_what_picolet_does_with_them() {
    let want = markdown(&report());
    readme::check_generated_section("real-world", &want, "real_world");
}
