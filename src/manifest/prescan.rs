//! A linear pre-scan of a manifest's bytes, before any YAML or JSON parser sees them.
//!
//! Why: the YAML parser's cost is not linear in its input. 400 KB of nested flow sequences
//! (`[[[[…`) kept libyaml busy for 95 s before the deserializer's recursion limit answered,
//! stalling every other manifest behind it. A Pod is a shallow object (its deepest real
//! paths, e.g. `spec.affinity.nodeAffinity.…matchExpressions[].values[]`, are about a dozen
//! levels) with at most a few thousand keys, so a manifest nested deeper than
//! [`MAX_DEPTH`] or with more than [`MAX_NODES`] keys and items is refused here, in
//! one pass over the bytes, with the line where the limit was crossed.
//!
//! The scan is a conservative approximation of YAML's structure (JSON is YAML's flow
//! subset), not a parser: it follows quoted scalars, comments, block scalars (`|`, `>`),
//! flow collections and block indentation, and counts every key (`: `), sequence item
//! (`- `), flow entry (`,`) and collection opening. An alias (`*name`) counts as what it
//! expands to: the nodes of its anchored node (`&name`, which ends where its flow entry or
//! its block ends), so a "billion laughs" document is refused by its expanded size. Brackets inside a
//! plain scalar in block context (`echo {a}`) are text, as in YAML. What it may get wrong
//! on unusual but valid input only ever adds a level or a node, far below the limits.

/// Deeper nesting than this is refused (serde's own recursion limit is 128).
pub(crate) const MAX_DEPTH: usize = 64;
/// More keys, items and flow entries (aliases counted as what they expand to) than this
/// are refused. The largest real Pods have a few thousand; the YAML parser takes ~35 ms for
/// 20,000 keys on an x86 VM, so this also bounds what a file that passes can cost.
pub(crate) const MAX_NODES: usize = 20_000;

/// A limit the document crossed: `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    Depth { line: usize },
    Nodes { line: usize },
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Depth { line } => write!(
                f,
                "nested deeper than {MAX_DEPTH} levels at line {line}: not a Pod manifest"
            ),
            Limit::Nodes { line } => write!(
                f,
                "more than {MAX_NODES} keys and list items, counting what aliases expand to (at line {line}): not a Pod manifest"
            ),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    Double,
    Single,
}

/// Scans `bytes` once; `Err` names the first limit crossed.
pub fn check(bytes: &[u8]) -> Result<(), Limit> {
    Scan::default().run(bytes)
}

#[derive(Default)]
struct Scan {
    line: usize,
    nodes: usize,
    flow: usize,
    /// Indentation columns of the open block collections.
    blocks: Vec<usize>,
    /// Inside a block scalar whose header line had this indentation.
    block_scalar: Option<usize>,
    quote: Option<Quote>,
    /// Expanded node counts of closed anchors.
    anchors: std::collections::HashMap<Vec<u8>, usize>,
    /// Anchored nodes still open, innermost last.
    open: Vec<OpenAnchor>,
}

struct OpenAnchor {
    name: Vec<u8>,
    /// `nodes` when the anchor appeared.
    start: usize,
    /// The flow depth it appeared at; at depth 0 it ends with its block (`indent`).
    flow: usize,
    indent: usize,
}

impl Scan {
    fn node(&mut self) -> Result<(), Limit> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(Limit::Nodes { line: self.line });
        }
        Ok(())
    }

    /// An alias: as many nodes as its anchor expands to.
    fn alias(&mut self, name: &[u8]) -> Result<(), Limit> {
        let n = self.anchors.get(name).copied().unwrap_or(0);
        self.nodes = self.nodes.saturating_add(n);
        self.node()
    }

    /// Closes the open anchors for which `done` holds (innermost first).
    fn close_anchors(&mut self, done: impl Fn(&OpenAnchor) -> bool) {
        while let Some(a) = self.open.last() {
            if !done(a) {
                break;
            }
            let a = self.open.pop().expect("checked");
            self.anchors.insert(a.name, self.nodes - a.start);
        }
    }

    fn depth(&self, extra: usize) -> Result<(), Limit> {
        if self.flow + self.blocks.len() + extra > MAX_DEPTH {
            return Err(Limit::Depth { line: self.line });
        }
        Ok(())
    }

    fn run(mut self, bytes: &[u8]) -> Result<(), Limit> {
        for line in bytes.split(|b| *b == b'\n') {
            self.line += 1;
            self.scan_line(line)?;
        }
        Ok(())
    }

    fn scan_line(&mut self, line: &[u8]) -> Result<(), Limit> {
        let indent = line.iter().take_while(|b| **b == b' ').count();
        let rest = &line[indent..];
        let blank = rest.iter().all(u8::is_ascii_whitespace);
        let mut i = indent;
        if self.quote.is_none() {
            if let Some(parent) = self.block_scalar {
                if blank || indent > parent {
                    return Ok(()); // block scalar content: text
                }
                self.block_scalar = None;
            }
            if blank || rest.first() == Some(&b'#') {
                return Ok(());
            }
            if self.flow == 0 {
                // A block-level anchored node ends at a line indented no deeper than its own.
                self.close_anchors(|a| a.flow == 0 && indent <= a.indent);
                // Block structure: indentation opens and closes collections.
                while self.blocks.last().is_some_and(|top| *top > indent) {
                    self.blocks.pop();
                }
                if self.blocks.last().is_none_or(|top| *top < indent) {
                    self.blocks.push(indent);
                    self.depth(0)?;
                }
                // Compact nesting on one line: `- - - x`, `? ? x`.
                let mut inline = 0;
                while i < line.len()
                    && matches!(line[i], b'-' | b'?')
                    && line.get(i + 1).is_none_or(|b| *b == b' ' || *b == b'\t')
                {
                    inline += 1;
                    self.node()?;
                    self.depth(inline)?;
                    i += 2;
                    while line.get(i) == Some(&b' ') {
                        i += 1;
                    }
                }
            }
        }
        // `prev`: the last byte that decides whether a scalar may start here.
        let mut prev = b' ';
        while i < line.len() {
            let b = line[i];
            if let Some(q) = self.quote {
                match (q, b) {
                    (Quote::Double, b'\\') => i += 1,
                    (Quote::Double, b'"') => self.quote = None,
                    (Quote::Single, b'\'') if line.get(i + 1) == Some(&b'\'') => i += 1,
                    (Quote::Single, b'\'') => self.quote = None,
                    _ => {}
                }
                i += 1;
                prev = b'x';
                continue;
            }
            let at_start = matches!(prev, b' ' | b'\t' | b'[' | b'{' | b',');
            match b {
                b'#' if matches!(prev, b' ' | b'\t') => return Ok(()), // comment
                b'"' if at_start || self.flow > 0 => self.quote = Some(Quote::Double),
                b'\'' if at_start || self.flow > 0 => self.quote = Some(Quote::Single),
                b'[' | b'{' if at_start || self.flow > 0 => {
                    self.flow += 1;
                    self.node()?;
                    self.depth(0)?;
                }
                b']' | b'}' if self.flow > 0 => {
                    let depth = self.flow;
                    self.close_anchors(|a| a.flow == depth);
                    self.flow -= 1;
                }
                b',' if self.flow > 0 => {
                    let depth = self.flow;
                    self.close_anchors(|a| a.flow == depth);
                    self.node()?;
                }
                b'&' | b'*' if at_start || self.flow > 0 => {
                    let end = line[i + 1..]
                        .iter()
                        .position(|c| {
                            matches!(c, b' ' | b'\t' | b'\r' | b',' | b'[' | b']' | b'{' | b'}')
                        })
                        .map_or(line.len(), |p| i + 1 + p);
                    let name = &line[i + 1..end];
                    if b == b'&' {
                        self.open.push(OpenAnchor {
                            name: name.to_vec(),
                            start: self.nodes,
                            flow: self.flow,
                            indent,
                        });
                    } else {
                        self.alias(name)?;
                    }
                    i = end;
                    prev = b'x';
                    continue;
                }
                b':' if line
                    .get(i + 1)
                    .is_none_or(|n| matches!(n, b' ' | b'\t' | b'\r' | b',' | b']' | b'}')) =>
                {
                    self.node()?;
                }
                b'|' | b'>' if at_start && self.flow == 0 && is_block_header(&line[i + 1..]) => {
                    self.block_scalar = Some(indent);
                    return Ok(());
                }
                _ => {}
            }
            prev = b;
            i += 1;
        }
        Ok(())
    }
}

/// The rest of a block scalar header line: indicators (`-`, `+`, a digit), then nothing or
/// a comment.
fn is_block_header(rest: &[u8]) -> bool {
    let end = rest
        .iter()
        .position(|b| !matches!(b, b'-' | b'+' | b'0'..=b'9'))
        .unwrap_or(rest.len());
    let tail = &rest[end..];
    let tail = &tail[tail.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    tail.is_empty() || tail[0] == b'#'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_manifests_pass() {
        let ok = [
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: x\n",
            // block scalars hold any text, brackets and quotes included
            "spec:\n  containers:\n  - args:\n    - |\n      if [ -f x ]; then echo \"[\"; fi\n      {{{{{{{{\n    - >-\n      [[[[[[[[[[\n",
            // plain scalars with brackets and apostrophes in block context are text
            "a: echo {b\nc: don't [x\nd: it's\n",
            // JSON
            "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"spec\": {\"containers\": [{\"name\": \"c\", \"args\": [\"[[[[\", \"]]\"]}]}}",
            // quotes across lines, escapes, comments
            "a: \"multi\n  line \\\" [[[[\"\nb: 'it''s [[['\nc: x # [[[[[[\n",
        ];
        for doc in ok {
            assert_eq!(check(doc.as_bytes()), Ok(()), "{doc}");
        }
    }

    #[test]
    fn deep_flow_nesting_is_refused_at_its_line() {
        let doc = format!(
            "apiVersion: v1\nspec: {{containers: {}",
            "[".repeat(200_000)
        );
        assert_eq!(check(doc.as_bytes()), Err(Limit::Depth { line: 2 }));
        let ok = format!(
            "a: {}{}",
            "[".repeat(MAX_DEPTH - 2),
            "]".repeat(MAX_DEPTH - 2)
        );
        assert_eq!(check(ok.as_bytes()), Ok(()));
    }

    #[test]
    fn deep_block_nesting_is_refused() {
        // compact sequences on one line
        let doc = format!("a:\n  {}x\n", "- ".repeat(100));
        assert_eq!(check(doc.as_bytes()), Err(Limit::Depth { line: 2 }));
        // indentation
        let mut doc = String::new();
        for level in 0..100 {
            doc.push_str(&" ".repeat(level));
            doc.push_str("k:\n");
        }
        assert!(matches!(check(doc.as_bytes()), Err(Limit::Depth { .. })));
    }

    #[test]
    fn too_many_nodes_are_refused() {
        let doc: String = (0..MAX_NODES + 1).map(|i| format!("k{i}: v\n")).collect();
        assert_eq!(
            check(doc.as_bytes()),
            Err(Limit::Nodes {
                line: MAX_NODES + 1
            })
        );
        let laughs = format!("a: &a [x]\nb: [{}]\n", "*a, ".repeat(MAX_NODES));
        assert!(matches!(check(laughs.as_bytes()), Err(Limit::Nodes { .. })));
    }

    #[test]
    fn aliases_count_what_they_expand_to() {
        // Billion laughs: 9 levels of 9 references, a few hundred bytes.
        let mut doc = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        for w in names.windows(2) {
            let refs = vec![format!("*{}", w[0]); 9].join(", ");
            doc.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
        }
        assert!(doc.len() < 1000);
        assert!(
            matches!(check(doc.as_bytes()), Err(Limit::Nodes { .. })),
            "{doc}"
        );
        // The same in block style, and nested in flow mappings.
        let mut doc = String::from("a: &a\n  - lol\n  - lol\n  - lol\n  - lol\n");
        for w in names.windows(2) {
            doc.push_str(&format!("{}: &{}\n", w[1], w[1]));
            for _ in 0..9 {
                doc.push_str(&format!("  - *{}\n", w[0]));
            }
        }
        assert!(
            matches!(check(doc.as_bytes()), Err(Limit::Nodes { .. })),
            "{doc}"
        );
        let doc = format!(
            "x: {{a: &a [1, 2]{}}}\n",
            ", b: [*a, *a, *a, *a, *a, *a, *a, *a]".repeat(3)
        );
        assert_eq!(check(doc.as_bytes()), Ok(()));
        // Ordinary reuse is fine.
        let env = "spec:\n  containers:\n  - name: a\n    env: &env\n    - name: X\n      value: \"1\"\n  - name: b\n    env: *env\n";
        assert_eq!(check(env.as_bytes()), Ok(()));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in 0..2000 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let alphabet = b"[]{}:,-? \n\"'\\#|>*&x";
                    alphabet[(seed % alphabet.len() as u64) as usize]
                })
                .collect();
            let _ = check(&bytes);
        }
    }
}
