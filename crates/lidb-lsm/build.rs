//! Declares the `loom` cfg, under which the page cache's shards use loom's locks and atomics and
//! its loom model builds (src/table/cache/sync.rs says how to run it).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
