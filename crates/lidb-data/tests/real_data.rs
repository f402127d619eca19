//! The real datasets of `shared/datasets` load with the counts the README states, sorted.
//! Each test prints `SKIPPED` (and passes) when the data directory or the file is absent.

use lidb_data::datadir::{WORDS_DATASET, require_dataset};
use lidb_data::{info, keymap, sosd, text};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Loads a real u64 dataset (read_u64 rejects unsorted files) and checks its counts.
fn check_u64(test: &str, name: &str, count: u64, distinct: u64) -> TestResult {
    let Some(path) = require_dataset(test, name) else {
        return Ok(());
    };
    let keys = sosd::read_u64(&path)?;
    let i = info(&keys);
    eprintln!("{name}: {i}");
    assert!(i.sorted, "{name}");
    assert_eq!(i.count, count, "{name}");
    assert_eq!(i.distinct, distinct, "{name}");
    Ok(())
}

#[test]
fn osm_cellids_loads() -> TestResult {
    check_u64(
        "osm_cellids_loads",
        "osm_cellids_274K_uint64.zst",
        273_745,
        273_719,
    )
}

#[test]
fn tweet_ts_loads() -> TestResult {
    check_u64(
        "tweet_ts_loads",
        "tweet_ts_10M_uint64.zst",
        10_000_000,
        9_943_752,
    )
}

#[test]
fn tweetids_loads() -> TestResult {
    check_u64(
        "tweetids_loads",
        "tweetids_10M_uint64.zst",
        10_000_000,
        10_000_000,
    )
}

#[test]
fn words_load_and_their_images_are_monotone() -> TestResult {
    let test = "words_load_and_their_images_are_monotone";
    let Some(path) = require_dataset(test, WORDS_DATASET) else {
        return Ok(());
    };
    let words = text::read_keys(&path)?;
    assert_eq!(words.len(), 663_473);
    let unique = words.iter().zip(words.iter().skip(1)).all(|(a, b)| a < b);
    assert!(unique, "words are strictly increasing");
    let prefix = keymap::common_prefix_len(&words);
    let images = keymap::images(&words);
    let first_drop = images
        .iter()
        .zip(images.iter().skip(1))
        .position(|(a, b)| b < a);
    assert_eq!(first_drop, None, "images are non-decreasing");
    let mut distinct = images.clone();
    distinct.dedup();
    eprintln!(
        "{WORDS_DATASET}: {} words, common prefix {prefix} bytes, {} distinct images ({} words share an image with the word before)",
        words.len(),
        distinct.len(),
        words.len() - distinct.len()
    );
    Ok(())
}
