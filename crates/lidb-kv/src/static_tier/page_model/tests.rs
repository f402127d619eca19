#![expect(
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "tests: a failed expectation is a failed test"
)]

use super::*;
use crate::vlog::{VlogKind, encode_header, encode_record};

/// An svlog image of `records` (key, value) in order: the bytes and each record's place.
fn svlog(records: &[(Vec<u8>, Vec<u8>)]) -> (Vec<u8>, Vec<(u64, u32)>) {
    let mut bytes = encode_header(VlogKind::Static, 7).to_vec();
    let mut places = Vec::new();
    for (k, v) in records {
        let rec = encode_record(k, v);
        places.push((bytes.len() as u64, rec.len() as u32));
        bytes.extend_from_slice(&rec);
    }
    (bytes, places)
}

fn rec(key: &str, value_len: usize) -> (Vec<u8>, Vec<u8>) {
    (key.as_bytes().to_vec(), vec![0xab; value_len])
}

/// The page-start table computed by brute force: for each page, the first place starting in it.
fn brute_starts(places: &[(u64, u32)], pages: u64) -> Vec<u16> {
    (0..pages)
        .map(|p| {
            places
                .iter()
                .find(|(o, _)| o / PAGE_BYTES == p)
                .map_or(NO_RECORD_START, |(o, _)| (o % PAGE_BYTES) as u16)
        })
        .collect()
}

#[test]
fn page_starts_of_records_straddling_and_longer_than_pages() {
    // 1000-byte values straddle pages; a 20 000-byte value covers whole pages; then small.
    let mut records: Vec<_> = (0..9).map(|i| rec(&format!("a{i}"), 1000)).collect();
    records.push(rec("b", 20_000));
    records.extend((0..5).map(|i| rec(&format!("c{i}"), 30)));
    let (bytes, places) = svlog(&records);
    let plan = plan_pages(&places, bytes.len() as u64).expect("plan");
    let pages = (bytes.len() as u64).div_ceil(PAGE_BYTES);
    assert_eq!(plan.page_starts, brute_starts(&places, pages));
    assert_eq!(plan.page_starts[0], 32);
    // Record 9 ("b", bytes 9158..29171) starts in page 2 and covers pages 3 to 6 wholly: they
    // have no start; page 7 holds its end and the next record's start.
    let b_page = places[9].0 / PAGE_BYTES;
    assert_eq!(b_page, 2);
    for p in 3..7 {
        assert_eq!(plan.page_starts[p], NO_RECORD_START, "page {p}");
    }
    assert_eq!(u64::from(plan.page_starts[7]), places[10].0 % PAGE_BYTES);
    // A page without a start repeats the previous page's last record.
    assert_eq!(plan.last_record[b_page as usize + 1], 9);
    for (p, &last) in plan.last_record.iter().enumerate() {
        let (o, _) = places[last as usize];
        assert!(o / PAGE_BYTES <= p as u64);
        if let Some((next, _)) = places.get(last as usize + 1) {
            assert!(
                next / PAGE_BYTES > p as u64,
                "page {p}: a later record starts in it"
            );
        }
    }
    assert_eq!(plan.max_record_len, places[9].1);
    let b_span = (places[9].0 + u64::from(places[9].1) - 1) / PAGE_BYTES - b_page;
    assert_eq!(plan.tail_pages, b_span);
}

#[test]
fn tail_pages_are_capped_and_edge_cases_plan() {
    let (bytes, places) = svlog(&[rec("k", 200_000)]);
    let plan = plan_pages(&places, bytes.len() as u64).expect("plan");
    assert_eq!(plan.tail_pages, MAX_TAIL_PAGES);
    assert_eq!(
        plan.page_starts.len() as u64,
        (bytes.len() as u64).div_ceil(PAGE_BYTES)
    );
    assert!(plan.page_starts[1..].iter().all(|&s| s == NO_RECORD_START));
    // A single small record: one page, tail 0.
    let (bytes, places) = svlog(&[rec("only", 3)]);
    let plan = plan_pages(&places, bytes.len() as u64).expect("plan");
    assert_eq!((plan.page_starts.clone(), plan.tail_pages), (vec![32], 0));
    // No record, a gap, or a size that disagrees: no plan.
    assert_eq!(plan_pages(&[], 32), None);
    assert_eq!(plan_pages(&[(32, 20), (60, 20)], 80), None);
    assert_eq!(plan_pages(&[(32, 20)], 60), None);
}

#[test]
fn max_lead_counts_tied_pages_before_a_start() {
    // Pages 0..5 images; a record starting in page 3 with image 5 has pages 1 and 2 (image 5)
    // just before it.
    let images = [1, 5, 5, 5, 9];
    assert_eq!(max_lead(&images, [(0, 1), (3, 5), (4, 9)].into_iter()), 2);
    assert_eq!(max_lead(&images, [(0, 1), (1, 5), (4, 9)].into_iter()), 0);
    assert_eq!(max_lead(&[], std::iter::empty()), 0);
}

/// Every key is found from every window that starts at or before its page and whose search end
/// is after it; absent keys are absent.
#[test]
fn find_in_window_finds_every_key_from_every_covering_window() {
    let mut records = Vec::new();
    for i in 0..60u32 {
        let len = match i % 7 {
            0 => 5000,
            3 => 0,
            _ => (i as usize * 37) % 900,
        };
        records.push(rec(&format!("key{:04}", i * 2), len));
    }
    let (bytes, places) = svlog(&records);
    let file_bytes = bytes.len() as u64;
    let plan = plan_pages(&places, file_bytes).expect("plan");
    let pages = plan.page_starts.len() as u64;
    for (i, (key, value)) in records.iter().enumerate() {
        let t = places[i].0 / PAGE_BYTES;
        for lo in t.saturating_sub(3)..=t {
            for search_end in t + 1..=(t + 3).min(pages) {
                let read_end = (search_end + plan.tail_pages).min(pages);
                let buf = bytes
                    .get(
                        (lo * PAGE_BYTES) as usize
                            ..((read_end * PAGE_BYTES) as usize).min(bytes.len()),
                    )
                    .expect("window");
                let w = Window {
                    buf,
                    first_page: lo,
                    search_end,
                    file_bytes,
                };
                match find_in_window(w, &plan.page_starts, key).expect("find") {
                    Found::Value { start, end } => assert_eq!(&buf[start..end], value.as_slice()),
                    other => panic!("key {i} window [{lo}, {search_end}): {other:?}"),
                }
                // The key just after it (odd numbers are absent).
                let absent = format!("key{:04}", i * 2 + 1);
                let got = find_in_window(w, &plan.page_starts, absent.as_bytes()).expect("find");
                assert!(matches!(got, Found::Absent | Found::Tail { .. }), "{got:?}");
            }
        }
    }
}

#[test]
fn a_record_past_the_window_is_a_tail() {
    let (bytes, places) = svlog(&[rec("a", 10), rec("b", 100_000), rec("c", 10)]);
    let plan = plan_pages(&places, bytes.len() as u64).expect("plan");
    let buf = bytes.get(..(2 * PAGE_BYTES) as usize).expect("window");
    let w = Window {
        buf,
        first_page: 0,
        search_end: 1,
        file_bytes: bytes.len() as u64,
    };
    assert_eq!(
        find_in_window(w, &plan.page_starts, b"b").expect("find"),
        Found::Tail {
            offset: places[1].0,
            len: places[1].1
        }
    );
    assert!(matches!(
        find_in_window(w, &plan.page_starts, b"a").expect("find"),
        Found::Value { .. }
    ));
}

#[test]
fn a_wrong_page_start_or_record_is_an_error_never_a_panic() {
    let records: Vec<_> = (0..40).map(|i| rec(&format!("k{i:03}"), 700)).collect();
    let (bytes, places) = svlog(&records);
    let file_bytes = bytes.len() as u64;
    let plan = plan_pages(&places, file_bytes).expect("plan");
    let pages = plan.page_starts.len() as u64;
    let last = &records[39].0;
    // A start moved by one byte, or a start where none is: the walk across pages notices it.
    for p in 1..pages as usize {
        for delta in [1u16, 4000] {
            let mut starts = plan.page_starts.clone();
            starts[p] = starts[p].wrapping_add(delta) % 4096;
            let w = Window {
                buf: &bytes,
                first_page: 0,
                search_end: pages,
                file_bytes,
            };
            assert!(
                find_in_window(w, &starts, last).is_err(),
                "page {p} +{delta}"
            );
        }
    }
    // Every byte of a record flipped: an error or the right answer, never another value.
    for at in (places[3].0..places[5].0).step_by(3) {
        let mut bad = bytes.clone();
        bad[at as usize] ^= 0x40;
        let w = Window {
            buf: &bad,
            first_page: 0,
            search_end: pages,
            file_bytes,
        };
        for (k, v) in records.iter().take(8) {
            if let Ok(Found::Value { start, end }) = find_in_window(w, &plan.page_starts, k) {
                assert_eq!(&bad[start..end], v.as_slice(), "flip at {at}");
            }
        }
    }
    // A window cut short of its records' headers.
    let w = Window {
        buf: &bytes[..40],
        first_page: 0,
        search_end: 1,
        file_bytes,
    };
    assert!(find_in_window(w, &plan.page_starts, last).is_err());
}

#[test]
fn the_model_round_trips_and_bad_models_are_refused() {
    let m = SvlogModel {
        pages: 3,
        family_tag: 1,
        page_boundary: 4,
        max_lead: 0,
        tail_pages: 1,
        max_record_len: 1000,
        page_starts: vec![32, 100, NO_RECORD_START],
        index: vec![1, 2, 3],
    };
    let mut bytes = Vec::new();
    m.encode_into(&mut bytes);
    let mut r = ByteReader::new(&bytes);
    assert_eq!(SvlogModel::decode_from(&mut r).expect("decode"), m);
    for cut in 0..bytes.len() {
        let mut r = ByteReader::new(&bytes[..cut]);
        assert!(SvlogModel::decode_from(&mut r).is_err(), "cut {cut}");
    }
    let bad = [
        SvlogModel {
            page_starts: vec![33, 100, NO_RECORD_START],
            ..m.clone()
        },
        SvlogModel {
            page_starts: vec![32, 4096, NO_RECORD_START],
            ..m.clone()
        },
        SvlogModel {
            tail_pages: MAX_TAIL_PAGES + 1,
            ..m.clone()
        },
        SvlogModel {
            max_lead: 3,
            ..m.clone()
        },
        SvlogModel {
            index: Vec::new(),
            ..m.clone()
        },
    ];
    for b in bad {
        let mut bytes = Vec::new();
        b.encode_into(&mut bytes);
        assert!(
            SvlogModel::decode_from(&mut ByteReader::new(&bytes)).is_err(),
            "{b:?}"
        );
    }
    // A page count whose table would overflow.
    let mut huge = u64::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(&[0u8; 64]);
    assert!(SvlogModel::decode_from(&mut ByteReader::new(&huge)).is_err());
}

/// A window whose bytes end before the record the page-start table points at (a window shorter
/// than its pages, at every such length) is refused as such, not searched as an empty record.
#[test]
fn a_record_starting_past_the_window_bytes_is_named() {
    let records: Vec<_> = (0..40).map(|i| rec(&format!("k{i:03}"), 700)).collect();
    let (bytes, places) = svlog(&records);
    let file_bytes = bytes.len() as u64;
    let plan = plan_pages(&places, file_bytes).expect("plan");
    // Page 1 opens with the end of a record from page 0; its first record starts later.
    let start = usize::from(plan.page_starts[1]);
    assert!(start > 0 && start < PAGE_BYTES as usize, "{start}");
    let at = PAGE_BYTES + start as u64;
    let page1 = &bytes[PAGE_BYTES as usize..];
    for len in 0..start {
        let w = Window {
            buf: &page1[..len],
            first_page: 1,
            search_end: 2,
            file_bytes,
        };
        let err = find_in_window(w, &plan.page_starts, &records[10].0)
            .expect_err("a window short of its first record is an error");
        assert_eq!(
            err,
            format!("record at offset {at}: starts past the {len} bytes read from offset 4096")
        );
    }
}

/// `last_record` against its definition, by brute force, over records of mixed lengths (many
/// per page, straddling, spanning several pages).
#[test]
fn last_record_is_the_last_record_starting_at_or_before_each_page() {
    let lens = [30usize, 1000, 5000, 8, 4090, 12_000, 70, 1016];
    let records: Vec<_> = (0..300)
        .map(|i| rec(&format!("k{i:04}"), lens[(i * 7 + i / 3) % lens.len()]))
        .collect();
    let (bytes, places) = svlog(&records);
    let plan = plan_pages(&places, bytes.len() as u64).expect("plan");
    let pages = (bytes.len() as u64).div_ceil(PAGE_BYTES);
    assert_eq!(plan.last_record.len() as u64, pages);
    for p in 0..pages {
        let want = places
            .iter()
            .rposition(|(o, _)| o / PAGE_BYTES <= p)
            .expect("page 0 holds the first record") as u64;
        assert_eq!(plan.last_record[p as usize], want, "page {p}");
    }
}
