//! Automatic checkpoints while blocks are committed (`arbor load`, `arbor import`): the
//! `[checkpoint]` section of the store config, one background checkpoint at a time.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use anyhow::Result;
use checkpoint::{CheckpointDir, CreateOptions};

/// Automatic checkpoints (`[checkpoint]` in the store config): at every block number
/// divisible by `every_blocks`, a checkpoint of the persisted state is created on a
/// background thread (commits go on meanwhile; one at a time: the next waits for it), then
/// the oldest beyond `keep` are pruned. `arbor load` flushes before asking, so its
/// checkpoints are exactly at the multiples; `arbor import` persists in the background, so
/// its checkpoint is of the last block persisted by then.
pub(crate) struct AutoCheckpoint {
    config: store::CheckpointConfig,
    dir: PathBuf,
    running: Option<std::thread::JoinHandle<Result<String>>>,
}

impl AutoCheckpoint {
    /// The checkpointer `config` asks for, for the database at `db` (`None`: off).
    pub(crate) fn new(db: &std::path::Path, config: &store::StoreConfig) -> Option<AutoCheckpoint> {
        let c = config.checkpoint.clone();
        if c.every_blocks == 0 {
            return None;
        }
        let dir = if c.dir.is_empty() {
            let mut name = db.file_name().unwrap_or_default().to_os_string();
            name.push(".checkpoints");
            db.with_file_name(name)
        } else {
            PathBuf::from(&c.dir)
        };
        Some(AutoCheckpoint { config: c, dir, running: None })
    }

    /// True when block `number` is due a checkpoint.
    pub(crate) fn due(&self, number: u64) -> bool {
        number > 0 && number.is_multiple_of(self.config.every_blocks)
    }

    /// Start a checkpoint of what `handle`'s store has persisted (after the previous one
    /// finished).
    pub(crate) fn start(&mut self, handle: store::ReadHandle) -> Result<()> {
        self.finish_running()?;
        let (dir, threads, keep) =
            (self.dir.clone(), self.config.threads as usize, self.config.keep as usize);
        self.running = Some(std::thread::spawn(move || -> Result<String> {
            let state = handle.persisted()?;
            let out = CheckpointDir::new(&dir);
            let opts = CreateOptions { threads, ..CreateOptions::default() };
            let created = checkpoint::create(&state, &opts, &out, &AtomicU64::new(0))?;
            out.prune(keep)?;
            Ok(format!(
                "checkpoint {} of block {} in {}",
                hex::encode(created.id.0),
                created.manifest.block,
                dir.display()
            ))
        }));
        Ok(())
    }

    /// Wait for a running checkpoint and report it on stderr.
    pub(crate) fn finish_running(&mut self) -> Result<()> {
        if let Some(t) = self.running.take() {
            let line = t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
            errln!("{line}");
        }
        Ok(())
    }
}
