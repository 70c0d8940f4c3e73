"""The collector runner, shared by `uvmsim record` and `uvmsim run` (uvmsim.groundtruth):
finding or building native_trace/'s library with CMake, the environment that injects it into a
program, running that program, and the machine facts stored beside the results."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import RecordError

__all__ = ["DEFAULT_BUILD_DIR", "LIB_NAME", "NATIVE_DIR", "ProgramExit", "build_library",
           "collector_env", "exit_status", "find_library", "gpu_info", "library_has_pages",
           "run_program"]

REPO_ROOT = Path(__file__).resolve().parents[3]  # src/uvmsim/record/collector.py -> the clone
NATIVE_DIR = REPO_ROOT / "native_trace"
DEFAULT_BUILD_DIR = NATIVE_DIR / "build"
LIB_NAME = "libuvmtrace.so"


# --------------------------------------------------------------------------- library
def _read_build_info(build_dir: Path) -> dict[str, Any]:
    p = build_dir / "uvmtrace_build.json"
    return json.loads(p.read_text()) if p.exists() else {}


def build_library(build_dir: str | os.PathLike = DEFAULT_BUILD_DIR, *,
                  sanitizer_root: str | None = None, quiet: bool = False) -> Path:
    """Configure and build native_trace with CMake; returns the library's path."""
    if shutil.which("cmake") is None:
        raise RecordError("cmake is not on PATH: it is needed to build native_trace/")
    b = Path(build_dir)
    cfg = ["cmake", "-S", str(NATIVE_DIR), "-B", str(b), "-DCMAKE_BUILD_TYPE=Release"]
    if sanitizer_root:
        cfg.append(f"-DUVMTRACE_SANITIZER_ROOT={sanitizer_root}")
    out = subprocess.DEVNULL if quiet else sys.stderr
    for cmd in (cfg, ["cmake", "--build", str(b), "-j", str(os.cpu_count() or 2)]):
        rc = subprocess.call(cmd, stdout=out, stderr=out)
        if rc != 0:
            raise RecordError(f"building native_trace failed ({shlex.join(cmd)} exited {rc})")
    lib = b / LIB_NAME
    if not lib.exists():
        raise RecordError(f"the build of native_trace produced no {lib}")
    return lib


def find_library(lib: str | os.PathLike | None = None, *, build: bool = True) -> Path:
    """The collector library: `lib`, $UVMTRACE_LIB, native_trace/build/, or a fresh build."""
    for cand, what in ((lib, "--lib"), (os.environ.get("UVMTRACE_LIB"), "UVMTRACE_LIB")):
        if cand:
            p = Path(cand)
            if not p.is_file():
                raise RecordError(f"{what}={cand}: no such file")
            return p.resolve()
    p = DEFAULT_BUILD_DIR / LIB_NAME
    if p.is_file():
        return p
    if not build:
        raise RecordError(f"{p} does not exist; build it with: cmake -S {NATIVE_DIR} -B "
                          f"{DEFAULT_BUILD_DIR} && cmake --build {DEFAULT_BUILD_DIR}")
    return build_library()


def library_has_pages(lib: Path) -> bool | None:
    """Whether `lib` was built with the page pass (None: no build record beside it)."""
    info = _read_build_info(lib.parent)
    return info.get("page_pass") if info else None


# --------------------------------------------------------------------------- running
def exit_status(rc: int) -> int:
    """Shell convention: a program killed by signal N exits 128 + N."""
    return 128 - rc if rc < 0 else rc


def collector_env(pass_name: str, lib: Path, out_dir: Path, *, inject: str = "env",
                  user_env: Mapping[str, str] | None = None,
                  settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a program traced by the collector's `pass_name` pass.

    This process's environment, then the user's `user_env`, then the collector's
    ``UVMTRACE_*`` `settings` (which the user's cannot override), the pass and the output
    folder. `inject` ``env`` loads `lib` with CUDA_INJECTION64_PATH, ``preload`` with
    LD_PRELOAD (before any the user gave).
    """
    env = dict(os.environ)
    env.update(user_env or {})
    env.update(settings or {})
    env["UVMTRACE_PASS"] = pass_name
    env["UVMTRACE_OUT"] = str(out_dir)
    if inject == "preload":
        env.pop("CUDA_INJECTION64_PATH", None)
        env["UVMTRACE_PRELOAD"] = "1"
        env["LD_PRELOAD"] = f"{lib}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else str(lib)
    else:
        env["CUDA_INJECTION64_PATH"] = str(lib)
    return env


@dataclass(frozen=True)
class ProgramExit:
    """How a traced program ended: its shell-style `status` and whether the runner killed it
    at its deadline."""

    status: int
    killed: bool = False


def run_program(cmd: Sequence[str], env: Mapping[str, str], *, deadline_s: float | None = None,
                error: type[Exception] = RecordError) -> ProgramExit:
    """Run `cmd` with `env` and wait for it.

    Without `deadline_s` the program shares this process's group: Ctrl-C reaches it too, and
    it is waited for. With a deadline it runs in a session of its own, so that the whole
    group it started can be killed when the deadline passes (``killed``) or on Ctrl-C (which
    then propagates). A program that cannot be started raises `error`.
    """
    try:
        proc = subprocess.Popen(list(cmd), env=dict(env), start_new_session=deadline_s is not None)
    except OSError as e:
        raise error(f"cannot run {cmd[0]!r}: {e.strerror}") from e
    if deadline_s is None:
        try:
            return ProgramExit(exit_status(proc.wait()))
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            return ProgramExit(exit_status(proc.wait()))
    try:
        return ProgramExit(exit_status(proc.wait(timeout=deadline_s)))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return ProgramExit(exit_status(proc.wait()), killed=True)
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


# --------------------------------------------------------------------------- machine facts
def gpu_info() -> dict[str, Any]:
    """The GPU, its driver and memory (nvidia-smi) and the CUDA toolkit (nvcc), where found."""
    info: dict[str, Any] = {}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        if q.returncode == 0 and q.stdout.strip():
            name, drv, mem = [s.strip() for s in q.stdout.strip().splitlines()[0].split(",")]
            info.update(gpu=name, driver=drv, gpu_memory=mem)
        h = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30)
        m = re.search(r"CUDA Version:\s*([\d.]+)", h.stdout)
        if m:
            info["cuda_driver_api"] = m.group(1)
    except (OSError, subprocess.SubprocessError):
        pass
    info.update(_build_cuda_info())
    return info


def _build_cuda_info() -> dict[str, Any]:
    try:
        v = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30)
        m = re.search(r"release ([\d.]+)", v.stdout)
        return {"cuda_toolkit": m.group(1)} if m else {}
    except (OSError, subprocess.SubprocessError):
        return {}
