#!/usr/bin/env python3
"""Writes real English text, one line per text, for timing `edo embed` beside model2vec: the lines
of every docstring and comment in the Python standard library that runs the script (files in
sorted order; `ast` docstrings of modules, classes and functions, then `tokenize` comments),
stripped, of at least three words, the first N (default 100 000; repeats kept, as in any real
stream of texts). Nothing is downloaded and nothing is committed: the same Python version gives the same
lines.

    python3 scripts/peers/make_embed_texts.py target/embed-texts.txt [N]
"""
import ast
import pathlib
import sys
import sysconfig
import tokenize


def main():
    out = pathlib.Path(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    lines = []
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
            comments = [t.string.lstrip("#") for t in tokenize.generate_tokens(iter(source.splitlines(True)).__next__) if t.type == tokenize.COMMENT]
        except (SyntaxError, UnicodeDecodeError, ValueError, tokenize.TokenError):
            continue
        docs = [ast.get_docstring(node) or "" for node in ast.walk(tree) if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        for line in [l for doc in docs for l in doc.splitlines()] + comments:
            line = line.strip()
            if len(line.split()) >= 3:
                lines.append(line)
        if len(lines) >= n:
            break
    if len(lines) < n:
        sys.exit(f"only {len(lines)} lines in {root}; asked for {n}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
    print(f"wrote {out}: {n} lines from the docstrings and comments of Python {sys.version.split()[0]}'s standard library")


if __name__ == "__main__":
    main()
