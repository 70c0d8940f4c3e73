"""Child process of the fuzzer: reads case specs (JSON) on stdin, prints one result line per
case as soon as it is known, so the parent can tell which case a signal or a hang hit."""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

PREFIX = "@@FUZZ "


def selftest(cases: list[dict], spec: str) -> int:
    """UVMSIM_FUZZ_SELFTEST="segv=ID,hang=ID": die or stall on those cases and answer the
    others at once, so the parent's signal and hang detection can be tested in seconds."""
    what = dict(kv.split("=") for kv in spec.split(","))
    for c in cases:
        if str(c["id"]) == what.get("segv"):
            os.kill(os.getpid(), signal.SIGSEGV)
        if str(c["id"]) == what.get("hang"):
            time.sleep(3600)
        print(PREFIX + json.dumps(dict(id=c["id"], mut=c["mut"], outcome="rejected",
                                       detail="selftest")), flush=True)
    return 0


def main() -> int:
    # a case that makes the reader allocate without bound should fail here with MemoryError,
    # not take the (shared) machine's memory
    limit = int(os.environ.get("UVMSIM_FUZZ_MEMORY", 8 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cases = json.loads(sys.stdin.read())
    if os.environ.get("UVMSIM_FUZZ_SELFTEST"):
        return selftest(cases, os.environ["UVMSIM_FUZZ_SELFTEST"])
    import fuzzlib
    work = os.environ.get("UVMSIM_FUZZ_WORK")  # the parent's, which it removes
    with nullcontext(work) if work else tempfile.TemporaryDirectory(prefix="uvmfuzz-") as tmp:
        runner = fuzzlib.Runner(Path(tmp))
        # compile (or load from the cache) the engine every case's replay uses before the
        # first case, so that a case's time limit measures the case, not a cold compile
        # on a loaded machine; the parent gives this its startup allowance
        runner.warm()
        sys.stdout.write(PREFIX + json.dumps({"ready": True}) + "\n")
        sys.stdout.flush()
        for spec in cases:
            res = runner.run(spec)
            sys.stdout.write(PREFIX + json.dumps(res) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
