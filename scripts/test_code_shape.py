#!/usr/bin/env python3
"""Tests of `scripts/code_shape.py`, run by `bash scripts/arbor.sh lint` before the check
itself: the functions it finds in `scripts/fixtures/awkward.rs` (array parameters, `where`
clauses, const generics, literals and comments holding braces, bodyless trait methods,
macro templates, test items) must be exactly the ones the fixture's `// expect:` lines
name, with their lengths; a generated tree must fail on an 81-line function and on an
import cycle, and pass without them.
"""
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import code_shape  # noqa: E402

FIXTURE = os.path.join(HERE, "fixtures", "awkward.rs")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class Fixture(unittest.TestCase):
    def setUp(self):
        self.text = read(FIXTURE)
        self.found = code_shape.functions(self.text)

    def test_finds_exactly_the_expected_functions(self):
        expected = [
            (m.group(1), int(m.group(2)))
            for m in re.finditer(r"// expect: (\S+) (\d+)", self.text)
        ]
        self.assertGreater(len(expected), 20)
        self.assertEqual([(name, lines) for name, _, lines in self.found], expected)

    def test_lines_point_at_the_fn_keyword(self):
        lines = self.text.split("\n")
        for name, line, _ in self.found:
            self.assertRegex(lines[line - 1], r"\bfn\s+" + re.escape(name), name)

    def test_sees_a_function_with_an_array_parameter(self):
        by_name = {name: lines for name, _, lines in self.found}
        self.assertEqual(by_name.get("encode_branch"), 6)
        self.assertEqual(by_name.get("encode_nibbled_branch"), 11)

    def test_bodyless_and_test_functions_are_left_out(self):
        names = {name for name, _, _ in self.found}
        for absent in ["load", "bounded", "arrays", "declared", "in_doc", "hidden", "fake",
                       "test_only_helper", "a_test", "helper", "works", "$inner"]:
            self.assertNotIn(absent, names)

    def test_mask_keeps_length_and_line_breaks(self):
        masked = code_shape.mask(self.text)
        self.assertEqual(len(masked), len(self.text))
        self.assertEqual(
            [i for i, c in enumerate(masked) if c == "\n"],
            [i for i, c in enumerate(self.text) if c == "\n"],
        )
        self.assertNotIn("hidden", masked)
        self.assertIn("'outer: loop", masked)


class Tree(unittest.TestCase):
    def crate(self, root, files):
        for name, text in files.items():
            write(os.path.join(root, "crates", "demo", "src", name), text)

    def long_fn(self, body_lines):
        body = "".join(f"    let _x{i} = [0u8; {i}];\n" for i in range(body_lines))
        return "fn wide(children: &[[u8; 32]; 16]) -> [u8; 2] {\n" + body + "    [0; 2]\n}\n"

    def test_limit_counts_from_fn_line_to_closing_brace(self):
        with tempfile.TemporaryDirectory() as root:
            self.crate(root, {"lib.rs": self.long_fn(78)})  # 78 + 3 lines = 81
            self.assertEqual(code_shape.long_functions(80, root),
                             [(81, os.path.join("crates", "demo", "src", "lib.rs"), 1, "wide")])
            self.assertEqual(code_shape.long_functions(81, root), [])

    def test_files_of_test_modules_are_left_out(self):
        with tempfile.TemporaryDirectory() as root:
            self.crate(root, {
                "lib.rs": "mod walk;\n#[cfg(test)]\n#[allow(dead_code)]\nmod speed;\n",
                "walk.rs": "#[cfg(test)]\nmod tests;\n" + self.long_fn(90),
                "walk/tests.rs": self.long_fn(90),
                "walk/tests/deeper.rs": self.long_fn(90),
                "speed.rs": self.long_fn(90),
            })
            found = code_shape.long_functions(80, root)
            self.assertEqual([path for _, path, _, _ in found],
                             [os.path.join("crates", "demo", "src", "walk.rs")])

    def test_import_cycle_is_found_and_strings_do_not_count(self):
        with tempfile.TemporaryDirectory() as root:
            self.crate(root, {
                "lib.rs": "mod a;\nmod b;\n",
                "a.rs": "use crate::b::B;\n",
                "b.rs": 'const S: &str = "crate::a";\n// crate::a\n',
            })
            self.assertEqual(code_shape.import_cycles(root), [])
            write(os.path.join(root, "crates", "demo", "src", "b.rs"), "use crate::a::A;\n")
            self.assertEqual(code_shape.import_cycles(root), [("demo", ["a", "b"])])


if __name__ == "__main__":
    unittest.main(verbosity=1)
