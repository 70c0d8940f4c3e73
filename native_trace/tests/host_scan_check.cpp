// Checks native_trace/src/host_scan.h on this machine (tests/test_native_pagemap.py): in an
// anonymous mapping of N pages, touches the pages listed on stdin, drops some again, and
// prints what reading /proc/self/pagemap and PAGEMAP_SCAN each find present.
//   in:  N, then page indices to touch, -1, then page indices to drop (MADV_DONTNEED), -1
//   out: "pread RC COUNT", "scan OK EQUAL", then the present pages (pread)
#include <fcntl.h>
#include <sys/mman.h>

#include <cstdio>

#include "../src/host_scan.h"

int main() {
  long n, p;
  if (scanf("%ld", &n) != 1 || n <= 0) return 2;
  char* m = (char*)mmap(nullptr, (size_t)n * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 3;
  madvise(m, (size_t)n * 4096, MADV_NOHUGEPAGE);  // one touch, one page (no 2 MiB pages)
  while (scanf("%ld", &p) == 1 && p >= 0) m[p * 4096 + 7] = 1;
  while (scanf("%ld", &p) == 1 && p >= 0) madvise(m + p * 4096, 4096, MADV_DONTNEED);
  int fd = open("/proc/self/pagemap", O_RDONLY);
  uint64_t first = (uint64_t)(uintptr_t)m >> 12, last = first + (uint64_t)n - 1;
  std::vector<uint64_t> a(((uint64_t)n + 63) / 64), b(a.size());
  int rc = uvmt::present_pread(fd, first, last, a);
  bool ok = uvmt::present_scan(fd, first, last, b);
  long count = 0;
  for (uint64_t w : a) count += __builtin_popcountll(w);
  printf("pread %d %ld\nscan %d %d\n", rc, count, ok ? 1 : 0, a == b ? 1 : 0);
  for (long i = 0; i < n; ++i)
    if (a[i / 64] >> (i % 64) & 1) printf("%ld\n", i);
  return 0;
}
