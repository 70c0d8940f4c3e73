"""The page pass's page-table reads (native_trace/src/host_scan.h), compiled on this machine:
reading /proc/self/pagemap and the PAGEMAP_SCAN ioctl must find the same present pages (the
page pass uses the ioctl only after they have agreed; docs/collector.md)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path_factory.mktemp("pm") / "host_scan_check"
    r = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                        str(REPO / "native_trace" / "tests" / "host_scan_check.cpp")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.mark.parametrize("seed", range(6))
def test_pread_and_pagemap_scan_agree(checker, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 63, 64, 65, 5000, 70000]))
    touch = sorted(set(rng.integers(0, n, int(rng.integers(0, min(n, 3000) + 1))).tolist()))
    if seed % 2 and n > 1000:  # a run of present pages longer than one word of bits
        touch = sorted(set(touch) | set(range(100, 900)))
    drop = [p for p in touch if rng.random() < 0.2]
    inp = " ".join(map(str, [n, *touch, -1, *drop, -1]))
    out = subprocess.run([str(checker)], input=inp, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    rc, count = map(int, out[0].split()[1:])
    ok, equal = map(int, out[1].split()[1:])
    present = [int(x) for x in out[2:] if x]
    assert rc == 0
    assert present == sorted(set(touch) - set(drop)) and count == len(present)
    if ok:  # Linux >= 6.7; on an older kernel the page pass keeps reading the page table
        assert equal == 1
    else:
        print("PAGEMAP_SCAN not supported here")
