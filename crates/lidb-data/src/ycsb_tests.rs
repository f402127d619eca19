//! Tests of `ycsb.rs`.

use super::*;

const SEED: u64 = 0x7C5B;
const OPS: usize = 100_000;

#[derive(Default, Debug)]
struct Counts {
    read: usize,
    update: usize,
    insert: usize,
    scan: usize,
    rmw: usize,
}

fn run(workload: Workload, records: u64, dist: Option<RequestDistribution>) -> Result<Counts> {
    let mut g = Generator::new(workload, records, dist, SEED)?;
    let mut c = Counts::default();
    let mut next_insert = records;
    for _ in 0..OPS {
        let existing = g.record_count();
        let op = g.next_op();
        match op {
            Op::Read(r) | Op::Update(r) | Op::ReadModifyWrite(r) => {
                assert!(
                    r < existing,
                    "{workload}: {op:?} of a missing record, seed={SEED}"
                );
            }
            Op::Scan { start, len } => {
                assert!(start < existing, "{workload}: {op:?}, seed={SEED}");
                assert!((1..=MAX_SCAN_LEN).contains(&len), "{op:?}");
            }
            Op::Insert(r) => {
                assert_eq!(r, next_insert, "inserts are sequential, seed={SEED}");
                next_insert += 1;
            }
        }
        match op {
            Op::Read(_) => c.read += 1,
            Op::Update(_) => c.update += 1,
            Op::Insert(_) => c.insert += 1,
            Op::Scan { .. } => c.scan += 1,
            Op::ReadModifyWrite(_) => c.rmw += 1,
        }
    }
    assert_eq!(g.record_count(), next_insert);
    Ok(c)
}

#[test]
fn operation_mix_matches_every_workload() -> Result<()> {
    for workload in Workload::ALL {
        for dist in [
            None,
            Some(RequestDistribution::Uniform),
            Some(RequestDistribution::Latest),
        ] {
            let c = run(workload, 10_000, dist)?;
            let m = workload.mix();
            let share = |n: usize| n as f64 / OPS as f64;
            for (name, got, want) in [
                ("read", share(c.read), m.read),
                ("update", share(c.update), m.update),
                ("insert", share(c.insert), m.insert),
                ("scan", share(c.scan), m.scan),
                ("rmw", share(c.rmw), m.read_modify_write),
            ] {
                assert!(
                    (got - want).abs() < 0.01,
                    "{workload} {dist:?} {name}: {got:.4} vs {want}, seed={SEED}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn same_seed_same_stream() -> Result<()> {
    for workload in Workload::ALL {
        let a: Vec<Op> = Generator::new(workload, 1_000, None, SEED)?
            .take(2_000)
            .collect();
        let b: Vec<Op> = Generator::new(workload, 1_000, None, SEED)?
            .take(2_000)
            .collect();
        let c: Vec<Op> = Generator::new(workload, 1_000, None, SEED + 1)?
            .take(2_000)
            .collect();
        assert_eq!(a, b, "{workload} seed={SEED}");
        assert_ne!(a, c, "{workload} seeds {SEED} and {}", SEED + 1);
    }
    Ok(())
}

#[test]
fn zipfian_reads_are_skewed() -> Result<()> {
    let records = 100_000u64;
    let mut g = Generator::new(Workload::C, records, None, SEED)?;
    let mut counts = std::collections::HashMap::new();
    for _ in 0..OPS {
        if let Op::Read(r) = g.next_op() {
            *counts.entry(r).or_insert(0usize) += 1;
        }
    }
    let hottest = counts.values().copied().max().unwrap_or(0);
    let share = hottest as f64 / OPS as f64;
    // 1 / zeta(1e10, 0.99) = 3.78% for the hottest zipfian value.
    assert!(
        (0.033..0.045).contains(&share),
        "hottest share {share:.4}, seed={SEED}"
    );
    let uniform = run(Workload::C, records, Some(RequestDistribution::Uniform))?;
    assert_eq!(uniform.read, OPS);
    Ok(())
}

#[test]
fn latest_favours_recent_records() -> Result<()> {
    let records = 10_000u64;
    let mut g = Generator::new(Workload::D, records, None, SEED)?;
    let (mut reads, mut recent) = (0usize, 0usize);
    for _ in 0..OPS {
        let newest = g.record_count() - 1;
        if let Op::Read(r) = g.next_op() {
            reads += 1;
            if r + 100 > newest {
                recent += 1;
            }
        }
    }
    assert!(
        recent * 2 > reads,
        "{recent} of {reads} reads hit the newest 100 records, seed={SEED}"
    );
    assert!(
        g.record_count() > records + 4_000,
        "inserts grew the key space"
    );
    Ok(())
}

#[test]
fn single_record_and_bad_parameters() -> Result<()> {
    for workload in Workload::ALL {
        for dist in [
            None,
            Some(RequestDistribution::Uniform),
            Some(RequestDistribution::Latest),
        ] {
            run(workload, 1, dist)?;
        }
    }
    assert!(Generator::new(Workload::A, 0, None, SEED).is_err());
    let bad = Some(RequestDistribution::Zipfian { theta: 1.0 });
    assert!(Generator::new(Workload::A, 10, bad, SEED).is_err());
    Ok(())
}

#[test]
fn names_and_record_keys() -> Result<()> {
    for w in Workload::ALL {
        assert_eq!(Workload::from_name(w.name())?, w);
        assert_eq!(Workload::from_name(&format!("workload{}", w.name()))?, w);
        assert_eq!(Workload::from_name(&w.name().to_uppercase())?, w);
        let m = w.mix();
        let total = m.read + m.update + m.insert + m.scan + m.read_modify_write;
        assert!((total - 1.0).abs() < 1e-12);
    }
    assert!(Workload::from_name("g").is_err());
    // Hashed insert order: distinct and scattered over the first records.
    let keys: std::collections::HashSet<u64> = (0..100_000).map(record_key).collect();
    assert_eq!(keys.len(), 100_000);
    assert_eq!(record_key(0), 6_284_781_860_667_377_211);
    Ok(())
}
