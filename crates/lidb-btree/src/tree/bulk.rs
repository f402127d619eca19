//! Bulk load of sorted pairs into an empty tree: leaves filled to a fill factor, then each inner
//! level from the one below, written straight to the page file (not through the pool, so a load
//! larger than the pool works); the root swip then holds the new root's page id and the pages
//! are read on demand. Nothing is durable until the caller's next checkpoint.
//!
//! Callers: the `BTree` handle (benchmarks), one thread; writers are kept out by the gate.

use super::{Target, Tree, retry};
use crate::buffer::Swip;
use crate::error::{Error, Result};
use crate::node::{self, NODE_HEADER};
use crate::page::{self, PageKind};

impl Tree {
    /// Loads `pairs` (strictly increasing keys) into the empty tree, filling leaves to
    /// `fill` (0.5..=1.0) of the page. Returns the number of pairs.
    pub fn bulk_load(
        &self,
        pairs: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
        fill: f64,
    ) -> Result<u64> {
        if !(0.5..=1.0).contains(&fill) {
            return Err(Error::InvalidOption(format!(
                "bulk load fill factor {fill} must be in 0.5..=1.0"
            )));
        }
        let _gate = self
            .gate
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let empty = retry(|| {
            let p = self.descend(Target::Last, u8::MAX, true)?;
            let w = &*self.pool.frame(p.node).words;
            let e = node::is_leaf(w) && node::count(w) == 0;
            super::restart_unless(self.pool.frame(p.node).latch.validate(p.version))?;
            Ok(e)
        })?;
        if !empty {
            return Err(Error::InvalidOption("bulk load needs an empty tree".into()));
        }
        let page_size = self.pool.page_size();
        let budget = ((page_size - NODE_HEADER) as f64 * fill) as usize;
        let mut level_refs: Vec<(Option<Vec<u8>>, u64)> = Vec::new();
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut bytes = 0usize;
        let mut lower: Option<Vec<u8>> = None;
        let mut count = 0u64;
        for (k, v) in pairs {
            self.check_sizes(&k, &v)?;
            if batch.last().is_some_and(|(last, _)| *last >= k)
                || lower.as_ref().is_some_and(|l| *l >= k)
            {
                return Err(Error::InvalidOption(
                    "bulk load keys must be strictly increasing".into(),
                ));
            }
            let size = node::entry_size(k.len(), v.len());
            if !batch.is_empty() && self.node_full(bytes + size, lower.as_deref(), budget) {
                let upper = batch.last().map(|(k, _)| k.clone());
                let pid = self.write_node(
                    PageKind::Leaf,
                    0,
                    lower.as_deref(),
                    upper.as_deref(),
                    &batch,
                    0,
                )?;
                level_refs.push((upper.clone(), pid));
                lower = upper;
                batch.clear();
                bytes = 0;
            }
            bytes += size;
            batch.push((k, v));
            count += 1;
        }
        let pid = self.write_node(PageKind::Leaf, 0, lower.as_deref(), None, &batch, 0)?;
        level_refs.push((None, pid));
        let mut level = 1u8;
        while level_refs.len() > 1 {
            level_refs = self.build_level(&level_refs, level, budget)?;
            level += 1;
        }
        let root_pid = level_refs.first().map_or(0, |(_, p)| *p);
        let _rg = self.root_latch.lock();
        let old = Swip::decode(self.root.load(std::sync::atomic::Ordering::Relaxed));
        if let Swip::Frame(f) = old {
            let frame = self.pool.frame(f);
            let _g = frame.latch.lock();
            let pid = frame.pid();
            // Page first, frame second, under the latch (see `Tree::merge_step` in smo.rs).
            self.pool.file().free_page(pid);
            self.pool.discard(f);
        }
        self.root.store(
            Swip::Page(root_pid).encode(),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(count)
    }

    /// Builds the inner level above `children` ((upper fence, pid) in key order).
    fn build_level(
        &self,
        children: &[(Option<Vec<u8>>, u64)],
        level: u8,
        budget: usize,
    ) -> Result<Vec<(Option<Vec<u8>>, u64)>> {
        let mut out = Vec::new();
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut bytes = 0usize;
        let mut lower: Option<Vec<u8>> = None;
        for (upper, pid) in children {
            let Some(sep) = upper else {
                // The last child: the rightmost child of the last node.
                let pid =
                    self.write_node(PageKind::Inner, level, lower.as_deref(), None, &batch, *pid)?;
                out.push((None, pid));
                return Ok(out);
            };
            let size = node::entry_size(sep.len(), 8);
            if !batch.is_empty() && self.node_full(bytes + size, lower.as_deref(), budget) {
                // This child ends the node: it becomes the rightmost child, its fence the
                // node's upper fence.
                let node_upper = Some(sep.clone());
                let pid = self.write_node(
                    PageKind::Inner,
                    level,
                    lower.as_deref(),
                    node_upper.as_deref(),
                    &batch,
                    *pid,
                )?;
                out.push((node_upper.clone(), pid));
                lower = node_upper;
                batch.clear();
                bytes = 0;
                continue;
            }
            bytes += size;
            batch.push((sep.clone(), pid.to_le_bytes().to_vec()));
        }
        Err(Error::InvalidOption(
            "bulk load: the last child has an upper fence".into(),
        ))
    }

    /// Whether entries of `bytes` would overfill a node: past the fill budget, or past the
    /// page once both fences (the upper one at most a maximal key) are counted.
    fn node_full(&self, bytes: usize, lower: Option<&[u8]>, budget: usize) -> bool {
        let room = self.pool.page_size() - NODE_HEADER;
        bytes > budget || bytes + lower.map_or(0, <[u8]>::len) + self.max_key > room
    }

    fn write_node(
        &self,
        kind: PageKind,
        level: u8,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        entries: &[(Vec<u8>, Vec<u8>)],
        rightmost: u64,
    ) -> Result<u64> {
        let pid = self.new_pid();
        let mut buf = vec![0u8; self.pool.page_size()];
        page::set_id(&mut buf, pid);
        let built = node::build(
            &mut buf,
            kind,
            level,
            lower,
            upper,
            entries,
            rightmost,
            kind == PageKind::Leaf,
        );
        if !built {
            return Err(Error::InvalidOption(format!(
                "bulk load: {} entries do not fit a page (a bug in the fill budget)",
                entries.len()
            )));
        }
        self.pool.file().write_page(pid, &mut buf)?;
        Ok(pid)
    }
}
