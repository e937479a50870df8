#!/usr/bin/env python3
"""Build testdata/ethereum/state-tests/: the subset of ethereum/tests' GeneralStateTests that
the test command runs, by the rule written in its SOURCES.md.

Rule: the category folders are the folders directly under GeneralStateTests/ (st* folders
and Cancun, Pyspecs, Shanghai, VMTests). In each, its *.json files (searched recursively)
are sorted by (size in bytes, path) and the first third of them (rounded up) is taken, at
least three (or all, if the folder has fewer). Files whose blob the clone lacks are left
out before the rule is applied (the table in SOURCES.md names none of them).

The archive is deterministic: members in path order, mode 0644, owner 0, mtime 0, gzip
header mtime 0, compression level 9. Prints the table rows (path, bytes, SHA-256) that
SOURCES.md lists.

Usage: scripts/statetest_subset.py GIT_DIR COMMIT OUT_DIR
"""

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


def main():
    git_dir, commit, out_dir = sys.argv[1:4]
    listing = git(git_dir, "ls-tree", "-r", "-l", commit, "GeneralStateTests").decode()
    rows = []
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        _mode, _kind, blob, size = meta.split()
        if path.endswith(".json"):
            rows.append((path, blob, size))
    present = git(git_dir, "cat-file", "--batch-check",
                  stdin="\n".join(b for _, b, _ in rows).encode()).decode().splitlines()
    categories = {}
    for (path, blob, size), check in zip(rows, present):
        if check.endswith("missing"):
            continue
        categories.setdefault(path.split("/")[1], []).append((int(size), path, blob))
    chosen = []
    for name in sorted(categories):
        files = sorted(categories[name])
        take = max(min(len(files), 3), math.ceil(len(files) / 3))
        chosen.extend(files[:take])
    chosen.sort(key=lambda f: f[1])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for size, path, blob in chosen:
            data = git(git_dir, "cat-file", "blob", blob)
            assert len(data) == size, path
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = size, 0o644, 0
            tar.addfile(info, io.BytesIO(data))
            print(f"| {path} | {size} | {hashlib.sha256(data).hexdigest()} |")
    with open(f"{out_dir}/GeneralStateTests-subset.tar.gz", "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
            gz.write(buf.getvalue())
    print(f"{len(chosen)} files from {len(categories)} category folders", file=sys.stderr)


if __name__ == "__main__":
    main()
