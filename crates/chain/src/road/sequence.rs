//! Which blocks follow: the stateless checks of the next block (its number and parent
//! link). Blocks follow one another; the first may be one imported already, and so may
//! the ones after it up to the head: each of those must link to the block before it and
//! carry the id the store recorded for it (while it holds one) before it is skipped.

use state::H256;
use store::{ReadHandle, StateDb, StoreError};

use super::{BlockExecutor, IdKind, ImportError, InvalidBlock, Link};

pub(super) struct Sequencer {
    next: u64,
    /// The head's id.
    id: H256,
    /// The source's previous block: its number and id.
    prev: Option<(u64, H256)>,
    /// Where the ids recorded for blocks below the head are read.
    recorded: ReadHandle,
    /// The chain was seen to hold the database's head: its block at the head's height
    /// carried the head's id, or the head is the genesis (checked by the caller).
    anchored: bool,
    /// The last block skipped as imported already.
    last_skipped: Option<u64>,
}

/// The invalid-link reason for ids of `kind`.
fn bad_parent(kind: IdKind, expected: H256, got: H256) -> InvalidBlock {
    match kind {
        IdKind::BlockHash => InvalidBlock::ParentHash { expected, got },
        _ => InvalidBlock::ParentRoot { expected, got },
    }
}

/// The reason for a skipped block whose id is not the one recorded at its height.
fn bad_recorded(kind: IdKind, recorded: H256, got: H256) -> InvalidBlock {
    match kind {
        IdKind::BlockHash => InvalidBlock::RecordedHash { recorded, got },
        _ => InvalidBlock::Recorded { recorded, got },
    }
}

impl Sequencer {
    pub(super) fn new<E: BlockExecutor>(db: &StateDb, executor: &E) -> Result<Self, ImportError> {
        let head = db.head_number();
        let recorded = db.read_handle()?;
        let id =
            executor.recorded_id(&recorded, head)?.ok_or(ImportError::NoHeadRecord { head })?;
        Ok(Sequencer {
            next: head + 1,
            id,
            prev: None,
            recorded,
            anchored: head == 0,
            last_skipped: None,
        })
    }

    /// At the end of the chain: an error when no block of it reached the database's head.
    pub(super) fn finish(&self) -> Result<(), ImportError> {
        if self.anchored {
            return Ok(());
        }
        Err(ImportError::HeadPastChain { head: self.next - 1, last: self.last_skipped })
    }

    /// `Ok(None)`: a block already imported, checked and skipped. A block whose number is
    /// not the one expected is invalid block `expected` (so a block at or below the head
    /// after one above it is out of order).
    pub(super) fn admit<E: BlockExecutor>(
        &mut self,
        executor: &E,
        block: &E::Block,
    ) -> Result<Option<()>, ImportError> {
        let link = executor.link(block);
        let expected = self.prev.map_or(self.next, |(n, _)| n.saturating_add(1));
        let first_skipped = self.prev.is_none() && link.number < self.next;
        if link.number != expected && !first_skipped {
            return Err(ImportError::Invalid {
                number: expected,
                reason: InvalidBlock::Number { expected, got: link.number },
            });
        }
        let admitted = match link.number < self.next {
            true => self.skip(executor, &link),
            false => self.follow(E::ID_KIND, &link),
        };
        self.prev = Some((link.number, link.id));
        admitted
    }

    /// A block at or below the head: it must link to the block before it (the source's,
    /// or for the first one the id the store recorded), and carry the id recorded for its
    /// number; the one at the head's height must carry the head's id, otherwise the
    /// database holds another chain.
    fn skip<E: BlockExecutor>(
        &mut self,
        executor: &E,
        link: &Link,
    ) -> Result<Option<()>, ImportError> {
        let kind = E::ID_KIND;
        let invalid = |reason| ImportError::Invalid { number: link.number, reason };
        match (self.prev, link.number.checked_sub(1)) {
            (Some((_, parent)), _) if link.parent != parent => {
                return Err(invalid(bad_parent(kind, parent, link.parent)));
            }
            (None, Some(parent)) => self.check_recorded_parent(executor, parent, link)?,
            _ => {}
        }
        if link.number + 1 == self.next {
            if link.id != self.id {
                return Err(ImportError::OtherChain {
                    number: link.number,
                    kind,
                    database: self.id,
                    chain: link.id,
                });
            }
            self.anchored = true;
        } else if let Some(recorded) = self.recorded_id(executor, link.number)? {
            if recorded != link.id {
                return Err(invalid(bad_recorded(kind, recorded, link.id)));
            }
        }
        self.last_skipped = Some(link.number);
        Ok(None)
    }

    /// The first block of the source, below the head: its parent must be the block the
    /// store recorded at `parent`'s height, if it still records one.
    fn check_recorded_parent<E: BlockExecutor>(
        &self,
        executor: &E,
        parent: u64,
        link: &Link,
    ) -> Result<(), ImportError> {
        match self.recorded_id(executor, parent)? {
            Some(database) if database != link.parent => Err(ImportError::OtherChain {
                number: parent,
                kind: E::ID_KIND,
                database,
                chain: link.parent,
            }),
            _ => Ok(()),
        }
    }

    fn recorded_id<E: BlockExecutor>(
        &self,
        executor: &E,
        number: u64,
    ) -> Result<Option<H256>, StoreError> {
        executor.recorded_id(&self.recorded, number)
    }

    /// The head's successor: it must link to the head.
    fn follow(&mut self, kind: IdKind, link: &Link) -> Result<Option<()>, ImportError> {
        if link.parent != self.id {
            return Err(ImportError::Invalid {
                number: link.number,
                reason: bad_parent(kind, self.id, link.parent),
            });
        }
        self.next = self.next.saturating_add(1);
        self.id = link.id;
        self.anchored = true;
        Ok(Some(()))
    }
}
