//! The tables of the human reports, drawn by one crate (comfy-table) in one style:
//! Markdown pipes, so that a report pastes into an issue or a note as a table; the first
//! column (the row names) left-aligned, every other (the figures) right-aligned.

use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

/// A table with these column headers.
pub fn table<S: AsRef<str>>(header: &[S]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().map(|h| h.as_ref().to_string()));
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// `t` as text ending in a line break.
pub fn text(t: &Table) -> String {
    format!("{t}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_with_numbers_right_aligned() {
        let mut t = table(&["engine", "ms"]);
        t.add_row(vec!["arbor", "1.5"]);
        t.add_row(vec!["blind", "12.25"]);
        let s = text(&t);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4, "{s}");
        assert!(lines.iter().all(|l| l.starts_with('|') && l.ends_with('|')), "{s}");
        // Right-aligned: both numbers end at the same column.
        let end = |l: &str, x: &str| l.find(x).map(|i| i + x.len());
        assert_eq!(end(lines[2], "1.5"), end(lines[3], "12.25"), "{s}");
    }
}
