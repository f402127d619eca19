//! The results page's plots, with the hand-written SVG helpers of [`crate::plot`]: the index
//! families as one labelled point each (lookup ns against bytes per key, log x), and horizontal
//! bars of throughput (one bar per engine or index of one run). Pure: builds strings. Any thread.
//!
//! Invariants: the output is well-formed XML (every text escaped); one `<circle class="point">`
//! per finite point and one `<rect class="bar">` per finite bar, in input order.

use std::fmt::Write;

use crate::plot::{COLOURS, escape, nice_step, svg_open, trim_float};

const WIDTH: f64 = 820.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

fn colour(i: usize) -> &'static str {
    COLOURS.get(i % COLOURS.len()).copied().unwrap_or("black")
}

/// One point per (name, bytes per key, lookup ns): x log scale (clamped to >= 0.01 B/key so
/// binary search's zero bytes still shows), y linear from 0.
pub fn families_svg(title: &str, points: &[(String, f64, f64)]) -> String {
    let pts: Vec<(&str, f64, f64)> = points
        .iter()
        .filter(|p| p.1.is_finite() && p.2.is_finite())
        .map(|p| (p.0.as_str(), p.1.max(0.01), p.2))
        .collect();
    let xmin = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let xmax = pts.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let ymax = pts.iter().map(|p| p.2).fold(0.0f64, f64::max);
    let (d0, d1) = if xmin.is_finite() {
        let d0 = xmin.log10().floor() as i32;
        (d0, (xmax.log10().ceil() as i32).max(d0 + 1))
    } else {
        (0, 1)
    };
    let step = nice_step(if ymax > 0.0 { ymax } else { 1.0 });
    let ytop = ((ymax / step).ceil() * step).max(step);
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let sx = |x: f64| LEFT + (x.log10() - f64::from(d0)) / f64::from(d1 - d0) * pw;
    let sy = |y: f64| TOP + ph - y / ytop * ph;
    let mut s = svg_open(WIDTH, HEIGHT, title, 14);
    axes(
        &mut s,
        pw,
        ph,
        "bytes per key (log scale)",
        "mean lookup (ns)",
    );
    for d in d0..=d1 {
        let x = sx(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#e0e0e0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + ph,
            TOP + ph + 18.0,
            trim_float(10f64.powi(d))
        );
    }
    y_ticks(&mut s, ytop, step, pw, sy);
    for (i, (name, x, y)) in pts.iter().enumerate() {
        let (cx, cy) = (sx(*x), sy(*y));
        let name = escape(name);
        let _ = writeln!(
            s,
            r#"<circle class="point" cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{}"><title>{name}: {x:.2} B/key, {y:.1} ns</title></circle><text x="{:.1}" y="{:.1}">{name}</text>"#,
            colour(i),
            cx + 7.0,
            cy - 6.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One horizontal bar per (label, value), value axis linear from 0 in `unit`.
pub fn bars_svg(title: &str, unit: &str, bars: &[(String, f64)]) -> String {
    let bars: Vec<&(String, f64)> = bars.iter().filter(|b| b.1.is_finite()).collect();
    let row = 26.0;
    let height = TOP + BOTTOM + row * bars.len().max(1) as f64;
    let left = 200.0;
    let pw = WIDTH - left - RIGHT;
    let vmax = bars.iter().map(|b| b.1).fold(0.0f64, f64::max);
    let step = nice_step(if vmax > 0.0 { vmax } else { 1.0 });
    let top = ((vmax / step).ceil() * step).max(step);
    let sx = |v: f64| left + v.max(0.0) / top * pw;
    let base = height - BOTTOM;
    let mut s = svg_open(WIDTH, height, title, 14);
    let _ = writeln!(
        s,
        r#"<g class="axes" stroke="black"><line x1="{left}" y1="{TOP}" x2="{left}" y2="{base}"/><line x1="{left}" y1="{base}" x2="{:.1}" y2="{base}"/></g>
<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        left + pw,
        left + pw / 2.0,
        height - 15.0,
        escape(unit)
    );
    let mut tick = 0.0;
    while tick <= top + step / 2.0 {
        let x = sx(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{base}" stroke="#e0e0e0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            base + 18.0,
            trim_float(tick)
        );
        tick += step;
    }
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = TOP + row * i as f64 + 4.0;
        let label = escape(label);
        let _ = writeln!(
            s,
            r#"<rect class="bar" x="{left}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{label}: {v:.1}</title></rect><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text><text x="{:.1}" y="{:.1}">{}</text>"#,
            sx(*v) - left,
            row - 8.0,
            colour(i),
            left - 6.0,
            y + 13.0,
            sx(*v) + 4.0,
            y + 13.0,
            trim_float(*v)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn axes(s: &mut String, pw: f64, ph: f64, x_label: &str, y_label: &str) {
    let _ = writeln!(
        s,
        r#"<g class="axes" stroke="black"><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/></g>
<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>
<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">{}</text>"#,
        TOP + ph,
        TOP + ph,
        LEFT + pw,
        TOP + ph,
        LEFT + pw / 2.0,
        HEIGHT - 15.0,
        escape(x_label),
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        escape(y_label)
    );
}

fn y_ticks(s: &mut String, ytop: f64, step: f64, pw: f64, sy: impl Fn(f64) -> f64) {
    let mut tick = 0.0;
    while tick <= ytop + step / 2.0 {
        let y = sy(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 8.0,
            y + 4.0,
            trim_float(tick)
        );
        tick += step;
    }
}

/// Every plot the runs allow, as (file name, SVG): `report-index.svg` (families at the index
/// row's boundary), `report-ycsb.svg` (kops/s per engine), `report-finedex.svg` (kops/s per
/// index, workload and threads), `report-learnedstore.svg`, `report-serve.svg`.
pub fn report_plots(
    runs: &std::collections::BTreeMap<String, super::Run>,
) -> Vec<(String, String)> {
    use super::systems;
    use serde_json::Value;
    let mut out = Vec::new();
    let rows = |f: &str| runs.get(f).map(|r| r.rows.as_slice());
    if let Some(rows) = rows("index")
        && let Some(b) = systems::index_boundary(rows)
    {
        let title = format!("index families at B = {b}: lookup time against memory");
        let points = systems::index_points(rows, b);
        out.push(("report-index.svg".into(), families_svg(&title, &points)));
    }
    if let Some(rows) = rows("ycsb") {
        let bars: Vec<(String, f64)> = systems::ycsb_kops(rows).into_iter().collect();
        if !bars.is_empty() {
            let title = "YCSB throughput per engine (one run)";
            out.push(("report-ycsb.svg".into(), bars_svg(title, "kops/s", &bars)));
        }
    }
    if let Some(rows) = rows("finedex") {
        let bars: Vec<(String, f64)> = systems::concurrent_points(rows)
            .into_iter()
            .map(|(w, t, i, k)| (format!("{i} {w} {t}t"), k))
            .collect();
        if !bars.is_empty() {
            let title = "concurrent indexes (one run)";
            out.push((
                "report-finedex.svg".into(),
                bars_svg(title, "kops/s", &bars),
            ));
        }
    }
    let pick = |rows: &[Value], label: &dyn Fn(&Value) -> Option<String>| -> Vec<(String, f64)> {
        rows.iter()
            .filter_map(|r| Some((label(r)?, r.get("kops_per_s")?.as_f64()?)))
            .collect()
    };
    if let Some(rows) = rows("learnedstore") {
        let bars = pick(rows, &|r| {
            (r.get("op")?.as_str()? == "read").then_some(())?;
            Some(format!(
                "{} {}",
                r.get("engine")?.as_str()?,
                r.get("data")?.as_str()?.rsplit('/').next()?
            ))
        });
        if !bars.is_empty() {
            let title = "LearnedStore reads (one run)";
            out.push((
                "report-learnedstore.svg".into(),
                bars_svg(title, "kops/s", &bars),
            ));
        }
    }
    if let Some(rows) = rows("serve") {
        let bars = pick(rows, &|r| {
            Some(format!(
                "{} {} {}t",
                r.get("engine")?.as_str()?,
                r.get("workload")?.as_str()?,
                r.get("threads")?.as_u64()?
            ))
        });
        if !bars.is_empty() {
            let title = "lidb serve against redis-server (one run)";
            out.push(("report-serve.svg".into(), bars_svg(title, "kops/s", &bars)));
        }
    }
    out
}
