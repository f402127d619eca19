//! The scaling figure (`lidb bench plot-scaling`, drawn by `scripts/scale.sh`): throughput
//! (kops/s, linear from 0) against threads (log2 scale), one panel per workload, one line per
//! engine or index, from the JSON rows of the benchmarks, plus a text summary of the same
//! figures. Pure: builds strings; the caller reads and writes the files. Any thread.
//!
//! Rows it reads (any other line is skipped), each giving (panel, series, threads, kops/s):
//! - `lidb bench concurrent`: `"row": "result"` and `"op": "all"`: panel "concurrent
//!   WORKLOAD" (skew adds its hotspot), series the index.
//! - `lidb bench ycsb`: rows with `phase` and `workload`, `"op": "all"`, of the last phase
//!   present for their (engine, workload, budget, threads): panel "ycsb WORKLOAD" (", --memory
//!   SIZE" under a budget), series the engine.
//! - `lidb bench btree`: rows with `experiment`, `"op": "read"`: panel "btree EXPERIMENT"
//!   ("(simulated)" for the paper's simulation), series the engine.
//! - anything else with `bench`, `workload`, `engine`, `threads` and `kops_per_s` (what
//!   `scripts/scale.sh` writes for `lidb serve` against redis-server): panel "BENCH WORKLOAD".
//!
//! Invariants: one `<g class="panel">` per panel in order of first appearance, and inside it
//! exactly one `<path class="series">` per series (engine); the points of a (panel, series,
//! threads) are one (for ycsb the latest phase, otherwise the last line read).

use std::fmt::Write;

use serde_json::Value;

use super::{COLOURS, Series, escape, nice_step, path_data, svg_open, trim_float};

const WIDTH: f64 = 820.0;
const PANEL_HEIGHT: f64 = 330.0;
const HEADER: f64 = 40.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// One panel of the figure: a workload, its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    /// Points are (threads, kops/s), sorted by threads.
    pub series: Vec<Series>,
}

/// One point read from a row, and its rank among duplicates (higher wins; ties: the later).
struct Point {
    panel: String,
    series: String,
    threads: f64,
    kops: f64,
    rank: u64,
}

fn text<'a>(row: &'a Value, field: &str) -> Option<&'a str> {
    row.get(field)?.as_str()
}

/// The point of `row`, if it is one of the kinds of the module doc.
fn point(row: &Value) -> Option<Point> {
    let threads = row.get("threads")?.as_f64()?;
    let kops = row.get("kops_per_s")?.as_f64()?;
    let op = text(row, "op");
    let (panel, series, rank) = if text(row, "row") == Some("result") {
        let hotspot = row
            .get("hotspot")
            .and_then(Value::as_f64)
            .map_or(String::new(), |h| format!(" hotspot {h}"));
        let panel = format!("concurrent {}{hotspot}", text(row, "workload")?);
        (op == Some("all")).then_some((panel, text(row, "index")?, 0))?
    } else if let Some(phase) = row.get("phase").and_then(Value::as_u64) {
        let budget = row
            .get("budget_bytes")
            .and_then(Value::as_u64)
            .map_or(String::new(), |b| {
                format!(", --memory {}", crate::lsm::load::format_size(b))
            });
        let panel = format!("ycsb {}{budget}", text(row, "workload")?);
        (op == Some("all")).then_some((panel, text(row, "engine")?, phase))?
    } else if let Some(experiment) = text(row, "experiment") {
        let simulated = row.get("simulated").and_then(Value::as_bool) == Some(true);
        let panel = format!(
            "btree {experiment}{}",
            if simulated { " (simulated)" } else { "" }
        );
        (op == Some("read")).then_some((panel, text(row, "engine")?, 0))?
    } else {
        let panel = format!("{} {}", text(row, "bench")?, text(row, "workload")?);
        (panel, text(row, "engine")?, 0)
    };
    Some(Point {
        panel,
        series: series.to_string(),
        threads,
        kops,
        rank,
    })
}

/// The panels of `rows` (see the module doc), in order of first appearance.
pub fn panels(rows: &[Value]) -> Vec<Panel> {
    let mut kept: Vec<Point> = Vec::new();
    for p in rows.iter().filter_map(point) {
        if !p.threads.is_finite() || !p.kops.is_finite() {
            continue;
        }
        let same = |q: &Point| q.panel == p.panel && q.series == p.series && q.threads == p.threads;
        match kept.iter_mut().find(|q| same(q)) {
            Some(q) if q.rank <= p.rank => *q = p,
            Some(_) => {}
            None => kept.push(p),
        }
    }
    // (panel title, its (series, threads, kops) triples).
    type Points = Vec<(String, f64, f64)>;
    let mut out: Vec<(String, Points)> = Vec::new();
    for p in kept {
        let triple = (p.series, p.threads, p.kops);
        match out.iter_mut().find(|(t, _)| *t == p.panel) {
            Some((_, points)) => points.push(triple),
            None => out.push((p.panel, vec![triple])),
        }
    }
    out.into_iter()
        .map(|(title, points)| Panel {
            title,
            series: super::group(&points),
        })
        .collect()
}

/// The thread counts of `panel`, ascending.
fn thread_counts(panel: &Panel) -> Vec<f64> {
    let mut xs: Vec<f64> = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs
}

/// The figures for people: per panel and series, kops/s at each thread count, and the top
/// count's figure over the 2-thread one (">= 0.9x" is what a read path without a shared write
/// should keep above the core count).
pub fn summary(panels: &[Panel]) -> String {
    let mut out = String::new();
    for panel in panels {
        let xs = thread_counts(panel);
        let top = xs.last().copied().unwrap_or(1.0);
        let heads: Vec<String> = xs.iter().map(|x| format!("{}t", trim_float(*x))).collect();
        let ratio_head = format!("{}t/2t", trim_float(top));
        let mut header: Vec<&str> = vec!["series"];
        header.extend(heads.iter().map(String::as_str));
        header.push(&ratio_head);
        let rows: Vec<Vec<String>> = panel
            .series
            .iter()
            .map(|s| {
                let at = |x: f64| s.points.iter().find(|p| p.0 == x).map(|p| p.1);
                let mut row = vec![s.name.clone()];
                row.extend(
                    xs.iter()
                        .map(|&x| at(x).map_or("-".into(), |k| format!("{k:.1}"))),
                );
                row.push(match (at(top), at(2.0)) {
                    (Some(t), Some(two)) if two > 0.0 => format!("{:.2}x", t / two),
                    _ => "-".into(),
                });
                row
            })
            .collect();
        let _ = writeln!(out, "# {} (kops/s)", panel.title);
        out.push_str(&crate::table::render(&header, &rows));
    }
    out
}

/// The SVG document: `title`, then the panels one under another.
pub fn scaling_svg(title: &str, panels: &[Panel]) -> String {
    let height = HEADER + PANEL_HEIGHT * panels.len().max(1) as f64;
    let mut s = svg_open(WIDTH, height, title, 14);
    for (i, panel) in panels.iter().enumerate() {
        draw_panel(&mut s, panel, HEADER + PANEL_HEIGHT * i as f64);
    }
    s.push_str("</svg>\n");
    s
}

/// One panel whose box starts `top` pixels down.
fn draw_panel(s: &mut String, panel: &Panel, top: f64) {
    let xs = thread_counts(panel);
    let lo = xs.first().copied().unwrap_or(1.0).max(1.0).log2();
    let hi = xs
        .last()
        .copied()
        .unwrap_or(2.0)
        .max(1.0)
        .log2()
        .max(lo + 1.0);
    let ymax = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let step = nice_step(if ymax > 0.0 { ymax } else { 1.0 });
    let ytop = ((ymax / step).ceil() * step).max(step);
    let pw = WIDTH - LEFT - RIGHT;
    let ph = PANEL_HEIGHT - TOP - BOTTOM;
    let y0 = top + TOP;
    let sx = |x: f64| LEFT + (x.max(1.0).log2() - lo) / (hi - lo) * pw;
    let sy = |y: f64| y0 + ph - (y / ytop) * ph;
    let _ = writeln!(
        s,
        r#"<g class="panel"><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13">{}</text>
<g class="axes" stroke="black" fill="none"><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/><line x1="{LEFT}" y1="{y0:.1}" x2="{LEFT}" y2="{:.1}"/></g>"#,
        LEFT + pw / 2.0,
        top + 25.0,
        escape(&panel.title),
        y0 + ph,
        LEFT + pw,
        y0 + ph,
        y0 + ph
    );
    for &x in &xs {
        let px = sx(x);
        let _ = writeln!(
            s,
            r##"<line x1="{px:.1}" y1="{y0:.1}" x2="{px:.1}" y2="{:.1}" stroke="#e0e0e0"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            y0 + ph,
            y0 + ph + 18.0,
            trim_float(x)
        );
    }
    let mut tick = 0.0;
    while tick <= ytop + step / 2.0 {
        let py = sy(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 8.0,
            py + 4.0,
            trim_float(tick)
        );
        tick += step;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">threads (log scale)</text>
<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">kops/s</text>"#,
        LEFT + pw / 2.0,
        y0 + ph + 38.0,
        y0 + ph / 2.0,
        y0 + ph / 2.0
    );
    for (i, ser) in panel.series.iter().enumerate() {
        let colour = COLOURS.get(i % COLOURS.len()).copied().unwrap_or("black");
        let d = path_data(&ser.points, sx, sy);
        let name = escape(&ser.name);
        let _ = writeln!(
            s,
            r#"<path class="series" d="{}" stroke="{colour}" stroke-width="2" fill="none"><title>{name}</title></path>"#,
            d.trim_end()
        );
        for &(x, y) in &ser.points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{colour}"><title>{name}: {} threads, {y:.1} kops/s</title></circle>"#,
                sx(x),
                sy(y),
                trim_float(x)
            );
        }
        let ly = y0 + 10.0 + 18.0 * i as f64;
        let lx = WIDTH - RIGHT + 20.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly:.1}" x2="{}" y2="{ly:.1}" stroke="{colour}" stroke-width="2"/><text x="{}" y="{:.1}">{name}</text>"#,
            lx + 24.0,
            lx + 30.0,
            ly + 4.0
        );
    }
    s.push_str("</g>\n");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::xml::well_formed;
    use super::*;

    fn ycsb(engine: &str, threads: u64, phase: u64, kops: f64) -> Value {
        ycsb_with(engine, threads, phase, kops, "all", None)
    }

    fn ycsb_with(
        engine: &str,
        threads: u64,
        phase: u64,
        kops: f64,
        op: &str,
        budget: Option<u64>,
    ) -> Value {
        json!({"engine": engine, "workload": "c", "threads": threads, "phase": phase,
               "op": op, "kops_per_s": kops, "budget_bytes": budget, "scaling": null})
    }

    #[test]
    fn one_series_per_engine_in_a_well_formed_svg() {
        let mut rows = Vec::new();
        for engine in ["lsm", "learnedkv", "finedex <&>"] {
            for threads in [1, 2, 16] {
                // P0 and P1 must give way to the last phase; an op row is not "all".
                for phase in 0..=2 {
                    rows.push(ycsb(engine, threads, phase, (threads * 10 + phase) as f64));
                }
                rows.push(ycsb_with(engine, threads, 2, 1e9, "read", None));
            }
        }
        rows.push(ycsb_with("lsm", 1, 1, 5.0, "all", Some(64 << 20)));
        rows.push(
            json!({"row": "result", "index": "skipmap", "workload": "a", "threads": 2,
                         "op": "all", "kops_per_s": 900.0, "hotspot": null}),
        );
        rows.push(
            json!({"bench": "serve", "workload": "get", "engine": "redis",
                         "threads": 8, "kops_per_s": 120.0}),
        );
        rows.push(json!({"unrelated": true}));
        let panels = panels(&rows);
        let titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "ycsb c",
                "ycsb c, --memory 64MiB",
                "concurrent a",
                "serve get"
            ]
        );
        let first = panels.first().map(|p| p.series.clone()).unwrap_or_default();
        let names: Vec<&str> = first.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["lsm", "learnedkv", "finedex <&>"]);
        for s in &first {
            // The last phase (2) of each thread count: threads * 10 + 2.
            let want: Vec<(f64, f64)> = [1.0, 2.0, 16.0]
                .iter()
                .map(|&t| (t, t * 10.0 + 2.0))
                .collect();
            assert_eq!(s.points, want, "{}", s.name);
        }
        let svg = scaling_svg("scaling & more", &panels);
        assert_eq!(well_formed(&svg), Ok(()));
        assert_eq!(svg.matches(r#"<g class="panel">"#).count(), 4);
        // 3 engines of ycsb c, then one series in each other panel.
        assert_eq!(svg.matches(r#"<path class="series""#).count(), 6);
        assert!(svg.contains("finedex &lt;&amp;&gt;") && !svg.contains("finedex <&>"));
        let table = summary(&panels);
        assert!(table.contains("# ycsb c (kops/s)"), "{table}");
        // lsm: 162 kops at 16 threads over 22 at 2.
        assert!(table.contains("7.36x"), "{table}");
    }

    #[test]
    fn no_rows_is_still_a_document() {
        let svg = scaling_svg("nothing", &panels(&[]));
        assert_eq!(well_formed(&svg), Ok(()));
        assert_eq!(svg.matches("<path").count(), 0);
        assert_eq!(summary(&[]), "");
    }
}
