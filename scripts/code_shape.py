#!/usr/bin/env python3
"""Two checks of the code's shape, run by `bash scripts/arbor.sh lint`:

- no file-level import cycle inside a crate: module A imports module B when A's file names
  `crate::B` (in a `use` or a path); the graph of a crate's top-level modules must be
  acyclic;
- no function over 80 lines outside tests, counted from its `fn` line to its closing
  brace (test modules, `tests/` folders, benches and fuzz targets are left out).

`--functions N` lists the functions over N lines instead of failing on 80.
Exit 1 with one line per finding; 0 when the code is in shape.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LIMIT = 80


def crate_sources(crate_dir):
    src = os.path.join(crate_dir, "src")
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(dirpath, f)


def module_of(src, path):
    """The top-level module a file belongs to (`lib`/`main` for the crate root)."""
    rel = os.path.relpath(path, src)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def strip_tests(text):
    """The text without `#[cfg(test)]` items (a module or a function)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        j = text.find("{", m.end())
        semi = text.find(";", m.end())
        if j < 0 or (0 <= semi < j):
            i = semi + 1 if semi >= 0 else len(text)
            continue
        i = matching_brace(text, j) + 1
    out.append(text[i:])
    return "".join(out)


def matching_brace(text, open_at):
    depth, i, n = 0, open_at, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                return n - 1
            continue
        if c == "/" and text.startswith("/*", i):
            i = text.find("*/", i) + 2
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "'" and i + 2 < n and (text[i + 2] == "'" or text[i + 1] == "\\"):
            i = text.find("'", i + 2)
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not text[i - 1].isalnum():
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            i = text.find('"' + hashes, i + len(hashes) + 2) + len(hashes)
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n - 1


def long_functions(limit):
    found = []
    for crate in sorted(os.listdir(os.path.join(ROOT, "crates"))):
        crate_dir = os.path.join(ROOT, "crates", crate)
        for path in crate_sources(crate_dir):
            text = strip_tests(open(path, encoding="utf-8").read())
            for m in re.finditer(r"(?m)^[ \t]*(?:pub(?:\([^)]*\))? )?(?:const )?(?:async )?(?:unsafe )?(?:extern \"C\" )?fn (\w+)", text):
                body = text.find("{", m.end())
                semi = text.find(";", m.end())
                if body < 0 or (0 <= semi < body and "where" not in text[m.end():semi]):
                    continue
                end = matching_brace(text, body)
                lines = text.count("\n", m.start(), end) + 1
                if lines > limit:
                    line_no = text.count("\n", 0, m.start()) + 1
                    found.append((lines, os.path.relpath(path, ROOT), line_no, m.group(1)))
    return found


def import_cycles():
    cycles = []
    for crate in sorted(os.listdir(os.path.join(ROOT, "crates"))):
        crate_dir = os.path.join(ROOT, "crates", crate)
        src = os.path.join(crate_dir, "src")
        if not os.path.isdir(src):
            continue
        edges = {}
        for path in crate_sources(crate_dir):
            a = module_of(src, path)
            text = strip_tests(open(path, encoding="utf-8").read())
            text = re.sub(r"//[^\n]*", "", text)
            for b in re.findall(r"crate::(\w+)", text):
                if b != a and os.path.exists(os.path.join(src, b + ".rs")) or os.path.isdir(os.path.join(src, b)):
                    if b != a:
                        edges.setdefault(a, set()).add(b)
        for cycle in find_cycles(edges):
            cycles.append((crate, cycle))
    return cycles


def find_cycles(edges):
    """One cycle per strongly connected component of more than one module."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--functions":
        for lines, path, line, name in sorted(long_functions(int(sys.argv[2])), reverse=True):
            print(f"{lines:4} {path}:{line} {name}")
        return 0
    bad = 0
    for crate, cycle in import_cycles():
        print(f"import cycle in crates/{crate}: {' <-> '.join(cycle)}")
        bad += 1
    for lines, path, line, name in sorted(long_functions(LIMIT), reverse=True):
        print(f"{path}:{line}: fn {name} has {lines} lines (limit {LIMIT})")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
