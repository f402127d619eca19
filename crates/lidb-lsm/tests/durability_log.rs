//! The record log under crashes, truncations, bit flips and injected faults.

use std::path::{Path, PathBuf};

use lidb_storage::Error;
use lidb_storage::Storage;
use lidb_storage::log::{LOG_HEADER_BYTES, LogWriter, parse_log, read_log};
use lidb_storage::mem::{Fault, MemStorage};
use lidb_storage::tail::TailKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn ok<T>(r: lidb_storage::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn setup() -> (MemStorage, PathBuf) {
    let s = MemStorage::new();
    ok(s.create_dir_all(Path::new("/db")));
    (s, PathBuf::from("/db/000001.log"))
}

fn random_record(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(1000..20_000),
        _ => rng.gen_range(1..200),
    };
    (0..len).map(|_| rng.r#gen::<u8>()).collect()
}

/// A valid log image with `n` random records.
fn log_bytes(seed: u64, n: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    let (s, path) = setup();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut w = LogWriter::new(ok(s.create(&path)), path.clone());
    let mut records = Vec::new();
    for _ in 0..n {
        let r = random_record(&mut rng);
        ok(w.add_record(&r));
        records.push(r);
    }
    ok(w.sync());
    (ok(s.read_all(&path)), records)
}

#[test]
fn round_trip_and_empty_logs() {
    let (bytes, records) = log_bytes(1, 50);
    let got = parse_log(&bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.records, records);
    assert_eq!(got.valid_len, bytes.len() as u64);
    assert_eq!(got.bad_tail, None);

    let (s, path) = setup();
    let w = LogWriter::new(ok(s.create(&path)), path.clone());
    drop(w);
    let empty = ok(read_log(&s, &path));
    assert!(empty.records.is_empty() && empty.bad_tail.is_none() && empty.valid_len == 0);

    let mut w = LogWriter::new(ok(s.create(&path)), path.clone());
    ok(w.sync());
    assert_eq!(w.len(), LOG_HEADER_BYTES);
    let header_only = ok(read_log(&s, &path));
    assert!(header_only.records.is_empty() && header_only.bad_tail.is_none());
    assert_eq!(header_only.valid_len, LOG_HEADER_BYTES);
}

#[test]
fn crash_keeps_synced_records_and_a_prefix_of_the_rest() {
    let (mut torn, mut beyond_synced) = (0, 0);
    for seed in 0..200u64 {
        let (s, path) = setup();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut w = LogWriter::new(ok(s.create(&path)), path.clone());
        ok(s.sync_dir(Path::new("/db")));
        let mut written = Vec::new();
        let mut synced = 0usize;
        for _ in 0..rng.gen_range(0..60) {
            let r = random_record(&mut rng);
            ok(w.add_record(&r));
            written.push(r);
            if rng.gen_bool(0.2) {
                ok(w.sync());
                synced = written.len();
            }
        }
        s.crash(seed);
        let got = read_log(&s, &path).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(
            got.records.len() >= synced,
            "seed {seed}: {} records read, {synced} were synced",
            got.records.len()
        );
        assert_eq!(
            got.records.as_slice(),
            written.get(..got.records.len()).unwrap_or_default(),
            "seed {seed}: a returned record differs from the one written"
        );
        let file_len = ok(s.file_size(&path));
        torn += usize::from(got.bad_tail.is_some());
        beyond_synced += usize::from(got.records.len() > synced);
        match &got.bad_tail {
            None => assert_eq!(got.valid_len, file_len, "seed {seed}"),
            Some(t) => {
                assert_eq!(t.offset, got.valid_len, "seed {seed}");
                assert_eq!(
                    t.kind,
                    TailKind::Torn,
                    "seed {seed}: a crash is never damage"
                );
                assert!(got.valid_len < file_len, "seed {seed}: {}", t.detail);
            }
        }
        // Truncating the torn tail leaves a clean log.
        ok(s.truncate(&path, got.valid_len));
        let again = ok(read_log(&s, &path));
        assert_eq!(again.records, got.records, "seed {seed}");
        assert_eq!(again.bad_tail, None, "seed {seed}");
    }
    // The seeds exercise both torn tails and unsynced records that survived.
    assert!(
        torn > 20 && beyond_synced > 20,
        "torn {torn}, beyond synced {beyond_synced}"
    );
}

#[test]
fn every_truncation_returns_a_prefix() {
    let (bytes, records) = log_bytes(2, 12);
    for cut in 0..=bytes.len() {
        let got = parse_log(bytes.get(..cut).unwrap_or_default())
            .unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        assert_eq!(
            got.records.as_slice(),
            records.get(..got.records.len()).unwrap_or_default(),
            "cut {cut}"
        );
        assert!(got.valid_len <= cut as u64, "cut {cut}");
        assert_eq!(
            got.bad_tail.is_some(),
            got.valid_len < cut as u64,
            "cut {cut}"
        );
        if let Some(t) = &got.bad_tail {
            assert_eq!(
                t.kind,
                TailKind::Torn,
                "cut {cut}: a truncation is a torn tail"
            );
        }
    }
}

#[test]
fn bit_flips_never_return_a_bad_record() {
    for seed in 0..20u64 {
        let (bytes, records) = log_bytes(100 + seed, 8);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..200 {
            let mut b = bytes.clone();
            let flips = rng.gen_range(1..4);
            for _ in 0..flips {
                let at = rng.gen_range(0..b.len());
                if let Some(x) = b.get_mut(at) {
                    *x ^= rng.gen_range(1..=255u8);
                }
            }
            // A header flip may be a clean Corruption error; otherwise a prefix of the records.
            if let Ok(got) = parse_log(&b) {
                assert_eq!(
                    got.records.as_slice(),
                    records.get(..got.records.len()).unwrap_or_default(),
                    "seed {seed}: a corrupt record was returned"
                );
            }
        }
    }
}

#[test]
fn garbage_never_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for _ in 0..2000 {
        let len = rng.gen_range(0..64);
        let mut b: Vec<u8> = (0..len).map(|_| rng.r#gen::<u8>()).collect();
        if rng.gen_bool(0.5) {
            // Valid header, garbage records (including huge lengths).
            let mut h = b"LIDBLOG\x01".to_vec();
            h.append(&mut b);
            b = h;
        }
        let _ = parse_log(&b);
    }
}

#[test]
fn header_errors_are_corruption_naming_the_file() {
    let (s, path) = setup();
    let mut f = ok(s.create(&path));
    ok(f.append(b"SSTABLE! and more"));
    match read_log(&s, &path) {
        Err(Error::Corruption { file, detail }) => {
            assert_eq!(file, path);
            assert!(detail.contains("not a lidb log"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    let mut f = ok(s.create(&path));
    ok(f.append(b"LIDBLOG\x09"));
    match read_log(&s, &path) {
        Err(Error::Corruption { detail, .. }) => assert!(detail.contains("version 9"), "{detail}"),
        other => panic!("{other:?}"),
    }
    // A torn or zeroed header is a torn tail at 0, not an error.
    for torn in [b"LID".as_slice(), &[0u8; 8], &[0u8; 30]] {
        let got = parse_log(torn).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.valid_len, 0);
        assert_eq!(got.bad_tail.map(|t| t.kind), Some(TailKind::Torn));
    }
    assert!(read_log(&s, Path::new("/db/missing.log")).is_err());
}

#[test]
fn faults_poison_the_writer() {
    for fault in [Fault::WriteError, Fault::ShortWrite, Fault::SyncError] {
        for after in 0..4u64 {
            let (s, path) = setup();
            let mut w = LogWriter::new(ok(s.create(&path)), path.clone());
            ok(s.sync_dir(Path::new("/db")));
            s.fail_after(after, fault);
            let mut acknowledged = Vec::new();
            let mut failed = false;
            for i in 0..8u8 {
                let record = vec![i; 10 + usize::from(i)];
                let r = w.add_record(&record).and_then(|()| w.sync());
                match r {
                    Ok(()) => {
                        assert!(!failed, "{fault:?} after {after}: write after a failure");
                        acknowledged.push(record);
                    }
                    Err(e) => {
                        assert!(matches!(e, Error::Io { .. }), "{e}");
                        failed = true;
                    }
                }
            }
            assert!(failed, "{fault:?} after {after}: the fault never fired");
            s.clear_faults();
            let got = ok(read_log(&s, &path));
            assert!(
                got.records.len() >= acknowledged.len()
                    && got.records.get(..acknowledged.len()) == Some(acknowledged.as_slice()),
                "{fault:?} after {after}: acknowledged records lost"
            );
            s.crash(after);
            let got = ok(read_log(&s, &path));
            assert_eq!(
                got.records.get(..acknowledged.len()),
                Some(acknowledged.as_slice()),
                "{fault:?} after {after}: acknowledged records lost in a crash"
            );
        }
    }
}

#[test]
fn len_counts_the_header_and_the_framing() {
    let (s, path) = setup();
    let mut w = LogWriter::new(ok(s.create(&path)), path.clone());
    ok(w.add_record(b"fine"));
    assert_eq!(w.len(), LOG_HEADER_BYTES + 8 + 4);
}
