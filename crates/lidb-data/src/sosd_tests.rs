//! Tests of `sosd.rs`: round trips and every malformed-file case.

use super::*;
use crate::fileio::ZSTD_MAGIC;
use crate::testutil::{TempDir, TestResult};

/// Raw SOSD bytes with an explicit header count and key bytes.
fn raw(count: u64, keys: &[u64]) -> Vec<u8> {
    let mut out = count.to_le_bytes().to_vec();
    for k in keys {
        out.extend_from_slice(&k.to_le_bytes());
    }
    out
}

fn format_detail(r: Result<Vec<u64>>) -> String {
    match r {
        Err(Error::Format { detail, .. }) => detail,
        other => panic!("expected a Format error, got {other:?}"),
    }
}

#[test]
fn round_trip_plain_and_zst() -> TestResult {
    let dir = TempDir::new("sosd_rt")?;
    let keys: Vec<u64> = vec![0, 1, 1, 7, 1 << 40, u64::MAX - 1, u64::MAX, u64::MAX];
    let small: Vec<u32> = vec![0, 3, 3, 9, u32::MAX];
    for name in ["k.bin", "k.zst", "k.sosd.zst"] {
        let p = dir.path().join(name);
        write_u64(&p, &keys)?;
        assert_eq!(read_u64(&p)?, keys, "{name}");
        let head = std::fs::read(&p)?;
        let zst = head.get(..4) == Some(&ZSTD_MAGIC[..]);
        assert_eq!(zst, name.ends_with(".zst"), "{name}: compressed iff .zst");
        let p32 = dir.path().join(format!("u32_{name}"));
        write_u32(&p32, &small)?;
        assert_eq!(read_u32(&p32)?, small, "{name}");
    }
    Ok(())
}

#[test]
fn round_trip_empty_and_large() -> TestResult {
    let dir = TempDir::new("sosd_rt2")?;
    for name in ["e.bin", "e.zst"] {
        let p = dir.path().join(name);
        write_u64(&p, &[])?;
        assert_eq!(read_u64(&p)?, Vec::<u64>::new());
    }
    // More than one read chunk, and a count that is not a multiple of the chunk.
    let keys: Vec<u64> = (0..100_003u64).map(|i| i * 3).collect();
    for name in ["l.bin", "l.zst"] {
        let p = dir.path().join(name);
        write_u64(&p, &keys)?;
        assert_eq!(read_u64(&p)?, keys);
    }
    Ok(())
}

#[test]
fn missing_file_is_io_naming_the_path() {
    let p = std::path::Path::new("/nonexistent/dir/keys_uint64.zst");
    match read_u64(p) {
        Err(e @ Error::Io { .. }) => {
            assert!(e.to_string().contains("keys_uint64.zst"), "{e}");
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn header_larger_than_data() -> TestResult {
    let dir = TempDir::new("sosd_short")?;
    for name in ["h.bin", "h.zst"] {
        let p = dir.path().join(name);
        let bytes = raw(10, &[1, 2, 3]);
        if name.ends_with(".zst") {
            std::fs::write(&p, zstd::encode_all(&bytes[..], 3)?)?;
        } else {
            std::fs::write(&p, &bytes)?;
        }
        let detail = format_detail(read_u64(&p));
        assert_eq!(
            detail, "header says 10 u64 keys but the file holds 3",
            "{name}"
        );
        let e = read_u64(&p).err().ok_or("expected an error")?;
        assert!(e.to_string().contains(name), "{e}");
    }
    // A header so large it must not be trusted for allocation.
    let p = dir.path().join("huge.bin");
    std::fs::write(&p, raw(u64::MAX, &[1]))?;
    let detail = format_detail(read_u64(&p));
    assert!(detail.contains(&u64::MAX.to_string()), "{detail}");
    Ok(())
}

#[test]
fn header_smaller_than_data() -> TestResult {
    let dir = TempDir::new("sosd_long")?;
    let p = dir.path().join("t.bin");
    std::fs::write(&p, raw(2, &[1, 2, 3, 4]))?;
    assert_eq!(
        format_detail(read_u64(&p)),
        "header says 2 u64 keys but the file holds 4"
    );
    Ok(())
}

#[test]
fn trailing_and_odd_sizes() -> TestResult {
    let dir = TempDir::new("sosd_odd")?;
    let p = dir.path().join("o.bin");
    let mut bytes = raw(2, &[1, 2]);
    bytes.extend_from_slice(&[0xAA, 0xBB, 0xCC]);
    std::fs::write(&p, &bytes)?;
    assert_eq!(
        format_detail(read_u64(&p)),
        "header says 2 u64 keys but the 19 bytes after it hold 2 keys and 3 trailing bytes"
    );
    // Every size shorter than the header.
    for len in 0..8usize {
        std::fs::write(&p, vec![1u8; len])?;
        let detail = format_detail(read_u64(&p));
        assert!(
            detail.contains(&format!("file holds {len} bytes")),
            "{detail}"
        );
    }
    // Every size of a u32 file with a partial key.
    let mut bytes = 3u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 10]);
    std::fs::write(&p, &bytes)?;
    match read_u32(&p) {
        Err(Error::Format { detail, .. }) => assert_eq!(
            detail,
            "header says 3 u32 keys but the 10 bytes after it hold 2 keys and 2 trailing bytes"
        ),
        other => panic!("expected Format, got {other:?}"),
    }
    Ok(())
}

#[test]
fn unsorted_names_first_position() -> TestResult {
    let dir = TempDir::new("sosd_unsorted")?;
    let keys = [1u64, 5, 5, 4, 9, 2];
    for name in ["u.bin", "u.zst"] {
        let p = dir.path().join(name);
        write_u64(&p, &keys)?;
        match read_u64(&p) {
            Err(Error::Unsorted { position, .. }) => assert_eq!(position, 3),
            other => panic!("expected Unsorted, got {other:?}"),
        }
        assert_eq!(read_u64_any_order(&p)?, keys.to_vec());
    }
    let p = dir.path().join("u32.bin");
    write_u32(&p, &[2, 1])?;
    assert!(matches!(
        read_u32(&p),
        Err(Error::Unsorted { position: 1, .. })
    ));
    assert_eq!(read_u32_any_order(&p)?, vec![2, 1]);
    Ok(())
}

#[test]
fn corrupt_and_truncated_zstd_are_format_errors() -> TestResult {
    let dir = TempDir::new("sosd_corrupt")?;
    let good = dir.path().join("g.zst");
    let keys: Vec<u64> = (0..50_000u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    write_u64(&good, &keys)?;
    let bytes = std::fs::read(&good)?;
    let bad = dir.path().join("b.zst");
    // Truncations at many points, including right after the magic.
    for cut in [4usize, 5, 9, 20, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&bad, bytes.get(..cut).unwrap_or_default())?;
        let r = read_u64_any_order(&bad);
        assert!(matches!(r, Err(Error::Format { .. })), "cut {cut}: {r:?}");
    }
    // Flipped bytes in the body.
    for pos in [
        6usize,
        12,
        bytes.len() / 3,
        bytes.len() / 2,
        bytes.len() - 3,
    ] {
        let mut corrupt = bytes.clone();
        if let Some(b) = corrupt.get_mut(pos) {
            *b ^= 0x5A;
        }
        std::fs::write(&bad, &corrupt)?;
        let r = read_u64_any_order(&bad);
        // Some flips may still decode (zstd frames carry no mandatory checksum): the key
        // counts then disagree or the data changed; what matters is no panic and no silent
        // success with the wrong length.
        if let Ok(v) = r {
            assert_eq!(v.len(), keys.len(), "flip at {pos}");
        }
    }
    Ok(())
}

#[test]
fn writes_replace_atomically() -> TestResult {
    let dir = TempDir::new("sosd_atomic")?;
    let p = dir.path().join("a.zst");
    write_u64(&p, &[1, 2, 3])?;
    write_u64(&p, &[4])?;
    assert_eq!(read_u64(&p)?, vec![4]);
    let entries = std::fs::read_dir(dir.path())?.count();
    assert_eq!(entries, 1);
    // Writing into a missing directory is an Io error naming a path there.
    let missing = dir.path().join("no/such/dir/x.bin");
    match write_u64(&missing, &[1]) {
        Err(e @ Error::Io { .. }) => assert!(e.to_string().contains("no/such/dir"), "{e}"),
        other => panic!("expected Io, got {other:?}"),
    }
    Ok(())
}

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Arbitrary bytes, plain or behind a zstd magic, never panic any reader.
        #[test]
        fn arbitrary_bytes_never_panic(
            body in proptest::collection::vec(any::<u8>(), 0..200),
            as_zstd_magic in any::<bool>(),
            count in 0u64..40,
            use_count in any::<bool>(),
        ) {
            let dir = TempDir::new("sosd_fuzz").map_err(|e| TestCaseError::fail(e.to_string()))?;
            let p = dir.path().join("f");
            let mut bytes = Vec::new();
            if as_zstd_magic {
                bytes.extend_from_slice(&ZSTD_MAGIC);
            }
            if use_count {
                bytes.extend_from_slice(&count.to_le_bytes());
            }
            bytes.extend_from_slice(&body);
            std::fs::write(&p, &bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let _ = read_u64(&p);
            let _ = read_u64_any_order(&p);
            let _ = read_u32(&p);
            let _ = crate::text::read_keys(&p);
        }
    }
}
