"""Shared by the benchmark scripts: put a generated table into a document between its
<!-- NAME:begin --> and <!-- NAME:end --> markers, keeping everything else."""
import sys


def replace_between_markers(path, name, table):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = open(path).read()
    if begin not in text or end not in text:
        sys.exit(f"{path} has no {begin} ... {end} markers to write between")
    start, stop = text.index(begin) + len(begin), text.index(end)
    open(path, "w").write(text[:start] + "\n" + table + "\n" + text[stop:])
    print(f"wrote {path}", file=sys.stderr)
