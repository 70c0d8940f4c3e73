"""Child process of the fuzzer: reads case specs (JSON) on stdin, prints one result line per
case as soon as it is known, so the parent can tell which case a signal or a hang hit."""
from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
from pathlib import Path

import fuzzlib


def main() -> int:
    # a case that makes the reader allocate without bound should fail here with MemoryError,
    # not take the (shared) machine's memory
    limit = int(os.environ.get("UVMSIM_FUZZ_MEMORY", 8 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
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
