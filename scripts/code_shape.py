#!/usr/bin/env python3
"""Two checks of the code's shape, run by `bash scripts/arbor.sh lint`:

- no file-level import cycle inside a crate: module A imports module B when A's file names
  `crate::B` (in a `use` or a path); the graph of a crate's top-level modules must be
  acyclic;
- no function over 80 lines outside tests, counted from its `fn` line to its closing
  brace (test modules, inline or in files of their own, `#[test]` functions, `tests/`
  folders, benches and fuzz targets are left out). Functions written inside a
  `macro_rules!` template count too.

The source is first masked: comments, string literals (raw ones too) and char literals
become spaces (line breaks kept), so a brace or `fn` inside them is invisible; a lifetime
(`'a`) is not a char literal. A function is the keyword `fn`, a name, optional generics and
a parameter list; its signature ends at the first `{` or `;` outside parentheses, brackets
and angle brackets (`[u8; 32]`, `where F: Fn(&[u8; 32]) -> X`, `Foo<{ N }>`), and one
ending at `;` (a trait method or an extern declaration) has no body to measure.
`scripts/test_code_shape.py` checks this on `scripts/fixtures/`.

`--functions N` lists the functions over N lines instead of failing on 80.
Exit 1 with one line per finding; 0 when the code is in shape.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LIMIT = 80

RAW_STRING = re.compile(r'[bc]?r(#*)"')
ESCAPED_CHAR = re.compile(r"'\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]{1,6}\}|.)'")
FN = re.compile(r"(?<![\w$#])fn\s+(\$?(?:r#)?\w+)")
TEST_ATTRIBUTE = re.compile(r"#\[\s*(?:cfg\s*\(\s*test\s*\)|test)\s*\]")
TEST_MODULE_FILE = re.compile(r"(?:#\[[^\]]*\]\s*)+(?:pub\S*\s+)?mod\s+(\w+)\s*;")
BLOCK_ITEM = re.compile(
    r"(?:(?:pub\s*(?:\([^)]*\))?|async|const|unsafe|extern|default|safe)\s+)*"
    r"(?:fn|impl|struct|enum|trait|union|mod|macro_rules\s*!)(?!\w)"
)


def is_ident(c):
    return c.isalnum() or c == "_"


def mask(text):
    """`text` with comments, strings and char literals turned into spaces (line breaks kept),
    so that every brace, semicolon and `fn` left is code."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
        elif c in "bcr" and (i == 0 or not is_ident(text[i - 1])) and RAW_STRING.match(text, i):
            m = RAW_STRING.match(text, i)
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        elif c == "'":
            j = char_literal_end(text, i)
            if j is None:  # a lifetime or a loop label
                i += 1
                continue
        else:
            i += 1
            continue
        blank(i, j)
        i = j
    return "".join(out)


def char_literal_end(text, i):
    """The end of the char literal opening at `i`, or None when `'` opens a lifetime."""
    if text.startswith("'\\", i):
        m = ESCAPED_CHAR.match(text, i)
        return m.end() if m else None
    if i + 2 < len(text) and text[i + 2] == "'" and text[i + 1] not in "\n'":
        return i + 3
    return None


def matching(masked, open_at):
    """The index of the bracket closing the one at `open_at` (in masked text)."""
    pairs = {"{": "}", "(": ")", "[": "]"}
    opener = masked[open_at]
    closer = pairs[opener]
    depth = 0
    for i in range(open_at, len(masked)):
        c = masked[i]
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i
    return len(masked) - 1


def skip_space(masked, i):
    while i < len(masked) and masked[i].isspace():
        i += 1
    return i


def signature_end(masked, i):
    """From just after a function's name: (index of the body's `{` or of the `;`, has_body),
    or None when what follows is not a function signature (a `fn $name:ident` matcher in a
    macro, say). Angle brackets count only outside parentheses, where a type's `<` cannot be
    a comparison; a `{` inside any bracket is a const block (`Foo<{ N }>`, `[u8; { N }]`)."""
    n = len(masked)
    i = skip_space(masked, i)
    if i < n and masked[i] == "<":
        i = angle_end(masked, i)
        if i is None:
            return None
        i = skip_space(masked, i + 1)
    if i >= n or masked[i] != "(":
        return None
    paren = angle = 0
    while i < n:
        c = masked[i]
        if c in "([":
            paren += 1
        elif c in ")]":
            paren -= 1
            if paren < 0:
                return None
        elif c == "{":
            if paren == 0 and angle == 0:
                return i, True
            i = matching(masked, i)
        elif paren == 0:
            if c == "<":
                angle += 1
            elif c == ">" and masked[i - 1] != "-":
                angle -= 1
                if angle < 0 or masked[i - 1] == "=":
                    return None
            elif c == ";" and angle == 0:
                return i, False
            elif c in "}=" and angle == 0:
                return None
        i += 1
    return None


def angle_end(masked, i):
    """The `>` closing the generics `<` at `i` (brackets and const blocks inside skipped)."""
    depth, n = 0, len(masked)
    while i < n:
        c = masked[i]
        if c in "([{":
            i = matching(masked, i)
        elif c in ")]};":
            return None
        elif c == "<":
            depth += 1
        elif c == ">" and masked[i - 1] != "-":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def item_end(masked, i):
    """The end of the item or statement an attribute ending at `i` is attached to. A block
    item (fn, impl, mod, struct…) ends with its first `{…}` outside brackets or at a `;`;
    anything else (a `use`, a field, a statement) at a `;` or `,` outside all brackets. A
    `}` closing the enclosing block ends it too, so a field never swallows what follows."""
    n = len(masked)
    while True:
        i = skip_space(masked, i)
        if masked.startswith("#[", i) or masked.startswith("#![", i):
            i = matching(masked, masked.index("[", i)) + 1
        else:
            break
    block_item = BLOCK_ITEM.match(masked, i) is not None
    paren = angle = 0
    while i < n:
        c = masked[i]
        if c in "([":
            paren += 1
        elif c in ")]":
            paren -= 1
        elif c == "{":
            if block_item and paren == 0 and angle == 0:
                return matching(masked, i) + 1
            i = matching(masked, i)
        elif c == "}":
            return i
        elif paren == 0 and angle == 0 and (c == ";" or (c == "," and not block_item)):
            return i + 1
        elif block_item and paren == 0 and c == "<":
            angle += 1
        elif block_item and paren == 0 and c == ">" and masked[i - 1] != "-":
            angle = max(angle - 1, 0)
        i += 1
    return n


def test_spans(masked):
    """The (start, end) spans of `#[cfg(test)]` and `#[test]` items, outermost only."""
    spans = []
    for m in TEST_ATTRIBUTE.finditer(masked):
        if spans and m.start() < spans[-1][1]:
            continue
        spans.append((m.start(), item_end(masked, m.end())))
    return spans


def without_tests(masked):
    """Masked text with its test items blanked (line breaks kept)."""
    out = list(masked)
    for a, b in test_spans(masked):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def functions(text):
    """Every function with a body outside tests: (name, line of `fn`, lines), in order."""
    masked = without_tests(mask(text))
    found = []
    for m in FN.finditer(masked):
        end = signature_end(masked, m.end())
        if end is None or not end[1]:
            continue
        close = matching(masked, end[0])
        line = masked.count("\n", 0, m.start()) + 1
        found.append((m.group(1), line, masked.count("\n", m.start(), close) + 1))
    return found


def crate_sources(crate_dir):
    """The crate's source files, less those of modules declared `#[cfg(test)] mod name;`
    (and everything below them)."""
    src = os.path.join(crate_dir, "src")
    paths = []
    for dirpath, _, files in os.walk(src):
        paths += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".rs")]
    test_dirs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            masked = mask(f.read())
        for a, b in test_spans(masked):
            m = TEST_MODULE_FILE.fullmatch(masked[a:b].strip())
            if m:
                test_dirs.append(os.path.join(module_dir(path), m.group(1)))
    for path in sorted(paths):
        stem = path[:-3]
        if not any(stem == d or stem.startswith(d + os.sep) for d in test_dirs):
            yield path


def module_dir(path):
    """The folder holding the files of the modules `path` declares."""
    if os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs"):
        return os.path.dirname(path)
    return path[:-3]


def module_of(src, path):
    """The top-level module a file belongs to (`lib`/`main` for the crate root)."""
    rel = os.path.relpath(path, src)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def crate_dirs(root):
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        if os.path.isdir(os.path.join(crates, crate, "src")):
            yield crate, os.path.join(crates, crate)


def long_functions(limit, root=ROOT):
    found = []
    for _, crate_dir in crate_dirs(root):
        for path in crate_sources(crate_dir):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for name, line, lines in functions(text):
                if lines > limit:
                    found.append((lines, os.path.relpath(path, root), line, name))
    return found


def import_cycles(root=ROOT):
    cycles = []
    for crate, crate_dir in crate_dirs(root):
        src = os.path.join(crate_dir, "src")
        edges = {}
        for path in crate_sources(crate_dir):
            a = module_of(src, path)
            with open(path, encoding="utf-8") as f:
                text = without_tests(mask(f.read()))
            for b in re.findall(r"\bcrate::(\w+)", text):
                is_module = os.path.exists(os.path.join(src, b + ".rs")) or os.path.isdir(
                    os.path.join(src, b)
                )
                if b != a and is_module:
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
