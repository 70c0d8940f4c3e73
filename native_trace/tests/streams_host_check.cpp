// Runs native_trace/src/streams_host.h's build_stream on entries read from stdin, for
// tests/test_trace_v12.py, which compares its output with uvmsim.trace.streams.stream_tables.
//   in:  min_unit factor tick_bits n_access_rows n_entries n_ends
//        n_entries lines "block page t flags", n_ends lines "block end"
//   out: "unit tick", the block count, "block n_rows t_start t_end" lines, the row count,
//        "page t flags" lines
#include <cstdio>
#include <map>

#include "../src/streams_host.h"

int main() {
  int min_unit, factor, tick_bits;
  unsigned long long n_acc, n, n_ends;
  if (scanf("%d %d %d %llu %llu %llu", &min_unit, &factor, &tick_bits, &n_acc, &n, &n_ends) != 6) return 2;
  std::vector<uvmt::StreamTouch> e(n);
  for (auto& x : e) {
    unsigned long long b, p, t, f;
    if (scanf("%llu %llu %llu %llu", &b, &p, &t, &f) != 4) return 2;
    x = {(uint32_t)b, (uint32_t)f, p, t};
  }
  std::map<uint32_t, uint64_t> ends;
  for (unsigned long long i = 0; i < n_ends; ++i) {
    unsigned long long b, t;
    if (scanf("%llu %llu", &b, &t) != 2) return 2;
    ends[(uint32_t)b] = t;
  }
  uvmt::StreamOut o = uvmt::build_stream(
      e, min_unit, n_acc, [&](uint32_t b) -> uint64_t { auto it = ends.find(b); return it == ends.end() ? 0 : it->second; },
      factor, tick_bits);
  printf("%d %llu\n%zu\n", o.unit, (unsigned long long)o.tick_ns, o.blocks.size());
  for (auto& b : o.blocks) printf("%u %u %u %u\n", b.block, b.n_rows, b.t_start, b.t_end);
  printf("%zu\n", o.rows.size());
  for (auto& r : o.rows) printf("%llu %u %u\n", (unsigned long long)r.page, r.t, r.flags);
  return 0;
}
