//! End-to-end tests of `lidb bench report` on small fixture files (no benchmark runs): each
//! rerun row's ratio is the one computed by hand from its fixture rows, a second render of the
//! page is byte-identical, a system whose file is absent keeps its old row marked "(not rerun)",
//! the text outside the markers is untouched, and the plots are written and linked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::process::Command;

use lidb_testkit::Scratch;

const PAGE: &str = "# Benchmarks\n\nIntro kept.\n\n<!-- report:begin -->\n\
| system | claim (paper) | lidb's figure | peer | ratio | met? | where |\n\
|---|---|---|---|---|---|---|\n\
| learned indexes, in memory | old | old figure | old | 9.99x | yes | old |\n\
| ALEX, LIPP, DILI (updatable) | as fast | ALEX 23.3 B/key | C++ | 0.56x | no | [log](x.md) |\n\
| LearnedStore | beats the walk | 1.17x old | btree | 0.86x to 1.41x | no | [learnedstore](y.md) |\n\
<!-- report:end -->\n\n## The dated log\n\nkept too\n";

fn write(dir: &Path, name: &str, lines: &[&str]) {
    std::fs::write(dir.join(name), lines.join("\n") + "\n").unwrap();
}

/// The fixture run: index, ycsb and finedex files; no learnedstore, serve or stress file.
fn fixtures(dir: &Path) {
    write(
        dir,
        "machine.json",
        &[
            r#"{"host": "fixture-box", "cores": 2, "memory_gib": 24, "date": "2026-01-02", "quick": false}"#,
        ],
    );
    write(
        dir,
        "index.jsonl",
        &[
            r#"{"report_command": "lidb index bench --data D --boundary 16"}"#,
            r#"{"index": "binary", "boundary": 16, "keys": 100, "size_bytes": 0, "lookup_ns_mean": 400.0}"#,
            r#"{"index": "fp", "boundary": 16, "keys": 100, "size_bytes": 1000, "lookup_ns_mean": 390.0}"#,
            r#"{"index": "rs", "boundary": 16, "keys": 100, "size_bytes": 300, "lookup_ns_mean": 200.0}"#,
            r#"{"index": "pgm", "boundary": 16, "keys": 100, "size_bytes": 100, "lookup_ns_mean": 160.0}"#,
            r#"{"index": "rs", "boundary": 64, "keys": 100, "size_bytes": 90, "lookup_ns_mean": 1.0}"#,
        ],
    );
    write(
        dir,
        "ycsb.jsonl",
        &[
            r#"{"report_command": "lidb bench ycsb --workload c"}"#,
            "a note line that is not JSON",
            r#"{"engine": "lsm", "workload": "c", "threads": 1, "phase": 1, "op": "all", "kops_per_s": 30.0}"#,
            r#"{"engine": "lsm+", "workload": "c", "threads": 1, "phase": 1, "op": "all", "kops_per_s": 20.0}"#,
            r#"{"engine": "learnedkv", "workload": "c", "threads": 1, "phase": 1, "op": "all", "kops_per_s": 45.0}"#,
            r#"{"engine": "learnedkv", "workload": "c", "threads": 1, "phase": 0, "op": "all", "kops_per_s": 1.0}"#,
        ],
    );
    write(
        dir,
        "finedex.jsonl",
        &[
            r#"{"report_command": "lidb-bench bench concurrent --index finedex,li+delta,congee"}"#,
            r#"{"row": "result", "index": "finedex", "workload": "c", "threads": 2, "op": "all", "kops_per_s": 80.0}"#,
            r#"{"row": "result", "index": "li+delta", "workload": "c", "threads": 2, "op": "all", "kops_per_s": 100.0}"#,
            r#"{"row": "result", "index": "congee", "workload": "c", "threads": 2, "op": "all", "kops_per_s": 40.0}"#,
            r#"{"row": "result", "index": "congee", "workload": "c", "threads": 2, "op": "read", "kops_per_s": 1.0}"#,
        ],
    );
}

fn report(input: &Path, page: &Path, plots: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["bench", "report", "--input"])
        .arg(input)
        .arg("--page")
        .arg(page)
        .arg("--plots")
        .arg(plots)
        .output()
        .expect("run lidb");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "lidb bench report failed: {err}");
    std::fs::read_to_string(page).unwrap()
}

/// The cells of the row whose first cell is `system`.
fn row(page: &str, system: &str) -> Vec<String> {
    let line = page
        .lines()
        .find(|l| l.starts_with(&format!("| {system} |")))
        .unwrap_or_else(|| panic!("no row {system} in\n{page}"));
    line.trim_matches('|')
        .split(" | ")
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn rows_carry_the_ratios_of_their_own_run_and_rerendering_is_idempotent() {
    let dir = Scratch::new("report");
    let input = dir.join("in");
    std::fs::create_dir_all(&input).unwrap();
    fixtures(&input);
    let page = dir.join("BENCHMARKS.md");
    std::fs::write(&page, PAGE).unwrap();
    let plots = dir.join("docs").join("plots");
    let first = report(&input, &page, &plots);

    // Ratios by hand: binary 400 ns over rs 200 and pgm 160 (B = 16 only); pgm 100 bytes over
    // fp's 1000; lsm 30 over lsm+ 20; learnedkv 45 (its last phase) over 20; finedex 80 over
    // li+delta 100 and congee 40.
    let index = row(&first, "learned indexes, in memory");
    assert_eq!(
        index[4],
        format!("{:.2}x to {:.2}x faster", 400.0 / 200.0, 400.0 / 160.0)
    );
    assert!(
        index[2].contains("pgm 0.10x fence pointers' size"),
        "{index:?}"
    );
    assert_eq!(index[5], "yes");
    assert_eq!(row(&first, "LSM with learned tables")[4], "1.50x lsm+");
    assert_eq!(row(&first, "LearnedKV")[4], "2.25x lsm+");
    let fine = row(&first, "FINEdex");
    assert_eq!(fine[4], "c/2t: 0.80x li+delta, 2.00x congee");
    assert_eq!(fine[5], "no (target 1.00x)");
    // Each rerun row ends with its command, date and machine.
    assert!(
        fine[7].contains("lidb-bench bench concurrent")
            && fine[7].contains("2026-01-02, fixture-box (2 cores, 24 GiB)"),
        "{fine:?}"
    );

    // Absent files: the old rows stay, marked once; the hand-compiled ALEX row too.
    let store = row(&first, "LearnedStore");
    assert_eq!(store[2], "1.17x old");
    assert!(store[7].starts_with("(not rerun)"), "{store:?}");
    assert!(row(&first, "ALEX, LIPP, DILI (updatable)")[7].starts_with("(not rerun)"));
    assert!(
        !first.contains("| reliability |"),
        "no old row, no file: no row"
    );

    // Text outside the markers is kept; the plots are written and linked relative to the page.
    assert!(first.starts_with("# Benchmarks\n\nIntro kept.\n\n<!-- report:begin -->\n"));
    assert!(first.ends_with("<!-- report:end -->\n\n## The dated log\n\nkept too\n"));
    for name in ["report-index.svg", "report-ycsb.svg", "report-finedex.svg"] {
        assert!(plots.join(name).exists(), "{name}");
        assert!(
            first.contains(&format!("(docs/plots/{name})")),
            "{name} not linked"
        );
    }

    // Idempotent: the same inputs give the same bytes, and so does a run whose files are gone
    // (every row then kept, nothing marked twice).
    assert_eq!(report(&input, &page, &plots), first);
    std::fs::remove_file(input.join("finedex.jsonl")).unwrap();
    let kept = report(&input, &page, &plots);
    let fine_kept = row(&kept, "FINEdex");
    assert_eq!(fine_kept[4], fine[4]);
    assert!(
        fine_kept[7].starts_with("(not rerun) `lidb-bench"),
        "{fine_kept:?}"
    );
    assert_eq!(report(&input, &page, &plots), kept);
    assert_eq!(kept.matches("(not rerun) (not rerun)").count(), 0);
}

#[test]
fn a_page_without_markers_is_refused_and_left_alone() {
    let dir = Scratch::new("report-nomarkers");
    fixtures(&dir);
    let page = dir.join("page.md");
    std::fs::write(&page, "no markers here\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lidb"))
        .args(["bench", "report", "--input"])
        .arg(dir.path())
        .arg("--page")
        .arg(&page)
        .output()
        .expect("run lidb");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("report:begin"));
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "no markers here\n");
}
