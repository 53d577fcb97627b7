#!/usr/bin/env python3
"""Writes web/corpus.txt, the demo page's built-in corpus for semantic search: the first sentence
of the docstring of every public function, class and method of a fixed list of Python
standard-library modules, as "module.name: sentence", one per line, deduplicated, sorted.
Real text that a search by meaning can be tried on ("read a file line by line", "current time in
UTC"). Regenerate with the same Python minor version to get the same lines (this file was made
with the version in the corpus's first line).

    python3 scripts/web/make_web_corpus.py            # → web/corpus.txt
"""

import importlib
import inspect
import os
import re
import sys

MODULES = """abc argparse array asyncio base64 bisect bz2 calendar cmath codecs collections colorsys
concurrent.futures configparser contextlib copy csv datetime decimal difflib email.message
email.utils enum filecmp fnmatch fractions ftplib functools gettext glob gzip hashlib heapq hmac
html html.parser http.client http.cookies http.server imaplib importlib inspect io ipaddress
itertools json keyword linecache locale logging lzma mailbox math mimetypes multiprocessing
numbers operator os os.path pathlib pickle pkgutil platform plistlib poplib pprint queue quopri
random re reprlib sched secrets select selectors shelve shlex shutil signal smtplib socket
socketserver sqlite3 ssl stat statistics string struct subprocess sysconfig tarfile tempfile
textwrap threading time timeit tokenize trace traceback types typing unicodedata urllib.parse
urllib.request uuid warnings wave weakref xml.dom.minidom xml.etree.ElementTree zipfile zlib""".split()

SENTENCE = re.compile(r"^(.+?[.!?])(\s|$)", re.S)


def first_sentence(doc):
    para = doc.strip().split("\n\n")[0]
    para = " ".join(para.split())
    m = SENTENCE.match(para)
    s = m.group(1) if m else para
    # Signatures some C functions put first ("f(x) -> y") say nothing by meaning.
    if re.match(r"^[\w.]+\(.*\)( ->.*)?$", s) or len(s) < 25 or len(s) > 220:
        return None
    return s


def main():
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "web", "corpus.txt")
    by_sentence = {}
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr, obj in sorted(vars(module).items()):
            if attr.startswith("_") or inspect.ismodule(obj) or not callable(obj):
                continue
            members = [(attr, obj)]
            if inspect.isclass(obj):
                members += [(f"{attr}.{m}", v) for m, v in sorted(vars(obj).items()) if not m.startswith("_") and callable(v)]
            for qual, member in members:
                doc = inspect.getdoc(member)
                s = doc and first_sentence(doc)
                # A sentence said of several names (re-exports, inherited docs) counts once.
                if s:
                    by_sentence.setdefault(s, f"{name}.{qual}")
    lines = [f"{qual}: {s}" for s, qual in by_sentence.items()]
    lines = sorted(lines)
    with open(out, "w", encoding="utf-8") as f:
        f.write(f"# {len(lines)} first sentences of Python {sys.version_info.major}.{sys.version_info.minor} standard-library docstrings (scripts/web/make_web_corpus.py)\n")
        f.write("\n".join(lines) + "\n")
    print(f"{out}: {len(lines)} lines")


if __name__ == "__main__":
    main()
