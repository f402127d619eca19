//! What a stress run drives: one engine in this process ([`EngineTarget`]), or `lidb serve`
//! over the Redis protocol (`serve.rs`). Every method may be called from several threads.

use lidb_engines::Engine;

/// Entries a scan returned: (key, value) in key order.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The operations a stress worker issues. Errors are one line each.
pub trait Target: Send + Sync {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    fn delete(&self, key: &[u8]) -> Result<(), String>;
    /// Writes every entry (a later entry of a key wins); atomic where the engine's batches are.
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<(), String>;
    /// Up to `limit` entries with key in `[start, end)`, in key order.
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Rows, String>;
    /// Runs one of the target's background jobs, chosen by `pick` (flush, compaction or GC,
    /// conversion, checkpoint); returns its name.
    fn background(&self, pick: u64) -> Result<&'static str, String>;
}

/// One of lidb's engines in this process.
pub struct EngineTarget {
    pub engine: Box<dyn Engine>,
}

impl std::fmt::Debug for EngineTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineTarget")
            .field("engine", &self.engine.name())
            .finish()
    }
}

impl Target for EngineTarget {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.engine.put(key, value).map_err(|e| e.to_string())
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.engine.get(key).map_err(|e| e.to_string())
    }
    fn delete(&self, key: &[u8]) -> Result<(), String> {
        self.engine.delete(key).map_err(|e| e.to_string())
    }
    fn put_many(&self, entries: &[(&[u8], &[u8])]) -> Result<(), String> {
        self.engine.put_many(entries).map_err(|e| e.to_string())
    }
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Rows, String> {
        let mut out = Vec::new();
        self.engine
            .scan(start, Some(end), limit, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
            })
            .map_err(|e| e.to_string())?;
        Ok(out)
    }
    fn background(&self, pick: u64) -> Result<&'static str, String> {
        // learnedkv alone converts; for the other engines the third pick is a flush.
        let converts = self.engine.name() == "learnedkv";
        match pick % 3 {
            0 => self.engine.flush().map(|()| "flush"),
            1 => self.engine.gc().map(|()| gc_name(self.engine.name())),
            _ if converts => self.engine.convert().map(|()| "convert"),
            _ => self.engine.flush().map(|()| "flush"),
        }
        .map_err(|e| e.to_string())
    }
}

/// What `Engine::gc` is for each engine.
fn gc_name(engine: &str) -> &'static str {
    match engine {
        "lsm" => "compaction",
        "finedex" | "learnedstore" | "btree" => "checkpoint",
        _ => "gc",
    }
}
