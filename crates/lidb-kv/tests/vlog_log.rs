//! Value logs: round trips, crashes at random points, torn tails, corruption, bad bytes.
//! Every randomised test prints its seed on failure through the assertion messages.
#![expect(
    clippy::expect_used,
    reason = "tests: a failed expectation is a failed test"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lidb_kv::vlog::{VLOG_HEADER_BYTES, VlogReader, VlogWriter, vlog_path};
use lidb_kv::{Error, Pointer};
use lidb_storage::RecoveryMode;
use lidb_storage::mem::{Fault, MemStorage};
use lidb_storage::{ReadMode, Storage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn setup() -> MemStorage {
    let s = MemStorage::new();
    s.create_dir_all(&dir()).ok();
    s
}

fn random_kv(rng: &mut ChaCha8Rng) -> (Vec<u8>, Vec<u8>) {
    let kl = rng.gen_range(0..40);
    let vl = if rng.gen_bool(0.1) {
        rng.gen_range(0..20_000)
    } else {
        rng.gen_range(0..300)
    };
    let k = (0..kl).map(|_| rng.r#gen::<u8>()).collect();
    let v = (0..vl).map(|_| rng.r#gen::<u8>()).collect();
    (k, v)
}

fn reader(s: &MemStorage) -> VlogReader {
    VlogReader::new(Arc::new(s.clone()), dir(), ReadMode::Buffered)
}

#[test]
fn append_read_scan_round_trip() {
    let s = setup();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut w = VlogWriter::create(&s, &dir(), 3).expect("create");
    assert_eq!(w.number(), 3);
    assert!(w.is_empty());
    let r = reader(&s);
    let mut written = Vec::new();
    for i in 0..1500 {
        let (k, v) = random_kv(&mut rng);
        let p = w.append(&k, &v).expect("append");
        assert_eq!(p.file, 3);
        assert_eq!(p.offset + u64::from(p.len), w.len());
        // Readable at once, through a cached handle that must notice the file grew.
        if i % 100 == 0 {
            assert_eq!(r.read(p).expect("read"), (k.clone(), v.clone()));
        }
        written.push((p, k, v));
    }
    w.sync().expect("sync");
    for (p, k, v) in &written {
        assert_eq!(&r.read(*p).expect("read"), &(k.clone(), v.clone()));
    }
    let scanned: Vec<_> = r
        .scan(3)
        .expect("scan")
        .map(|x| x.expect("record"))
        .collect();
    assert_eq!(scanned, written);
    // Reopen: nothing torn, appends continue after the last record.
    drop(w);
    let (mut w, torn) = VlogWriter::reopen(&s, &dir(), 3, RecoveryMode::default()).expect("reopen");
    assert_eq!(torn, None);
    let p = w.append(b"after", b"reopen").expect("append");
    assert_eq!(
        p.offset,
        written
            .last()
            .map_or(0, |(p, _, _)| p.offset + u64::from(p.len))
    );
    assert_eq!(
        r.read(p).expect("read"),
        (b"after".to_vec(), b"reopen".to_vec())
    );
    r.forget(3);
    assert_eq!(r.scan(3).expect("scan").count(), written.len() + 1);
}

#[test]
fn crash_at_random_points_keeps_synced_records_and_cuts_torn_tails() {
    for seed in 0..60u64 {
        let s = setup();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut w = VlogWriter::create(&s, &dir(), 1).expect("create");
        let mut all: Vec<(Pointer, Vec<u8>, Vec<u8>)> = Vec::new();
        let mut synced = 0;
        let steps = rng.gen_range(1..200);
        for _ in 0..steps {
            let (k, v) = random_kv(&mut rng);
            let p = w.append(&k, &v).expect("append");
            all.push((p, k, v));
            if rng.gen_bool(0.2) {
                w.sync().expect("sync");
                synced = all.len();
            }
        }
        s.crash(seed);
        let (mut w, torn) =
            VlogWriter::reopen(&s, &dir(), 1, RecoveryMode::default()).expect("reopen");
        let r = reader(&s);
        let scanned: Vec<_> = r
            .scan(1)
            .expect("scan")
            .map(|x| x.expect("clean after reopen"))
            .collect();
        // What survives is a prefix of what was appended: never a garbage record.
        assert!(scanned.len() >= synced, "seed {seed}: lost synced records");
        assert_eq!(
            scanned.as_slice(),
            all.get(..scanned.len()).unwrap_or_default(),
            "seed {seed}"
        );
        let end = scanned
            .last()
            .map_or(VLOG_HEADER_BYTES, |(p, _, _)| p.offset + u64::from(p.len));
        assert_eq!(w.len(), end, "seed {seed}");
        if let Some(t) = &torn {
            assert_eq!(t.offset, end, "seed {seed}");
            assert!(t.bytes > 0, "seed {seed}");
        }
        for (p, k, v) in all.iter().take(synced) {
            assert_eq!(
                r.read(*p).expect("synced record"),
                (k.clone(), v.clone()),
                "seed {seed}"
            );
        }
        // Appends go after the last intact record and scan cleanly.
        let p = w.append(b"k", b"v").expect("append");
        assert_eq!(p.offset, end);
        w.sync().expect("sync");
        r.forget(1);
        assert_eq!(
            r.scan(1)
                .expect("scan")
                .collect::<Result<Vec<_>, _>>()
                .expect("rec")
                .len(),
            scanned.len() + 1
        );
    }
}

#[test]
fn a_failed_append_poisons_the_writer() {
    let s = setup();
    let mut w = VlogWriter::create(&s, &dir(), 2).expect("create");
    w.append(b"a", b"1").expect("append");
    s.fail_after(0, Fault::ShortWrite);
    assert!(w.append(b"b", b"2").is_err());
    assert!(matches!(w.append(b"c", b"3"), Err(Error::Closed(_))));
    drop(w);
    let (_, torn) = VlogWriter::reopen(&s, &dir(), 2, RecoveryMode::default()).expect("reopen");
    assert!(torn.is_some(), "the half record is cut");
    assert_eq!(reader(&s).scan(2).expect("scan").count(), 1);
}

fn small_log(s: &MemStorage) -> Vec<(Pointer, Vec<u8>, Vec<u8>)> {
    let mut w = VlogWriter::create(s, &dir(), 9).expect("create");
    let mut out = Vec::new();
    for i in 0..6u8 {
        let k = vec![b'k', i];
        let v = vec![i; usize::from(i) * 7];
        let p = w.append(&k, &v).expect("append");
        out.push((p, k, v));
    }
    w.sync().expect("sync");
    out
}

fn corruption_at(e: &Error, path: &Path) -> String {
    match e {
        Error::Corruption { file, detail } => {
            assert_eq!(file, path);
            detail.clone()
        }
        other => panic!("expected Corruption, got {other}"),
    }
}

#[test]
fn corrupt_record_names_file_and_offset() {
    let s = setup();
    let recs = small_log(&s);
    let (p, _, _) = recs.get(3).cloned().expect("record 3");
    let path = vlog_path(&dir(), 9);
    s.corrupt(&path, p.offset + 14, 0x40).expect("corrupt");
    let r = reader(&s);
    let e = r.read(p).expect_err("corrupt record");
    let detail = corruption_at(&e, &path);
    assert!(
        detail.contains(&format!("record at offset {}", p.offset)),
        "{detail}"
    );
    assert!(detail.contains("checksum"), "{detail}");
    // Other records still read; a scan stops at the bad one with the same offset.
    let (p0, k0, v0) = recs.first().cloned().expect("record 0");
    assert_eq!(r.read(p0).expect("read"), (k0, v0));
    let items: Vec<_> = r.scan(9).expect("scan").collect();
    assert_eq!(items.len(), 4);
    let last = items.last().expect("an error").as_ref().expect_err("error");
    assert!(corruption_at(last, &path).contains(&format!("offset {}", p.offset)));
    // A pointer whose length disagrees with the record is corruption too.
    let bad = Pointer {
        len: p0.len + 1,
        ..p0
    };
    assert!(matches!(r.read(bad), Err(Error::Corruption { .. })));
    let past = Pointer {
        offset: 1 << 40,
        ..p0
    };
    assert!(
        corruption_at(&r.read(past).expect_err("past"), &path).contains("offset 1099511627776")
    );
}

#[test]
fn every_truncation_and_bit_flip_is_an_error_or_the_right_data() {
    let s0 = setup();
    let recs = small_log(&s0);
    let path = vlog_path(&dir(), 9);
    let full = s0.read_all(&path).expect("read");
    // Truncations: reopen cuts to a record boundary and never panics.
    for cut in 0..full.len() as u64 {
        let s = setup();
        small_log(&s);
        s.truncate(&path, cut).expect("truncate");
        match VlogWriter::reopen(&s, &dir(), 9, RecoveryMode::default()) {
            Ok((w, _)) => {
                let n = reader(&s)
                    .scan(9)
                    .expect("scan")
                    .collect::<Result<Vec<_>, _>>()
                    .expect("rec")
                    .len();
                assert_eq!(
                    w.len(),
                    recs.get(..n)
                        .and_then(|r| r.last())
                        .map_or(VLOG_HEADER_BYTES, |(p, _, _)| p.offset + u64::from(p.len))
                );
            }
            Err(e) => panic!("cut {cut}: reopen failed: {e}"),
        }
    }
    // Bit flips: every read either fails with Corruption or returns the record written.
    for byte in 0..full.len() as u64 {
        for mask in [0x01u8, 0x80] {
            let s = setup();
            small_log(&s);
            s.corrupt(&path, byte, mask).expect("corrupt");
            let r = reader(&s);
            for (p, k, v) in &recs {
                match r.read(*p) {
                    Ok(kv) => assert_eq!(kv, (k.clone(), v.clone()), "byte {byte}"),
                    Err(e) => assert!(matches!(e, Error::Corruption { .. }), "byte {byte}: {e}"),
                }
            }
            if let Ok(scan) = r.scan(9) {
                for (p, k, v) in scan.flatten() {
                    assert!(recs.contains(&(p, k, v)), "byte {byte}: garbage record");
                }
            }
            let _ = VlogWriter::reopen(&s, &dir(), 9, RecoveryMode::default());
        }
    }
}

#[test]
fn wrong_file_number_or_missing_file() {
    let s = setup();
    small_log(&s);
    s.rename(&vlog_path(&dir(), 9), &vlog_path(&dir(), 10))
        .expect("rename");
    let r = reader(&s);
    let p = Pointer {
        file: 10,
        offset: VLOG_HEADER_BYTES,
        len: 14,
    };
    assert!(matches!(r.read(p), Err(Error::Corruption { .. })));
    assert!(matches!(
        VlogWriter::reopen(&s, &dir(), 10, RecoveryMode::default()),
        Err(Error::Corruption { .. })
    ));
    assert!(matches!(
        r.read(Pointer { file: 11, ..p }),
        Err(Error::Io { .. })
    ));
}
