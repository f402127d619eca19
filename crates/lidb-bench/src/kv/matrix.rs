//! The YCSB matrix's summary: one cell per (engine, threads) and (workload, distribution), the
//! engine's throughput in the last phase (every op type together) over the anchor engine's in
//! the same cell, as a table and as an SVG heat map. Pure: reads rows, builds strings. Any
//! thread.
//!
//! Invariants: a cell exists only where both the engine and the anchor ran that workload,
//! distribution and thread count (a ratio is never made up); the anchor itself gets no cell;
//! columns keep the order the rows first name them in, engines the order of the rows.

use std::fmt::Write;

use super::ycsb::YcsbRow;
use crate::plot::{escape, svg_open};

/// One engine against the anchor in one (workload, distribution, threads).
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub engine: String,
    pub threads: u32,
    pub workload: String,
    pub distribution: String,
    pub kops_per_s: f64,
    pub anchor_kops_per_s: f64,
    /// kops_per_s over anchor_kops_per_s.
    pub ratio: f64,
}

/// The last phase's "all" row of each (engine, workload, distribution, threads) of `rows`, over
/// `anchor`'s, for every engine but the anchor.
pub fn cells(rows: &[YcsbRow], anchor: &str) -> Vec<Cell> {
    let last_phase = rows.iter().map(|r| r.phase).max().unwrap_or(0);
    let finals: Vec<&YcsbRow> = rows
        .iter()
        .filter(|r| r.op == "all" && r.phase == last_phase)
        .collect();
    let mut out = Vec::new();
    for r in &finals {
        if r.engine == anchor {
            continue;
        }
        let base = finals.iter().find(|a| {
            a.engine == anchor
                && a.workload == r.workload
                && a.distribution == r.distribution
                && a.threads == r.threads
        });
        if let Some(a) = base.filter(|a| a.kops_per_s > 0.0) {
            out.push(Cell {
                engine: r.engine.clone(),
                threads: r.threads,
                workload: r.workload.clone(),
                distribution: r.distribution.clone(),
                kops_per_s: r.kops_per_s,
                anchor_kops_per_s: a.kops_per_s,
                ratio: r.kops_per_s / a.kops_per_s,
            });
        }
    }
    out
}

/// A column: (workload, distribution).
type Column = (String, String);
/// A line: (engine, threads).
type Line = (String, u32);

/// The columns and the lines, in first-seen order.
fn axes(cells: &[Cell]) -> (Vec<Column>, Vec<Line>) {
    let mut cols: Vec<Column> = Vec::new();
    let mut rows: Vec<Line> = Vec::new();
    for c in cells {
        let col = (c.workload.clone(), c.distribution.clone());
        if !cols.contains(&col) {
            cols.push(col);
        }
        let row = (c.engine.clone(), c.threads);
        if !rows.contains(&row) {
            rows.push(row);
        }
    }
    (cols, rows)
}

fn find<'a>(cells: &'a [Cell], row: &Line, col: &Column) -> Option<&'a Cell> {
    cells.iter().find(|c| {
        c.engine == row.0 && c.threads == row.1 && c.workload == col.0 && c.distribution == col.1
    })
}

/// The summary for people: one line per (engine, threads), one column per (workload,
/// distribution), each cell the ratio to the anchor ("-" where either did not run).
pub fn table(cells: &[Cell], anchor: &str) -> String {
    let (cols, rows) = axes(cells);
    let header: Vec<String> = ["engine".to_string(), "threads".to_string()]
        .into_iter()
        .chain(cols.iter().map(|(w, d)| format!("{w}/{d}")))
        .collect();
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            [row.0.clone(), row.1.to_string()]
                .into_iter()
                .chain(cols.iter().map(|col| {
                    find(cells, row, col).map_or("-".into(), |c| format!("{:.2}", c.ratio))
                }))
                .collect()
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    format!(
        "# summary: last phase's throughput (all op types) over {anchor}'s in the same workload, \
         distribution and thread count\n{}",
        crate::table::render(&header, &body)
    )
}

/// The colour of a ratio: red below 1 (the anchor is faster), green above, white at 1, full
/// strength at 4x either way (log scale).
fn heat(ratio: f64) -> String {
    let t = (ratio.max(1e-6).log2() / 2.0).clamp(-1.0, 1.0);
    let fade = |strength: f64| (255.0 - 155.0 * strength).round() as u8;
    let (r, g, b) = if t < 0.0 {
        (255, fade(-t), fade(-t))
    } else {
        (fade(t), 255, fade(t))
    };
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// The summary as a heat map: a grid of cells coloured by the ratio (see [`heat`]), each with
/// its ratio written in it and both throughputs in its tooltip.
pub fn heatmap_svg(title: &str, cells: &[Cell], anchor: &str) -> String {
    let (cols, rows) = axes(cells);
    let (left, top, cw, ch) = (170.0, 80.0, 92.0, 34.0);
    let width = left + cw * cols.len().max(1) as f64 + 30.0;
    let height = top + ch * rows.len().max(1) as f64 + 50.0;
    let mut s = svg_open(width.max(420.0), height, title, 14);
    for (j, (w, d)) in cols.iter().enumerate() {
        let x = left + cw * j as f64 + cw / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
            top - 22.0,
            escape(&w.to_uppercase()),
            top - 8.0,
            escape(d)
        );
    }
    for (i, row) in rows.iter().enumerate() {
        let y = top + ch * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{} ({} thr.)</text>"#,
            left - 8.0,
            y + ch / 2.0 + 5.0,
            escape(&row.0),
            row.1
        );
        for (j, col) in cols.iter().enumerate() {
            let x = left + cw * j as f64;
            let Some(c) = find(cells, row, col) else {
                continue;
            };
            let _ = writeln!(
                s,
                r##"<rect class="cell" x="{x:.1}" y="{y:.1}" width="{cw}" height="{ch}" fill="{}" stroke="#ffffff"><title>{}: {:.1} kops/s, {}: {:.1} kops/s</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle">{:.2}</text>"##,
                heat(c.ratio),
                escape(&c.engine),
                c.kops_per_s,
                escape(anchor),
                c.anchor_kops_per_s,
                x + cw / 2.0,
                y + ch / 2.0 + 5.0,
                c.ratio
            );
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="{:.1}" font-size="11">throughput over {}'s in the same cell: green faster, red slower</text>"#,
        height - 18.0,
        escape(anchor)
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn row(engine: &str, workload: &str, dist: &str, phase: u32, op: &str, kops: f64) -> YcsbRow {
        YcsbRow {
            engine: engine.into(),
            workload: workload.into(),
            distribution: dist.into(),
            phase,
            op: op.into(),
            kops_per_s: kops,
            ..YcsbRow::default()
        }
    }

    fn rows() -> Vec<YcsbRow> {
        vec![
            row("rocksdb", "a", "zipfian:0.99", 1, "all", 100.0),
            row("rocksdb", "a", "zipfian:0.99", 2, "all", 200.0),
            row("rocksdb", "a", "zipfian:0.99", 2, "read", 999.0),
            row("lsm", "a", "zipfian:0.99", 1, "all", 50.0),
            row("lsm", "a", "zipfian:0.99", 2, "all", 300.0),
            row("lsm", "c", "uniform", 2, "all", 80.0),
            row("rocksdb", "c", "uniform", 2, "all", 160.0),
            // No anchor for this cell: no ratio is made up.
            row("lsm", "e", "uniform", 2, "all", 10.0),
        ]
    }

    #[test]
    fn a_cell_is_the_last_phase_over_the_anchor_in_the_same_workload_and_distribution() {
        let cells = cells(&rows(), "rocksdb");
        assert_eq!(cells.len(), 2, "{cells:?}");
        assert_eq!(cells[0].workload, "a");
        assert!((cells[0].ratio - 1.5).abs() < 1e-9);
        assert_eq!(cells[1].workload, "c");
        assert!((cells[1].ratio - 0.5).abs() < 1e-9);
        assert!(cells.iter().all(|c| c.engine == "lsm"));
    }

    #[test]
    fn the_table_has_a_column_per_workload_and_distribution() {
        let text = table(&cells(&rows(), "rocksdb"), "rocksdb");
        assert!(text.contains("a/zipfian:0.99"), "{text}");
        assert!(text.contains("c/uniform"), "{text}");
        assert!(!text.contains("e/uniform"), "{text}");
        assert!(text.contains("1.50") && text.contains("0.50"), "{text}");
    }

    #[test]
    fn the_heat_map_has_one_cell_per_ratio_and_colours_by_side_of_one() {
        let svg = heatmap_svg("t <&>", &cells(&rows(), "rocksdb"), "rocksdb");
        assert_eq!(svg.matches(r#"class="cell""#).count(), 2);
        assert!(svg.contains("t &lt;&amp;&gt;"));
        assert_eq!(heat(1.0), "#ffffff", "even is white");
        let (slower, faster) = (heat(0.5), heat(2.0));
        assert!(
            slower.starts_with("#ff") && !slower.starts_with("#ffff"),
            "{slower}"
        );
        assert!(
            faster.get(3..5) == Some("ff") && !faster.starts_with("#ff"),
            "{faster}"
        );
        assert_eq!(heat(100.0), heat(4.0), "full strength at 4x");
    }
}
