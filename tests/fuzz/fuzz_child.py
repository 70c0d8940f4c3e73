"""Child process of the fuzzer: reads case specs (JSON) on stdin, prints one result line per
case as soon as it is known, so the parent can tell which case a signal or a hang hit."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import fuzzlib


def main() -> int:
    cases = json.loads(sys.stdin.read())
    with tempfile.TemporaryDirectory(prefix="uvmfuzz-") as tmp:
        runner = fuzzlib.Runner(Path(tmp))
        for spec in cases:
            res = runner.run(spec)
            sys.stdout.write(fuzzlib.PREFIX + json.dumps(res) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
