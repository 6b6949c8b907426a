//! Go's `text/tabwriter` (flags 0, pad character ' '), which kubectl prints tables and
//! descriptions through: cells end at a `\t`; a column is as wide as its widest cell in a
//! block of consecutive lines that have it, plus `padding`, and at least `min_width`; the
//! text after a line's last tab is not a column and is not padded.
//! kubectl: `get` uses (min 6, padding 3), `describe` (min 0, padding 2).

/// Aligns `text` as Go's tabwriter would.
pub(crate) fn align(text: &str, min_width: usize, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text
        .split_inclusive('\n')
        .map(|l| l.strip_suffix('\n').unwrap_or(l).split('\t').collect())
        .collect();
    let ends_with_newline = text.ends_with('\n');
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut widths = Vec::new();
    format(
        &lines,
        0,
        lines.len(),
        &mut widths,
        min_width,
        padding,
        &mut out,
    );
    if !ends_with_newline && out.ends_with('\n') {
        out.pop();
    }
    out
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Go: `Writer.format` — the column `widths.len()` of lines `line0..line1`.
fn format(
    lines: &[Vec<&str>],
    mut line0: usize,
    line1: usize,
    widths: &mut Vec<usize>,
    min_width: usize,
    padding: usize,
    out: &mut String,
) {
    let column = widths.len();
    let mut this = line0;
    while this < line1 {
        if column + 1 >= lines[this].len() {
            this += 1;
            continue;
        }
        write_lines(&lines[line0..this], widths, out);
        line0 = this;
        let mut w = min_width;
        while this < line1 && column + 1 < lines[this].len() {
            w = w.max(width(lines[this][column]) + padding);
            this += 1;
        }
        widths.push(w);
        format(lines, line0, this, widths, min_width, padding, out);
        widths.pop();
        line0 = this;
    }
    write_lines(&lines[line0..line1], widths, out);
}

fn write_lines(lines: &[Vec<&str>], widths: &[usize], out: &mut String) {
    for cells in lines {
        for (j, cell) in cells.iter().enumerate() {
            out.push_str(cell);
            if j < widths.len() && j + 1 < cells.len() {
                for _ in width(cell)..widths[j] {
                    out.push(' ');
                }
            }
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::align;

    #[test]
    fn columns_are_as_wide_as_their_block() {
        assert_eq!(
            align("NAME\tREADY\tAGE\nweb-node\t1/1\t5s\n", 6, 3),
            "NAME       READY   AGE\nweb-node   1/1     5s\n"
        );
        // A line without a tab ends the block: the next block aligns on its own.
        assert_eq!(
            align(
                "Name:\tx\nIP:\t1\nContainers:\n  c:\n    Image:\tbusybox\n",
                0,
                2
            ),
            "Name:  x\nIP:    1\nContainers:\n  c:\n    Image:  busybox\n"
        );
        // min width
        assert_eq!(align("a\tb\n", 6, 3), "a     b\n");
        assert_eq!(align("x", 0, 2), "x");
    }
}
