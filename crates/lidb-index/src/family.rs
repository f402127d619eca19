//! The index families, their parameters, and the one entry point that builds or decodes any of
//! them. Callers hold a `Box<dyn LearnedIndex>` and never name a concrete family type.

use std::fmt;

use crate::bound::{Bound, MIN_BOUNDARY};
use crate::codec::{self, FRAME_LEN, Header, Reader};
use crate::error::{Error, Result, corrupt};
use crate::points::validate_keys;
use crate::{binary, fiting, fp, lpa, pgm, plex, plr, rmi, rs};

/// The index families of the library; the CLI names are in [`Family::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Fence pointers: the last key of every block of B entries (the classic baseline).
    Fp,
    /// Binary search over all keys: no index memory, the in-memory baseline.
    Binary,
    /// Greedy piece-wise linear regression as in Bourbon.
    Plr,
    /// FITing-Tree: shrinking-cone segments under a B+-tree.
    Fiting,
    /// PGM-index: optimal segments, applied recursively.
    Pgm,
    /// RadixSpline: a greedy spline with a radix table.
    Rs,
    /// Recursive model index: a root model over linear leaves.
    Rmi,
    /// The learning probe algorithm of FINEdex.
    Lpa,
    /// PLEX: RadixSpline's spline under a self-tuned Compact Hist-Tree.
    Plex,
}

impl Family {
    pub const ALL: [Family; 9] = [
        Family::Fp,
        Family::Binary,
        Family::Plr,
        Family::Fiting,
        Family::Pgm,
        Family::Rs,
        Family::Rmi,
        Family::Lpa,
        Family::Plex,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::Fp => "fp",
            Family::Binary => "binary",
            Family::Plr => "plr",
            Family::Fiting => "fiting",
            Family::Pgm => "pgm",
            Family::Rs => "rs",
            Family::Rmi => "rmi",
            Family::Lpa => "lpa",
            Family::Plex => "plex",
        }
    }

    pub fn from_name(name: &str) -> Result<Family> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let known: Vec<_> = Family::ALL.iter().map(|f| f.name()).collect();
                Error::InvalidParam(format!(
                    "unknown index \"{name}\" (known: {})",
                    known.join(", ")
                ))
            })
    }

    /// The tag stored in the encoding header. DO NOT CHANGE THESE VALUES.
    pub fn tag(self) -> u8 {
        match self {
            Family::Fp => 1,
            Family::Binary => 2,
            Family::Plr => 3,
            Family::Fiting => 4,
            Family::Pgm => 5,
            Family::Rs => 6,
            Family::Rmi => 7,
            Family::Lpa => 8,
            Family::Plex => 9,
        }
    }

    pub fn from_tag(tag: u8) -> Result<Family> {
        Family::ALL
            .into_iter()
            .find(|f| f.tag() == tag)
            .ok_or_else(|| corrupt(format!("unknown family tag {tag}")))
    }

    /// Whether `search` keeps the position boundary. Only `binary` does not: it answers the whole
    /// key range and leaves everything to the last-mile search.
    pub fn is_bounded(self) -> bool {
        self != Family::Binary
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The root model of an RMI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmiRoot {
    Linear,
    Cubic,
}

/// Build parameters. Only `boundary` applies to every family; the rest are read by one family each.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Position boundary B: `search` answers ranges at most this wide. At least 2.
    pub boundary: u64,
    /// pgm: the error of the internal levels (in positions of the level below). At least 1.
    pub pgm_epsilon_recursive: u64,
    /// rs: bits of the radix table (0 to 30).
    pub rs_radix_bits: u32,
    /// rmi: the root model.
    pub rmi_root: RmiRoot,
    /// lpa: the largest model error tolerated; `None` takes the largest the boundary allows.
    pub lpa_threshold: Option<u64>,
    /// lpa: how many points the probe adds per forward step. At least 1.
    pub lpa_learning_step: u64,
    /// lpa: how fast the backward steps shrink, in (0, 1).
    pub lpa_learning_rate: f64,
    /// fiting: entries per B+-tree node. At least 2.
    pub fiting_fanout: u32,
}

impl Params {
    /// Defaults for every family-specific parameter, with the given boundary.
    pub fn new(boundary: u64) -> Params {
        Params {
            boundary,
            pgm_epsilon_recursive: 4,
            rs_radix_bits: rs::DEFAULT_RADIX_BITS,
            rmi_root: RmiRoot::Linear,
            lpa_threshold: None,
            lpa_learning_step: 32,
            lpa_learning_rate: 0.5,
            fiting_fanout: 16,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidParam(msg));
        if self.boundary < MIN_BOUNDARY {
            return bad(format!(
                "boundary {} is below the minimum {MIN_BOUNDARY}",
                self.boundary
            ));
        }
        if self.pgm_epsilon_recursive < 1 {
            return bad("pgm epsilon_recursive must be at least 1".into());
        }
        if self.rs_radix_bits > 30 {
            return bad(format!("rs radix_bits {} is above 30", self.rs_radix_bits));
        }
        if self.lpa_learning_step < 1 {
            return bad("lpa learning_step must be at least 1".into());
        }
        if !(self.lpa_learning_rate > 0.0 && self.lpa_learning_rate < 1.0) {
            return bad(format!(
                "lpa learning_rate {} is not in (0, 1)",
                self.lpa_learning_rate
            ));
        }
        if self.fiting_fanout < 2 {
            return bad("fiting fanout must be at least 2".into());
        }
        Ok(())
    }
}

/// One figure of an index's structure, for `lidb index stats`.
#[derive(Debug, Clone, PartialEq)]
pub enum StatValue {
    U64(u64),
    F64(f64),
    List(Vec<u64>),
}

/// The structure of a built index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexStats {
    /// Models (segments, spline points, leaves, fences) the index holds; 0 for `binary`.
    pub models: u64,
    /// Family-specific figures, named as in `lidb index stats --json`.
    pub details: Vec<(&'static str, StatValue)>,
}

/// The contract every family keeps. See `bound.rs` for what `search` guarantees.
///
/// Indexes are immutable once built: any thread may call any method.
pub trait LearnedIndex: Send + Sync + fmt::Debug {
    fn family(&self) -> Family;
    /// Number of keys the index was built over.
    fn key_count(&self) -> u64;
    /// The position boundary B it was built with.
    fn boundary(&self) -> u64;
    /// A range of positions that certainly holds `lower_bound(q)`, at most B wide.
    fn search(&self, q: u64) -> Bound;
    /// Length of the family-specific payload of the encoding.
    fn payload_len(&self) -> u64;
    /// Appends exactly `payload_len()` bytes.
    fn write_payload(&self, out: &mut Vec<u8>);
    fn stats(&self) -> IndexStats;

    /// Exact size of the encoded index in bytes.
    fn size_bytes(&self) -> u64 {
        FRAME_LEN + self.payload_len()
    }

    /// The self-describing encoding: header, payload, checksum (docs/format/index.md).
    fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(self.payload_len() as usize);
        self.write_payload(&mut payload);
        let header = Header {
            family_tag: self.family().tag(),
            key_count: self.key_count(),
            boundary: self.boundary(),
            payload_len: payload.len() as u64,
        };
        codec::frame(header, &payload)
    }
}

/// Builds an index of `family` over sorted `keys`.
pub fn build(family: Family, keys: &[u64], params: &Params) -> Result<Box<dyn LearnedIndex>> {
    params.validate()?;
    validate_keys(keys)?;
    Ok(match family {
        Family::Fp => Box::new(fp::FencePointers::build(keys, params)),
        Family::Binary => Box::new(binary::BinarySearch::build(keys, params)),
        Family::Plr => Box::new(plr::Plr::build(keys, params)?),
        Family::Fiting => Box::new(fiting::FitingTree::build(keys, params)?),
        Family::Pgm => Box::new(pgm::Pgm::build(keys, params)?),
        Family::Rs => Box::new(rs::RadixSpline::build(keys, params)?),
        Family::Rmi => Box::new(rmi::Rmi::build(keys, params)?),
        Family::Lpa => Box::new(lpa::Lpa::build(keys, params)?),
        Family::Plex => Box::new(plex::Plex::build(keys, params)?),
    })
}

/// Decodes any index from its encoding; corrupt or truncated bytes give `Corruption`, never a panic.
pub fn decode(bytes: &[u8]) -> Result<Box<dyn LearnedIndex>> {
    let (header, payload) = codec::unframe(bytes)?;
    if header.boundary < MIN_BOUNDARY {
        return Err(corrupt(format!(
            "boundary {} below the minimum",
            header.boundary
        )));
    }
    let family = Family::from_tag(header.family_tag)?;
    let mut r = Reader::new(payload);
    let index: Box<dyn LearnedIndex> = match family {
        Family::Fp => Box::new(fp::FencePointers::decode(&mut r, &header)?),
        Family::Binary => Box::new(binary::BinarySearch::decode(&mut r, &header)?),
        Family::Plr => Box::new(plr::Plr::decode(&mut r, &header)?),
        Family::Fiting => Box::new(fiting::FitingTree::decode(&mut r, &header)?),
        Family::Pgm => Box::new(pgm::Pgm::decode(&mut r, &header)?),
        Family::Rs => Box::new(rs::RadixSpline::decode(&mut r, &header)?),
        Family::Rmi => Box::new(rmi::Rmi::decode(&mut r, &header)?),
        Family::Lpa => Box::new(lpa::Lpa::decode(&mut r, &header)?),
        Family::Plex => Box::new(plex::Plex::decode(&mut r, &header)?),
    };
    r.finish(family.name())?;
    Ok(index)
}

/// The full lookup: `search`, then the last-mile binary search inside the range. Returns
/// `lower_bound(q)` over the same `keys` the index was built from.
#[inline]
pub fn lower_bound_with(index: &dyn LearnedIndex, keys: &[u64], q: u64) -> u64 {
    let b = index.search(q);
    match keys.get(b.lo as usize..b.hi as usize) {
        Some(range) => b.lo + range.partition_point(|&k| k < q) as u64,
        None => b.lo,
    }
}
