//! Single-node tests: random operations on one node against a `BTreeMap`, on the byte page and
//! read back through the atomic-word reader too; split and merge keep every entry and fence.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use proptest::prelude::*;

use super::*;

fn words(page: &[u8]) -> Vec<AtomicU64> {
    page.chunks_exact(8)
        .map(|c| AtomicU64::new(page::get_u64(c, 0)))
        .collect()
}

fn check_against(page: &[u8], model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = entries(page);
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, want);
    let w = words(page);
    for k in model.keys() {
        let (pos, found) = lower_bound(page, k);
        assert!(found);
        assert_eq!(lower_bound(w.as_slice(), k), (pos, true));
        assert_eq!(key(w.as_slice(), pos), *k);
    }
}

fn op() -> impl Strategy<Value = (u8, Vec<u8>, Vec<u8>)> {
    (
        0u8..3,
        prop::collection::vec(
            prop_oneof![Just(0u8), Just(1u8), Just(255u8), any::<u8>()],
            0..20,
        ),
        prop::collection::vec(any::<u8>(), 0..60),
    )
}

proptest! {
    #[test]
    fn node_ops_match_a_btreemap(ops in prop::collection::vec(op(), 1..200)) {
        let mut page = vec![0u8; 4096];
        init(&mut page, PageKind::Leaf, 0, None, None);
        let mut model = BTreeMap::new();
        for (what, k, v) in ops {
            let (pos, found) = lower_bound(page.as_slice(), &k);
            prop_assert_eq!(found, model.contains_key(&k));
            prop_assert_eq!(pos, model.range(..k.clone()).count());
            match what {
                0 | 1 => {
                    let ok = if found { set_value(&mut page, pos, &v) } else { insert(&mut page, pos, &k, &v) };
                    if ok { model.insert(k, v); } else {
                        prop_assert!(free_space(&page) < entry_size(k.len(), v.len()) + 200);
                    }
                }
                _ => if found { remove(&mut page, pos); model.remove(&k); },
            }
            if model.len() % 17 == 0 { fit_model(&mut page); }
        }
        fit_model(&mut page);
        check_against(&page, &model);
        // Split, then merge back.
        let mut right = vec![0u8; 4096];
        if let Some(sep) = split(&mut page, &mut right) {
            let (l, r): (BTreeMap<_, _>, BTreeMap<_, _>) = model.clone().into_iter().partition(|(k, _)| *k <= sep);
            check_against(&page, &l);
            check_against(&right, &r);
            prop_assert_eq!(upper_fence(page.as_slice()), Some(sep.clone()));
            prop_assert_eq!(lower_fence(right.as_slice()), Some(sep.clone()));
            prop_assert!(can_merge(&page, &right, sep.len()));
            prop_assert!(merge(&mut page, &right, &sep));
            check_against(&page, &model);
            prop_assert_eq!(upper_fence(page.as_slice()), None);
        }
    }
}

#[test]
fn inner_split_moves_the_middle_separator_up() {
    let mut page = vec![0u8; 4096];
    let es: Vec<(Vec<u8>, Vec<u8>)> = (0..100u64)
        .map(|i| {
            (
                format!("k{i:04}").into_bytes(),
                (i + 1000).to_le_bytes().to_vec(),
            )
        })
        .collect();
    assert!(build(
        &mut page,
        PageKind::Inner,
        1,
        None,
        Some(b"zzz"),
        &es,
        7,
        false
    ));
    let mut right = vec![0u8; 4096];
    let sep = split(&mut page, &mut right).unwrap_or_default();
    let nl = count(page.as_slice());
    let nr = count(right.as_slice());
    assert_eq!(nl + nr + 1, 100);
    assert!(key(page.as_slice(), nl - 1) < sep);
    assert_eq!(child(page.as_slice(), nl), 1000 + nl as u64);
    assert_eq!(rightmost(right.as_slice()), 7);
    assert_eq!(upper_fence(right.as_slice()), Some(b"zzz".to_vec()));
    // Every key routes to the child that held it before.
    for i in 0..100u64 {
        let k = format!("k{i:04}").into_bytes();
        let (p, pos) = if k <= sep {
            (&page, child_index(page.as_slice(), &k))
        } else {
            (&right, child_index(right.as_slice(), &k))
        };
        assert_eq!(child(p.as_slice(), pos), 1000 + i);
    }
}

#[test]
fn garbage_pages_never_panic() {
    let mut seed = 0x9e3779b97f4a7c15u64;
    for _ in 0..200 {
        let page: Vec<u8> = (0..4096)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let w = words(&page);
        let _ = lower_bound(w.as_slice(), b"some key");
        let _ = lower_bound(page.as_slice(), b"");
        let _ = (
            key(w.as_slice(), 3),
            value(w.as_slice(), 1),
            covers(w.as_slice(), b"x"),
        );
    }
}

#[test]
fn model_guided_search_agrees_with_binary_search_under_a_stale_model() {
    let mut page = vec![0u8; 16384];
    init(&mut page, PageKind::Leaf, 0, None, None);
    let mut keys: Vec<u64> = (0..300u64).map(|i| i * i * 1000 + 7).collect();
    for (i, k) in keys.iter().enumerate() {
        assert!(insert(&mut page, i, &k.to_be_bytes(), b"v"));
    }
    fit_model(&mut page);
    let (slope, _) = model(page.as_slice());
    assert!(slope > 0.0);
    // Skew the keys after the fit: the model is now stale.
    for j in 0..200u64 {
        let k = 1_000_000 + j;
        let (pos, found) = lower_bound(page.as_slice(), &k.to_be_bytes());
        assert!(!found);
        assert!(insert(&mut page, pos, &k.to_be_bytes(), b"w"));
        keys.push(k);
    }
    keys.sort_unstable();
    for probe in (0..300u64 * 300 * 1000)
        .step_by(9973)
        .chain(keys.iter().copied())
    {
        let want = keys.partition_point(|k| *k < probe);
        let (pos, found) = lower_bound(page.as_slice(), &probe.to_be_bytes());
        assert_eq!(pos, want, "probe {probe}");
        assert_eq!(found, keys.get(want) == Some(&probe));
    }
}

#[test]
fn heads_after_the_fences_common_prefix_order_keys() {
    let mut page = vec![0u8; 4096];
    let (lower, upper) = (
        b"user/shared/0100".as_slice(),
        b"user/shared/0900".as_slice(),
    );
    init(&mut page, PageKind::Leaf, 0, Some(lower), Some(upper));
    assert_eq!(prefix_len(page.as_slice()), 13);
    let mut model = BTreeMap::new();
    let mut x = 7u64;
    for _ in 0..120 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = 101 + (x >> 33) % 799;
        let mut k = format!("user/shared/{n:04}").into_bytes();
        k.extend(std::iter::repeat_n(b'z', ((x >> 20) % 5) as usize));
        let (pos, found) = lower_bound(page.as_slice(), &k);
        assert_eq!(found, model.contains_key(&k));
        if !found && insert(&mut page, pos, &k, b"v") {
            model.insert(k, b"v".to_vec());
        }
    }
    fit_model(&mut page);
    check_against(&page, &model);
    // Heads use the bytes after the prefix, so they differ for distinct numbers.
    let h1 = slot(page.as_slice(), 0).head;
    let h2 = slot(page.as_slice(), count(page.as_slice()) - 1).head;
    assert!(h1 >> 32 != h2 >> 32);
}
