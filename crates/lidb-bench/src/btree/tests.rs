//! The harness's own tests, over the `memory-reference` store: each experiment gives its rows,
//! device reads are divided by operations, the startup time is read off a per-interval series,
//! and bad configurations are refused with one line.

use super::config::value_for;
use super::engines::check_engines;
use super::experiments::{WRITE_MIXES, split_for_writes};
use super::measure::time_to_fraction_of_peak;
use super::reference::{self, MemoryReference};
use super::*;
use crate::peers::Peers;
use lidb_testkit::Scratch;

const SEED: u64 = 0x5EED_B7EE;

/// A configuration over `n` random keys whose run directory is `scratch`.
fn config(experiment: Experiment, n: u64, scratch: &Scratch) -> Config {
    Config {
        experiment,
        data: Dataset {
            source: format!("synthetic:randomgen:{n}"),
            keys: lidb_data::synthetic::generate(lidb_data::Distribution::Randomgen, n, SEED),
            value_size: 64,
        },
        engines: vec![reference::NAME.to_string()],
        pool: None,
        ops: 2_000,
        threads: vec![1],
        cold_seconds: 0.3,
        interval_ms: 100,
        inner_miss: 0.01,
        seed: SEED,
        dir: scratch.to_path_buf(),
        keep: false,
        progress: false,
    }
}

/// Opens the reference store, counting `reads_per_get` device reads per lookup.
fn reference_with(
    reads_per_get: u64,
) -> impl Fn(&str, &StoreSetup) -> Result<Box<dyn PagedStore>, Error> {
    move |name, _| {
        assert_eq!(name, reference::NAME);
        Ok(Box::new(MemoryReference::with_reads_per_get(reads_per_get)))
    }
}

#[test]
fn memory_gives_one_read_row_per_engine() -> Result<(), Error> {
    let scratch = Scratch::new("btree-harness");
    let cfg = config(Experiment::Memory, 5_000, &scratch);
    let report = run(&cfg, &reference_with(0))?;
    let [row] = report.rows.as_slice() else {
        panic!("expected one row, got {:?}", report.rows);
    };
    assert_eq!(
        (row.experiment.as_str(), row.op.as_str()),
        ("memory", "read")
    );
    assert_eq!(row.engine, reference::NAME);
    assert_eq!((row.ops, row.seed, row.records), (2_000, SEED, 5_000));
    assert!(row.kops_per_s > 0.0 && row.p99_us >= row.p50_us, "{row:?}");
    assert_eq!(row.reads_per_op, 0.0);
    assert!(row.time_to_90_s.is_none());
    Ok(())
}

#[test]
fn lookups_run_at_each_thread_count_with_their_scaling() -> Result<(), Error> {
    let scratch = Scratch::new("btree-harness");
    let mut cfg = config(Experiment::Partial, 5_000, &scratch);
    cfg.threads = vec![2, 1, 3];
    let report = run(&cfg, &reference_with(1))?;
    let got: Vec<(bool, usize, u64)> = report
        .rows
        .iter()
        .map(|r| (r.simulated, r.threads, r.ops))
        .collect();
    assert_eq!(
        got,
        [
            (false, 2, 2_000),
            (false, 1, 2_000),
            (false, 3, 2_000),
            (true, 2, 2_000),
            (true, 1, 2_000),
            (true, 3, 2_000)
        ]
    );
    for row in &report.rows {
        // Every thread count reads what one thread reads: the same keys, split.
        assert_eq!(row.reads_per_op, 1.0, "{row:?}");
        let one = report
            .rows
            .iter()
            .find(|r| r.threads == 1 && r.simulated == row.simulated)
            .ok_or(Error::Invalid("no 1-thread row".into()))?;
        let want = row.kops_per_s / one.kops_per_s;
        assert_eq!(row.scaling, Some(want), "{row:?}");
    }
    cfg.threads = vec![2];
    let report = run(&cfg, &reference_with(1))?;
    assert!(report.rows.iter().all(|r| r.scaling.is_none()));
    cfg.experiment = Experiment::Writes;
    cfg.threads = vec![1, 2];
    let e = run(&cfg, &reference_with(0)).err().map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("writes runs on one thread")),
        "{e:?}"
    );
    Ok(())
}

#[test]
fn reads_per_op_is_reads_over_operations() -> Result<(), Error> {
    let scratch = Scratch::new("btree-harness");
    let cfg = config(Experiment::Memory, 2_000, &scratch);
    // The warm-up pass also reads; only the timed lookups may count.
    let report = run(&cfg, &reference_with(3))?;
    let row = report.rows.first().ok_or(Error::Invalid("no row".into()))?;
    assert_eq!(row.reads_per_op, 3.0, "{row:?}");
    Ok(())
}

#[test]
fn partial_gives_a_real_row_and_a_simulated_one() -> Result<(), Error> {
    let scratch = Scratch::new("btree-harness");
    let cfg = config(Experiment::Partial, 5_000, &scratch);
    let report = run(&cfg, &reference_with(1))?;
    let simulated: Vec<bool> = report.rows.iter().map(|r| r.simulated).collect();
    assert_eq!(simulated, [false, true], "{:?}", report.rows);
    assert!(
        report.notes.iter().any(|n| n.contains("simulated")),
        "{:?}",
        report.notes
    );
    for row in &report.rows {
        assert!(row.pool_bytes > 0 && row.p999_us >= row.p99_us, "{row:?}");
        assert_eq!(row.reads_per_op, 1.0);
    }
    Ok(())
}

#[test]
fn partial_without_the_hook_says_so() -> Result<(), Error> {
    #[derive(Debug, Default)]
    struct NoHook(MemoryReference);
    impl PagedStore for NoHook {
        fn name(&self) -> &str {
            "no-hook"
        }
        fn bulk_load(
            &mut self,
            records: &mut dyn Iterator<Item = (u64, Vec<u8>)>,
        ) -> Result<(), StoreError> {
            self.0.bulk_load(records)
        }
        fn get(&self, key: u64, out: &mut Vec<u8>) -> Result<bool, StoreError> {
            self.0.get(key, out)
        }
        fn put(&mut self, key: u64, value: &[u8]) -> Result<(), StoreError> {
            self.0.put(key, value)
        }
        fn delete(&mut self, key: u64) -> Result<bool, StoreError> {
            self.0.delete(key)
        }
        fn device_reads(&self) -> u64 {
            0
        }
        fn pool_bytes(&self) -> u64 {
            1
        }
        fn reopen_cold(&mut self) -> Result<(), StoreError> {
            Ok(())
        }
    }
    let scratch = Scratch::new("btree-harness");
    let mut cfg = config(Experiment::Partial, 1_000, &scratch);
    cfg.engines = vec!["no-hook".to_string()];
    let open = |_: &str, _: &StoreSetup| -> Result<Box<dyn PagedStore>, Error> {
        Ok(Box::new(NoHook::default()))
    };
    let report = run(&cfg, &open)?;
    assert_eq!(report.rows.len(), 1, "{:?}", report.rows);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("no-hook: no simulated row")),
        "{:?}",
        report.notes
    );
    Ok(())
}

#[test]
fn cold_gives_a_series_and_a_startup_time() -> Result<(), Error> {
    let scratch = Scratch::new("btree-harness");
    let cfg = config(Experiment::Cold, 5_000, &scratch);
    let report = run(&cfg, &reference_with(0))?;
    let row = report.rows.first().ok_or(Error::Invalid("no row".into()))?;
    assert_eq!(
        row.series_kops.len(),
        3,
        "0.3 s in 100 ms intervals: {row:?}"
    );
    let t90 = row.time_to_90_s.ok_or(Error::Invalid("no t90".into()))?;
    assert!((0.1..=0.3 + 1e-9).contains(&t90), "{row:?}");
    Ok(())
}

#[test]
fn time_to_90_is_the_end_of_the_first_interval_at_90_percent() {
    let ramp = [10, 40, 70, 91, 100, 95, 99];
    assert_eq!(time_to_fraction_of_peak(&ramp, 1.0, 0.9), Some(4.0));
    assert_eq!(time_to_fraction_of_peak(&ramp, 0.5, 0.9), Some(2.0));
    // Exactly 90% counts; the peak may come late.
    assert_eq!(time_to_fraction_of_peak(&[9, 1, 10], 1.0, 0.9), Some(1.0));
    assert_eq!(
        time_to_fraction_of_peak(&[1, 2, 3, 50], 2.0, 0.9),
        Some(8.0)
    );
    assert_eq!(time_to_fraction_of_peak(&[0, 0], 1.0, 0.9), None);
    assert_eq!(time_to_fraction_of_peak(&[], 1.0, 0.9), None);
}

#[test]
fn writes_gives_the_three_mixes_and_inserts_new_keys() -> Result<(), Error> {
    let scratch = Scratch::new("btree-harness");
    let cfg = config(Experiment::Writes, 10_000, &scratch);
    let report = run(&cfg, &reference_with(0))?;
    let ops: Vec<&str> = report.rows.iter().map(|r| r.op.as_str()).collect();
    let want: Vec<&str> = WRITE_MIXES.iter().map(|(op, _)| *op).collect();
    assert_eq!(ops, want);
    for row in &report.rows {
        assert_eq!((row.ops, row.loaded), (2_000, 5_000), "{row:?}");
    }
    let (loaded, new_keys) = split_for_writes(&cfg.data.keys, 5_000, SEED);
    assert_eq!((loaded.len(), new_keys.len()), (5_000, 5_000));
    assert!(loaded.windows(2).all(|w| matches!(w, [a, b] if a < b)));
    let mut all: Vec<u64> = loaded.iter().chain(&new_keys).copied().collect();
    all.sort_unstable();
    assert_eq!(all, cfg.data.keys, "the split is a partition, seed={SEED}");
    Ok(())
}

#[test]
fn a_wrong_value_stops_the_run() {
    #[derive(Debug, Default)]
    struct Liar(MemoryReference);
    impl PagedStore for Liar {
        fn name(&self) -> &str {
            "liar"
        }
        fn bulk_load(
            &mut self,
            records: &mut dyn Iterator<Item = (u64, Vec<u8>)>,
        ) -> Result<(), StoreError> {
            self.0.bulk_load(records)
        }
        fn get(&self, key: u64, out: &mut Vec<u8>) -> Result<bool, StoreError> {
            out.clear();
            out.extend(value_for(key ^ 1, 0, 64));
            Ok(true)
        }
        fn put(&mut self, key: u64, value: &[u8]) -> Result<(), StoreError> {
            self.0.put(key, value)
        }
        fn delete(&mut self, key: u64) -> Result<bool, StoreError> {
            self.0.delete(key)
        }
        fn device_reads(&self) -> u64 {
            0
        }
        fn pool_bytes(&self) -> u64 {
            1
        }
        fn reopen_cold(&mut self) -> Result<(), StoreError> {
            Ok(())
        }
    }
    let scratch = Scratch::new("btree-harness");
    let mut cfg = config(Experiment::Memory, 100, &scratch);
    cfg.engines = vec!["liar".to_string()];
    let open = |_: &str, _: &StoreSetup| -> Result<Box<dyn PagedStore>, Error> {
        Ok(Box::new(Liar::default()))
    };
    assert!(matches!(run(&cfg, &open), Err(Error::WrongValue { .. })));
}

#[test]
fn bad_configurations_are_one_line_errors() {
    let scratch = Scratch::new("btree-harness");
    let mut partial = config(Experiment::Partial, 1_000, &scratch);
    partial.pool = Some(partial.data.data_bytes());
    let mut memory = config(Experiment::Memory, 1_000, &scratch);
    memory.pool = Some(1024);
    let mut writes = config(Experiment::Writes, 1_000, &scratch);
    writes.ops = 501;
    let mut no_ops = config(Experiment::Memory, 10, &scratch);
    no_ops.ops = 0;
    for (cfg, want) in [
        (partial, "smaller than the tree"),
        (memory, "smaller than the records"),
        (writes, "outside the loaded half"),
        (no_ops, "--ops"),
    ] {
        let e = cfg
            .check()
            .map(|()| String::new())
            .unwrap_or_else(|e| e.to_string());
        assert!(
            e.contains(want) && !e.contains('\n'),
            "{e:?} lacks {want:?}"
        );
    }
    assert!(Experiment::from_name("warm").is_err());
}

#[test]
fn the_learned_engines_are_built_and_run_first() {
    let none = Peers::none();
    assert!(check_engines(&none, &["learnedstore".to_string(), "btree".to_string()]).is_ok());
    let e = check_engines(&none, &["nosuch".to_string()]).map_err(|e| e.to_string());
    assert!(
        e.as_ref()
            .err()
            .is_some_and(|m| m.contains("unknown engine")),
        "{e:?}"
    );
    // The peers are known but not linked without their registration (the lean `lidb`).
    for peer in ["redb", "lmdb"] {
        let e = check_engines(&none, &[peer.to_string()]).map_err(|e| e.to_string());
        assert!(
            e.as_ref()
                .err()
                .is_some_and(|m| m.contains("lidb-bench-bin")),
            "{e:?}"
        );
    }
    let models = [
        "learnedstore:rs/16",
        "learnedstore:pgm",
        "learnedstore:plr/128",
    ];
    assert!(check_engines(&none, &models.map(String::from)).is_ok());
    for bad in [
        "learnedstore:rs/1",
        "learnedstore:nope/32",
        "learnedstore:",
        "btree:rs/16",
    ] {
        let e = check_engines(&none, &[bad.to_string()]).map_err(|e| e.to_string());
        assert!(e.is_err(), "{bad} accepted");
    }
    assert_eq!(btree_engines(&none), ["learnedstore", "btree"]);
}

#[test]
fn rows_print_as_json_with_the_issue_fields() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = Scratch::new("btree-harness");
    let cfg = config(Experiment::Cold, 1_000, &scratch);
    let report = run(&cfg, &reference_with(0))?;
    let lines = rows::json_lines(&report.rows)?;
    let first = lines.first().ok_or("no line")?;
    let v: serde_json::Value = serde_json::from_str(first)?;
    for field in [
        "experiment",
        "data",
        "engine",
        "op",
        "kops_per_s",
        "mean_us",
        "p50_us",
        "p99_us",
        "reads_per_op",
        "time_to_90_s",
        "seed",
        "pool_bytes",
        "value_size",
        "records",
    ] {
        assert!(v.get(field).is_some(), "{field} missing in {first}");
    }
    let table = rows::render(&report.rows);
    assert!(
        table.contains("memory-reference") && table.contains("t90_s"),
        "{table}"
    );
    Ok(())
}

/// Each engine's directories are gone once its rows are taken (the next engine finds none of
/// them), unless `keep`; names of leaf models become file names without '/' or ':'.
#[test]
fn engine_directories_go_when_their_rows_are_taken() -> Result<(), Error> {
    for keep in [false, true] {
        let scratch = Scratch::new("btree-harness");
        let mut cfg = config(Experiment::Memory, 1_000, &scratch);
        cfg.dir = cfg.dir.join(format!("dirs-{keep}"));
        cfg.keep = keep;
        cfg.engines = vec!["first:rs/16".to_string(), "second".to_string()];
        let seen = std::cell::RefCell::new(Vec::new());
        let open = |name: &str, setup: &StoreSetup| -> Result<Box<dyn PagedStore>, Error> {
            let mut present: Vec<String> = std::fs::read_dir(&cfg.dir)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            present.sort();
            seen.borrow_mut().push((name.to_string(), present));
            std::fs::create_dir_all(&setup.dir).map_err(|e| Error::store(name)(e.into()))?;
            Ok(Box::new(MemoryReference::with_reads_per_get(0)))
        };
        run(&cfg, &open)?;
        let seen = seen.into_inner();
        let at_second = seen
            .iter()
            .find(|(n, _)| n == "second")
            .map(|(_, p)| p.clone());
        let want: Vec<String> = if keep {
            vec!["first_rs_16-memory".to_string()]
        } else {
            Vec::new()
        };
        assert_eq!(at_second, Some(want), "keep={keep}: {seen:?}");
    }
    Ok(())
}
