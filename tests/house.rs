//! The house rules, read from the source (`../shared/docs/house.md`, `src/lib.rs`'s
//! Layout): no two files import each other (directly or round a loop), no top-level module
//! imports one that imports it back, and no top-level module holds more than 15 % of the
//! lines of `src/`.
//!
//! Imports are read as text: every `crate::a::b` path (in `use` trees too) and every
//! `super::` path of non-test code, resolved to the longest module that exists as a file.
//! Test code (`#[cfg(test)] mod x;` files and the `#[cfg(test)] mod tests { … }` at the end
//! of a file) is left out: a test may reach anything.
//!
//! `cargo test --test house -- --nocapture` also prints the module picture (module →
//! modules it imports) and the lines per top-level module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file as a module: `runtime::sync` for `src/runtime/sync.rs`, `runtime` for
/// `src/runtime/mod.rs` or `src/runtime.rs`.
struct File {
    module: Vec<String>,
    /// Non-test code.
    code: String,
    lines: usize,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn module_of(src: &Path, path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// Modules declared `#[cfg(test)] mod name;` (their files are test code).
fn test_modules(files: &[(Vec<String>, String)]) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for (module, text) in files {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(rest) = line
                .strip_prefix("mod ")
                .or_else(|| line.strip_prefix("pub mod "))
            else {
                continue;
            };
            let Some(name) = rest.strip_suffix(';') else {
                continue;
            };
            if i > 0 && lines[i - 1] == "#[cfg(test)]" {
                let mut m = module.clone();
                m.push(name.to_string());
                out.insert(m);
            }
        }
    }
    out
}

/// The text before a file's `#[cfg(test)] mod tests {` (its in-file tests).
fn strip_tests(text: &str) -> &str {
    let mut at = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

fn load() -> (Vec<File>, usize) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rs_files(&src, &mut paths);
    let raw: Vec<(Vec<String>, String)> = paths
        .iter()
        .filter(|p| !p.ends_with("main.rs"))
        .map(|p| (module_of(&src, p), std::fs::read_to_string(p).unwrap()))
        .collect();
    let tests = test_modules(&raw);
    let total: usize = raw.iter().map(|(_, t)| t.lines().count()).sum();
    let files = raw
        .into_iter()
        .filter(|(m, _)| !tests.iter().any(|t| m.starts_with(t)))
        .map(|(module, text)| {
            let code = strip_tests(&text).to_string();
            File {
                module,
                lines: text.lines().count(),
                code,
            }
        })
        .collect();
    (files, total)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Comments and string literals blanked (so a path in a doc comment is no import).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if b[i] == '/' && b.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == '*' && b[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if b[i] == 'r'
            && (b.get(i + 1) == Some(&'"') || b.get(i + 1) == Some(&'#'))
            && (i == 0 || !is_ident(b[i - 1]))
        {
            // raw string r"…", r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(b[i]);
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < b.len() {
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if b[i] == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == '\'' && b.get(i + 2) == Some(&'\'') {
            out.push_str("' '");
            i += 3;
        } else if b[i] == '\'' && b.get(i + 1) == Some(&'\\') {
            // '\n', '\u{..}'
            i += 2;
            while i < b.len() && b[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Every path this code names from `crate::` or `super::`, absolute.
fn paths(module: &[String], is_mod_file: bool, code: &str) -> Vec<Vec<String>> {
    let code = code_only(code);
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    // The module `super` names: a `foo/mod.rs` or `foo.rs` file is module `foo`; its
    // `super` is foo's parent.
    let _ = is_mod_file;
    let parent: Vec<String> = module[..module.len().saturating_sub(1)].to_vec();
    while i < chars.len() {
        let start_ok = i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':');
        let rest: String = chars[i..chars.len().min(i + 8)].iter().collect();
        let base = if start_ok && rest.starts_with("crate::") {
            i += 7;
            Some(Vec::new())
        } else if start_ok && rest.starts_with("super::") {
            i += 7;
            let mut p = parent.clone();
            // super::super::
            loop {
                let r: String = chars[i..chars.len().min(i + 7)].iter().collect();
                if r == "super::" {
                    p.pop();
                    i += 7;
                } else {
                    break;
                }
            }
            Some(p)
        } else {
            None
        };
        match base {
            Some(base) => {
                let (trees, next) = parse_tree(&chars, i);
                for t in trees {
                    let mut p = base.clone();
                    p.extend(t);
                    out.push(p);
                }
                i = next.max(i + 1);
            }
            None => i += 1,
        }
    }
    out
}

/// A use tree at `i`: `a::b::{c, d::e}` → [a::b::c, a::b::d::e]; a plain path `a::b::c`
/// (an expression) → [a::b::c]. Returns the paths and where parsing stopped.
fn parse_tree(c: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    loop {
        if c.get(i) == Some(&'{') {
            let mut out = Vec::new();
            i += 1;
            loop {
                while c.get(i).is_some_and(|x| x.is_whitespace() || *x == ',') {
                    i += 1;
                }
                if c.get(i) == Some(&'}') || i >= c.len() {
                    i += 1;
                    break;
                }
                let (sub, next) = parse_tree(c, i);
                for s in sub {
                    let mut p = prefix.clone();
                    p.extend(s);
                    out.push(p);
                }
                if next <= i {
                    i += 1;
                } else {
                    i = next;
                }
            }
            return (out, i);
        }
        let start = i;
        while c.get(i).is_some_and(|x| is_ident(*x)) {
            i += 1;
        }
        if i == start {
            return (vec![prefix], i);
        }
        let word: String = c[start..i].iter().collect();
        if word != "self" {
            prefix.push(word);
        }
        // `as name`
        if c.get(i) == Some(&':') && c.get(i + 1) == Some(&':') {
            i += 2;
            continue;
        }
        return (vec![prefix], i);
    }
}

struct Graph {
    /// file module → file modules it imports
    files: BTreeMap<String, BTreeSet<String>>,
    /// top-level module → top-level modules it imports
    tops: BTreeMap<String, BTreeSet<String>>,
    /// top-level module → lines (with tests)
    lines: BTreeMap<String, usize>,
    total: usize,
}

fn graph() -> Graph {
    let (files, total) = load();
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let mut g = Graph {
        files: BTreeMap::new(),
        tops: BTreeMap::new(),
        lines: BTreeMap::new(),
        total,
    };
    for f in &files {
        let name = f.module.join("::");
        let top = f.module.first().cloned().unwrap_or_default();
        *g.lines.entry(top.clone()).or_default() += f.lines;
        let edges = g.files.entry(name.clone()).or_default();
        let is_mod_file = false;
        for p in paths(&f.module, is_mod_file, &f.code) {
            // the longest known module prefix
            let target = (1..=p.len())
                .rev()
                .map(|n| p[..n].to_vec())
                .find(|m| known.contains(m));
            let Some(target) = target else { continue };
            let t = target.join("::");
            if t != name && !f.module.starts_with(&target) {
                edges.insert(t);
            }
            let ttop = target[0].clone();
            if !top.is_empty() && ttop != top {
                g.tops.entry(top.clone()).or_default().insert(ttop);
            }
        }
        g.tops.entry(top).or_default();
    }
    g
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn picture(g: &Graph) {
    eprintln!("module → modules it imports (non-test code):");
    for (m, to) in &g.tops {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        eprintln!("  {m:<14} → {}", to.join(", "));
    }
    eprintln!("lines per top-level module (of {}):", g.total);
    let mut by: Vec<(&String, &usize)> = g.lines.iter().collect();
    by.sort_by(|a, b| b.1.cmp(a.1));
    for (m, n) in by {
        eprintln!(
            "  {m:<14} {n:>6}  {:>5.1} %",
            *n as f64 * 100.0 / g.total as f64
        );
    }
}

#[test]
fn no_file_imports_round_a_loop() {
    let g = graph();
    picture(&g);
    let c = cycles(&g.files);
    assert!(
        c.is_empty(),
        "files importing each other round a loop: {c:#?}"
    );
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let g = graph();
    let c = cycles(&g.tops);
    assert!(c.is_empty(), "top-level modules in a loop: {c:#?}");
}

#[test]
fn no_module_holds_more_than_15_percent() {
    let g = graph();
    let big: Vec<_> = g
        .lines
        .iter()
        .filter(|(_, n)| **n * 100 > g.total * 15)
        .collect();
    assert!(big.is_empty(), "over 15 % of {} lines: {big:?}", g.total);
}

/// The layer table of `src/lib.rs`: (layer, module, modules it may import).
fn declared() -> Vec<(usize, String, BTreeSet<String>)> {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let mut out = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(l) = line.strip_prefix("//!") else {
            continue;
        };
        let l = l.trim();
        if l.starts_with("layer  module") {
            inside = true;
            continue;
        }
        if inside && l.starts_with("```") {
            break;
        }
        if inside {
            let mut words = l.split_whitespace();
            let layer: usize = words.next().unwrap().parse().unwrap();
            let module = words.next().unwrap().to_string();
            let may: BTreeSet<String> = words.filter(|w| *w != "-").map(str::to_string).collect();
            out.push((layer, module, may));
        }
    }
    out
}

#[test]
fn the_layer_table_of_lib_rs_is_what_the_code_imports() {
    let g = graph();
    let table = declared();
    assert!(!table.is_empty(), "no layer table in src/lib.rs");
    let layer_of: BTreeMap<&str, usize> = table.iter().map(|(l, m, _)| (m.as_str(), *l)).collect();
    let mut problems = Vec::new();
    // every module of src/ has its line, and nothing else does
    for m in g.tops.keys().filter(|m| !m.is_empty()) {
        if !layer_of.contains_key(m.as_str()) {
            problems.push(format!("{m}: no line in lib.rs's layer table"));
        }
    }
    for (layer, m, may) in &table {
        let Some(actual) = g.tops.get(m) else {
            problems.push(format!("{m}: in the table but not a module of src/"));
            continue;
        };
        for a in actual.difference(may) {
            problems.push(format!("{m} imports {a}, which its line does not name"));
        }
        for d in may {
            match layer_of.get(d.as_str()) {
                Some(l) if l < layer => {}
                Some(l) => problems.push(format!(
                    "{m} (layer {layer}) may import {d} (layer {l}): not a lower layer"
                )),
                None => problems.push(format!("{m} names {d}, which has no line")),
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
