//! The one list of engines and of table indexes: every command that opens an engine, and every
//! harness, names them through [`EngineKind`] and [`IndexChoice`], so an engine or index one
//! command accepts is accepted by all, and a refusal lists every name.

use lidb_index::Family;
use lidb_lsm::{IndexKind, Unclustered};

/// Every engine lidb serves and compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// lidb-lsm, values inline in the tables.
    Lsm,
    /// lidb-kv with the learned tier (the LearnedKV paper).
    LearnedKv,
    /// lidb-kv without a tier: one LSM of pointers, GC writes them back (the paper's RocksDB+).
    LsmPlus,
    /// lidb-kv with the tier's learned index replaced by an LSM.
    LsmPlusTier,
    /// lidb-fine's FineStore over FINEdex.
    Finedex,
    /// lidb-btree's LearnedStore, its learned leaf path on.
    LearnedStore,
    /// lidb-btree's LearnedStore with the learned path off.
    Btree,
    /// Real RocksDB (the `rocksdb` cargo feature).
    RocksDb,
}

/// What kind of store an engine is, which decides the options it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Tables, a memtable, table reads: lsm, learnedkv, lsm+, lsm+tier.
    Lsm,
    /// Everything in memory, a log and checkpoints: finedex.
    InMemory,
    /// A buffer-managed tree under a write-ahead log: learnedstore, btree.
    Tree,
    /// RocksDB, with its own file layer.
    Foreign,
}

impl EngineKind {
    /// Every engine, in the order help texts and harnesses list them.
    pub const ALL: [EngineKind; 8] = [
        EngineKind::Lsm,
        EngineKind::LearnedKv,
        EngineKind::LsmPlus,
        EngineKind::LsmPlusTier,
        EngineKind::Finedex,
        EngineKind::LearnedStore,
        EngineKind::Btree,
        EngineKind::RocksDb,
    ];

    /// The name every command accepts.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Lsm => "lsm",
            EngineKind::LearnedKv => "learnedkv",
            EngineKind::LsmPlus => "lsm+",
            EngineKind::LsmPlusTier => "lsm+tier",
            EngineKind::Finedex => "finedex",
            EngineKind::LearnedStore => "learnedstore",
            EngineKind::Btree => "btree",
            EngineKind::RocksDb => "rocksdb",
        }
    }

    /// Whether this build can open it (rocksdb needs the `rocksdb` feature).
    pub fn built_in(self) -> bool {
        self != EngineKind::RocksDb || cfg!(feature = "rocksdb")
    }

    /// The engines this build can open.
    pub fn built() -> Vec<EngineKind> {
        EngineKind::ALL
            .into_iter()
            .filter(|k| k.built_in())
            .collect()
    }

    /// The engine named `name`, or an error listing every name.
    pub fn parse(name: &str) -> Result<EngineKind, String> {
        EngineKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown engine \"{name}\" (known: {})",
                    EngineKind::ALL.map(EngineKind::name).join(", ")
                )
            })
    }

    /// What kind of store it is.
    pub fn shape(self) -> Shape {
        match self {
            EngineKind::Lsm
            | EngineKind::LearnedKv
            | EngineKind::LsmPlus
            | EngineKind::LsmPlusTier => Shape::Lsm,
            EngineKind::Finedex => Shape::InMemory,
            EngineKind::LearnedStore | EngineKind::Btree => Shape::Tree,
            EngineKind::RocksDb => Shape::Foreign,
        }
    }

    /// Whether lidb's storage layer holds its files (every engine but rocksdb).
    pub fn is_lidb(self) -> bool {
        self != EngineKind::RocksDb
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EngineKind::parse(s)
    }
}

/// One index configuration of an LSM's tables (the LSM study's Figure 5): a clustered family,
/// the same with mapped keys retained (`pgm+keys`, its Figure 7 (C), (F), (I)), or an
/// unclustered index (`alex`, `lipp`, `dili`, `lits`; `family` is then unused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexChoice {
    pub family: Family,
    pub kind: IndexKind,
}

impl Default for IndexChoice {
    /// PGM, clustered: every engine's default table index.
    fn default() -> Self {
        IndexChoice::clustered(Family::Pgm)
    }
}

impl IndexChoice {
    /// A clustered family alone.
    pub fn clustered(family: Family) -> IndexChoice {
        IndexChoice {
            family,
            kind: IndexKind::Clustered,
        }
    }

    /// `fp`, `pgm+keys`, `alex`: what `parse` reads.
    pub fn name(&self) -> String {
        match self.kind {
            IndexKind::Clustered => self.family.name().to_string(),
            IndexKind::MappedKeys => format!("{}+keys", self.family.name()),
            IndexKind::Unclustered(u) => u.name().to_string(),
        }
    }

    /// Every name `parse` reads, as a help text or a refusal lists them.
    pub fn names() -> String {
        let families: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        let unclustered: Vec<&str> = Unclustered::ALL.iter().map(|u| u.name()).collect();
        format!(
            "{}, any of them with +keys (mapped keys retained), or an unclustered {}",
            families.join(", "),
            unclustered.join(", ")
        )
    }

    /// A family name, a family name with `+keys`, or an unclustered kind; an error lists every
    /// name.
    pub fn parse(name: &str) -> Result<IndexChoice, String> {
        if let Some(u) = Unclustered::from_name(name) {
            return Ok(IndexChoice {
                family: Family::Pgm,
                kind: IndexKind::Unclustered(u),
            });
        }
        let (family, kind) = match name.strip_suffix("+keys") {
            Some(f) => (f, IndexKind::MappedKeys),
            None => (name, IndexKind::Clustered),
        };
        let family = Family::from_name(family)
            .map_err(|_| format!("unknown index \"{name}\" (known: {})", IndexChoice::names()))?;
        Ok(IndexChoice { family, kind })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_name_parses_back_and_a_wrong_one_lists_them_all() {
        for kind in EngineKind::ALL {
            assert_eq!(EngineKind::parse(kind.name()), Ok(kind));
        }
        let Err(msg) = EngineKind::parse("nosuch") else {
            panic!("nosuch parsed")
        };
        for kind in EngineKind::ALL {
            assert!(msg.contains(kind.name()), "{msg}");
        }
    }

    #[test]
    fn every_index_name_parses_back_and_a_wrong_one_lists_them_all() {
        let mut all: Vec<IndexChoice> = Family::ALL
            .iter()
            .flat_map(|&f| {
                [
                    IndexChoice::clustered(f),
                    IndexChoice {
                        family: f,
                        kind: IndexKind::MappedKeys,
                    },
                ]
            })
            .collect();
        all.extend(Unclustered::ALL.iter().map(|&u| IndexChoice {
            family: Family::Pgm,
            kind: IndexKind::Unclustered(u),
        }));
        for choice in all {
            assert_eq!(IndexChoice::parse(&choice.name()), Ok(choice));
        }
        let Err(msg) = IndexChoice::parse("nosuch") else {
            panic!("nosuch parsed")
        };
        for name in Family::ALL
            .iter()
            .map(|f| f.name())
            .chain(Unclustered::ALL.iter().map(|u| u.name()))
        {
            assert!(msg.contains(name), "{name} missing from: {msg}");
        }
    }
}
