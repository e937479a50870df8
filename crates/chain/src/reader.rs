//! The chain file reader: a chain file's header, then its blocks as the import road's
//! block source ([`crate::import()`]). A record that does not decode is an invalid block;
//! a file that cannot be read further is the source's error. Memory: one block record
//! (at most [`BLOCK_BYTES_MAX`]) and a 1 MiB read buffer.

use std::io::{self, BufReader, Read};

use state::H256;

use crate::block::Block;
use crate::chainfile::{
    ChainFileError, ChainHeader, BLOCK_BYTES_MAX, GENESIS_ACCOUNTS_MAX, MAGIC, VERSION,
};
use crate::road::{ImportError, InvalidBlock};

/// Reads a chain file: the header, then the blocks as an iterator (for [`crate::import()`]).
#[derive(Debug)]
pub struct ChainReader<R: Read> {
    inner: BufReader<R>,
    header: ChainHeader,
    record: u64,
    /// The number of the last block read.
    last: Option<u64>,
    done: bool,
}

/// Fill `buf` exactly; `Ok(false)` at a clean end of file before the first byte.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<Result<bool, ()>> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => return Ok(if at == 0 { Ok(false) } else { Err(()) }),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Ok(true))
}

impl<R: Read> ChainReader<R> {
    /// Read the header.
    pub fn new(r: R) -> Result<Self, ChainFileError> {
        let mut inner = BufReader::with_capacity(1 << 20, r);
        let mut head = [0u8; 8 + 1 + 8 + 16 + 32];
        match read_full(&mut inner, &mut head)? {
            Ok(true) => {}
            Ok(false) => return Err(ChainFileError::Truncated { block: None }),
            Err(()) if head[..8] == *MAGIC => {
                return Err(ChainFileError::Truncated { block: None })
            }
            Err(()) => return Err(ChainFileError::Header),
        }
        if head[..8] != *MAGIC || head[8] != VERSION {
            return Err(ChainFileError::Header);
        }
        let accounts = u64::from_be_bytes(head[9..17].try_into().expect("8 bytes"));
        if !(1..=GENESIS_ACCOUNTS_MAX).contains(&accounts) {
            return Err(ChainFileError::Accounts(accounts));
        }
        let balance = u128::from_be_bytes(head[17..33].try_into().expect("16 bytes"));
        let genesis_root = H256(head[33..65].try_into().expect("32 bytes"));
        let header = ChainHeader { accounts, balance, genesis_root };
        Ok(ChainReader { inner, header, record: 0, last: None, done: false })
    }

    /// The genesis.
    pub fn header(&self) -> &ChainHeader {
        &self.header
    }

    fn next_record(&mut self) -> Result<Option<Vec<u8>>, ChainFileError> {
        let block = self.record;
        let truncated = || ChainFileError::Truncated { block: Some(block) };
        let mut len = [0u8; 4];
        match read_full(&mut self.inner, &mut len)? {
            Ok(false) => return Ok(None),
            Err(()) => return Err(truncated()),
            Ok(true) => {}
        }
        let len = u32::from_be_bytes(len);
        if len > BLOCK_BYTES_MAX {
            return Err(ChainFileError::TooLong { block, len });
        }
        let mut body = vec![0u8; len as usize];
        match read_full(&mut self.inner, &mut body)? {
            Ok(true) => {}
            _ if len == 0 => {}
            _ => return Err(truncated()),
        }
        self.record += 1;
        Ok(Some(body))
    }
}

impl<R: Read> Iterator for ChainReader<R> {
    type Item = Result<Block, ImportError>;

    /// The next block; an undecodable record is invalid block `n + 1` after block `n` (the
    /// number expected there), or block 1 when it is the first record (blocks follow
    /// genesis from number 1).
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = match self.next_record() {
            Ok(None) => None,
            Ok(Some(body)) => Some(Block::decode(&body).map_err(|e| ImportError::Invalid {
                number: self.last.map_or(self.record, |n| n.saturating_add(1)),
                reason: InvalidBlock::Undecodable(e),
            })),
            Err(e) => Some(Err(ImportError::Source(e))),
        };
        self.done = !matches!(item, Some(Ok(_)));
        if let Some(Ok(b)) = &item {
            self.last = Some(b.number);
        }
        item
    }
}
