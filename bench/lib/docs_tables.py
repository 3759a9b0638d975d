"""Putting a generated table into a document, keeping everything else. Two marker styles, as
the tables in docs/benchmarks.md already have them:

- replace_between_markers: between <!-- NAME:begin --> and <!-- NAME:end --> (which must be there);
- write_block: between <!-- KEY --> and <!-- KEY end --> (the block added at the end the first time)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHMARKS_MD = os.path.join(ROOT, "docs", "benchmarks.md")


def replace_between_markers(path, name, table):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = open(path).read()
    if begin not in text or end not in text:
        sys.exit(f"{path} has no {begin} ... {end} markers to write between")
    start, stop = text.index(begin) + len(begin), text.index(end)
    open(path, "w").write(text[:start] + "\n" + table + "\n" + text[stop:])
    print(f"wrote {path}", file=sys.stderr)


def write_block(key, text, path=BENCHMARKS_MD):
    """Puts `text` into docs/benchmarks.md between the <!-- key --> markers (added at the
    end the first time)."""
    doc = open(path).read()
    begin, end = f"<!-- {key} -->", f"<!-- {key} end -->"
    block = f"{begin}\n{text}\n{end}"
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
    else:
        doc += "\n" + block + "\n"
    open(path, "w").write(doc)
