"""The docs run: every ```python, ```bash and ```sh block of README.md and docs/*.md.

A block that stops working (a renamed argument, a moved file, a changed default) fails here.
The conventions (docs/reliability.md, "The docs are tested"):

* Blocks run in a scratch folder laid out like a clone after `scripts/setup.sh`: the
  repository's files and folders linked in, and `.venv/bin` with `python`, `uvmsim` (like
  the installed script) and `activate`. Outputs (`out/`, `my.uvmtrace`) land in the scratch
  folder.
* A shell block runs in its own `bash` with `set -eo pipefail`. `.venv` is active in it only
  where the doc has said to activate it (`source .venv/bin/activate` in the block or in the
  text above it); elsewhere no `uvmsim` is on PATH, so a doc that uses the bare command
  without saying where it comes from fails here.
* The Python blocks of one file run in order in one interpreter started in the scratch
  folder, so a later block may use what an earlier one defined (as in a notebook).
* A Python block whose first line is `# path/of/a/file.py` quotes that file: its lines must
  appear in the file, in the same order; it is checked, not run.
* `<!-- no-test: REASON -->` on the line before a block (blank lines between are allowed)
  skips it: only for blocks that need an NVIDIA GPU, install software or run for minutes.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import fake_venv

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGS = {"python": "python", "bash": "bash", "sh": "bash"}
NO_TEST = re.compile(r"<!--\s*no-test:\s*(.+?)\s*-->")
#: what may be skipped, at most (the skip list stays small: see the module doc)
MAX_SKIPPED = 6
ACTIVATE = "source .venv/bin/activate"


@dataclass
class Block:
    file: Path
    line: int       # of the opening fence, 1-based
    lang: str       # "python" or "bash"
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"

    @property
    def activated(self) -> bool:
        """Whether the doc has told the reader to activate .venv by this block's end."""
        before = "\n".join(self.file.read_text().splitlines()[:self.line - 1])
        return ACTIVATE in before or ACTIVATE in self.code

    @property
    def quotes(self) -> Path | None:
        m = re.match(r"#\s*(\S+\.py)\b", self.code)
        if self.lang == "python" and m and (ROOT / m.group(1)).is_file():
            return ROOT / m.group(1)
        return None


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file in the languages above."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w+)\s*$", lines[i])
        if not m:
            if lines[i].startswith("```"):          # another language or a plain fence:
                i += 1                               # skip to its end
                while i < len(lines) and not lines[i].startswith("```"):
                    i += 1
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        if m.group(1) not in LANGS:
            continue
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        skip = NO_TEST.search(lines[j]) if j >= 0 else None
        out.append(Block(path, start + 1, LANGS[m.group(1)], "\n".join(body) + "\n",
                         skip.group(1) if skip else None))
    return out


ALL = [b for p in DOCS for b in blocks(p)]
RUN = [b for b in ALL if b.skip is None and b.quotes is None]


def test_the_walk_finds_the_blocks_and_few_are_skipped():
    by_file = {b.file.name for b in ALL}
    assert {"README.md", "quickstart.md", "cli.md", "policies.md"} <= by_file
    assert sum(b.lang == "python" for b in RUN) >= 5 and sum(b.lang == "bash" for b in RUN) >= 4
    skipped = [b for b in ALL if b.skip]
    assert len(skipped) <= MAX_SKIPPED, [(b.name, b.skip) for b in skipped]
    for b in skipped:
        assert len(b.skip) > 10, b.name   # a reason, not a bare marker


def test_a_bare_uvmsim_comes_after_saying_to_activate_the_venv():
    """A reader of README.md or a doc who runs a block with a bare `uvmsim` has been told to
    activate .venv first (the script is installed there, not on PATH)."""
    bare = [b for b in RUN if b.lang == "bash" and re.search(r"(^|[;&|(]\s*)uvmsim ", b.code, re.M)]
    assert any(b.file.name == "README.md" for b in bare)
    assert [b.name for b in bare if not b.activated] == []


def test_the_parser_reads_fences_markers_and_quotes(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("text\n<!-- no-test: needs an NVIDIA GPU -->\n\n```bash\nuvmsim record\n```\n"
                  "```\nnot code\n```\n```python\n# src/uvmsim/cli.py\nx = 1\n```\n"
                  "```text\nprinted\n```\n```sh\necho hi\n```\n")
    got = blocks(md)
    assert [(b.line, b.lang, b.skip) for b in got] == [
        (4, "bash", "needs an NVIDIA GPU"), (10, "python", None), (17, "bash", None)]
    assert got[1].quotes == ROOT / "src" / "uvmsim" / "cli.py" and got[2].code == "echo hi\n"


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A scratch folder laid out like a clone after scripts/setup.sh (module doc)."""
    d = tmp_path_factory.mktemp("clone")
    for p in ROOT.iterdir():
        if p.name not in (".git", ".venv", "out") and not p.name.startswith("."):
            (d / p.name).symlink_to(p)
    fake_venv(d)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), MPLBACKEND="Agg")
    env.pop("UVMSIM_DEBUG", None)
    return d, env


@pytest.mark.parametrize("block", [b for b in RUN if b.lang == "bash"], ids=lambda b: b.name)
def test_shell_block(block, clone):
    d, env = clone
    if block.activated:
        script = f"set -eo pipefail\nsource .venv/bin/activate\n{block.code}"
    else:   # no uvmsim on PATH: the doc never said to activate .venv
        path = [p for p in env.get("PATH", "").split(os.pathsep)
                if p and not (Path(p) / "uvmsim").exists()]
        env = dict(env, PATH=os.pathsep.join(path))
        script = f"set -eo pipefail\n{block.code}"
    p = subprocess.run(["bash", "-c", script], cwd=d, env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, f"{block.name} failed:\n{block.code}\n{p.stdout[-3000:]}\n" \
                              f"{p.stderr[-3000:]}"


RUNNER = r"""
import json, sys, traceback
ns = {"__name__": "__main__"}
for name, code in json.load(open(sys.argv[1])):
    try:
        exec(compile(code, name, "exec"), ns)
    except BaseException:
        print(f"block {name} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


@pytest.mark.parametrize("doc", sorted({b.file for b in RUN if b.lang == "python"}),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks(doc, clone, tmp_path):
    d, env = clone
    todo = [(b.name, b.code) for b in RUN if b.lang == "python" and b.file == doc]
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps(todo))
    # `python -c`: the current folder is on the import path, as in a notebook or a REPL
    p = subprocess.run([sys.executable, "-c", RUNNER, str(spec)], cwd=d, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]


@pytest.mark.parametrize("block", [b for b in ALL if b.quotes and not b.skip],
                         ids=lambda b: b.name)
def test_quoted_source_matches_its_file(block):
    want = [ln.rstrip() for ln in block.code.splitlines()[1:] if ln.strip()]
    have = [ln.rstrip() for ln in block.quotes.read_text().splitlines()]
    i = 0
    for ln in want:
        while i < len(have) and have[i] != ln:
            i += 1
        assert i < len(have), f"{block.name}: {ln!r} is not in {block.quotes.name} (in order)"
        i += 1


# ---------------------------------------------------------------- what the docs point at
SOURCES = [p for pattern in ("README.md", "docs/*.md", "src/**/*.py", "tests/**/*.py",
                             "benchmarks/**/*.py", "benchmarks/**/*.md", "benchmarks/**/*.sh",
                             "examples/*.py", "examples/*.ipynb", "scripts/*.sh",
                             "native_trace/**/*.cpp", "native_trace/**/*.h",
                             "native_trace/**/*.cu", "native_trace/**/*.sh")
           for p in sorted(ROOT.glob(pattern)) if p != Path(__file__).resolve()]
# files a clone does not have, and issue numbers, which mean nothing to a reader of the repo
OUTSIDE = re.compile(r"driver-model\.md|anchors\.md|shared/spec|\.\./shared|"
                     r"\bissue[- ]?#?\d+|\(#\d+\)", re.I)


def test_nothing_points_outside_the_repository():
    bad = []
    for p in SOURCES:
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if '"image/png"' in line or len(line) > 2000:   # notebook outputs
                continue
            if OUTSIDE.search(line):
                bad.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()[:120]}")
    assert not bad, "\n".join(bad)


def test_links_between_docs_resolve_and_headings_are_unique():
    for doc in DOCS:
        text = doc.read_text()
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
            if not re.match(r"[a-z]+://", target):
                assert (doc.parent / target).exists(), f"{doc.name}: link to {target}"
        prose = re.sub(r"```.*?```", "(code)", text, flags=re.S)
        heads = re.findall(r"^(#+ .+?)\s*$", prose, re.M)
        assert len(heads) == len(set(heads)), f"{doc.name}: a heading twice"
        # nor a section left empty by the same-level heading right after it
        empty = re.search(r"^(#+) .*\n(?:\s*\n)*\1 ", prose, re.M)
        assert not empty, f"{doc.name}: empty section {empty.group(0)!r}"
