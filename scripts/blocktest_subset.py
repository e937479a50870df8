#!/usr/bin/env python3
"""Build testdata/ethereum/blockchain-tests/: the subset of ethereum/tests' BlockchainTests
that the test command runs, by the rule written in its SOURCES.md.

Rule: every .json file of BlockchainTests/ValidBlocks and BlockchainTests/InvalidBlocks
(at the chosen commit all of their tests are of network Cancun, which the block executor
runs); and of BlockchainTests/GeneralStateTests (the state tests in blockchain form), per
category folder (the folders directly under it), its .json files (searched recursively)
sorted by (size in bytes, path) and the first sixth of them (rounded up) taken, at least
three (or all, if the folder has fewer). Files whose blob the clone lacks (the snapshot
leaves out files of 4 MiB and more) are left out before the rule is applied.

The archive is deterministic: members in path order, mode 0644, owner 0, mtime 0, gzip
header mtime 0, compression level 9. Prints the table rows (path, bytes, SHA-256) that
SOURCES.md lists.

Usage: scripts/blocktest_subset.py GIT_DIR COMMIT OUT_DIR
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


def main():
    git_dir, commit, out_dir = sys.argv[1:4]
    chosen = []
    for folder in ("BlockchainTests/ValidBlocks", "BlockchainTests/InvalidBlocks"):
        chosen.extend(listing(git_dir, commit, folder))
    categories = {}
    for row in listing(git_dir, commit, "BlockchainTests/GeneralStateTests"):
        categories.setdefault(row[1].split("/")[2], []).append(row)
    for name in sorted(categories):
        files = sorted(categories[name])
        take = max(min(len(files), 3), math.ceil(len(files) / 6))
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
    with open(f"{out_dir}/BlockchainTests-subset.tar.gz", "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
            gz.write(buf.getvalue())
    print(f"{len(chosen)} files, {len(categories)} GeneralStateTests category folders",
          file=sys.stderr)


if __name__ == "__main__":
    main()
