"""A small program (allocations, then events) as data: what the strategies generate, what a
counterexample shows. A Program builds its trace with uvmsim.trace.TraceBuilder, prints as
the TraceBuilder code that builds the same trace (`code()`) and as a short table
(`table()`), and can be cut to a prefix or to its v1 content.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..trace import Trace
from ..trace.builder import TraceBuilder

PAGE = 4096
BASE = 0x7F0000000000
REGION = 8 << 20        # each allocation has its own 8 MiB region: allocations never overlap
FLAG_NAMES = {1: "r", 2: "w", 3: "rw", 4: "a", 5: "ra", 6: "wa", 7: "rwa"}


@dataclass(frozen=True)
class Alloc:
    """`npages` pages from page `offset` of its region (offset 0: 2 MiB aligned), the last
    page `tail` bytes short (a size that is not whole pages)."""

    npages: int
    offset: int = 0
    tail: int = 0
    kind: str = "managed"

    def size(self) -> int:
        return self.npages * PAGE - self.tail


@dataclass(frozen=True)
class Kernel:
    """Access rows (alloc, page index, flags, count, slice mask) in first-touch order; with
    n_slices > 1 each row's mask says which of the kernel's time slices touch it (v1.1)."""

    rows: tuple[tuple[int, int, int, int, int], ...]
    duration_ns: int | None = 1000
    n_slices: int = 1


@dataclass(frozen=True)
class Range:
    """A range event on pages first..first+count-1 of an allocation: op is memcpy_htod,
    memcpy_dtoh, memcpy_dtod (the range is its destination), memset, prefetch (arg
    'gpu'/'cpu'), host_access (arg 'read'/'write'/None, v1.1) or advise (arg: the advice)."""

    op: str
    alloc: int
    first: int
    count: int
    arg: str | None = None


@dataclass(frozen=True)
class Free:
    alloc: int


@dataclass(frozen=True)
class Sync:
    pass


@dataclass(frozen=True)
class Program:
    allocs: tuple[Alloc, ...]
    ops: tuple = ()
    # packed: allocations follow each other, each `offset` pages after the previous one's
    # end, so small ones share 2 MiB windows (as the CUDA driver's sub-allocation places
    # them); otherwise each has its own region
    packed: bool = False

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    def prefix(self, n: int | None) -> "Program":
        """The program with only its first `n` events after the allocations."""
        return replace(self, ops=self.ops[:n])

    def v1(self) -> "Program":
        """Its v1 content: host_access events dropped, every kernel one time slice."""
        ops = tuple(replace(o, n_slices=1) if isinstance(o, Kernel) else o for o in self.ops
                    if not (isinstance(o, Range) and o.op == "host_access"))
        return replace(self, ops=ops)

    def base(self, a: int) -> int:
        if self.packed:
            before = sum(al.npages + al.offset for al in self.allocs[:a])
            return BASE + (before + self.allocs[a].offset) * PAGE
        return BASE + a * REGION + self.allocs[a].offset * PAGE

    def builder(self) -> TraceBuilder:
        b = TraceBuilder()
        for i, al in enumerate(self.allocs):
            b.alloc(al.size(), base=self.base(i), kind=al.kind)
        for k, o in enumerate(self.ops):
            if isinstance(o, Kernel):
                rows = [(int(b.pages(a, p, p + 1)[0]), fl) for a, p, fl, _, _ in o.rows]
                kw = {}
                if o.n_slices > 1:
                    kw = dict(slices=[m for *_, m in o.rows], n_slices=o.n_slices)
                b.kernel(f"k{self._kernel_index(k)}", rows=rows, duration_ns=o.duration_ns,
                         counts=[c for _, _, _, c, _ in o.rows], **kw)
            elif isinstance(o, Free):
                b.free(o.alloc)
            elif isinstance(o, Sync):
                b.sync()
            else:
                addr, size = self._range(o)
                if o.op == "prefetch":
                    b.prefetch(addr, size, o.arg)
                elif o.op == "host_access":
                    b.host_access(addr, size, o.arg)
                elif o.op == "advise":
                    b.advise(addr, size, o.arg)
                else:
                    getattr(b, o.op)(addr, size)
        return b

    def build(self) -> Trace:
        return self.builder().build()

    def _kernel_index(self, k: int) -> int:
        return sum(1 for o in self.ops[:k] if isinstance(o, Kernel))

    def _range(self, o: Range) -> tuple[int, int]:
        al = self.allocs[o.alloc]
        return self.base(o.alloc) + o.first * PAGE, min(o.count * PAGE,
                                                        al.size() - o.first * PAGE)

    # ------------------------------------------------------------------ printing
    def code(self) -> str:
        """Python that builds the same trace with TraceBuilder."""
        out = ["from uvmsim.trace.builder import TraceBuilder",
               "PAGE = 4096",
               "b = TraceBuilder()",
               "page = lambda a, i: int(b.pages(a, i, i + 1)[0])  # page i of allocation a",
               "addr = lambda a, i: b.base(a) + i * PAGE"]
        for i, al in enumerate(self.allocs):
            size = f"{al.npages} * PAGE" + (f" - {al.tail}" if al.tail else "")
            kind = f", kind={al.kind!r}" if al.kind != "managed" else ""
            out.append(f"a{i} = b.alloc({size}, base={self.base(i):#x}{kind})")
        for k, o in enumerate(self.ops):
            if isinstance(o, Kernel):
                rows = ", ".join(f"(page(a{a}, {p}), {fl})" for a, p, fl, _, _ in o.rows)
                args = [f'"k{self._kernel_index(k)}"', f"rows=[{rows}]"]
                counts = [c for _, _, _, c, _ in o.rows]
                if any(c != 1 for c in counts):
                    args.append(f"counts={counts}")
                if o.n_slices > 1:
                    args.append(f"slices={[m for *_, m in o.rows]}, n_slices={o.n_slices}")
                if o.duration_ns != 1000:
                    args.append(f"duration_ns={o.duration_ns}")
                out.append(f"b.kernel({', '.join(args)})")
            elif isinstance(o, Free):
                out.append(f"b.free(a{o.alloc})")
            elif isinstance(o, Sync):
                out.append("b.sync()")
            else:
                _, size = self._range(o)
                sz = f"{size // PAGE} * PAGE" + (f" + {size % PAGE}" if size % PAGE else "")
                extra = f", {o.arg!r}" if o.op in ("prefetch", "host_access", "advise") else ""
                out.append(f"b.{o.op}(addr(a{o.alloc}, {o.first}), {sz}{extra})")
        out.append("trace = b.build()")
        return "\n".join(out)

    def table(self) -> str:
        """One line per allocation and event; rows as a<alloc>[<page>]<flags>(xcount)."""
        out = []
        for i, al in enumerate(self.allocs):
            off = self.base(i) % (2 << 20) // PAGE
            out.append(f"a{i}: {al.npages} pages ({al.kind}), starting at position {off} of "
                       f"its 2 MiB window" + (f", last page {al.tail} B short" if al.tail
                                              else ""))
        for k, o in enumerate(self.ops):
            if isinstance(o, Kernel):
                cells = []
                for a, p, fl, c, m in o.rows:
                    cell = f"a{a}[{p}]{FLAG_NAMES.get(fl, fl)}" + (f"x{c}" if c != 1 else "")
                    cells.append(cell + (f"@{m:b}" if o.n_slices > 1 else ""))
                sl = f" ({o.n_slices} slices)" if o.n_slices > 1 else ""
                out.append(f"{k:>3} kernel k{self._kernel_index(k)}{sl}: "
                           + (" ".join(cells) or "(no rows)"))
            elif isinstance(o, Free):
                out.append(f"{k:>3} free a{o.alloc}")
            elif isinstance(o, Sync):
                out.append(f"{k:>3} sync")
            else:
                arg = f" {o.arg}" if o.arg else ""
                out.append(f"{k:>3} {o.op}{arg} a{o.alloc}[{o.first}..{o.first + o.count - 1}]")
        return "\n".join(out)

    def __repr__(self) -> str:
        return "Program:\n" + self.table()

    def _repr_pretty_(self, p, cycle) -> None:
        # hypothesis (and IPython) print a falsifying example with this: the event table
        p.text(repr(self))
