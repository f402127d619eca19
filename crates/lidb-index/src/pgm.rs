//! PLACEHOLDER: the pgm family is being written; build and decode report that it is missing.

use crate::bound::Bound;
use crate::codec::{Header, Reader};
use crate::error::{Error, Result};
use crate::family::{Family, IndexStats, LearnedIndex, Params};

#[derive(Debug, Clone)]
pub struct Pgm {
    n: u64,
}

impl Pgm {
    pub fn build(_keys: &[u64], _params: &Params) -> Result<Pgm> {
        Err(Error::InvalidParam("pgm is not implemented yet".into()))
    }

    pub fn decode(_r: &mut Reader<'_>, _h: &Header) -> Result<Pgm> {
        Err(Error::InvalidParam("pgm is not implemented yet".into()))
    }
}

impl LearnedIndex for Pgm {
    fn family(&self) -> Family {
        Family::Pgm
    }
    fn key_count(&self) -> u64 {
        self.n
    }
    fn boundary(&self) -> u64 {
        2
    }
    fn search(&self, _q: u64) -> Bound {
        Bound::default()
    }
    fn payload_len(&self) -> u64 {
        0
    }
    fn write_payload(&self, _out: &mut Vec<u8>) {}
    fn stats(&self) -> IndexStats {
        IndexStats {
            models: 0,
            details: vec![],
        }
    }
}
