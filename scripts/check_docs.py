#!/usr/bin/env python3
"""Checks that README.md and docs/**/*.md say only what the repository backs.

  1. links: every relative markdown link names a file or folder of the repository, and its
     #anchor a heading of the target (GitHub's slugs);
  2. paths: every repository path the text names (docs/..., scripts/..., tools/..., zerotrain/...,
     tests/..., bench/..., examples/..., python/..., cmake/..., fuzz/..., offline/..., .ci/...)
     exists; `<name>`, `*` and `{a,b}` are matched as globs;
  3. commands: every `zerotrain ...` or `build/tools/zerotrain ...` command in a fenced code
     block or an inline code span names subcommands and flags that the built binary's --help
     lists (nested subcommands, `launch ... -- zerotrain ...`, pipes, `&&`, `\\` continuations,
     environment assignments and synopses such as `[--json]` are understood);
  4. references: no doc names an issue number, "the brief", DESIGN.md or a path outside the
     repository (../shared, /work/, home folders, a link that climbs out of the clone).

Each failure is one line: FILE:LINE: the problem; the fix.

  scripts/check_docs.py [--root DIR] [--binary build/tools/zerotrain]
  scripts/check_docs.py --self-test [--binary ...]   # a docs tree with one defect of each kind

Without --binary the commands are not checked (and the run says so). Standard library only.
"""

import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

PATH_ROOTS = ("docs", "scripts", "tools", "zerotrain", "tests", "bench", "examples", "python", "cmake", "fuzz",
              "offline", ".ci")
# Paths the docs name that are made, not committed: by the build or by scripts/setup.sh. Each is
# a prefix; anything under it is taken as existing.
GENERATED = (
    "offline/debs/",  # scripts/offline_gpu.sh downloads the .deb files here
    "offline/wheels/",  # and the wheels
    "python/zerotrain/_bin/",  # the install copies the binaries into the package
    "python/zerotrain/_C",  # the extension module the build produces
)

# A repository path: one of PATH_ROOTS, a slash, then path characters (globs and <placeholders> too).
_PATH = re.compile(r"(?<![\w./$~-])((?:%s)/[\w./*<>{},+@-]*)" % "|".join(re.escape(r) for r in PATH_ROOTS))
# `optim/adam_kernel.h`: a relative source path in a code span.
_CODE_PATH = re.compile(r"[A-Za-z_][\w.-]*(?:/[\w.-]+)+\.(?:h|hpp|cpp|cc|py|sh|json|md|txt|cmake|toml)")
# Other projects' roots, which the docs use to cite those projects' files.
FOREIGN_ROOTS = ("deepspeed", "torch", "transformers", "T", "accelerate", "safetensors", "c10", "ATen", "torch_xla",
                 "site-packages", "csrc", "op_builder")
_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFLINK = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*(\S+)")
_FENCE = re.compile(r"^\s*(```+|~~~+)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")

# What a doc of this project must not name. (regex, problem, fix); checked outside code too
# unless marked prose-only.
_OUTSIDE = [
    (re.compile(r"\bissues?\s+#?\d+\b", re.I), "names an issue number",
     "say what the project does, not which ticket changed it", False),
    (re.compile(r"(?<![\w&`/#])#\d+\b"), "names a `#N` issue or pull-request reference",
     "say what the project does; cite an upstream change by its full URL", True),
    (re.compile(r"\bthe brief\b", re.I), "refers to \"the brief\"",
     "state what the project does, for a reader of the repository", False),
    (re.compile(r"\bbrief's\b", re.I), "refers to \"the brief\"",
     "state what the project does, for a reader of the repository", False),
    (re.compile(r"§"), "cites a section (§) of a document that is not in the repository",
     "state the fact here, or link a heading of a doc of the repository", False),
    (re.compile(r"\b(?:deepspeed-semantics|machine-facts)\b"), "cites a reference note that is not in the "
     "repository", "state the fact here, or cite DeepSpeed's own code or docs by URL", False),
    (re.compile(r"\bpain points?\s+\d+", re.I), "cites a numbered list that is not in the repository",
     "state the problem itself", False),
    (re.compile(r"(?<![\w./-])shared/"), "names shared/, outside the repository",
     "name what the reader provides (an environment variable or a flag) instead", False),
    (re.compile(r"\bDESIGN\.md\b"), "refers to DESIGN.md, which is not in the repository",
     "state the reason here or link a doc of the repository", False),
    (re.compile(r"(?<![\w.])\.\./shared\b"), "names ../shared, outside the repository",
     "name what the reader provides (an environment variable or a flag) instead", False),
    (re.compile(r"(?<![\w.~$])/(?:work|home|root|Users)/"), "names an absolute path of a particular machine",
     "use a path relative to the clone or a placeholder", False),
    (re.compile(r"(?<![\w.])/tmp/zt"), "names a scratch path of a particular machine",
     "use a path relative to the clone or a placeholder", False),
]


def github_slug(text):
    """The anchor GitHub gives a heading: inline markup dropped, lower case, punctuation
    removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # html tags
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class Doc:
    """A markdown file split into lines, each marked as code (fenced) or prose."""

    def __init__(self, root, path):
        self.root = root
        self.path = path
        self.rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        self.in_fence = []
        fence = None
        for line in self.lines:
            m = _FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)[0] * 3
                self.in_fence.append(None)  # the fence line itself
            elif fence is not None and m and m.group(1).startswith(fence):
                fence = None
                self.in_fence.append(None)
            else:
                self.in_fence.append(fence is not None)

    def anchors(self):
        seen = {}
        out = set()
        for line, fenced in zip(self.lines, self.in_fence):
            if fenced is False:
                for a in _HTML_ANCHOR.findall(line):
                    out.add(a)
                m = _HEADING.match(line)
                if m:
                    slug = github_slug(m.group(2))
                    n = seen.get(slug, 0)
                    seen[slug] = n + 1
                    out.add(slug if n == 0 else f"{slug}-{n}")
        return out


def code_spans(line):
    """The inline code spans of a prose line, and the line with them blanked."""
    spans = []
    out = []
    i = 0
    while i < len(line):
        if line[i] == "`":
            j = i
            while j < len(line) and line[j] == "`":
                j += 1
            ticks = line[i:j]
            end = line.find(ticks, j)
            if end == -1:
                out.append(line[i:j])
                i = j
                continue
            spans.append(line[j:end].strip())
            out.append(" " * (end + len(ticks) - i))
            i = end + len(ticks)
        else:
            out.append(line[i])
            i += 1
    return spans, "".join(out)


class Checker:
    def __init__(self, root, binary):
        self.root = os.path.abspath(root)
        self.binary = binary
        self.errors = []
        self.docs = {}
        self._help = {}

    def error(self, doc, lineno, problem, fix):
        self.errors.append(f"{doc.rel}:{lineno}: {problem}; {fix}")

    # ---- which files ----
    def files(self):
        out = []
        readme = os.path.join(self.root, "README.md")
        if os.path.exists(readme):
            out.append(readme)
        out += sorted(glob.glob(os.path.join(self.root, "docs", "**", "*.md"), recursive=True))
        return out

    def doc(self, path):
        path = os.path.abspath(path)
        if path not in self.docs:
            self.docs[path] = Doc(self.root, path)
        return self.docs[path]

    def run(self):
        for path in self.files():
            d = self.doc(path)
            self.check_links(d)
            self.check_paths(d)
            self.check_code_paths(d)
            self.check_outside(d)
            if self.binary:
                self.check_commands(d)
        return self.errors

    # ---- 1. links ----
    def check_links(self, d):
        for i, (line, fenced) in enumerate(zip(d.lines, d.in_fence), 1):
            if fenced is not False:
                continue
            _, prose = code_spans(line)
            targets = [m.group(3) for m in _LINK.finditer(prose)]
            m = _REFLINK.match(prose)
            if m:
                targets.append(m.group(2))
            for t in targets:
                self.check_link(d, i, t)

    def check_link(self, d, lineno, target):
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            return  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        if path.startswith("/"):
            self.error(d, lineno, f"link `{target}` is absolute", "link relative to this file")
            return
        full = os.path.normpath(os.path.join(os.path.dirname(d.path), path)) if path else d.path
        if not (full + os.sep).startswith(self.root + os.sep) and full != self.root:
            self.error(d, lineno, f"link `{target}` leads outside the repository",
                       "link a file of the repository, or describe the outside thing in words")
            return
        if not os.path.exists(full):
            self.error(d, lineno, f"link `{target}`: {os.path.relpath(full, self.root)} does not exist",
                       "correct the path or drop the link")
            return
        if anchor:
            if not full.endswith(".md") or os.path.isdir(full):
                return
            if anchor not in self.doc(full).anchors():
                self.error(d, lineno, f"link `{target}`: {os.path.relpath(full, self.root)} has no heading "
                           f"with the anchor #{anchor}", "link an existing heading (GitHub's slug of it)")

    # ---- 2. paths ----
    def path_exists(self, p):
        p = p.rstrip(".,:;)")
        if p.count(">") > p.count("<"):
            p = p[:p.rindex(">")]  # #include <zerotrain/engine/engine.h>
        while p.endswith(("'", '"')):
            p = p[:-1]
        if "..." in p or "…" in p:
            return True
        if any(p.startswith(g) or p == g.rstrip("/") for g in GENERATED):   # the folder itself, too
            return True
        pattern = re.sub(r"<[^>]*>", "*", p)
        pats = [pattern]
        m = re.search(r"\{([^{}]*)\}", pattern)
        if m:
            pats = [pattern[:m.start()] + alt + pattern[m.end():] for alt in m.group(1).split(",")]
        for pat in pats:
            full = os.path.join(self.root, pat)
            if any(c in pat for c in "*?["):
                if not glob.glob(full):
                    return False
            elif not os.path.exists(full):
                return False
        return True

    def check_paths(self, d):
        for i, (line, fenced) in enumerate(zip(d.lines, d.in_fence), 1):
            if fenced is None:
                continue
            # link targets are check_links' business
            text = _LINK.sub(lambda m: "[" + m.group(2) + "]", line) if not fenced else line
            for m in _PATH.finditer(text):
                p = m.group(1)
                if p.count(">") > p.count("<"):
                    p = p[:p.rindex(">")]  # #include <zerotrain/engine/engine.h>
                if p.rstrip(".,:;)") in [r + "/" for r in PATH_ROOTS] + list(PATH_ROOTS):
                    if not os.path.exists(os.path.join(self.root, p.rstrip(".,:;)"))):
                        self.error(d, i, f"names `{p}`, which is not in the repository", "correct or drop it")
                    continue
                if not self.path_exists(p):
                    self.error(d, i, f"names `{p.rstrip('.,:;)')}`, which is not in the repository",
                               "correct the path (or, for a file the build makes, say so and add it to GENERATED "
                               "in scripts/check_docs.py)")

    def check_code_paths(self, d):
        """`optim/adam_kernel.h`-style paths in code spans: the repository's, from its root,
        from zerotrain/ or from python/zerotrain/ (other projects' files are named with their
        project's root: deepspeed/, torch/, transformers/)."""
        for i, (line, fenced) in enumerate(zip(d.lines, d.in_fence), 1):
            if fenced is not False:
                continue
            spans, _ = code_spans(line)
            for span in spans:
                if not _CODE_PATH.fullmatch(span) or span.split("/")[0] in PATH_ROOTS:
                    continue
                first = span.split("/")[0]
                if first in FOREIGN_ROOTS or first.isupper() or "<" in span or "*" in span:
                    continue
                if not any(os.path.exists(os.path.join(self.root, base, span))
                           for base in ("", "zerotrain", os.path.join("python", "zerotrain"))):
                    self.error(d, i, f"names `{span}`, which is in neither the repository's root, zerotrain/ "
                               f"nor python/zerotrain/", "correct the path (another project's file: name it "
                               "from that project's root, e.g. deepspeed/runtime/...)")

    # ---- 4. outside references ----
    def check_outside(self, d):
        for i, (line, fenced) in enumerate(zip(d.lines, d.in_fence), 1):
            if fenced is None:
                continue
            prose = line
            if not fenced:
                _, prose = code_spans(line)
                prose = _LINK.sub(lambda m: "[" + m.group(2) + "]", prose)  # URLs may hold #N
            for rx, problem, fix, prose_only in _OUTSIDE:
                where = prose if prose_only else line
                if prose_only and fenced:
                    continue
                m = rx.search(where)
                if m:
                    self.error(d, i, f"{problem} (`{m.group(0)}`)", fix)

    # ---- 3. commands ----
    def help_of(self, words):
        key = tuple(words)
        if key not in self._help:
            try:
                p = subprocess.run([self.binary, *words, "--help"], capture_output=True, text=True, timeout=60)
                text = p.stdout if p.returncode == 0 else None
            except OSError as e:
                raise SystemExit(f"check_docs: cannot run {self.binary}: {e}")
            self._help[key] = parse_help(text) if text is not None else None
        return self._help[key]

    def check_commands(self, d):
        i = 0
        n = len(d.lines)
        while i < n:
            line, fenced = d.lines[i], d.in_fence[i]
            start = i + 1
            if fenced:
                # join `\` continuations
                text = line
                while text.rstrip().endswith("\\") and i + 1 < n and d.in_fence[i + 1]:
                    i += 1
                    text = text.rstrip()[:-1] + " " + d.lines[i]
                self.check_command_line(d, start, text, strict=False)
            elif fenced is False:
                spans, _ = code_spans(line)
                for s in spans:
                    self.check_command_line(d, start, s, strict=False, inline=True)
            i += 1

    def check_command_line(self, d, lineno, text, strict, inline=False):
        text = re.sub(r"^\s*\$\s+", "", text)
        try:
            lex = shlex.shlex(text, posix=True)
            lex.whitespace_split = True
            lex.commenters = "#"
            tokens = list(lex)
        except ValueError:
            return  # not shell (an unbalanced quote in output text)
        # split at the shell's operators
        commands, cur = [], []
        for t in tokens:
            if t in ("|", "||", "&&", ";", "&"):
                commands.append(cur)
                cur = []
            elif t.endswith(";") and len(t) > 1:
                cur.append(t[:-1])
                commands.append(cur)
                cur = []
            else:
                cur.append(t)
        commands.append(cur)
        for words in commands:
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words = words[1:]  # FOO=1 zerotrain ...
            if words and words[0] in ("time", "exec", "nohup"):
                words = words[1:]
            if not words or not is_zerotrain(words[0]):
                continue
            if len(words) > 1 and not looks_like_invocation(words[1]):
                continue  # output text ("zerotrain train: done ..."), not a command
            if inline and len(words) == 1:
                continue
            self.check_words(d, lineno, words[1:], [], " ".join(words))

    def check_words(self, d, lineno, args, path, whole):
        """args: the words after `zerotrain` and after the subcommands in path."""
        h = self.help_of(path)
        if h is None:
            self.error(d, lineno, f"`zerotrain {' '.join(path)}` is not a command of the binary "
                       f"(in `{whole}`)", "name an existing subcommand (zerotrain --help)")
            return
        i = 0
        positional_seen = False
        while i < len(args):
            a = args[i].strip("[]")
            i += 1
            if not a or a in ("...", "|") or a.startswith("..."):
                continue
            if re.fullmatch(r"\d?(>>?|<)(&\d)?", a):
                i += 1  # a redirection and its file
                continue
            if re.match(r"^\d?(>>?|<)", a):
                continue  # >file, 2>/dev/null
            if a.startswith("--") and "/--" in a:
                args[i:i] = a.split("/")[1:]  # --save_steps/--resume_from_checkpoint: both
                a = a.split("/")[0]
            if a == "--":
                if path == ["launch"]:
                    self.check_program(d, lineno, args[i:], whole)
                return
            if a.startswith("-") and len(a) > 1 and not re.match(r"^-\d", a):
                name = a.split("=", 1)[0]
                if name not in h["options"]:
                    where = "zerotrain " + " ".join(path) if path else "zerotrain"
                    self.error(d, lineno, f"`{name}` is not a flag of `{where}` (in `{whole}`)",
                               f"use a flag that `{where} --help` lists")
                    continue
                nvals = h["options"][name]
                if "=" in a or args[i - 1].endswith("]"):
                    continue
                if nvals == 1 and i < len(args):
                    i += 1
                elif nvals == -1:
                    while i < len(args) and not args[i].lstrip("[").startswith("-"):
                        i += 1
                continue
            # a word: a subcommand, else a positional
            if not positional_seen and a in h["subcommands"]:
                self.check_words(d, lineno, args[i:], path + [a], whole)
                return
            if path == ["launch"]:
                self.check_program(d, lineno, [args[i - 1]] + args[i:], whole)
                return
            if h["subcommands"] and not h["positionals"] and not positional_seen:
                self.error(d, lineno, f"`{a}` is not a subcommand of `zerotrain {' '.join(path)}` (in `{whole}`)",
                           "name one that --help lists")
                return
            positional_seen = True

    def check_program(self, d, lineno, words, whole):
        if words and is_zerotrain(words[0]):
            self.check_words(d, lineno, words[1:], [], whole)


def is_zerotrain(word):
    return word in ("zerotrain", "build/tools/zerotrain", "./build/tools/zerotrain") or \
        word.endswith("/tools/zerotrain")


def looks_like_invocation(word):
    """`zerotrain train ...` or `zerotrain --version`, but not `zerotrain train: done` or
    `zerotrain ZeRO-3 vs ZeRO-2` (output) or `zerotrain reads ...` (prose)."""
    return word.startswith("-") or re.fullmatch(r"[a-z][a-z0-9-]*", word) is not None


def parse_help(text):
    """CLI11's --help: {'options': {name: values (0, 1 or -1 for several)}, 'subcommands': set,
    'positionals': bool}."""
    options = {"-h": 0, "--help": 0}
    subcommands = set()
    positionals = False
    section = None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1].strip()
            continue
        if not line.startswith("  ") or not line.strip():
            continue
        if section == "Subcommands":
            subcommands.add(line.split()[0])
        elif section == "Positionals":
            if re.match(r"^  \S", line):
                positionals = True
        elif section == "Options" and re.match(r"^  -", line):
            head = re.split(r"\s{2,}", line.strip())[0]
            names, _, rest = head.partition(" ")
            rest = re.sub(r"\s*(Excludes|Needs):.*$", "", rest).strip()
            nvals = 0
            if rest and re.match(r"^[A-Z]", rest):
                nvals = -1 if rest.endswith("...") else 1
            for name in names.split(","):
                options[name] = nvals
    return {"options": options, "subcommands": subcommands, "positionals": positionals}


# ---- self-test ----
_BAD_DOCS = {
    "README.md": "# Top\n\nSee [the engine](docs/engine.md#no-such-heading) and [gone](docs/missing.md).\n",
    "docs/engine.md": (
        "# Engine\n\n## Good heading\n\n"
        "The code is in `zerotrain/no_such_dir/x.cpp` and `optim/no_such.h`.\n\n"
        "As issue 12 says, and DESIGN.md too.\n\n"
        "The corpus is in ../shared/corpus.\n\n"
        "```\nbuild/tools/zerotrain train --no_such_flag 3\nzerotrain config chek a.json\n```\n"
    ),
}
_BAD_EXPECT = [
    ("README.md:3", "no heading with the anchor #no-such-heading"),
    ("README.md:3", "docs/missing.md does not exist"),
    ("docs/engine.md:5", "zerotrain/no_such_dir/x.cpp"),
    ("docs/engine.md:5", "`optim/no_such.h`"),
    ("docs/engine.md:7", "issue number"),
    ("docs/engine.md:7", "DESIGN.md"),
    ("docs/engine.md:9", "../shared"),
]
_BAD_EXPECT_BINARY = [
    ("docs/engine.md:12", "`--no_such_flag` is not a flag of `zerotrain train`"),
    ("docs/engine.md:13", "`chek` is not a subcommand of `zerotrain config`"),
]
_GOOD_DOCS = {
    "README.md": "# Top\n\nSee [the engine](docs/engine.md#good-heading-n) and [docs](docs/).\n",
    "docs/engine.md": (
        "# Engine\n\n## Good heading (`n`)\n\n"
        "The code is in `zerotrain/engine/`, `engine/x.h`, `docs/<name>.md` and `docs/engine.md#good-heading-n`; "
        "DeepSpeed's is `deepspeed/runtime/engine.py`.\n\n"
        "Collective `#2` failed; see [upstream](https://example.com/pull/12#x).\n\n"
        "```\n$ FOO=1 build/tools/zerotrain launch --nproc_per_node 2 -- build/tools/zerotrain train \\\n"
        "    --model gpt --report_to csv jsonl --save_on_signal=false | tail -1\n"
        "zerotrain config check FILE [--world_size N] [--json]   # a synopsis\n"
        "zerotrain train: done: 10 steps\n```\n"
    ),
}


def self_test(binary):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, docs in (("bad", _BAD_DOCS), ("good", _GOOD_DOCS)):
            root = os.path.join(tmp, name)
            for rel, text in docs.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w") as f:
                    f.write(text)
            os.makedirs(os.path.join(root, "zerotrain", "engine"))
            open(os.path.join(root, "zerotrain", "engine", "x.h"), "w").close()
            errors = Checker(root, binary).run()
            if name == "bad":
                expect = _BAD_EXPECT + (_BAD_EXPECT_BINARY if binary else [])
                for where, what in expect:
                    if not any(e.startswith(where + ":") and what in e for e in errors):
                        failures.append(f"the bad tree: no report at {where} of {what!r}; got:\n  "
                                        + "\n  ".join(errors))
                if len(errors) != len(expect):
                    failures.append(f"the bad tree: {len(errors)} reports for {len(expect)} defects:\n  "
                                    + "\n  ".join(errors))
            elif errors:
                failures.append("the clean tree was reported:\n  " + "\n  ".join(errors))
    for f in failures:
        print(f"check_docs self-test: {f}", file=sys.stderr)
    if not failures:
        print(f"check_docs self-test: every defect reported, the clean tree passed"
              f"{'' if binary else ' (commands not checked: no --binary)'}")
    return not failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository (default: this script's)")
    ap.add_argument("--binary", help="the built zerotrain, to check the docs' commands against its --help")
    ap.add_argument("--self-test", action="store_true", help="check the checker on made-up docs first")
    args = ap.parse_args()
    ok = True
    if args.self_test:
        ok = self_test(args.binary)
    errors = Checker(args.root, args.binary).run()
    for e in errors:
        print(e, file=sys.stderr)
    n = len(Checker(args.root, None).files())
    if errors:
        print(f"check_docs: {len(errors)} problems in {n} files", file=sys.stderr)
    else:
        print(f"check_docs: {n} files: links, paths, outside references"
              f"{', commands' if args.binary else ' (commands not checked: no --binary)'} all good")
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
