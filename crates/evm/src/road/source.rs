//! [`RlpBlocks`]: the blocks of a file of concatenated RLP Ethereum blocks (what
//! `geth export` writes and `geth import` reads), one record at a time, as the import
//! road takes them.
//!
//! A record is one RLP list (its header's first byte 0xc0 to 0xff), read whole (at most
//! `chain::BLOCK_BYTES_MAX` bytes, checked before anything is allocated) and decoded into
//! an [`EthRoadBlock`]. The file's failures are `ImportError::Source` (reading failed,
//! the file ends inside a record, a record that is no list or too long); a record that
//! is a list but not a block is the road's refusal of the block at that position
//! ([`super::undecodable`]): the block after the previous record's, or for the first
//! record the number the caller gives (the database's next block). The iterator ends at
//! the file's end or after its first error. Memory: one record at a time.

use std::io::{self, BufReader, Read};

use chain::{ChainFileError, ImportError, BLOCK_BYTES_MAX};

use super::{undecodable, EthRoadBlock};

/// The blocks of an RLP block file (see the module docs).
pub struct RlpBlocks<R> {
    inner: BufReader<R>,
    /// The next record's index (0-based).
    record: u64,
    /// The number a block that does not decode is refused as.
    next_number: u64,
    done: bool,
}

impl<R> std::fmt::Debug for RlpBlocks<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RlpBlocks").field("record", &self.record).finish_non_exhaustive()
    }
}

/// Fill `buf` from `r`: `Ok(true)` full, `Ok(false)` at the end before any byte, an
/// `UnexpectedEof` error when the end comes inside it.
fn read_exact_or_end<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<bool> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) if at == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

impl<R: Read> RlpBlocks<R> {
    /// The blocks of the file `r`; a first record that does not decode is refused as
    /// block `first_number`.
    pub fn new(r: R, first_number: u64) -> Self {
        let inner = BufReader::with_capacity(1 << 20, r);
        RlpBlocks { inner, record: 0, next_number: first_number, done: false }
    }

    /// The next record's bytes, or `None` at the file's end.
    fn next_record(&mut self) -> Result<Option<Vec<u8>>, ChainFileError> {
        let block = self.record;
        let truncated = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof => ChainFileError::Truncated { block: Some(block) },
            _ => ChainFileError::Io(e),
        };
        let mut first = [0u8; 1];
        if !read_exact_or_end(&mut self.inner, &mut first)? {
            return Ok(None);
        }
        let mut record = vec![first[0]];
        let payload = match first[0] {
            0xc0..=0xf7 => u64::from(first[0] - 0xc0),
            0xf8..=0xff => {
                let mut len = [0u8; 8];
                let width = usize::from(first[0] - 0xf7);
                let at = 8 - width;
                read_exact_or_end(&mut self.inner, &mut len[at..])
                    .and_then(|full| full.then_some(()).ok_or(io::ErrorKind::UnexpectedEof.into()))
                    .map_err(truncated)?;
                record.extend_from_slice(&len[at..]);
                u64::from_be_bytes(len)
            }
            _ => return Err(ChainFileError::NotRlpList { block }),
        };
        let len = payload.saturating_add(record.len() as u64);
        if len > u64::from(BLOCK_BYTES_MAX) {
            return Err(ChainFileError::RlpTooLong { block, len });
        }
        let start = record.len();
        // At most BLOCK_BYTES_MAX: checked above.
        record.resize(len as usize, 0);
        read_exact_or_end(&mut self.inner, &mut record[start..])
            .and_then(|full| full.then_some(()).ok_or(io::ErrorKind::UnexpectedEof.into()))
            .map_err(truncated)?;
        self.record += 1;
        Ok(Some(record))
    }
}

impl<R: Read> Iterator for RlpBlocks<R> {
    type Item = Result<EthRoadBlock, ImportError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = match self.next_record() {
            Ok(None) => None,
            Ok(Some(bytes)) => Some(match EthRoadBlock::decode(&bytes) {
                Ok(block) => {
                    self.next_number = block.block.header.number.saturating_add(1);
                    Ok(block)
                }
                Err(e) => Err(undecodable(self.next_number, e)),
            }),
            Err(e) => Some(Err(ImportError::Source(e))),
        };
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

#[cfg(test)]
mod tests {
    use alloy_consensus::{Block, Header};
    use alloy_rlp::Encodable;

    use super::*;
    use crate::block::BlockTx;

    /// The RLP of an empty block numbered `number`.
    fn block_rlp(number: u64) -> Vec<u8> {
        let header = Header { number, gas_limit: 30_000_000, ..Header::default() };
        let block = Block::<BlockTx, Header> { header, body: Default::default() };
        let mut out = Vec::new();
        block.encode(&mut out);
        out
    }

    fn numbers(bytes: &[u8]) -> Vec<Result<u64, String>> {
        RlpBlocks::new(bytes, 7)
            .map(|b| b.map(|b| b.block.header.number).map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn records_are_read_one_by_one_and_every_cut_is_typed() {
        let records: Vec<Vec<u8>> = (1..=3).map(block_rlp).collect();
        let file = records.concat();
        assert_eq!(numbers(&file), vec![Ok(1), Ok(2), Ok(3)]);
        assert!(numbers(&[]).is_empty());
        let ends: Vec<usize> = records
            .iter()
            .scan(0, |at, r| Some(std::mem::replace(at, *at + r.len()) + r.len()))
            .collect();
        for cut in 1..file.len() {
            let got = numbers(&file[..cut]);
            let whole = ends.iter().filter(|e| **e <= cut).count();
            let want_ok: Vec<Result<u64, String>> = (1..=whole as u64).map(Ok).collect();
            assert_eq!(got[..whole], want_ok[..], "cut {cut}");
            if ends.contains(&cut) {
                assert_eq!(got.len(), whole, "cut {cut} at a record's end");
            } else {
                let want = format!("the chain file is truncated inside block record {whole}");
                assert_eq!(got[whole..], [Err(want)], "cut {cut}");
            }
        }
    }

    #[test]
    fn records_that_are_not_blocks_are_refused() {
        let not_list = [block_rlp(1), vec![0x83, 1, 2, 3]].concat();
        let got = numbers(&not_list);
        assert_eq!(got[0], Ok(1));
        assert!(got[1].as_ref().unwrap_err().contains("record 1 of the RLP block file is not"));
        // A length past the limit is refused before anything is allocated or read.
        let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let got = numbers(&huge);
        assert!(got[0].as_ref().unwrap_err().contains("more than the"), "{got:?}");
        // A list that is not a block: the block after the previous one, else the first
        // number given.
        let junk = [block_rlp(4), vec![0xc2, 0x01, 0x02], block_rlp(6)].concat();
        let mut blocks = RlpBlocks::new(junk.as_slice(), 7);
        assert!(blocks.next().unwrap().is_ok());
        match blocks.next() {
            Some(Err(ImportError::Invalid { number: 5, .. })) => {}
            other => panic!("{other:?}"),
        }
        assert!(blocks.next().is_none(), "the iterator ends after its first error");
        match RlpBlocks::new(&[0xc0u8][..], 7).next() {
            Some(Err(ImportError::Invalid { number: 7, .. })) => {}
            other => panic!("{other:?}"),
        }
    }
}
