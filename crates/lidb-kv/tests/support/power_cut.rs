// Shared by the store crash test files (included): runs a workload on a PowerCut storage that
// cuts the power at operation N, for N over the whole workload, and checks the reopened store.
// Paths are written out in full: this file is included next to store_options.rs, in one module.

/// Opens the store in `/kv` of `storage`.
pub fn open_on(
    storage: impl lidb_storage::Storage + 'static,
    opts: &lidb_kv::StoreOptions,
) -> lidb_storage::Result<lidb_kv::Store> {
    let dir = std::path::Path::new("/kv");
    lidb_kv::Store::open_with_storage(std::sync::Arc::new(storage), dir, opts.clone())
}

/// Runs `workload` once without a cut to count its storage operations, then about `cuts` times
/// with the power cut at operations spread over that count (and a crash at the end if the cut
/// never came). After each, reopens the store on the rebooted storage and hands it, with what
/// the interrupted workload recorded in `E`, to `check` (whose last argument names the run).
pub fn each_power_cut<E: Default>(
    opts: &lidb_kv::StoreOptions,
    cuts: usize,
    workload: impl Fn(&lidb_kv::Store, &mut E) -> lidb_storage::Result<()>,
    check: impl Fn(&lidb_kv::Store, &E, &str),
) {
    use lidb_storage::mem::MemStorage;
    use lidb_storage::powercut::PowerCut;
    let total = {
        let p = PowerCut::new(MemStorage::new(), u64::MAX, 0);
        let store = open_on(p.clone(), opts).unwrap();
        workload(&store, &mut E::default()).unwrap();
        drop(store);
        p.ops()
    };
    for (i, cut_at) in (1..=total).step_by((total as usize / cuts).max(1)).enumerate() {
        let seed = i as u64;
        let mem = MemStorage::new();
        let p = PowerCut::new(mem.clone(), cut_at, seed);
        let mut recorded = E::default();
        if let Ok(store) = open_on(p.clone(), opts) {
            let _ = workload(&store, &mut recorded);
            drop(store);
        }
        if !p.is_cut() {
            mem.crash(seed);
        }
        let ctx = format!("power cut at operation {cut_at} of {total} (tear seed {seed})");
        let store = open_on(mem, opts).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        check(&store, &recorded, &ctx);
    }
}
