// Device patch of the page pass. Compute Sanitizer calls these functions at every patched
// instruction (nvcc --fatbin --keep-device-functions -Xptxas --compile-as-tools-patch).
//
// Cost model: one call per thread per global access. Lanes of a warp that hit the same page
// with the same kind of access are merged with __match_any_sync, so only one atomic update
// per (warp, page) reaches memory. Each page covered by a live allocation owns a fixed slot
// (slot_of); the first warp to touch it claims a record whose index is the page's first-touch
// rank, so the host reads back exactly n_touched records: work proportional to pages touched.
// Each record also collects the time slices of the launch in which its page was touched
// (%globaltimer; see uvmt_layout.h), updated by compare-and-swap only when a new slice or a
// wider slice width appears.
#include <sanitizer_patching.h>
#include "../src/uvmt_layout.h"

static __device__ __forceinline__ unsigned lane_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}

// Slot of `page`: its entry in slot_of when an allocation covers it, else in the table of
// unknown pages (nullptr when that table is full).
static __device__ __forceinline__ unsigned* find_slot(uvmt_state* s, unsigned long long page) {
  const uvmt_seg* segs = s->segs;
  int lo = 0, hi = (int)s->n_segs - 1;
  while (lo <= hi) {
    int mid = (lo + hi) >> 1;
    if (page < segs[mid].first_page) hi = mid - 1;
    else if (page >= segs[mid].end_page) lo = mid + 1;
    else return &s->slot_of[segs[mid].slot_base + (page - segs[mid].first_page)];
  }
  unsigned h = (unsigned)((page * 0x9E3779B97F4A7C15ull) >> 32) & s->umask;
  for (unsigned probe = 0; probe <= s->umask && probe < 256; ++probe) {
    unsigned long long prev = atomicCAS(&s->ukeys[h], ~0ull, page);
    if (prev == ~0ull) { atomicAdd(&s->n_unknown, 1u); return &s->uslot[h]; }
    if (prev == page) return &s->uslot[h];
    h = (h + 1) & s->umask;
  }
  return nullptr;
}

static __device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Folds a mask from slices of 2^from ns to slices of 2^to ns (to >= from): each step ORs
// adjacent bit pairs into one bit (bits 2i, 2i+1 -> bit i).
static __device__ __forceinline__ unsigned long long fold_mask(unsigned long long m, unsigned from, unsigned to) {
  for (; from < to && m > 1ull; ++from) {
    m = (m | (m >> 1)) & 0x5555555555555555ull;
    m = (m | (m >> 1)) & 0x3333333333333333ull;
    m = (m | (m >> 2)) & 0x0F0F0F0F0F0F0F0Full;
    m = (m | (m >> 4)) & 0x00FF00FF00FF00FFull;
    m = (m | (m >> 8)) & 0x0000FFFF0000FFFFull;
    m = (m | (m >> 16)) & 0x00000000FFFFFFFFull;
  }
  return m;
}

// The packed slice word of an access now: (shift << 56) | bit of its slice. Grows the
// launch's shift when the access falls past the last slice of the current width.
static __device__ __forceinline__ unsigned long long slice_word(uvmt_state* s) {
  if (!s->slices_on) return 1ull;  // shift 0, slice 0
  unsigned long long now = global_ns();
  unsigned long long t0 = *(volatile unsigned long long*)&s->t0;
  if (t0 == 0ull) {
    unsigned long long prev = atomicCAS(&s->t0, 0ull, now);
    t0 = prev == 0ull ? now : prev;
  }
  unsigned long long dt = now > t0 ? now - t0 : 0ull;  // a warp that read the clock before t0 was set
  unsigned shift = *(volatile unsigned*)&s->shift;
  if ((dt >> shift) >= UVMT_MASK_BITS) {
    unsigned need = shift;
    while ((dt >> need) >= UVMT_MASK_BITS) ++need;
    shift = max(atomicMax(&s->shift, need), need);
  }
  return ((unsigned long long)shift << UVMT_MASK_BITS) | (1ull << (dt >> shift));
}

// Merges an access's slice word into a record's: both at the larger of their shifts.
// Most accesses find their bit already set at the current shift and only read.
static __device__ __forceinline__ void add_slice(unsigned long long* w, unsigned long long mine) {
  unsigned long long old = *(volatile unsigned long long*)w;
  for (;;) {
    unsigned os = (unsigned)(old >> UVMT_MASK_BITS), ms = (unsigned)(mine >> UVMT_MASK_BITS);
    unsigned long long om = old & UVMT_MASK, mm = mine & UVMT_MASK;
    unsigned ts = max(os, ms);
    unsigned long long nm = fold_mask(om, os, ts) | fold_mask(mm, ms, ts);
    unsigned long long nw = ((unsigned long long)ts << UVMT_MASK_BITS) | nm;
    if (nw == old) return;
    unsigned long long prev = atomicCAS(w, old, nw);
    if (prev == old) return;
    old = prev;
  }
}

static __device__ void record(uvmt_state* s, unsigned long long page, unsigned n, unsigned flags) {
  unsigned* slot = find_slot(s, page);
  if (slot == nullptr) { atomicAdd(&s->dropped, (unsigned long long)n); return; }
  unsigned long long sw = slice_word(s);
  unsigned v = *(volatile unsigned*)slot;
  if (v == UVMT_SLOT_EMPTY) {
    unsigned prev = atomicCAS(slot, UVMT_SLOT_EMPTY, UVMT_SLOT_CLAIM);
    if (prev == UVMT_SLOT_EMPTY) {
      unsigned t = atomicAdd(&s->n_touched, 1u);
      if (t >= s->rec_cap) {
        atomicExch(slot, UVMT_SLOT_FULL);
        atomicAdd(&s->dropped, (unsigned long long)n);
        return;
      }
      s->recs[t].page = page;
      s->recs[t].count = n;
      s->recs[t].flags = flags;
      s->recs[t].slices = sw;
      __threadfence();  // the record must be visible before the slot says it exists
      atomicExch(slot, t + 1u);
      return;
    }
    v = prev;
  }
  while (v == UVMT_SLOT_CLAIM) v = *(volatile unsigned*)slot;  // the claimer is another warp or lane
  if (v == UVMT_SLOT_FULL) { atomicAdd(&s->dropped, (unsigned long long)n); return; }
  __threadfence();
  uvmt_rec* r = &s->recs[v - 1u];
  atomicAdd(&r->count, n);
  if ((*(volatile unsigned*)&r->flags & flags) != flags) atomicOr(&r->flags, flags);
  add_slice(&r->slices, sw);
}

// Per-thread access: merge lanes that touch the same page the same way.
static __device__ __forceinline__ void warp_record(uvmt_state* s, unsigned long long page, unsigned flags) {
  unsigned long long key = (page << 4) | flags;  // pages are < 2^52, flags < 16
  unsigned mask = __activemask();
  unsigned peers = __match_any_sync(mask, key);
  if (lane_id() != (unsigned)(__ffs(peers) - 1)) return;
  record(s, page, (unsigned)__popc(peers), flags);
}

// Warp-uniform bulk operation over [addr, addr + bytes): the lowest active lane records it
// once, count 1 per page.
static __device__ __forceinline__ void warp_range(uvmt_state* s, unsigned long long addr, unsigned long long bytes, unsigned flags) {
  unsigned mask = __activemask();
  if (lane_id() != (unsigned)(__ffs(mask) - 1) || bytes == 0) return;
  for (unsigned long long p = addr >> 12, e = (addr + bytes - 1) >> 12; p <= e; ++p) record(s, p, 1u, flags);
}

static __device__ __forceinline__ unsigned map_flags(uint32_t f) {
  // A single instruction that both reads and writes is an atomic; ATOMSYS marks system-scope
  // atomics. A cache prefetch instruction is counted as a read of its page.
  unsigned out = 0;
  if (f & SANITIZER_MEMORY_DEVICE_FLAG_READ) out |= UVMT_F_READ;
  if (f & SANITIZER_MEMORY_DEVICE_FLAG_WRITE) out |= UVMT_F_WRITE;
  if ((out == (UVMT_F_READ | UVMT_F_WRITE)) || (f & SANITIZER_MEMORY_DEVICE_FLAG_ATOMSYS))
    out = UVMT_F_READ | UVMT_F_WRITE | UVMT_F_ATOMIC;
  if (out == 0) out = UVMT_F_READ;
  return out;
}

extern "C" __device__ __noinline__ SanitizerPatchResult uvmt_global_access(
    void* userdata, uint64_t pc, void* ptr, uint32_t size, uint32_t flags
#ifdef UVMT_HAS_PDATA
    , const void* pData
#endif
) {
  uvmt_state* s = (uvmt_state*)userdata;
  if (s == nullptr) return SANITIZER_PATCH_SUCCESS;
  warp_record(s, ((unsigned long long)ptr) >> 12, map_flags(flags));
  return SANITIZER_PATCH_SUCCESS;
}

// cp.async (LDGSTS): a global read into shared memory.
extern "C" __device__ __noinline__ SanitizerPatchResult uvmt_memcpy_async(
    void* userdata, uint64_t pc, void* src, uint32_t dst, uint32_t size) {
  uvmt_state* s = (uvmt_state*)userdata;
  if (s == nullptr || src == nullptr) return SANITIZER_PATCH_SUCCESS;
  warp_record(s, ((unsigned long long)src) >> 12, UVMT_F_READ);
  return SANITIZER_PATCH_SUCCESS;
}

// cp.async.bulk global -> shared.
extern "C" __device__ __noinline__ SanitizerPatchResult uvmt_bulk_g2s(
    void* userdata, uint64_t pc, uint64_t src, uint32_t dst, uint32_t barrier, uint32_t data, uint32_t isMulticast) {
  uvmt_state* s = (uvmt_state*)userdata;
  if (s == nullptr) return SANITIZER_PATCH_SUCCESS;
  warp_range(s, src, (unsigned long long)(data & 0xFFFFu) * 16ull, UVMT_F_READ);
  return SANITIZER_PATCH_SUCCESS;
}

// cp.async.bulk shared -> global.
extern "C" __device__ __noinline__ SanitizerPatchResult uvmt_bulk_s2g(
    void* userdata, uint64_t pc, uint64_t dst, uint32_t src, uint32_t numBlocks) {
  uvmt_state* s = (uvmt_state*)userdata;
  if (s == nullptr) return SANITIZER_PATCH_SUCCESS;
  warp_range(s, dst, (unsigned long long)numBlocks * 16ull, UVMT_F_WRITE);
  return SANITIZER_PATCH_SUCCESS;
}

// cp.reduce.async.bulk shared -> global: a read-modify-write of global memory.
extern "C" __device__ __noinline__ SanitizerPatchResult uvmt_bulk_red_s2g(
    void* userdata, uint64_t pc, uint64_t dst, uint32_t src, uint32_t numBlocks) {
  uvmt_state* s = (uvmt_state*)userdata;
  if (s == nullptr) return SANITIZER_PATCH_SUCCESS;
  warp_range(s, dst, (unsigned long long)numBlocks * 16ull, UVMT_F_READ | UVMT_F_WRITE | UVMT_F_ATOMIC);
  return SANITIZER_PATCH_SUCCESS;
}
