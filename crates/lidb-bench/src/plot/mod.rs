//! A small hand-written SVG writer (no plotting dependency) for the figures of the benchmarks:
//! here the papers' main figure, memory (bytes, log scale) on x, mean lookup latency (µs,
//! linear) on y, one coloured line with markers per series (family), and a legend; in
//! [`scaling`] throughput against threads, one panel per workload. Pure: builds a string; the
//! caller writes it. Any thread.
//!
//! Invariants: the output is well-formed XML (every text is escaped), with exactly one
//! `<path class="series">` per series; non-finite points are dropped and x is clamped to >= 1
//! (1 byte, 1 thread) so the log scale is defined.

pub mod scaling;

use std::fmt::Write;

const WIDTH: f64 = 820.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
pub(crate) const COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// One line of the plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// (memory bytes, latency µs).
    pub points: Vec<(f64, f64)>,
}

/// Groups (series, x, y) triples into series in order of first appearance, points sorted by x.
pub fn group(points: &[(String, f64, f64)]) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for (name, x, y) in points {
        if !x.is_finite() || !y.is_finite() {
            continue;
        }
        let p = (x.max(1.0), *y);
        match out.iter_mut().find(|s| &s.name == name) {
            Some(s) => s.points.push(p),
            None => out.push(Series {
                name: name.clone(),
                points: vec![p],
            }),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The `d` attribute of a polyline through `points`, mapped to the page by `sx` and `sy`.
pub(crate) fn path_data(
    points: &[(f64, f64)],
    sx: impl Fn(f64) -> f64,
    sy: impl Fn(f64) -> f64,
) -> String {
    let mut d = String::new();
    for (j, &(x, y)) in points.iter().enumerate() {
        let _ = write!(
            d,
            "{}{:.1},{:.1} ",
            if j == 0 { "M" } else { "L" },
            sx(x),
            sy(y)
        );
    }
    d
}

/// The start of an SVG document of `width` x `height` on white, with `title` centred on top in
/// `title_px` type; the caller adds the drawing and the closing `</svg>`.
pub(crate) fn svg_open(width: f64, height: f64, title: &str, title_px: u32) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">
<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>
<text x="{}" y="25" text-anchor="middle" font-size="{title_px}">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    s
}

/// Escapes text for XML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A decade of bytes as a label: 1 B, 10 B, 100 B, 1 kB, ...
fn bytes_label(decade: i32) -> String {
    let units = ["B", "kB", "MB", "GB", "TB", "PB"];
    let d = decade.max(0);
    let unit = units.get((d / 3) as usize).copied().unwrap_or("EB");
    format!("{} {unit}", 10u64.pow((d % 3) as u32))
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about five ticks up to `max`.
pub(crate) fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// The SVG document of the memory-versus-latency plot.
pub fn memory_latency_svg(title: &str, series: &[Series]) -> String {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut xmin, mut xmax, mut ymax) = (f64::INFINITY, 0.0f64, 0.0f64);
    for &(x, y) in all {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        ymax = ymax.max(y);
    }
    if !xmin.is_finite() {
        (xmin, xmax) = (1.0, 10.0);
    }
    let d0 = xmin.log10().floor() as i32;
    let d1 = (xmax.log10().ceil() as i32).max(d0 + 1);
    let step = nice_step(if ymax > 0.0 { ymax } else { 1.0 });
    let ytop = ((ymax / step).ceil() * step).max(step);
    let pw = WIDTH - LEFT - RIGHT;
    let ph = HEIGHT - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (x.log10() - f64::from(d0)) / f64::from(d1 - d0) * pw;
    let sy = |y: f64| TOP + ph - (y / ytop) * ph;

    let mut s = svg_open(WIDTH, HEIGHT, title, 13);
    // Axes, grid and ticks.
    let _ = writeln!(
        s,
        r#"<g class="axes" stroke="black" fill="none"><line x1="{LEFT}" y1="{}" x2="{}" y2="{}"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}"/></g>"#,
        TOP + ph,
        LEFT + pw,
        TOP + ph,
        TOP + ph
    );
    for d in d0..=d1 {
        let x = sx(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#e0e0e0"/><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="black"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + ph,
            TOP + ph,
            TOP + ph + 5.0,
            TOP + ph + 20.0,
            escape(&bytes_label(d))
        );
    }
    let mut tick = 0.0;
    while tick <= ytop + step / 2.0 {
        let y = sy(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e0e0e0"/><line x1="{:.1}" y1="{y:.1}" x2="{LEFT}" y2="{y:.1}" stroke="black"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 5.0,
            LEFT - 8.0,
            y + 4.0,
            trim_float(tick)
        );
        tick += step;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">index memory (bytes, log scale)</text>
<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">mean lookup latency (µs)</text>"#,
        LEFT + pw / 2.0,
        HEIGHT - 15.0,
        TOP + ph / 2.0,
        TOP + ph / 2.0
    );
    // Series and legend.
    for (i, ser) in series.iter().enumerate() {
        let colour = COLOURS.get(i % COLOURS.len()).copied().unwrap_or("black");
        let d = path_data(&ser.points, sx, sy);
        let _ = writeln!(
            s,
            r#"<g class="family"><path class="series" d="{}" stroke="{colour}" stroke-width="2" fill="none"><title>{}</title></path>"#,
            d.trim_end(),
            escape(&ser.name)
        );
        for &(x, y) in &ser.points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{colour}"><title>{}: {x:.0} bytes, {y:.2} µs</title></circle>"#,
                sx(x),
                sy(y),
                escape(&ser.name)
            );
        }
        let ly = TOP + 10.0 + 20.0 * i as f64;
        let lx = WIDTH - RIGHT + 20.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="2"/><circle cx="{}" cy="{ly}" r="4" fill="{colour}"/><text x="{}" y="{}">{}</text></g>"#,
            lx + 24.0,
            lx + 12.0,
            lx + 30.0,
            ly + 4.0,
            escape(&ser.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

pub(crate) fn trim_float(v: f64) -> String {
    let t = format!("{v:.3}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    t.to_string()
}

/// Well-formedness of what the writers emit, for the tests of every plot.
#[cfg(test)]
pub(crate) mod xml {
    /// Checks that `doc` is well-formed XML: tags nest and close, attributes are quoted, and
    /// text holds no raw `<` or stray `&`. Enough for what this writer emits.
    pub(crate) fn well_formed(doc: &str) -> Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = doc.trim_start();
        rest = match rest.strip_prefix("<?xml") {
            Some(r) => r.split_once("?>").map(|(_, r)| r).ok_or("bad prolog")?,
            None => rest,
        };
        let mut roots = 0;
        while !rest.is_empty() {
            let (text, after) = rest.split_once('<').unwrap_or((rest, ""));
            check_text(text)?;
            if after.is_empty() {
                break;
            }
            let (tag, after) = after.split_once('>').ok_or("unclosed tag")?;
            rest = after;
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or("close without open")?;
                if open != name.trim() {
                    return Err(format!("</{name}> closes <{open}>"));
                }
                continue;
            }
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name = body.split_whitespace().next().ok_or("empty tag")?;
            if body.matches('"').count() % 2 != 0 {
                return Err(format!("unbalanced quotes in <{body}>"));
            }
            if stack.is_empty() {
                roots += 1;
            }
            if !self_closing {
                stack.push(name.to_string());
            }
        }
        if !stack.is_empty() || roots != 1 {
            return Err(format!("unclosed {stack:?} or {roots} roots"));
        }
        Ok(())
    }

    fn check_text(text: &str) -> Result<(), String> {
        for (i, _) in text.match_indices('&') {
            let ent = text.get(i..).unwrap_or_default();
            if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                .iter()
                .any(|e| ent.starts_with(e))
            {
                return Err(format!("stray & in {text:?}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::xml::well_formed;
    use super::*;

    #[test]
    fn the_plot_is_xml_with_one_path_per_family() {
        let points = vec![
            ("fp".to_string(), 40_000.0, 9.0),
            ("fp".to_string(), 4_000.0, 12.0),
            ("pgm <&>".to_string(), 900.0, 10.5),
            ("pgm <&>".to_string(), 90.0, 14.0),
            ("rmi".to_string(), 0.0, f64::NAN),
            ("rmi".to_string(), 2_000.0, 11.0),
        ];
        let series = group(&points);
        assert_eq!(series.len(), 3);
        assert_eq!(
            series.first().map(|s| s.points.clone()),
            Some(vec![(4_000.0, 12.0), (40_000.0, 9.0)])
        );
        let svg = memory_latency_svg("memory vs latency & more", &series);
        assert_eq!(well_formed(&svg), Ok(()));
        assert_eq!(svg.matches(r#"<path class="series""#).count(), 3);
        assert!(svg.contains("pgm &lt;&amp;&gt;"));
        assert!(svg.contains("1 kB") && svg.contains("100 kB"));
        assert!(well_formed("<a><b></a></b>").is_err());
        assert!(well_formed("<a>x & y</a>").is_err());
    }

    #[test]
    fn an_empty_plot_is_still_a_document() {
        let svg = memory_latency_svg("nothing", &[]);
        assert_eq!(well_formed(&svg), Ok(()));
        assert_eq!(svg.matches("<path").count(), 0);
    }

    #[test]
    fn ticks_are_nice() {
        assert_eq!(nice_step(10.0), 2.0);
        assert_eq!(nice_step(23.0), 5.0);
        assert_eq!(nice_step(4.0), 1.0);
        assert_eq!(bytes_label(0), "1 B");
        assert_eq!(bytes_label(4), "10 kB");
        assert_eq!(bytes_label(6), "1 MB");
    }
}
