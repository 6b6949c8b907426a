//! The hostile manifest corpus of the core-hardening issue, shared by the file source's
//! corpus test (`tests/file_source.rs`, through `mod common`) and the `hostile` bench mode
//! (`benches/picolet.rs`, which includes this file with `#[path]`). Each entry: file name,
//! bytes, and a piece of the one error line picolet must log for it.

pub fn corpus() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let deep = format!(
        "apiVersion: v1\nkind: Pod\nspec: {{containers: {}",
        "[".repeat(200_000)
    );
    let mut compact = String::from("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  ");
    compact.push_str(&"- ".repeat(100_000));
    let mut laughs = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: lol\n");
    laughs.push_str("  labels: {a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]}\n");
    for (i, prev) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        let name = (b'b' + i as u8) as char;
        let refs = vec![format!("*{prev}"); 9].join(", ");
        laughs.push_str(&format!("  x{name}: &{name} [{refs}]\n"));
    }
    // 9.6 MB, under the 10 MiB file limit.
    let keys: String = (0..800_000).map(|i| format!("k{i:07}: v\n")).collect();
    // Just under the pre-scan's node limit: what the parsers themselves cost at worst.
    let under: String = (0..19_500).map(|i| format!("k{i:07}: v\n")).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect();
    let text = |s: &str| s.as_bytes().to_vec();
    vec![
        (
            "deep.yaml",
            deep.into_bytes(),
            "nested deeper than 64 levels at line 3",
        ),
        (
            "compact.yaml",
            compact.into_bytes(),
            "nested deeper than 64 levels at line 5",
        ),
        (
            "laughs.yaml",
            laughs.into_bytes(),
            "counting what aliases expand to",
        ),
        ("keys.yaml", keys.into_bytes(), "more than 20000 keys"),
        (
            "keys-under-limit.yaml",
            under.into_bytes(),
            "apiVersion: required",
        ),
        ("random.yaml", random, "invalid YAML"),
        ("empty.yaml", Vec::new(), "the file is empty"),
        (
            "deployment.yaml",
            text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"),
            "apiVersion: must be \"v1\", found \"apps/v1\"",
        ),
        (
            "list.yaml",
            text("apiVersion: v1\nkind: PodList\nitems: []\n"),
            "kind: must be \"Pod\"",
        ),
        (
            "noimage.yaml",
            text(
                "apiVersion: v1\nkind: Pod\nmetadata: {name: n}\nspec:\n  containers:\n  - name: c\n",
            ),
            "spec.containers[0].image: required",
        ),
        (
            "nocontainers.yaml",
            text("apiVersion: v1\nkind: Pod\nmetadata: {name: n}\nspec: {containers: []}\n"),
            "spec.containers",
        ),
        (
            "wrongtype.yaml",
            text("apiVersion: v1\nkind: Pod\nmetadata: {name: w}\nspec: {containers: {name: c}}\n"),
            "spec.containers: invalid type",
        ),
    ]
}

/// Puts the corpus into `dir`, plus two things that are not manifests at all: a FIFO
/// and a directory named `x.yaml`.
pub fn write_into(dir: &std::path::Path) -> std::io::Result<()> {
    for (name, bytes, _) in corpus() {
        std::fs::write(dir.join(name), bytes)?;
    }
    nix::unistd::mkfifo(&dir.join("fifo.yaml"), nix::sys::stat::Mode::S_IRWXU)
        .map_err(std::io::Error::from)?;
    std::fs::create_dir(dir.join("x.yaml"))
}
