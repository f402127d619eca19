//! MergingIter, DbIter and LevelIter against a BTreeMap model built from layered sources:
//! the newest source wins, deletions are hidden, seeks land on lower bounds, the upper bound
//! stops scans, errors propagate.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lidb_lsm::iter::{DbIter, LevelIter, MergingIter, VecEntry, VecIter};
use lidb_lsm::{EntryKind, SortedIter};
use lidb_storage::{Error, Result};
use proptest::prelude::*;

/// A source: key -> Some(value) for a put, None for a deletion.
type Layer = BTreeMap<Vec<u8>, Option<Vec<u8>>>;
/// The merged model: key -> (kind, seq, value).
type Model = BTreeMap<Vec<u8>, (EntryKind, u64, Vec<u8>)>;

fn seq_of(index: usize) -> u64 {
    1000 - index as u64
}

fn entries(layer: &Layer, seq: u64) -> Vec<VecEntry> {
    layer
        .iter()
        .map(|(k, v)| match v {
            Some(v) => (k.clone(), EntryKind::Put, seq, v.clone()),
            None => (k.clone(), EntryKind::Delete, seq, Vec::new()),
        })
        .collect()
}

fn level_iter(tables: Vec<Vec<VecEntry>>) -> Box<dyn SortedIter> {
    Box::new(LevelIter::new(
        tables,
        |t: &Vec<VecEntry>| Ok(Box::new(VecIter::new(t.clone())) as Box<dyn SortedIter>),
        |t: &Vec<VecEntry>| t.last().map_or(&[][..], |e| e.0.as_slice()),
    ))
}

/// Source `index` as a VecIter, or (when `split` holds a table size) as a LevelIter over tables.
fn source(layer: &Layer, index: usize, split: Option<usize>) -> Box<dyn SortedIter> {
    let all = entries(layer, seq_of(index));
    match split {
        Some(size) if !all.is_empty() => level_iter(all.chunks(size).map(<[_]>::to_vec).collect()),
        _ => Box::new(VecIter::new(all)),
    }
}

/// For each key, the entry of the first (newest) layer holding it.
fn merged(layers: &[Layer]) -> Model {
    let mut out = Model::new();
    for (i, layer) in layers.iter().enumerate().rev() {
        for (k, kind, seq, v) in entries(layer, seq_of(i)) {
            out.insert(k, (kind, seq, v));
        }
    }
    out
}

fn build(layers: &[Layer], splits: &[Option<usize>]) -> MergingIter {
    MergingIter::new(
        layers
            .iter()
            .enumerate()
            .map(|(i, l)| source(l, i, splits.get(i).copied().flatten()))
            .collect(),
    )
}

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..4, 0..4)
}

fn layers_strategy() -> impl Strategy<Value = (Vec<Layer>, Vec<Option<usize>>)> {
    let value = prop::option::weighted(0.7, prop::collection::vec(any::<u8>(), 0..6));
    let layer = prop::collection::btree_map(key_strategy(), value, 0..30);
    prop::collection::vec(layer, 1..6).prop_flat_map(|layers| {
        let n = layers.len();
        (
            Just(layers),
            prop::collection::vec(prop::option::of(1usize..5), n),
        )
    })
}

/// Everything a SortedIter yields from its position on.
fn drain(it: &mut dyn SortedIter) -> Vec<(Vec<u8>, EntryKind, u64, Vec<u8>)> {
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.kind(), it.seq(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

fn model_rows<'a>(
    rows: impl Iterator<Item = (&'a Vec<u8>, &'a (EntryKind, u64, Vec<u8>))>,
) -> Vec<(Vec<u8>, EntryKind, u64, Vec<u8>)> {
    rows.map(|(k, (kind, seq, v))| (k.clone(), *kind, *seq, v.clone()))
        .collect()
}

fn live<'a>(
    rows: impl Iterator<Item = (&'a Vec<u8>, &'a (EntryKind, u64, Vec<u8>))>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    rows.filter(|(_, (kind, _, _))| *kind == EntryKind::Put)
        .map(|(k, (_, _, v))| (k.clone(), v.clone()))
        .collect()
}

fn drain_db<I: SortedIter>(it: &mut DbIter<I>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn merging_iter_yields_the_newest_entry_of_each_key(
        (layers, splits) in layers_strategy(),
        targets in prop::collection::vec(key_strategy(), 1..8),
    ) {
        let model = merged(&layers);
        let mut it = build(&layers, &splits);
        prop_assert!(!it.valid());
        it.seek_to_first().unwrap();
        prop_assert_eq!(drain(&mut it), model_rows(model.iter()));
        for target in &targets {
            it.seek(target).unwrap();
            prop_assert_eq!(drain(&mut it), model_rows(model.range(target.clone()..)), "target {:?}", target);
        }
    }

    #[test]
    fn db_iter_hides_deletions_and_stops_at_the_upper_bound(
        (layers, splits) in layers_strategy(),
        start in key_strategy(),
        upper in prop::option::of(key_strategy()),
    ) {
        let model = merged(&layers);
        let mut it = DbIter::new(build(&layers, &splits), upper.clone());
        prop_assert!(!it.valid());
        it.seek(&start).unwrap();
        let expected = match &upper {
            Some(u) if *u <= start => Vec::new(),
            Some(u) => live(model.range(start.clone()..u.clone())),
            None => live(model.range(start.clone()..)),
        };
        prop_assert_eq!(drain_db(&mut it), expected);
        prop_assert!(!it.valid());
        it.next().unwrap();
        prop_assert!(!it.valid());

        it.seek_to_first().unwrap();
        let expected = match &upper {
            Some(u) => live(model.range(..u.clone())),
            None => live(model.iter()),
        };
        prop_assert_eq!(drain_db(&mut it), expected);
    }

    #[test]
    fn level_iter_equals_one_sorted_vector(
        layer in prop::collection::btree_map(key_strategy(), prop::option::of(prop::collection::vec(any::<u8>(), 0..4)), 1..40),
        size in 1usize..6,
        targets in prop::collection::vec(key_strategy(), 1..10),
    ) {
        let all = entries(&layer, 7);
        let mut level = level_iter(all.chunks(size).map(<[_]>::to_vec).collect());
        let mut flat = VecIter::new(all);
        level.seek_to_first().unwrap();
        flat.seek_to_first().unwrap();
        prop_assert_eq!(drain(level.as_mut()), drain(&mut flat));
        for target in &targets {
            level.seek(target).unwrap();
            flat.seek(target).unwrap();
            prop_assert_eq!(drain(level.as_mut()), drain(&mut flat), "target {:?}", target);
        }
    }
}

#[test]
fn level_iter_opens_tables_lazily_across_boundaries() {
    let key = |i: u32| format!("{i:04}").into_bytes();
    let tables: Vec<Vec<VecEntry>> = (0..5u32)
        .map(|t| {
            (0..10u32)
                .map(|i| (key(t * 100 + i * 2), EntryKind::Put, 1, vec![t as u8]))
                .collect()
        })
        .collect();
    let opened = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&opened);
    let mut it = LevelIter::new(
        tables,
        move |t: &Vec<VecEntry>| {
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(Box::new(VecIter::new(t.clone())) as Box<dyn SortedIter>)
        },
        |t: &Vec<VecEntry>| t.last().map_or(&[][..], |e| e.0.as_slice()),
    );
    assert_eq!(opened.load(Ordering::Relaxed), 0);
    // Between table 1 (largest 0118) and table 2 (smallest 0200): lands on 0200.
    it.seek(&key(150)).unwrap();
    assert_eq!(it.key(), key(200).as_slice());
    assert_eq!(opened.load(Ordering::Relaxed), 1);
    // A seek inside the open table does not reopen it.
    it.seek(&key(205)).unwrap();
    assert_eq!(it.key(), key(206).as_slice());
    assert_eq!(opened.load(Ordering::Relaxed), 1);
    // Walk across the boundary into table 3.
    for _ in 0..7 {
        it.next().unwrap();
    }
    assert_eq!(it.key(), key(300).as_slice());
    assert_eq!(it.value(), &[3]);
    assert_eq!(opened.load(Ordering::Relaxed), 2);
    // Past the last key.
    it.seek(&key(419)).unwrap();
    assert!(!it.valid());
    it.seek(&key(9999)).unwrap();
    assert!(!it.valid());
    it.next().unwrap();
    assert!(!it.valid());
    it.seek_to_first().unwrap();
    assert_eq!(it.key(), key(0).as_slice());

    let mut empty = LevelIter::new(
        Vec::<Vec<VecEntry>>::new(),
        |t: &Vec<VecEntry>| Ok(Box::new(VecIter::new(t.clone())) as Box<dyn SortedIter>),
        |t: &Vec<VecEntry>| t.last().map_or(&[][..], |e| e.0.as_slice()),
    );
    empty.seek_to_first().unwrap();
    assert!(!empty.valid());
    empty.seek(b"x").unwrap();
    assert!(!empty.valid());
}

/// A source that fails once `budget` positioning calls have been made.
struct Failing {
    inner: VecIter,
    budget: usize,
}

impl Failing {
    fn spend(&mut self) -> Result<()> {
        if self.budget == 0 {
            return Err(Error::Corruption {
                file: PathBuf::from("000007.sst"),
                detail: "injected".into(),
            });
        }
        self.budget -= 1;
        Ok(())
    }
}

impl SortedIter for Failing {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.spend()?;
        self.inner.seek_to_first()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.spend()?;
        self.inner.seek(target)
    }
    fn next(&mut self) -> Result<()> {
        self.spend()?;
        self.inner.next()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn kind(&self) -> EntryKind {
        self.inner.kind()
    }
    fn seq(&self) -> u64 {
        self.inner.seq()
    }
}

fn numbered(n: u32, kind: EntryKind) -> Vec<VecEntry> {
    (0..n)
        .map(|i| (format!("{i:03}").into_bytes(), kind, 1, b"v".to_vec()))
        .collect()
}

#[test]
fn errors_propagate_and_leave_iterators_invalid() {
    let failing = |budget| -> Box<dyn SortedIter> {
        Box::new(Failing {
            inner: VecIter::new(numbered(10, EntryKind::Put)),
            budget,
        })
    };
    // Merging: the failing source errors on its third call (a next).
    let mut it = MergingIter::new(vec![
        Box::new(VecIter::new(numbered(5, EntryKind::Put))),
        failing(2),
    ]);
    it.seek_to_first().unwrap();
    it.next().unwrap();
    let err = it.next().unwrap_err();
    assert!(err.to_string().contains("000007.sst"), "{err}");
    assert!(!it.valid());
    // Seeks propagate too.
    let mut it = MergingIter::new(vec![failing(0)]);
    assert!(it.seek(b"001").is_err());
    assert!(!it.valid());

    // DbIter: an error while skipping a run of deletions.
    let deletions = Failing {
        inner: VecIter::new(numbered(10, EntryKind::Delete)),
        budget: 4,
    };
    let mut db = DbIter::new(MergingIter::new(vec![Box::new(deletions)]), None);
    assert!(db.seek_to_first().is_err());
    assert!(!db.valid());

    // LevelIter: opening the second table fails when the scan crosses into it.
    let tables = vec![
        numbered(3, EntryKind::Put),
        vec![(b"100".to_vec(), EntryKind::Put, 1, Vec::new())],
    ];
    let mut level = LevelIter::new(
        tables,
        |t: &Vec<VecEntry>| {
            if t.len() == 1 {
                Err(Error::Corruption {
                    file: PathBuf::from("000009.sst"),
                    detail: "injected".into(),
                })
            } else {
                Ok(Box::new(VecIter::new(t.clone())) as Box<dyn SortedIter>)
            }
        },
        |t: &Vec<VecEntry>| t.last().map_or(&[][..], |e| e.0.as_slice()),
    );
    level.seek_to_first().unwrap();
    level.next().unwrap();
    level.next().unwrap();
    assert_eq!(level.key(), b"002");
    assert!(level.next().is_err());
    assert!(!level.valid());
    assert!(level.seek(b"100").is_err());
    level.seek(b"001").unwrap();
    assert_eq!(level.key(), b"001");
}

#[test]
fn merging_iter_over_memtables_and_a_level() {
    use lidb_lsm::memtable::MemTable;
    let newer = Arc::new(MemTable::new());
    let older = Arc::new(MemTable::new());
    older.insert(1, EntryKind::Put, b"a", b"a1");
    older.insert(2, EntryKind::Put, b"b", b"b1");
    newer.insert(3, EntryKind::Delete, b"a", b"");
    newer.insert(4, EntryKind::Put, b"c", b"c2");
    // Not visible at snapshot 4.
    newer.insert(5, EntryKind::Put, b"b", b"b5");
    let level = level_iter(vec![
        vec![(b"a".to_vec(), EntryKind::Put, 0, b"a0".to_vec())],
        vec![(b"d".to_vec(), EntryKind::Put, 0, b"d0".to_vec())],
    ]);
    let merging = MergingIter::new(vec![
        Box::new(newer.iter(4)),
        Box::new(older.iter(4)),
        level,
    ]);
    let mut it = DbIter::new(merging, Some(b"d".to_vec()));
    it.seek_to_first().unwrap();
    assert_eq!(
        drain_db(&mut it),
        vec![
            (b"b".to_vec(), b"b1".to_vec()),
            (b"c".to_vec(), b"c2".to_vec())
        ]
    );
}
