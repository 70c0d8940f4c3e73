"""Write an output file whole or not at all.

Every file uvmsim writes (sweep tables and dataset cells, plots, JSON results, a recorded
trace's extra files) is written to a temporary file beside it and renamed into place, so a
full disk or an interrupted run leaves the previous file (or none), never a truncated one;
the temporary file is removed on any failure, and an OSError names the file that could not
be written.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def _read_umask() -> int:
    """The process's umask (os.umask can only be read by setting it: set it back at once)."""
    m = os.umask(0o022)
    os.umask(m)
    return m


# mkstemp makes its file readable by its owner only; an output gets the mode that a plain
# open() would have given it (0666 less the umask), as before it was written atomically
_MODE = 0o666 & ~_read_umask()


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call write(tmp) with a temporary path in `path`'s folder, then rename it to `path`.

    The temporary name is hidden and never matches `path`'s pattern (".NAME.XXXX.tmp"), so
    a folder scanned for outputs (a sweep dataset's cell-*.parquet) never sees a partial one.
    """
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        try:
            os.fchmod(fd, _MODE)
        finally:
            os.close(fd)
    except OSError as e:
        raise _named(e, p) from e
    tmp = Path(name)
    try:
        write(tmp)
        os.replace(tmp, p)
    except BaseException as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _named(e, p) from e
        raise
    return p


def _named(e: OSError, p: Path) -> OSError:
    """The error, saying which output it concerns (pyarrow's and pandas' messages name the
    temporary file or none)."""
    what = e.strerror or " ".join(str(e).split()) or type(e).__name__
    if e.errno is None:
        return OSError(f"cannot write {p}: {what}")
    return OSError(e.errno, f"cannot write output ({what})", str(p))
