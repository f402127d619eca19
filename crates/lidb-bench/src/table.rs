//! Plain-text tables for people: right-aligned columns sized to their widest cell.

/// Renders a header and rows as aligned columns separated by two spaces.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let parts: Vec<String> = cells
            .zip(&widths)
            .map(|(c, &w)| format!("{c:>w$}"))
            .collect();
        parts.join("  ")
    };
    let mut out = line(&mut header.iter().copied());
    out.push('\n');
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_align_to_the_widest_cell() {
        let t = super::render(&["a", "bbb"], &[vec!["1000".into(), "2".into()]]);
        assert_eq!(t, "   a  bbb\n1000    2\n");
    }
}
