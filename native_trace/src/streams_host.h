// Host side of the per-thread-block streams (uvmtrace v1.2): from one launch's stream entries
// (each the first touch of a (thread block, unit) at some level) and its blocks' last
// accesses, the stream written to the raw file. Header-only and free of CUDA, so
// tests/test_native_host.py compiles it into a small program and checks it against the
// Python rule (uvmsim.trace.streams.stream_tables) on random input.
//
// The rule (docs/trace-format.md, "v1.2"):
//  * unit: the smallest u in min_unit..30 (log2 bytes) at which the number of distinct
//    (block, page >> (u - 12)) is at most factor x n_access_rows + the number of blocks;
//    none: no stream ("over_bound");
//  * each (block, unit) keeps its earliest touch (ties: the lowest page) and the OR of flags;
//  * times: a block runs from its earliest touch to max(its last access, its last touch); the
//    kernel's earliest touch is 0; the tick is the smallest power of two 2^q ns with the run
//    below 2^tick_bits ticks; a time in ticks is floor((t - t_ref) / tick), a row's t is its
//    tick minus its block's start tick;
//  * blocks ascend; a block's rows are sorted by (t, page).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace uvmt {

struct StreamTouch {  // one entry, its page resolved
  uint32_t block;
  uint32_t flags;
  uint64_t page;
  uint64_t t;  // ns, any origin (the device's %globaltimer)
};

struct StreamBlockRec {  // raw file: one per block (uvmsim.record.raw.SBLK_DTYPE)
  uint32_t block;
  uint32_t n_rows;
  uint32_t t_start;
  uint32_t t_end;
};

struct StreamRowRec {  // raw file: one per (block, unit) (uvmsim.record.raw.SROW_DTYPE)
  uint64_t page;
  uint32_t t;
  uint32_t flags;
};

static_assert(sizeof(StreamBlockRec) == 16 && sizeof(StreamRowRec) == 16, "raw layout");

struct StreamOut {
  int unit = 0;        // 0: no stream (over the bound)
  uint64_t tick_ns = 1;
  uint64_t span_ns = 0;  // the kernel's run, earliest touch to last access
  std::vector<StreamBlockRec> blocks;
  std::vector<StreamRowRec> rows;
};

// `e` is reordered. `block_end(b)` gives the block's last access in the same clock, or 0 when
// unknown. Blocks are < 2^32 and pages < 2^52.
template <class BlockEnd>
StreamOut build_stream(std::vector<StreamTouch>& e, int min_unit, uint64_t n_access_rows, BlockEnd block_end,
                       int factor = 8, int tick_bits = 18) {
  StreamOut out;
  if (e.empty()) {
    out.unit = min_unit;
    return out;
  }
  std::sort(e.begin(), e.end(), [](const StreamTouch& a, const StreamTouch& b) {
    return a.block != b.block ? a.block < b.block : a.page < b.page;
  });
  uint64_t n_blocks = 1;
  for (size_t i = 1; i < e.size(); ++i) n_blocks += e[i].block != e[i - 1].block;
  const uint64_t bound = (uint64_t)factor * n_access_rows + n_blocks;
  int unit = 0;
  for (int u = min_unit; u <= 30 && unit == 0; ++u) {
    const int sh = u - 12;
    uint64_t n = 1;
    for (size_t i = 1; i < e.size(); ++i)
      n += e[i].block != e[i - 1].block || (e[i].page >> sh) != (e[i - 1].page >> sh);
    if (n <= bound) unit = u;
  }
  if (unit == 0) return out;  // over the bound at every unit
  out.unit = unit;
  const int sh = unit - 12;
  // block times, from every touch before merging
  struct Blk { uint32_t block; uint64_t t0, t1; size_t first, n; };
  std::vector<Blk> blks;
  for (size_t i = 0; i < e.size(); ++i) {
    if (blks.empty() || blks.back().block != e[i].block) blks.push_back({e[i].block, e[i].t, e[i].t, i, 0});
    Blk& b = blks.back();
    b.t0 = std::min(b.t0, e[i].t);
    b.t1 = std::max(b.t1, e[i].t);
    ++b.n;
  }
  uint64_t ref = ~0ull, last = 0;
  for (Blk& b : blks) {
    uint64_t end = block_end(b.block);
    if (end > b.t1) b.t1 = end;
    ref = std::min(ref, b.t0);
    last = std::max(last, b.t1);
  }
  out.span_ns = last - ref;
  uint64_t q = 0;
  while (((last - ref) >> q) >= (1ull << tick_bits)) ++q;
  out.tick_ns = 1ull << q;
  // merge each block's touches to the unit: earliest touch, lowest page on a tie, flags ORed
  std::vector<StreamTouch> m;
  for (Blk& b : blks) {
    auto first = e.begin() + (std::ptrdiff_t)b.first, stop = first + (std::ptrdiff_t)b.n;
    size_t start = m.size();
    for (auto it = first; it != stop;) {  // sorted by page: a unit's touches are together
      const uint64_t unit_id = it->page >> sh;
      StreamTouch best = *it;
      uint32_t fl = 0;
      for (; it != stop && (it->page >> sh) == unit_id; ++it) {
        fl |= it->flags;
        if (it->t < best.t || (it->t == best.t && it->page < best.page)) best = *it;
      }
      best.flags = fl;
      m.push_back(best);
    }
    const uint64_t t_start = (b.t0 - ref) >> q;
    for (size_t i = start; i < m.size(); ++i) m[i].t = ((m[i].t - ref) >> q) - t_start;  // ticks from the block's start
    std::sort(m.begin() + (std::ptrdiff_t)start, m.end(), [](const StreamTouch& a, const StreamTouch& c) {
      return a.t != c.t ? a.t < c.t : a.page < c.page;
    });
    out.blocks.push_back({b.block, (uint32_t)(m.size() - start), (uint32_t)t_start, (uint32_t)((b.t1 - ref) >> q)});
  }
  out.rows.reserve(m.size());
  for (const StreamTouch& t : m) out.rows.push_back({t.page, (uint32_t)t.t, t.flags});
  return out;
}

}  // namespace uvmt
