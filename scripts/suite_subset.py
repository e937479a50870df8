#!/usr/bin/env python3
"""Build a subset of ethereum/tests that the test command runs, by a rule given as
arguments: testdata/ethereum/state-tests/ and testdata/ethereum/blockchain-tests/, whose
SOURCES.md write their rule and the command that applies it.

Rule: every .json file of each --all FOLDER; and of each --sample FOLDER, per category
folder (the folders directly under it), its .json files (searched recursively) sorted by
(size in bytes, path) and the first 1/N of them (N = --share; rounded up) taken, at least
--least files (or all, if the folder has fewer). Files whose blob the clone lacks (a
snapshot may leave out its largest files) are left out before the rule is applied.

The archive OUT_DIR/ARCHIVE is deterministic: ustar members in path order, mode 0644,
owner 0, mtime 0; gzip header mtime 0, compression level 9. Prints the table rows (path,
bytes, SHA-256) that SOURCES.md lists.

Usage: scripts/suite_subset.py GIT_DIR COMMIT OUT_DIR ARCHIVE [--all FOLDER]...
           [--sample FOLDER]... --share N [--least K]
"""

import argparse
import gzip
import hashlib
import io
import math
import subprocess
import sys
import tarfile


def git(git_dir, *args, stdin=None):
    return subprocess.run(["git", "--git-dir", git_dir, *args], input=stdin,
                          capture_output=True, check=True).stdout


def listing(git_dir, commit, folder):
    """(size, path, blob) of every .json file under folder whose blob the clone has."""
    text = git(git_dir, "ls-tree", "-r", "-l", commit, folder).decode()
    rows = []
    for line in text.splitlines():
        meta, path = line.split("\t", 1)
        _mode, _kind, blob, size = meta.split()
        # `git ls-tree -l` cannot size a blob the clone lacks.
        if path.endswith(".json") and size.isdigit():
            rows.append((int(size), path, blob))
    present = git(git_dir, "cat-file", "--batch-check",
                  stdin="\n".join(b for _, _, b in rows).encode()).decode().splitlines()
    return [row for row, check in zip(rows, present) if not check.endswith("missing")]


def sample(rows, folder, share, least):
    """The rule's files of one --sample folder, and how many category folders it has."""
    categories = {}
    for row in rows:
        name = row[1][len(folder) + 1:].split("/")[0]
        categories.setdefault(name, []).append(row)
    chosen = []
    for name in sorted(categories):
        files = sorted(categories[name])
        take = max(min(len(files), least), math.ceil(len(files) / share))
        chosen.extend(files[:take])
    return chosen, len(categories)


def write_archive(git_dir, chosen, out_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for size, path, blob in chosen:
            data = git(git_dir, "cat-file", "blob", blob)
            assert len(data) == size, path
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = size, 0o644, 0
            tar.addfile(info, io.BytesIO(data))
            print(f"| {path} | {size} | {hashlib.sha256(data).hexdigest()} |")
    with open(out_path, "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
            gz.write(buf.getvalue())


def main():
    parser = argparse.ArgumentParser(description="Build a subset archive of ethereum/tests.")
    parser.add_argument("git_dir")
    parser.add_argument("commit")
    parser.add_argument("out_dir")
    parser.add_argument("archive", help="the archive's file name in OUT_DIR")
    parser.add_argument("--all", action="append", default=[], metavar="FOLDER",
                        help="take every .json file of FOLDER")
    parser.add_argument("--sample", action="append", default=[], metavar="FOLDER",
                        help="take the first 1/N of each category folder of FOLDER")
    parser.add_argument("--share", type=int, required=True, metavar="N")
    parser.add_argument("--least", type=int, default=3, metavar="K")
    args = parser.parse_args()
    if args.share < 1 or args.least < 0:
        parser.error("--share must be 1 or more and --least 0 or more")
    chosen = []
    for folder in args.all:
        chosen.extend(listing(args.git_dir, args.commit, folder))
    categories = 0
    for folder in args.sample:
        rows = listing(args.git_dir, args.commit, folder)
        taken, n = sample(rows, folder, args.share, args.least)
        chosen.extend(taken)
        categories += n
    chosen.sort(key=lambda f: f[1])
    write_archive(args.git_dir, chosen, f"{args.out_dir}/{args.archive}")
    print(f"{len(chosen)} files, {categories} category folders sampled", file=sys.stderr)


if __name__ == "__main__":
    main()
