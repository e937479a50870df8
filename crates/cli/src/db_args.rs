//! The database flags every command on a database shares (`--db`, `--config`) and the
//! rules for opening one.
//!
//! Commands that read a database refuse a directory that holds none (rather than creating
//! one); commands that create one (`init`, `load`, `import`, `checkpoint restore`) refuse
//! a non-empty directory that is not a database.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use store::{ConfigError, OpenError, StateDb, StoreConfig};
use trie::LayoutName;

/// `--db` and `--config`, shared by every database command.
#[derive(Debug, Args)]
pub(crate) struct DbArgs {
    /// The database directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) db: PathBuf,
    /// Store configuration file (TOML; every key optional) [default: built-in defaults].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

/// The configuration from `--config`, or the defaults. A file that cannot be read is exit
/// 3; one that does not parse, or holds a value out of its range, is a usage error (exit
/// 2, like a flag's value).
pub(crate) fn load_config(path: Option<&Path>) -> Result<StoreConfig> {
    match path.map(StoreConfig::from_file) {
        Some(Ok(config)) => Ok(config),
        Some(Err(e @ ConfigError::Read { .. })) => Err(e.into()),
        Some(Err(e)) => Err(crate::usage(e.to_string())),
        None => Ok(StoreConfig::default()),
    }
}

/// Refuse a directory that holds no database: none at all, or one whose creation has not
/// finished (`init`, `load` and `checkpoint restore` finish it).
fn check_exists(dir: &Path) -> Result<()> {
    if !dir.join("CURRENT").is_file() {
        bail!("no database at {} (create one with `arbor init` or `arbor load`)", dir.display());
    }
    if store::creation_unfinished(dir) {
        bail!(
            "no database at {}: its creation is under way or was interrupted (`arbor init` or `arbor load` finishes it)",
            dir.display()
        );
    }
    Ok(())
}

/// Open an existing database; a directory without one is an error, not a new database.
pub(crate) fn open_existing(args: &DbArgs) -> Result<StateDb> {
    open_existing_with(args, load_config(args.config.as_deref())?)
}

/// [`open_existing`] with the configuration already read from `args.config`.
pub(crate) fn open_existing_with(args: &DbArgs, config: StoreConfig) -> Result<StateDb> {
    check_exists(&args.db)?;
    StateDb::open(&args.db, config).with_context(|| format!("cannot open {}", args.db.display()))
}

/// Open an existing database read-only, for the read commands (`get`, `stats`, `verify`,
/// `prove --db`, `checkpoint create`): they run beside a writer in another process and
/// write nothing to the directory.
pub(crate) fn open_reading(args: &DbArgs) -> Result<StateDb> {
    open_reading_as(args, None)
}

/// [`open_reading`], refusing a database of another layout than `layout` or the
/// configuration file's (when given).
pub(crate) fn open_reading_as(args: &DbArgs, layout: Option<LayoutName>) -> Result<StateDb> {
    let mut config = load_config(args.config.as_deref())?;
    config.layout = layout_of(&config, layout)?;
    check_exists(&args.db)?;
    StateDb::open_read_only(&args.db, config)
        .map_err(layout_usage)
        .with_context(|| format!("cannot open {} read-only", args.db.display()))
}

/// The layout a database must have: the command's (`--layout`, or what its input implies)
/// or the configuration file's `layout`; both, when they differ, are a usage error.
fn layout_of(config: &StoreConfig, command: Option<LayoutName>) -> Result<Option<LayoutName>> {
    match (config.layout, command) {
        (Some(file), Some(command)) if file != command => Err(crate::usage(format!(
            "the configuration file's layout = \"{file}\" conflicts with this command's layout {command}"
        ))),
        (file, command) => Ok(command.or(file)),
    }
}

/// A database of another layout than the command line names is a usage error (exit 2).
fn layout_usage(e: OpenError) -> anyhow::Error {
    match e {
        e @ OpenError::LayoutMismatch { .. } => crate::usage(e.to_string()),
        e => e.into(),
    }
}

/// Open a database for its initial load `label` (a genesis, a workload), creating it when
/// the directory is absent or empty (a mount point, say), or finishing its interrupted
/// creation; a new database gets `layout` (else the configuration file's, else Ethereum),
/// an existing one must have it. A new database is born holding the load `label`
/// unfinished ([`StateDb::open_for_load`]): killed before its load is in, it is reported
/// unfinished, never taken for an empty chain.
pub(crate) fn open_for_load(
    args: &DbArgs,
    layout: Option<LayoutName>,
    label: &str,
) -> Result<StateDb> {
    let mut config = load_config(args.config.as_deref())?;
    config.layout = layout_of(&config, layout)?;
    check_dir(&args.db)?;
    StateDb::open_for_load(&args.db, config, label)
        .map_err(layout_usage)
        .with_context(|| format!("cannot open {}", args.db.display()))
}

/// Open a database, creating it (empty) when the directory is absent or empty, or finishing
/// its interrupted creation, with the configuration already read from `args.config`; as
/// [`open_for_load`] for the layout.
pub(crate) fn open_or_create_with(
    args: &DbArgs,
    mut config: StoreConfig,
    layout: Option<LayoutName>,
) -> Result<StateDb> {
    config.layout = layout_of(&config, layout)?;
    let dir = &args.db;
    check_dir(dir)?;
    StateDb::open(dir, config)
        .map_err(layout_usage)
        .with_context(|| format!("cannot open {}", dir.display()))
}

/// Refuse a directory that is not empty and holds no database (nor an unfinished
/// creation of one).
fn check_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.join("CURRENT").is_file() && !store::creation_unfinished(dir) {
        let mut entries = std::fs::read_dir(dir)
            .with_context(|| format!("cannot use {} as a database directory", dir.display()))?;
        if entries.next().is_some() {
            bail!("{} is not empty and holds no database; use a new directory", dir.display());
        }
    }
    Ok(())
}
