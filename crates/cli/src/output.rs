//! Output files a command writes: checked before any work starts, so that a refused
//! command writes nothing.
//!
//! Two outputs of one command must not be the same file, however they are spelled
//! (`./a` and `a`, a symbolic link, `dir/../a`, a hard link); `-`, which inputs read as
//! stdin, is refused rather than created as a file of that name; an existing file is kept
//! unless the user passes `--force`; a directory or a path in a missing directory is
//! refused. All of these are usage errors (exit code 2). Without `--force` the file is
//! also created exclusively, so one created meanwhile by another process is not
//! overwritten either.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::usage;

/// Symbolic links followed before a path is refused as a loop.
const LINKS_MAX: usize = 40;

/// An output file named by a flag.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output<'a> {
    /// The flag that names it (`--block`).
    pub(crate) flag: &'static str,
    /// The path as given.
    pub(crate) path: &'a Path,
}

/// Refuse outputs that name the same file, existing files (unless `force`), directories
/// (also a path ending in `/`) and paths whose directory does not exist. The files they
/// name: absolute, symbolic links followed.
pub(crate) fn check(outputs: &[Output<'_>], force: bool) -> Result<Vec<PathBuf>> {
    let mut resolved: Vec<(Output<'_>, PathBuf)> = Vec::with_capacity(outputs.len());
    for &out in outputs {
        // Inputs read `-` as stdin; an output spelled so would be a file named `-`.
        if out.path.as_os_str() == "-" {
            return Err(usage(format!(
                "{} - is not a file: name a file (this command does not write {} to stdout)",
                out.flag, out.flag
            )));
        }
        if out.path.as_os_str().as_encoded_bytes().ends_with(b"/") {
            return Err(usage(format!(
                "{} {} names a directory; name a file",
                out.flag,
                out.path.display()
            )));
        }
        let target = resolve(out.path)
            .map_err(|e| usage(format!("cannot write {} {}: {e}", out.flag, out.path.display())))?;
        for (earlier, earlier_target) in &resolved {
            if same_file(earlier_target, &target) {
                return Err(usage(format!(
                    "{} {} and {} {} name the same file ({}); give them different paths",
                    earlier.flag,
                    earlier.path.display(),
                    out.flag,
                    out.path.display(),
                    target.display()
                )));
            }
        }
        resolved.push((out, target));
    }
    for (out, target) in &resolved {
        match std::fs::metadata(target) {
            Ok(m) if m.is_dir() => {
                return Err(usage(format!(
                    "{} {} is a directory; name a file",
                    out.flag,
                    out.path.display()
                )));
            }
            Ok(_) if !force => {
                return Err(usage(format!(
                    "{} {} exists; pass --force to overwrite it",
                    out.flag,
                    out.path.display()
                )));
            }
            _ => {}
        }
    }
    Ok(resolved.into_iter().map(|(_, target)| target).collect())
}

/// Move a finished `staged` file (created in `target`'s directory) to the output file
/// `target` that [`check`] resolved: replacing a regular file only with `force`, refusing
/// one created meanwhile otherwise. An existing special file (a device, a FIFO) is
/// written into instead, never replaced.
pub(crate) fn place(
    out: Output<'_>,
    staged: tempfile::NamedTempFile,
    target: &Path,
    force: bool,
) -> Result<()> {
    let special = std::fs::metadata(target).is_ok_and(|m| !m.is_file());
    if special {
        let mut from = staged.reopen()?;
        let mut to = OpenOptions::new()
            .write(true)
            .open(target)
            .with_context(|| format!("cannot write {}", out.path.display()))?;
        std::io::copy(&mut from, &mut to)
            .with_context(|| format!("cannot write {}", out.path.display()))?;
        return Ok(());
    }
    // A temporary file is private (0600); an output gets the usual 0644.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        staged
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("cannot write {}", out.path.display()))?;
    }
    let placed = if force { staged.persist(target) } else { staged.persist_noclobber(target) };
    match placed {
        Ok(_) => Ok(()),
        Err(e) if e.error.kind() == ErrorKind::AlreadyExists => Err(created_meanwhile(out)),
        Err(e) => Err(e.error).with_context(|| format!("cannot write {}", out.path.display())),
    }
}

/// The usage error for an output that [`check`] found absent and that exists now.
fn created_meanwhile(out: Output<'_>) -> anyhow::Error {
    usage(format!(
        "{} {} was created by someone else meanwhile; pass --force to overwrite it",
        out.flag,
        out.path.display()
    ))
}

/// Write `bytes` to an output [`check`] accepted: created exclusively unless `force`.
pub(crate) fn write(out: Output<'_>, bytes: &[u8], force: bool) -> Result<()> {
    let path = out.path;
    let file = if force {
        File::create(path)
    } else {
        OpenOptions::new().write(true).create_new(true).open(path)
    };
    let mut file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Err(created_meanwhile(out)),
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
    };
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The file `path` writes to: absolute, symbolic links followed, `.` and `..` resolved.
/// The file itself need not exist; its directory must.
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = std::path::absolute(path)?;
    for _ in 0..LINKS_MAX {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                // A relative link target is relative to the link's directory.
                p = match p.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            Ok(_) => return std::fs::canonicalize(&p),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
                    return Err(std::io::Error::new(ErrorKind::InvalidInput, "not a file name"));
                };
                let dir = std::fs::canonicalize(dir).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("directory {}: {e}", dir.display()))
                })?;
                return Ok(dir.join(name));
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// Whether two resolved paths are one file: equal paths, or (both existing) one inode.
fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return ma.dev() == mb.dev() && ma.ino() == mb.ino();
        }
    }
    false
}

/// Human units for a byte count (binary prefixes).
pub(crate) fn human_bytes(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn out<'a>(flag: &'static str, path: &'a Path) -> Output<'a> {
        Output { flag, path }
    }

    #[test]
    fn spellings_of_one_file_collide() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let dotted = dir.path().join(".").join("sub").join("..").join("a");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let e = check(&[out("--block", &a), out("--witness", &dotted)], false).unwrap_err();
        assert!(e.to_string().contains("name the same file"), "{e}");
        assert!(e.is::<crate::UsageError>());

        let link = dir.path().join("link");
        std::os::unix::fs::symlink("a", &link).unwrap();
        // The link dangles (a does not exist yet) and still leads to a.
        let e = check(&[out("--block", &a), out("--witness", &link)], false).unwrap_err();
        assert!(e.to_string().contains("name the same file"), "{e}");

        std::fs::write(&a, b"x").unwrap();
        let hard = dir.path().join("hard");
        std::fs::hard_link(&a, &hard).unwrap();
        let e = check(&[out("--block", &a), out("--witness", &hard)], true).unwrap_err();
        assert!(e.to_string().contains("name the same file"), "{e}");
    }

    #[test]
    fn existing_files_need_force() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        check(&[out("--block", &a), out("--witness", &b)], false).unwrap();
        write(out("--block", &a), b"1", false).unwrap();
        let e = check(&[out("--block", &a), out("--witness", &b)], false).unwrap_err();
        assert!(e.to_string().contains("exists; pass --force"), "{e}");
        check(&[out("--block", &a), out("--witness", &b)], true).unwrap();
        assert!(write(out("--block", &a), b"2", false).unwrap_err().is::<crate::UsageError>());
        write(out("--block", &a), b"2", true).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"2");

        let e = check(&[out("--block", dir.path())], true).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let missing = dir.path().join("no").join("a");
        let e = check(&[out("--block", &missing)], false).unwrap_err();
        assert!(e.to_string().contains("cannot write --block"), "{e}");
    }
}
