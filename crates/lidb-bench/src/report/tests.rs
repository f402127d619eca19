use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::svg::{bars_svg, families_svg, report_plots};
use super::*;
use crate::plot::xml::well_formed;

fn run(rows: Vec<Value>) -> Run {
    Run {
        command: "lidb x | y".into(),
        rows,
    }
}

fn machine() -> Machine {
    Machine {
        host: "box".into(),
        cores: 2,
        memory_gib: 24,
        date: "2026-01-02".into(),
        quick: false,
    }
}

fn compute(system: &str, rows: &[Value]) -> Option<Figure> {
    let spec = systems::SPECS.iter().find(|s| s.system == system)?;
    (spec.compute)(rows)
}

#[test]
fn ratios_are_lidb_over_the_peer_of_the_same_rows() {
    let ycsb = vec![
        json!({"engine": "lsm", "workload": "c", "threads": 1, "phase": 0, "op": "all", "kops_per_s": 1.0}),
        json!({"engine": "lsm", "workload": "c", "threads": 1, "phase": 1, "op": "all", "kops_per_s": 30.0}),
        json!({"engine": "lsm+", "workload": "c", "threads": 1, "phase": 1, "op": "all", "kops_per_s": 20.0}),
        json!({"engine": "lsm", "workload": "c", "threads": 1, "phase": 1, "op": "read", "kops_per_s": 99.0}),
    ];
    let f = compute("LSM with learned tables", &ycsb);
    assert_eq!(f.as_ref().map(|f| f.ratio.as_str()), Some("1.50x lsm+"));
    assert_eq!(f.map(|f| f.met), Some("yes".to_string()));
    // learnedkv is absent: no figure rather than a made-up one.
    assert_eq!(compute("LearnedKV", &ycsb), None);

    let conc = vec![
        json!({"row": "result", "index": "finedex", "workload": "c", "threads": 1, "op": "all", "kops_per_s": 80.0}),
        json!({"row": "result", "index": "li+delta", "workload": "c", "threads": 1, "op": "all", "kops_per_s": 100.0}),
        json!({"row": "result", "index": "congee", "workload": "c", "threads": 1, "op": "all", "kops_per_s": 40.0}),
    ];
    let f = compute("FINEdex", &conc);
    assert_eq!(
        f.as_ref().map(|f| f.ratio.as_str()),
        Some("c/1t: 0.80x li+delta, 2.00x congee")
    );
    assert_eq!(f.map(|f| f.met), Some("no (target 1.00x)".to_string()));
}

/// Rounds taking turns give lidb's rows the median of the per-round ratios, which the page
/// shows instead of the ratio of the two medians; rows without it (one run) fall back to that.
#[test]
fn serve_takes_the_median_of_per_round_ratios_when_rows_carry_it() {
    let rows = |ratio: Option<f64>| {
        let mut lidb = json!({"bench": "serve", "engine": "lidb", "workload": "set", "threads": 1, "kops_per_s": 90.0});
        if let (Some(r), Some(obj)) = (ratio, lidb.as_object_mut()) {
            obj.insert("ratio_to_redis".into(), json!(r));
        }
        vec![
            lidb,
            json!({"bench": "serve", "engine": "redis", "workload": "set", "threads": 1, "kops_per_s": 100.0}),
        ]
    };
    let f = compute("`lidb serve`", &rows(Some(0.95)));
    assert_eq!(f.as_ref().map(|f| f.ratio.as_str()), Some("0.95x"));
    assert_eq!(f.map(|f| f.met), Some("yes".to_string()));
    let f = compute("`lidb serve`", &rows(None));
    assert_eq!(f.as_ref().map(|f| f.ratio.as_str()), Some("0.90x"));
    assert!(f.is_some_and(|f| f.figure.contains("SET 0.90x Redis (90 against 100 kops/s)")));
}

#[test]
fn a_peer_that_records_its_version_is_named_with_it() {
    let ycsb = vec![
        json!({"engine": "rocksdb", "engine_version": "11.8.1", "workload": "c", "threads": 1, "phase": 1, "op": "all", "kops_per_s": 40.0}),
        json!({"engine": "lsm", "engine_version": null, "workload": "c", "threads": 1, "phase": 1, "op": "all", "kops_per_s": 50.0}),
    ];
    let f = compute("LSM with learned tables", &ycsb);
    assert_eq!(f.as_ref().map(|f| f.peer.as_str()), Some("rocksdb 11.8.1"));
    assert_eq!(
        f.as_ref().map(|f| f.ratio.as_str()),
        Some("1.25x rocksdb 11.8.1")
    );
    assert!(f.is_some_and(|f| f.figure.contains("rocksdb 11.8.1 40.0")));
}

#[test]
fn a_page_without_markers_is_refused_and_text_outside_is_kept() {
    let runs = BTreeMap::new();
    assert_eq!(
        render_page("no block", &runs, &machine(), &[]),
        Err(Error::NoMarkers)
    );
    let page = format!("before\n{BEGIN}\n| reliability | a | b | c | d | e | f |\n{END}\nafter\n");
    let out = render_page(&page, &runs, &machine(), &[]).unwrap_or_default();
    assert!(
        out.starts_with("before\n") && out.ends_with("\nafter\n"),
        "{out}"
    );
    assert!(out.contains("| f | (not rerun) compiled by hand"), "{out}");
    assert_eq!(render_page(&out, &runs, &machine(), &[]), Ok(out.clone()));
}

#[test]
fn cells_keep_escaped_pipes() {
    assert_eq!(cells("| a | `x \\| y` | c |"), ["a", "`x \\| y`", "c"]);
    assert!(run_cell("a | b", &machine()).contains("a \\| b"));
    assert_eq!(run(vec![]).command, "lidb x | y");
}

#[test]
fn plots_are_well_formed() {
    let pts = vec![
        ("binary".to_string(), 0.0, 400.0),
        ("pgm <&>".to_string(), 0.2, 180.0),
    ];
    let svg = families_svg("t & t", &pts);
    assert_eq!(well_formed(&svg), Ok(()));
    assert_eq!(svg.matches(r#"<circle class="point""#).count(), 2);
    let svg = bars_svg("b", "kops/s", &[("a".into(), 3.0), ("n".into(), f64::NAN)]);
    assert_eq!(well_formed(&svg), Ok(()));
    assert_eq!(svg.matches(r#"<rect class="bar""#).count(), 1);
    let mut runs = BTreeMap::new();
    runs.insert(
        "index".to_string(),
        run(vec![
            json!({"index": "binary", "boundary": 16, "keys": 100, "size_bytes": 0, "lookup_ns_mean": 400.0}),
        ]),
    );
    let plots = report_plots(&runs);
    assert_eq!(plots.len(), 1);
    assert_eq!(
        plots.first().map(|p| p.0.as_str()),
        Some("report-index.svg")
    );
}
