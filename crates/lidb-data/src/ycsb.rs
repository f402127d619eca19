//! YCSB core workloads A-F as a seeded, engine-agnostic stream of operations on record numbers.
//!
//! Records are numbered `0..record_count` at load time; an engine turns a record number into
//! its key with [`record_key`] (YCSB's hashed insert order). The generator is single-threaded
//! and deterministic: the same `(workload, record_count, distribution, seed)` gives the same
//! operations everywhere.
//!
//! | workload | mix | default request distribution |
//! |---|---|---|
//! | A | 50% read, 50% update | zipfian 0.99 |
//! | B | 95% read, 5% update | zipfian 0.99 |
//! | C | 100% read | zipfian 0.99 |
//! | D | 95% read, 5% insert | latest |
//! | E | 95% scan (length uniform 1..=100), 5% insert | zipfian 0.99 |
//! | F | 50% read, 50% read-modify-write | zipfian 0.99 |
//!
//! Invariants:
//! 1. Inserts take the next record number (`record_count`, `record_count + 1`, ...) and every
//!    later operation may address them; no operation addresses a record not yet inserted.
//! 2. The operation is chosen as YCSB's `DiscreteGenerator` does (one uniform draw against the
//!    cumulative proportions read, update, insert, scan, read-modify-write).
//! 3. Record choice follows YCSB's `CoreWorkload`: zipfian is a scrambled Zipfian over
//!    `record_count + expected inserts` records, redrawn while above the last inserted record;
//!    latest is `SkewedLatest` over the inserted records. Two documented differences: YCSB sizes
//!    the expected inserts from the operation count, which this generator does not know, so it
//!    assumes as many operations as records (`2 * insert proportion * record_count`); and
//!    uniform choice covers all records inserted so far (YCSB's covers only the loaded ones).

use std::fmt;

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};
use crate::zipf::{ScrambledZipfian, SkewedLatest, ZIPFIAN_CONSTANT, check_theta, fnvhash64};

/// Largest scan length (YCSB's default `maxscanlength`).
pub const MAX_SCAN_LEN: u32 = 100;

/// Redraws of a zipfian record above the last inserted one before falling back to a modulo.
const MAX_REDRAWS: u32 = 1_000;

/// The key of record `record`: YCSB's hashed insert order, `fnvhash64(record)`.
pub fn record_key(record: u64) -> u64 {
    fnvhash64(record)
}

/// A YCSB core workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    A,
    B,
    C,
    D,
    E,
    F,
}

/// Operation proportions of a workload (they sum to 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
}

impl Workload {
    /// All workloads, A to F.
    pub const ALL: [Workload; 6] = [
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
    ];

    /// The workload's letter, lowercase (`"a"` .. `"f"`).
    pub fn name(self) -> &'static str {
        match self {
            Workload::A => "a",
            Workload::B => "b",
            Workload::C => "c",
            Workload::D => "d",
            Workload::E => "e",
            Workload::F => "f",
        }
    }

    /// Parses `a`..`f`, `A`..`F` or `workloada`..`workloadf`.
    pub fn from_name(name: &str) -> Result<Workload> {
        let lower = name.to_ascii_lowercase();
        let letter = lower.strip_prefix("workload").unwrap_or(&lower);
        Workload::ALL
            .into_iter()
            .find(|w| w.name() == letter)
            .ok_or_else(|| {
                Error::InvalidSpec(format!(
                    "unknown YCSB workload '{name}'; known: a, b, c, d, e, f"
                ))
            })
    }

    /// The operation proportions.
    pub fn mix(self) -> Mix {
        let m = |read, update, insert, scan, read_modify_write| Mix {
            read,
            update,
            insert,
            scan,
            read_modify_write,
        };
        match self {
            Workload::A => m(0.5, 0.5, 0.0, 0.0, 0.0),
            Workload::B => m(0.95, 0.05, 0.0, 0.0, 0.0),
            Workload::C => m(1.0, 0.0, 0.0, 0.0, 0.0),
            Workload::D => m(0.95, 0.0, 0.05, 0.0, 0.0),
            Workload::E => m(0.0, 0.0, 0.05, 0.95, 0.0),
            Workload::F => m(0.5, 0.0, 0.0, 0.0, 0.5),
        }
    }

    /// YCSB's request distribution for this workload.
    pub fn default_distribution(self) -> RequestDistribution {
        match self {
            Workload::D => RequestDistribution::Latest,
            _ => RequestDistribution::Zipfian {
                theta: ZIPFIAN_CONSTANT,
            },
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the records of reads, updates, scans and read-modify-writes are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RequestDistribution {
    /// Every inserted record equally likely.
    Uniform,
    /// YCSB's scrambled Zipfian with constant `theta` (0 < theta < 1; YCSB uses 0.99).
    Zipfian { theta: f64 },
    /// YCSB's skewed latest: the most recently inserted records are hottest.
    Latest,
}

/// One operation on record numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Read(u64),
    Update(u64),
    Insert(u64),
    /// Read `len` records in key order starting at the key of record `start`.
    Scan {
        start: u64,
        len: u32,
    },
    ReadModifyWrite(u64),
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

#[derive(Debug, Clone)]
enum Chooser {
    Uniform,
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
}

/// A seeded stream of YCSB operations (also an endless [`Iterator`]).
#[derive(Debug, Clone)]
pub struct Generator {
    workload: Workload,
    mix: Mix,
    rng: ChaCha8Rng,
    record_count: u64,
    chooser: Chooser,
}

impl Generator {
    /// A generator for `workload` over `record_count` loaded records (at least 1), with the
    /// workload's default distribution unless `distribution` is given.
    pub fn new(
        workload: Workload,
        record_count: u64,
        distribution: Option<RequestDistribution>,
        seed: u64,
    ) -> Result<Generator> {
        if record_count == 0 {
            return Err(Error::InvalidSpec(
                "YCSB record count must be at least 1".to_string(),
            ));
        }
        let mix = workload.mix();
        let chooser = match distribution.unwrap_or(workload.default_distribution()) {
            RequestDistribution::Uniform => Chooser::Uniform,
            RequestDistribution::Zipfian { theta } => {
                check_theta(theta)?;
                let expected_inserts = (record_count as f64 * mix.insert * 2.0) as u64;
                let max = record_count.saturating_add(expected_inserts) - 1;
                Chooser::Zipfian(ScrambledZipfian::new(0, max, theta)?)
            }
            RequestDistribution::Latest => {
                Chooser::Latest(SkewedLatest::new(record_count - 1, ZIPFIAN_CONSTANT)?)
            }
        };
        Ok(Generator {
            workload,
            mix,
            rng: ChaCha8Rng::seed_from_u64(seed),
            record_count,
            chooser,
        })
    }

    /// The workload being generated.
    pub fn workload(&self) -> Workload {
        self.workload
    }

    /// Records that exist now: the loaded ones plus every insert generated so far.
    pub fn record_count(&self) -> u64 {
        self.record_count
    }

    /// The next operation.
    pub fn next_op(&mut self) -> Op {
        match self.next_kind() {
            Kind::Read => Op::Read(self.next_record()),
            Kind::Update => Op::Update(self.next_record()),
            Kind::Insert => {
                let record = self.record_count;
                self.record_count = self.record_count.saturating_add(1);
                Op::Insert(record)
            }
            Kind::Scan => {
                let start = self.next_record();
                let len = self.rng.gen_range(1..=MAX_SCAN_LEN);
                Op::Scan { start, len }
            }
            Kind::ReadModifyWrite => Op::ReadModifyWrite(self.next_record()),
        }
    }

    /// YCSB's `DiscreteGenerator`: one uniform draw against the cumulative proportions; if
    /// rounding leaves the draw past the end, the last kind with a non-zero share.
    fn next_kind(&mut self) -> Kind {
        let m = self.mix;
        let kinds = [
            (m.read, Kind::Read),
            (m.update, Kind::Update),
            (m.insert, Kind::Insert),
            (m.scan, Kind::Scan),
            (m.read_modify_write, Kind::ReadModifyWrite),
        ];
        let mut u: f64 = self.rng.r#gen();
        for (share, kind) in kinds {
            if u < share {
                return kind;
            }
            u -= share;
        }
        kinds
            .into_iter()
            .rev()
            .find(|(share, _)| *share > 0.0)
            .map_or(Kind::Read, |(_, kind)| kind)
    }

    /// A record to operate on, never one not yet inserted.
    fn next_record(&mut self) -> u64 {
        let last = self.record_count - 1;
        match &mut self.chooser {
            Chooser::Uniform => self.rng.gen_range(0..=last),
            Chooser::Latest(g) => g.next_value(last, &mut self.rng),
            Chooser::Zipfian(g) => {
                for _ in 0..MAX_REDRAWS {
                    let r = g.next_value(&mut self.rng);
                    if r <= last {
                        return r;
                    }
                }
                g.next_value(&mut self.rng) % self.record_count
            }
        }
    }
}

impl Iterator for Generator {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        Some(self.next_op())
    }
}

#[cfg(test)]
#[path = "ycsb_tests.rs"]
mod tests;
