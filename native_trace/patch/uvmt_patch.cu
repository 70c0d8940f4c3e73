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
//
// Slot words carry the launch's generation in their high half, so the host never clears the
// tables between launches: a word of another generation is empty (uvmt_layout.h).
//
// Streams (uvmtrace v1.2): each (thread block, unit) touch is looked up in an open-addressing
// index of entries; the first warp of a block to touch a unit makes its entry (one atomicAdd
// and one compare-and-swap), later touches only read it (an atomicOr when a new kind of access
// appears). A block's last access is kept in blk_end with an atomicMax only when it has
// advanced by 2^UVMT_END_SHIFT ns, so most accesses only read. Every index is bounded: an
// entry that finds no room is counted in ent_dropped (the host then writes no stream for the
// launch), never written out of bounds.
#include <sanitizer_patching.h>
#include "../src/uvmt_layout.h"

static __device__ __forceinline__ unsigned lane_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}

// Slot word of `page`: its entry in slot_of when an allocation covers it (*seg = the segment),
// else in the table of unknown pages (*seg = -1; nullptr when that table is full).
static __device__ __forceinline__ unsigned long long* find_slot(uvmt_state* s, unsigned long long page, int* seg) {
  const uvmt_seg* segs = s->segs;
  int lo = 0, hi = (int)s->n_segs - 1;
  while (lo <= hi) {
    int mid = (lo + hi) >> 1;
    if (page < segs[mid].first_page) hi = mid - 1;
    else if (page >= segs[mid].end_page) lo = mid + 1;
    else {
      *seg = mid;
      return &s->slot_of[segs[mid].slot_base + (page - segs[mid].first_page)];
    }
  }
  *seg = -1;
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

// The launch's t0: the time of its first recorded access, set by whoever gets there first.
static __device__ __forceinline__ unsigned long long launch_t0(uvmt_state* s, unsigned long long now) {
  unsigned long long t0 = *(volatile unsigned long long*)&s->t0;
  if (t0 == 0ull) {
    unsigned long long prev = atomicCAS(&s->t0, 0ull, now);
    t0 = prev == 0ull ? now : prev;
  }
  return t0;
}

// The packed slice word of an access at `now`: (shift << 56) | bit of its slice. Grows the
// launch's shift when the access falls past the last slice of the current width.
static __device__ __forceinline__ unsigned long long slice_word(uvmt_state* s, unsigned long long now, unsigned long long t0) {
  if (!s->slices_on) return 1ull;  // shift 0, slice 0
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

static __device__ __forceinline__ unsigned sreg(int which) {
  unsigned r;
  switch (which) {
    case 0: asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(r)); break;
    case 1: asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(r)); break;
    case 2: asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(r)); break;
    case 3: asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(r)); break;
    default: asm volatile("mov.u32 %0, %%nctaid.y;" : "=r"(r)); break;
  }
  return r;
}

// Linear id of this thread block in its grid, x fastest.
static __device__ __forceinline__ unsigned long long block_linear() {
  unsigned long long nx = sreg(3), ny = sreg(4);
  return (unsigned long long)sreg(0) + nx * ((unsigned long long)sreg(1) + ny * (unsigned long long)sreg(2));
}

// A touch of `page` (in segment `seg`) by this thread block at `now`: keeps the block's last
// access and the first touch of each (block, unit).
static __device__ void stream_touch(uvmt_state* s, int seg, unsigned long long page, unsigned flags,
                                    unsigned long long now, unsigned long long t0) {
  const unsigned long long blk = block_linear();
  if (blk >= s->blk_cap) {  // the host sizes blk_end for the grid: never expected
    atomicAdd(&s->blk_dropped, 1ull);
    return;
  }
  const unsigned gen = s->gen;
  const unsigned long long tag = (unsigned long long)gen << 32;
  unsigned long long units = (now > t0 ? now - t0 : 0ull) >> UVMT_END_SHIFT;
  if (units > 0xFFFFFFF0ull) units = 0xFFFFFFF0ull;
  const unsigned long long mine = tag | (units + 1ull);
  unsigned long long* be = &s->blk_end[blk];
  const unsigned long long old = *(volatile unsigned long long*)be;
  if (old < mine) {
    if ((unsigned)(old >> 32) != gen && !*(volatile unsigned*)&s->dsmem_seen) {
      unsigned d;  // the launch's dynamic shared memory, as the hardware sees it
      asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(d));
      s->dsmem = d;  // every block stores the same value
      s->dsmem_seen = 1u;
    }
    atomicMax(be, mine);
  }
  const unsigned shifts[UVMT_LEVELS] = UVMT_LEVEL_SHIFTS;
  unsigned level = *(volatile unsigned*)&s->ent_level;
  if (level >= UVMT_LEVELS) level = UVMT_LEVELS - 1;
  const uvmt_seg* g = &s->segs[seg];
  unsigned long long first = (page >> shifts[level]) << shifts[level];
  if (first < g->first_page) first = g->first_page;
  const unsigned long long key = (blk << 32) | (g->slot_base + (first - g->first_page));
  const unsigned long long mask = (1ull << s->ent_bits) - 1ull;
  unsigned long long h = (key * 0x9E3779B97F4A7C15ull) >> (64u - s->ent_bits);
  for (unsigned probe = 0; probe < UVMT_ENT_PROBES; ++probe, h = (h + 1ull) & mask) {
    unsigned long long* w = &s->ent_slot[h];
    unsigned long long v = *(volatile unsigned long long*)w;
    if ((unsigned)(v >> 32) != gen) {  // empty in this launch
      unsigned long long prev = atomicCAS(w, v, tag | UVMT_LO_CLAIM);
      if (prev == v) {
        const unsigned i = atomicAdd(&s->n_ent, 1u);
        if (i >= s->ent_cap) {
          atomicExch(w, tag | UVMT_LO_FULL);
          atomicAdd(&s->ent_dropped, 1ull);
          return;
        }
        uvmt_ent* e = &s->ents[i];
        e->key = key;
        e->t = now;
        e->page_off = (unsigned)(page - first);
        e->flags = flags;
        __threadfence();  // the entry must be visible before its slot says it exists
        atomicExch(w, tag | (unsigned long long)(i + 1u));
        // coarser units once the array fills: level L holds until cap - cap / 2^(L+1)
        if (level + 1u < UVMT_LEVELS && i + 1u >= s->ent_cap - (s->ent_cap >> (level + 1u)))
          atomicMax(&s->ent_level, level + 1u);
        return;
      }
      v = prev;
    }
    while ((unsigned)v == UVMT_LO_CLAIM) v = *(volatile unsigned long long*)w;
    if ((unsigned)v == UVMT_LO_FULL) {
      atomicAdd(&s->ent_dropped, 1ull);
      return;
    }
    __threadfence();
    uvmt_ent* e = &s->ents[(unsigned)v - 1u];
    if (*(volatile unsigned long long*)&e->key == key) {
      if ((*(volatile unsigned*)&e->flags & flags) != flags) atomicOr(&e->flags, flags);
      return;
    }
  }
  atomicAdd(&s->ent_dropped, 1ull);
}

static __device__ void record(uvmt_state* s, unsigned long long page, unsigned n, unsigned flags) {
  int seg;
  unsigned long long* slot = find_slot(s, page, &seg);
  if (slot == nullptr) { atomicAdd(&s->dropped, (unsigned long long)n); return; }
  unsigned long long now = 0ull, t0 = 0ull;
  if (s->slices_on || s->streams_on) {
    now = global_ns();
    t0 = launch_t0(s, now);
  }
  const unsigned long long sw = slice_word(s, now, t0);
  const unsigned gen = s->gen;
  const unsigned long long tag = (unsigned long long)gen << 32;
  unsigned long long v = *(volatile unsigned long long*)slot;
  if ((unsigned)(v >> 32) != gen) {  // empty in this launch
    unsigned long long prev = atomicCAS(slot, v, tag | UVMT_LO_CLAIM);
    if (prev == v) {
      unsigned t = atomicAdd(&s->n_touched, 1u);
      if (t >= s->rec_cap) {
        atomicExch(slot, tag | UVMT_LO_FULL);
        atomicAdd(&s->dropped, (unsigned long long)n);
        return;
      }
      s->recs[t].page = page;
      s->recs[t].count = n;
      s->recs[t].flags = flags;
      s->recs[t].slices = sw;
      __threadfence();  // the record must be visible before the slot says it exists
      atomicExch(slot, tag | (unsigned long long)(t + 1u));
      if (seg >= 0 && s->streams_on) stream_touch(s, seg, page, flags, now, t0);
      return;
    }
    v = prev;
  }
  while ((unsigned)v == UVMT_LO_CLAIM) v = *(volatile unsigned long long*)slot;  // the claimer is another warp or lane
  if ((unsigned)v == UVMT_LO_FULL) { atomicAdd(&s->dropped, (unsigned long long)n); return; }
  __threadfence();
  uvmt_rec* r = &s->recs[(unsigned)v - 1u];
  atomicAdd(&r->count, n);
  if ((*(volatile unsigned*)&r->flags & flags) != flags) atomicOr(&r->flags, flags);
  add_slice(&r->slices, sw);
  if (seg >= 0 && s->streams_on) stream_touch(s, seg, page, flags, now, t0);
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
