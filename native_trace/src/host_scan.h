// Which pages of a range are present in the CPU page table: the host-access scans of the page
// pass (pages_pass.cpp) ask this of every live managed allocation before each GPU operation.
// Two ways: reading 8 bytes per page of /proc/self/pagemap (any Linux), or the PAGEMAP_SCAN
// ioctl (Linux 6.7 and later), which reports only the ranges of present pages and so costs
// little where nothing is present. Header-only and free of CUDA, so
// tests/test_native_pagemap.py compiles it and checks that both agree.
#pragma once
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

namespace uvmt {

// The ioctl's ABI (include/uapi/linux/fs.h, Linux 6.7), spelled out because the C library's
// kernel headers may be older than the running kernel.
struct PmRegion {
  uint64_t start, end, categories;
};
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
      category_anyof_mask, return_mask;
};
#define UVMT_PAGEMAP_SCAN _IOWR('f', 16, struct uvmt::PmScanArg)
constexpr uint64_t kPageIsPresent = 1ull << 3;

inline void set_pages(std::vector<uint64_t>& bits, uint64_t i, uint64_t j) {  // bits [i, j)
  for (; i < j && (i % 64); ++i) bits[i / 64] |= 1ull << (i % 64);
  for (; i + 64 <= j; i += 64) bits[i / 64] = ~0ull;
  for (; i < j; ++i) bits[i / 64] |= 1ull << (i % 64);
}

// Pages [first, last] present: bit (p - first) of `bits` (sized by the caller, cleared here).
// Returns 0, or the errno of the failed read.
inline int present_pread(int fd, uint64_t first, uint64_t last, std::vector<uint64_t>& bits) {
  static thread_local std::vector<uint64_t> ent(1u << 16);  // one pagemap entry per page
  for (auto& w : bits) w = 0;
  for (uint64_t p = first; p <= last;) {
    uint64_t n = std::min<uint64_t>(ent.size(), last + 1 - p);
    ssize_t got = pread(fd, ent.data(), n * 8, (off_t)(p * 8));
    if (got != (ssize_t)(n * 8)) return got < 0 ? errno : EIO;
    for (uint64_t k = 0; k < n; ++k)
      if (ent[k] >> 63) {  // bit 63: present in RAM
        uint64_t i = p - first + k;
        bits[i / 64] |= 1ull << (i % 64);
      }
    p += n;
  }
  return 0;
}

// The same with PAGEMAP_SCAN; false when the kernel cannot, or answers something other than
// what was asked (then the caller must not trust it).
inline bool present_scan(int fd, uint64_t first, uint64_t last, std::vector<uint64_t>& bits) {
  static thread_local std::vector<PmRegion> vec(4096);
  for (auto& w : bits) w = 0;
  uint64_t start = first << 12, end = (last + 1) << 12;
  while (start < end) {
    PmScanArg a{};
    a.size = sizeof a;
    a.start = start;
    a.end = end;
    a.vec = (uint64_t)(uintptr_t)vec.data();
    a.vec_len = vec.size();
    a.category_mask = kPageIsPresent;
    a.return_mask = kPageIsPresent;
    long n = ioctl(fd, UVMT_PAGEMAP_SCAN, &a);
    if (n < 0 || (uint64_t)n > vec.size()) return false;
    for (long r = 0; r < n; ++r) {
      uint64_t lo = vec[r].start >> 12, hi = vec[r].end >> 12;  // [lo, hi)
      if (lo < first || hi > last + 1 || lo >= hi || !(vec[r].categories & kPageIsPresent)) return false;
      set_pages(bits, lo - first, hi - first);
    }
    if (a.walk_end <= start || a.walk_end > end) return false;  // no progress: do not loop
    start = a.walk_end;
  }
  return true;
}

}  // namespace uvmt
