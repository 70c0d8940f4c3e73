// Page pass: Compute Sanitizer patches every global memory instruction of every loaded module
// to call uvmt_global_access (patch/uvmt_patch.cu); the host side tracks allocations, hands
// each launch its own device state, waits for the launch and reads back the pages it touched.
//
// Raw output (src/uvmsim/record/raw.py reads it): pages.<pid>.jsonl, one event per line in program
// order, and pages.<pid>.bin, the uvmt_rec records of each kernel (offset and count in its line;
// `slices` holds the mask folded to the kernel's final slice width, given in the line).
//
// Host accesses: before each GPU operation (launch, graph launch, copy, memset, prefetch) the
// pass reads /proc/self/pagemap over the live managed allocations. A managed page is mapped in
// the CPU page table only while its data is on the host side: the UVM driver unmaps it when
// the GPU takes it. So a page mapped now that was not mapped after the previous GPU operation
// (or that a GPU operation since then touched) was touched by the CPU in between; such pages
// are written as `host_access` lines, coalesced into ranges, before the operation's own line.
//
// Per-thread-block streams (uvmtrace v1.2): the patch also records, per (thread block, unit of
// memory), the time of its first touch, and each block's last access (uvmt_layout.h). After
// the launch the host picks the stream's unit and tick (streams_host.h) and appends one
// `stream` line after the kernel's line, its block and row records going to
// pages.<pid>.streams.bin. Anything that goes wrong with a stream (a table full, a buffer that
// cannot be had, a graph node sharing its state) leaves that kernel without a stream, with the
// reason in the line: the pages, slices and everything else of v1.1 are recorded as before.
//
// Launch attributes (v1.2): registers and static shared memory of the launched function
// (cuFuncGetAttribute), the occupancy the hardware allows for its block size and dynamic
// shared memory (cuOccupancyMaxActiveBlocksPerMultiprocessor) and the device's SM count,
// computed once per function / configuration after the launch has run (its module is loaded
// and patched by then), and cached. The launch call's driver API callback only notes the
// dynamic shared memory from its parameters and calls nothing: under lazy module loading
// (the default since CUDA 12.2) a query on the call's function handle (a context-less
// CUkernel when the runtime launches) loads the kernel's module right there, inside this
// library's own call, and a module whose load callback were skipped as the tool's own would
// run unpatched, recording no page.
//
// Per-launch costs: the device tables are reused across launches and never cleared (their
// words carry the launch's generation), the launch state is uploaded from pinned memory, the
// header is read back together with the first records, and the tool's own time per phase is
// counted and reported in the `end` line (and on stderr with UVMTRACE_TIMERS=1).
#include <sanitizer.h>
#include <generated_cuda_meta.h>  // parameter structs of driver API calls

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common.h"
#include "host_scan.h"
#include "streams_host.h"
#include "uvmt_layout.h"

static_assert(offsetof(uvmt_state, segs) == UVMT_HEADER_BYTES, "the header is the state's prefix");
static_assert(sizeof(uvmt_rec) == 24 && sizeof(uvmt_ent) == 24, "record layouts are read by Python");

extern "C" const unsigned char uvmt_patch_fatbin[];
extern "C" const unsigned char uvmt_patch_fatbin_end[];

namespace uvmt {
namespace {

struct Alloc {
  uint64_t size;
  std::string kind;
  // managed only: pages mapped on the CPU as of the last scan, minus pages a GPU operation
  // has touched since (which the driver unmaps when the GPU takes them)
  std::vector<uint64_t> cpu_mapped;
};

// Host memory for uploads and read-backs: pinned (sanitizerAllocHost) when it can be had, so
// copies are plain DMA; ordinary memory otherwise. Grows, never shrinks.
struct HostBuf {
  void* p = nullptr;
  size_t cap = 0;
  bool pinned = false;
  bool ensure(CUcontext ctx, size_t need) {
    if (need <= cap) return true;
    size_t n = std::max<size_t>(need + need / 2, 4096);
    void* q = nullptr;
    bool pin = sanitizerAllocHost(ctx, &q, n) == SANITIZER_SUCCESS && q != nullptr;
    if (!pin) q = malloc(n);
    if (q == nullptr) return false;
    release(ctx);
    p = q;
    cap = n;
    pinned = pin;
    return true;
  }
  void release(CUcontext ctx) {
    if (p == nullptr) return;
    if (pinned) sanitizerFreeHost(ctx, p);
    else free(p);
    p = nullptr;
    cap = 0;
  }
};

// The live allocations as page runs: the segments a launch's records and stream entries refer
// to, on the host and on the device. A launch holds its table until it is read back, so a table
// that changes while launches are pending (graph nodes, an allocation node between them) gets
// a device buffer of its own instead of overwriting theirs.
struct SegTable {
  std::vector<uvmt_seg> segs;
  uint64_t total_pages = 0;
  CUcontext ctx = nullptr;
  uvmt_seg* d = nullptr;  // device copy
  uint64_t dcap = 0;      // segments it holds
  SegTable() = default;
  SegTable(const SegTable&) = delete;
  SegTable& operator=(const SegTable&) = delete;
  ~SegTable() {
    if (d) sanitizerFree(ctx, d);
  }
};

struct Slot {
  HostBuf hstate;             // the launch state as uploaded (lives until the launch is read back)
  uvmt_state* h = nullptr;    // = hstate.p
  // device: one arena [state (UVMT_ARENA_HEAD bytes) | records], so the header and the first
  // records come back in one copy
  char* d_arena = nullptr;
  uvmt_state* d_state = nullptr;
  uvmt_rec* d_recs = nullptr;
  uint64_t rec_cap = 0;
  unsigned long long* d_slot_of = nullptr;
  uint64_t slot_cap = 0;
  unsigned long long* d_ukeys = nullptr;
  unsigned long long* d_uslot = nullptr;
  bool unknown_dirty = true;
  // streams
  unsigned long long* d_ent_slot = nullptr;
  uvmt_ent* d_ents = nullptr;
  uint32_t ent_cap = 0, ent_bits = 0;
  unsigned long long* d_blk_end = nullptr;
  uint64_t blk_cap = 0;
  uint32_t gen = 0;           // generation of the last launch prepared in this slot
  uint64_t spec_recs = 256;   // records read together with the header
  HostBuf hread;              // read-back buffer of the header and records
  HostBuf hstream;            // read-back buffer of the stream entries and block ends
  std::shared_ptr<SegTable> table;  // the segments of the launch in flight
  const char* stream_off = nullptr;       // why the launch in flight records no stream
  uint64_t n_blocks = 0;
};

struct Ctx {
  bool patches_added = false;
  std::shared_ptr<SegTable> table = std::make_shared<SegTable>();
  uint64_t table_gen = ~0ull;
  std::vector<Slot> slots;  // [0]: ordinary launches; [1..]: kernel nodes of one graph launch
};

// Launch attributes (uvmtrace v1.2); -1: unknown.
struct LaunchAttr {
  int64_t regs = -1, smem_static = -1, smem_dyn = -1, smem_dyn_dev = -1, sm_count = -1, occupancy = -1;
};

struct Pending {  // a launch between its begin callback and its read-back
  std::string mangled;
  uint32_t grid[3], block[3];
  uint32_t cluster = 1;  // blocks per cluster
  int64_t stream;
  size_t slot;
  CUcontext ctx;
  CUdevice device = 0;
  bool instrumented;
  int node_index;
  CUfunction function = nullptr;
  Sanitizer_StreamHandle hs_api = nullptr, hs_node = nullptr;  // graph nodes
  int rc_launch_data = -1, rc_function_data = -1;  // results of handing over the state
  bool launch_cb_seen = false;  // a LAUNCH_BEGIN callback also came for this graph node
  int merged = 1;  // graph nodes sharing this node's function (and so its state)
  int64_t dsmem_api = -1;  // dynamic shared memory from the launch call's parameters
  uint64_t n_blocks() const { return (uint64_t)grid[0] * grid[1] * grid[2]; }
  uint64_t threads() const { return (uint64_t)block[0] * block[1] * block[2]; }
};

struct GraphLaunch {
  bool active = false;
  uint64_t index = 0;
  int64_t stream = 0;
  std::vector<Pending> kernels;
  std::vector<std::string> lines;  // node events, written in node order at the end
  std::vector<int> line_kernel;    // -1: plain line; else index into kernels
};

std::recursive_mutex g_mu;
std::map<uint64_t, Alloc> g_live;  // by base address
uint64_t g_live_gen = 0;
// never destroyed: its buffers must not be freed by exit handlers after CUDA has shut down
std::unordered_map<CUcontext, Ctx>& g_ctx = *new std::unordered_map<CUcontext, Ctx>();
uint64_t g_kernels = 0, g_modules = 0, g_module_errors = 0, g_unknown_frees = 0, g_graph_launches = 0;
uint64_t g_dropped_total = 0, g_unknown_total = 0, g_skipped_capture = 0, g_setdata_errors = 0;
uint64_t g_launch_cb_in_graph = 0, g_graph_sync_fallbacks = 0;
uint32_t g_ucap = 1u << 16;
uint64_t g_rec_cap_limit = 0;  // 0: no limit beyond the live pages
bool g_slices_on = true;          // UVMTRACE_SLICES=0 records one slice per kernel
bool g_host_on = true;            // UVMTRACE_HOST_ACCESS=0 skips the pagemap scans
int g_pagemap_fd = -1;
uint64_t g_managed_live = 0, g_host_scans = 0, g_host_scan_ns = 0, g_host_pages = 0, g_host_ranges = 0;
std::string g_host_error;
std::map<std::pair<uint64_t, uint64_t>, std::string> g_pref_loc;  // last preferred location set
GraphLaunch g_graph;
thread_local int t_in_tool = 0;  // >0 while this library itself calls into CUDA

// streams (UVMTRACE_STREAMS=0 switches them off) and their limits
bool g_streams_on = true;
bool g_attrs_on = true;            // UVMTRACE_LAUNCH_ATTRS=0: no launch attributes
uint64_t g_ent_max = 1u << 22;     // UVMTRACE_STREAM_ENTRIES: most entries of one table
// A launch's table starts at the most: it coarsens its units once half full, and grows only
// for the launches after one that coarsened, so a smaller first table gave every kernel's
// first launch coarser units than its later ones (docs/validation.md, "Coarse stream rows
// shared out"). Graph nodes each hold a table at once: theirs start small and grow.
uint64_t g_ent_init = 1u << 22;
uint64_t g_ent_graph_init = 1u << 16;
uint64_t g_blk_max = 1u << 24;     // UVMTRACE_STREAM_MAX_BLOCKS: most blocks of a streamed grid
int g_stream_factor = 8;           // UVMTRACE_STREAM_ROWS_FACTOR
int g_tick_bits = 18;              // UVMTRACE_STREAM_TICK_BITS
std::map<std::string, uint64_t> g_stream_status;  // kernels by stream outcome
uint64_t g_stream_rows = 0, g_stream_blocks = 0, g_stream_entries = 0, g_kernel_span_ns = 0;

// The tool's own time, by phase (ns), and what it moved: reported at exit.
struct Timers {
  uint64_t prepare = 0, wait = 0, readback = 0, process = 0, write = 0, attrs = 0, launches = 0;
  uint64_t readback_bytes = 0, copies = 0, uploads = 0, table_uploads = 0;
} g_tm;
bool g_timers_print = false;

struct Stopwatch {
  uint64_t* acc;
  uint64_t t0;
  explicit Stopwatch(uint64_t* a) : acc(a), t0(now_ns()) {}
  ~Stopwatch() { *acc += now_ns() - t0; }
};

// launch attributes, cached by function / (function, block size, dynamic shared memory)
typedef int (*FuncGetAttributeFn)(int*, int, CUfunction);
typedef int (*OccupancyFn)(int*, CUfunction, int, size_t);
typedef int (*DeviceGetAttributeFn)(int*, int, CUdevice);
FuncGetAttributeFn g_func_attr_fn = nullptr;
OccupancyFn g_occupancy_fn = nullptr;
DeviceGetAttributeFn g_dev_attr_fn = nullptr;
struct FuncAttr { int64_t regs = -1, smem_static = -1; };
std::unordered_map<CUfunction, FuncAttr> g_func_attr;
struct OccKey {
  CUfunction f;
  uint64_t threads, dsmem;
  bool operator==(const OccKey& o) const { return f == o.f && threads == o.threads && dsmem == o.dsmem; }
};
struct OccHash {
  size_t operator()(const OccKey& k) const {
    return std::hash<const void*>()(k.f) ^ (k.threads * 0x9E3779B97F4A7C15ull) ^ (k.dsmem << 20);
  }
};
std::unordered_map<OccKey, int64_t, OccHash> g_occupancy;
std::unordered_map<int, int64_t> g_sm_count;
uint64_t g_attr_errors = 0, g_api_dsmem_matched = 0;
// The launch call this thread is in (driver API callback), for the LAUNCH_BEGIN inside it.
// Matched by geometry, not by function handle: the call may name a CUkernel where the launch
// callback names the context's CUfunction.
struct ApiLaunch {
  bool active = false;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int64_t dsmem = -1;
};
thread_local ApiLaunch t_api;
// modules whose load callback came while this library was itself calling into CUDA (they are
// patched all the same; counted in the end line)
uint64_t g_modules_in_tool = 0;

struct ToolScope {
  ToolScope() { ++t_in_tool; }
  ~ToolScope() { --t_in_tool; }
};

thread_local bool t_patching = false;  // while a loaded module is being patched
struct PatchingScope {
  bool prev;
  PatchingScope() : prev(t_patching) { t_patching = true; }
  ~PatchingScope() { t_patching = prev; }
};

typedef int (*StreamIsCapturingFn)(CUstream, int*);
StreamIsCapturingFn g_is_capturing = nullptr;

const char* rstr(SanitizerResult r) {
  const char* s = nullptr;
  sanitizerGetResultString(r, &s);
  return s ? s : "?";
}

void check(SanitizerResult r, const char* what) {
  if (r != SANITIZER_SUCCESS) fatal("%s failed: %s (%d)", what, rstr(r), (int)r);
}

std::string dims(const uint32_t d[3]) {
  return "\"" + std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]) + "\"";
}

void add_alloc(uint64_t base, uint64_t size, const std::string& kind, const std::string& name, uint32_t flags) {
  if (size == 0) return;
  auto old = g_live.find(base);
  if (old != g_live.end() && old->second.kind == "managed") --g_managed_live;
  Alloc a{size, kind, {}};
  if (kind == "managed") {
    a.cpu_mapped.assign((((base + size - 1) >> 12) - (base >> 12) + 1 + 63) / 64, 0);
    ++g_managed_live;
  }
  g_live[base] = std::move(a);
  ++g_live_gen;
  writer().line("{\"t\":\"alloc\",\"base\":" + std::to_string(base) + ",\"size\":" + std::to_string(size) +
                ",\"kind\":" + json_str(kind) + ",\"name\":" + json_str(name) + ",\"flags\":" + std::to_string(flags) + "}");
}

void free_alloc(uint64_t base, const char* how) {
  auto it = g_live.find(base);
  if (it == g_live.end()) {
    ++g_unknown_frees;  // e.g. cudaFree(nullptr) or memory allocated before tracing began
    return;
  }
  if (it->second.kind == "managed") --g_managed_live;
  g_live.erase(it);
  ++g_live_gen;
  writer().line("{\"t\":\"free\",\"base\":" + std::to_string(base) + ",\"how\":\"" + how + "\"}");
}

// ---- host accesses ---------------------------------------------------------------------

// Emits the pages of `a` (page index i = page (base >> 12) + i) set in `bits` as ranges.
void emit_ranges(uint64_t base, const Alloc& a, const std::vector<uint64_t>& bits) {
  uint64_t first = base >> 12, n = bits.size() * 64, end_addr = base + a.size;
  for (uint64_t i = 0; i < n;) {
    uint64_t w = bits[i / 64] >> (i % 64);
    if (w == 0) { i = (i / 64 + 1) * 64; continue; }
    i += (uint64_t)__builtin_ctzll(w);
    uint64_t j = i;
    while (j < n && (bits[j / 64] >> (j % 64)) & 1ull) ++j;
    uint64_t lo = std::max((first + i) << 12, base), hi = std::min((first + j) << 12, end_addr);
    if (hi > lo) {
      writer().line("{\"t\":\"host_access\",\"addr\":" + std::to_string(lo) + ",\"size\":" + std::to_string(hi - lo) + "}");
      ++g_host_ranges;
      g_host_pages += j - i;
    }
    i = j;
  }
}

// Reads the CPU page table over every live managed allocation and writes the pages mapped
// now that were not mapped at the last scan (and not touched by the GPU since) as host
// accesses. Called before each GPU operation; nothing to do without managed memory.
// PAGEMAP_SCAN (host_scan.h) is trusted once it has agreed with reading the page table on
// kPmTrustAfter scans that found pages present, and is checked again every kPmRecheck-th scan;
// a disagreement (or an error) switches it off for good, reported in the end line. So a kernel
// whose ioctl does not see the UVM driver's mappings costs nothing but the checks.
constexpr uint64_t kPmTrustAfter = 8, kPmRecheck = 256;
bool g_pm_on = true;  // UVMTRACE_PAGEMAP_SCAN=0: always read the page table
uint64_t g_pm_agreed = 0, g_pm_fast = 0, g_pm_checked = 0;
std::string g_pm_off;  // why it was switched off

void scan_error(const std::string& what) {
  g_host_error = what;
  writer().line("{\"t\":\"host_scan_error\",\"error\":" + json_str(g_host_error) + "}");
  ::close(g_pagemap_fd);
  g_pagemap_fd = -1;
  g_host_on = false;
}

// Reads the CPU page table over every live managed allocation and writes the pages mapped
// now that were not mapped at the last scan (and not touched by the GPU since) as host
// accesses. Called before each GPU operation; nothing to do without managed memory.
void scan_host() {
  if (!g_host_on || g_managed_live == 0) return;
  if (g_pagemap_fd < 0) {
    if (!g_host_error.empty()) return;
    g_pagemap_fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (g_pagemap_fd < 0) {
      g_host_error = std::string("open /proc/self/pagemap: ") + strerror(errno);
      writer().line("{\"t\":\"host_scan_error\",\"error\":" + json_str(g_host_error) + "}");
      return;
    }
  }
  uint64_t t0 = now_ns();
  const bool check = g_pm_agreed < kPmTrustAfter || g_host_scans % kPmRecheck == 0;
  std::vector<uint64_t> now, slow;
  for (auto& kv : g_live) {
    Alloc& a = kv.second;
    if (a.kind != "managed") continue;
    uint64_t first = kv.first >> 12;
    uint64_t last = (kv.first + a.size - 1) >> 12;
    now.assign(a.cpu_mapped.size(), 0);
    bool fast = g_pm_on && present_scan(g_pagemap_fd, first, last, now);
    if (g_pm_on && !fast) {
      g_pm_on = false;
      g_pm_off = "PAGEMAP_SCAN failed or unsupported";
    }
    if (!fast || check) {
      slow.assign(now.size(), 0);
      if (int e = present_pread(g_pagemap_fd, first, last, fast ? slow : now)) {
        scan_error(std::string("read /proc/self/pagemap: ") + strerror(e));
        return;
      }
      if (fast) {
        ++g_pm_checked;
        if (slow != now) {
          g_pm_on = false;
          g_pm_off = "PAGEMAP_SCAN disagreed with /proc/self/pagemap";
          now.swap(slow);
        } else {
          for (uint64_t w : slow)
            if (w) { ++g_pm_agreed; break; }
        }
      }
    } else {
      ++g_pm_fast;
    }
    bool any_new = false;
    std::vector<uint64_t> fresh(now.size());
    for (size_t w = 0; w < now.size(); ++w) {
      fresh[w] = now[w] & ~a.cpu_mapped[w];
      any_new |= fresh[w] != 0;
    }
    if (any_new) emit_ranges(kv.first, a, fresh);
    a.cpu_mapped.swap(now);
  }
  ++g_host_scans;
  g_host_scan_ns += now_ns() - t0;
}

// A GPU operation touched [addr, addr + bytes): those managed pages are no longer mapped on
// the CPU (the driver unmaps a page the GPU takes). Should the driver have left one mapped,
// the next scan reports it as a host access, which matches where its data then is.
void gpu_took_range(uint64_t addr, uint64_t bytes) {
  if (g_managed_live == 0 || bytes == 0) return;
  uint64_t end = addr + bytes;
  auto it = g_live.upper_bound(addr);
  if (it != g_live.begin()) --it;
  for (; it != g_live.end() && it->first < end; ++it) {
    Alloc& a = it->second;
    if (a.kind != "managed" || it->first + a.size <= addr) continue;
    uint64_t first = it->first >> 12;
    uint64_t lo = std::max(addr, it->first) >> 12, hi = (std::min(end, it->first + a.size) - 1) >> 12;
    for (uint64_t p = lo; p <= hi; ++p) a.cpu_mapped[(p - first) / 64] &= ~(1ull << ((p - first) % 64));
  }
}

void gpu_took_pages(const uvmt_rec* recs, size_t n) {
  if (g_managed_live == 0) return;
  for (size_t i = 0; i < n; ++i) {
    const uvmt_rec& r = recs[i];
    auto it = g_live.upper_bound(r.page << 12 | 0xFFF);
    if (it == g_live.begin()) continue;
    --it;
    Alloc& a = it->second;
    uint64_t first = it->first >> 12;
    if (a.kind != "managed" || r.page > ((it->first + a.size - 1) >> 12)) continue;
    a.cpu_mapped[(r.page - first) / 64] &= ~(1ull << ((r.page - first) % 64));
  }
}

void rebuild_table(CUcontext cctx, Ctx& c, Sanitizer_StreamHandle hs) {
  if (c.table_gen == g_live_gen) return;
  auto t = std::make_shared<SegTable>();
  uint64_t slot = 0;
  for (auto& kv : g_live) {
    uint64_t first = kv.first >> 12, end = ((kv.first + kv.second.size - 1) >> 12) + 1;
    if (!t->segs.empty() && first <= t->segs.back().end_page) {  // shares a page with the previous run
      if (end > t->segs.back().end_page) {
        slot += end - t->segs.back().end_page;
        t->segs.back().end_page = end;
      }
      continue;
    }
    t->segs.push_back(uvmt_seg{first, end, slot});
    slot += end - first;
  }
  t->total_pages = slot;
  t->ctx = cctx;
  // reuse the old table's device buffer when no pending launch holds that table
  if (c.table && c.table.use_count() == 1 && c.table->d != nullptr && c.table->dcap >= t->segs.size()) {
    std::swap(t->d, c.table->d);
    std::swap(t->dcap, c.table->dcap);
  } else if (!t->segs.empty()) {
    t->dcap = std::max<uint64_t>(t->segs.size() + t->segs.size() / 2, 64);
    check(sanitizerAlloc(cctx, (void**)&t->d, t->dcap * sizeof(uvmt_seg)), "sanitizerAlloc(segments)");
  }
  if (!t->segs.empty()) {
    // From pageable memory the call returns once the data is staged (sanitizer_memory.h), and
    // the table is not changed after this anyway.
    check(sanitizerMemcpyHostToDeviceAsync(t->d, (void*)t->segs.data(), t->segs.size() * sizeof(uvmt_seg), hs),
          "upload of segments");
    ++g_tm.table_uploads;
  }
  c.table = t;
  c.table_gen = g_live_gen;
}

// Device buffer that grows to `need` bytes (x1.25); false when it cannot be had (the old one
// is kept). `zero` clears a new buffer (slot words must start at generation 0).
bool grow_dev(CUcontext cctx, void** p, uint64_t* cap, uint64_t need, Sanitizer_StreamHandle hs, bool zero) {
  if (*p != nullptr && need <= *cap) return true;
  uint64_t n = need + need / 4;
  void* q = nullptr;
  if (sanitizerAlloc(cctx, &q, n) != SANITIZER_SUCCESS || q == nullptr) return false;
  if (zero && sanitizerMemset(q, 0, n, hs) != SANITIZER_SUCCESS) {
    sanitizerFree(cctx, q);
    return false;
  }
  if (*p != nullptr) sanitizerFree(cctx, *p);
  *p = q;
  *cap = n;
  return true;
}

constexpr uint64_t UVMT_ARENA_HEAD = 256;  // the state's room at the head of a slot's arena
static_assert(sizeof(uvmt_state) <= UVMT_ARENA_HEAD, "state fits the arena's head");

// The stream buffers of slot `s` for a launch of `n_blocks` blocks; returns why the launch
// gets no stream, or nullptr when it gets one.
const char* prepare_streams(CUcontext cctx, Slot& s, size_t k, uint64_t n_blocks, uint64_t total_pages,
                            Sanitizer_StreamHandle hs) {
  if (!g_streams_on) return "off";
  if (n_blocks == 0 || n_blocks > g_blk_max || n_blocks >= 0xFFFFFFFFull) return "too_many_blocks";
  if (total_pages >= 0xFFFFFFFFull) return "too_much_memory";  // entry keys hold 32-bit slots
  uint64_t cap_bytes = s.blk_cap * 8;
  if (!grow_dev(cctx, (void**)&s.d_blk_end, &cap_bytes, n_blocks * 8, hs, true)) return "alloc_failed";
  s.blk_cap = cap_bytes / 8;
  if (s.ent_cap == 0) {
    uint64_t want = k == 0 ? g_ent_init : g_ent_graph_init;
    want = std::min<uint64_t>(want, g_ent_max);
    uint32_t bits = 1;
    while ((1ull << bits) < 2 * want) ++bits;  // load factor <= 1/2
    uint64_t ents_bytes = 0, slot_bytes = 0;
    void* de = nullptr;
    void* ds = nullptr;
    if (!grow_dev(cctx, &de, &ents_bytes, want * sizeof(uvmt_ent), hs, false)) return "alloc_failed";
    if (!grow_dev(cctx, &ds, &slot_bytes, (1ull << bits) * 8, hs, true)) {
      sanitizerFree(cctx, de);
      return "alloc_failed";
    }
    s.d_ents = (uvmt_ent*)de;
    s.d_ent_slot = (unsigned long long*)ds;
    s.ent_cap = (uint32_t)want;
    s.ent_bits = bits;
  }
  return nullptr;
}

// A slot's stream table quadruples (up to UVMTRACE_STREAM_ENTRIES) after a launch that had to
// coarsen its units or ran out of room, so later launches of the same work keep pages.
void grow_stream_table(CUcontext cctx, Slot& s, Sanitizer_StreamHandle hs) {
  if (s.ent_cap == 0 || s.ent_cap >= g_ent_max) return;
  uint64_t want = std::min<uint64_t>((uint64_t)s.ent_cap * 4, g_ent_max);
  uint32_t bits = s.ent_bits;
  while ((1ull << bits) < 2 * want) ++bits;
  void* de = nullptr;
  void* ds = nullptr;
  uint64_t a = 0, b = 0;
  if (!grow_dev(cctx, &de, &a, want * sizeof(uvmt_ent), hs, false)) return;
  if (!grow_dev(cctx, &ds, &b, (1ull << bits) * 8, hs, true)) {
    sanitizerFree(cctx, de);
    return;
  }
  sanitizerFree(cctx, s.d_ents);
  sanitizerFree(cctx, s.d_ent_slot);
  s.d_ents = (uvmt_ent*)de;
  s.d_ent_slot = (unsigned long long*)ds;
  s.ent_cap = (uint32_t)want;
  s.ent_bits = bits;
}

// Sizes the buffers of slot k for the current table and uploads the launch's state. Nothing
// is cleared: the slot words of earlier launches carry older generations. Everything is
// queued on hs, ahead of the launch that will use it.
uvmt_state* prepare_slot(CUcontext cctx, Ctx& c, size_t k, Sanitizer_StreamHandle hs, uint64_t n_blocks) {
  Stopwatch sw(&g_tm.prepare);
  rebuild_table(cctx, c, hs);
  if (c.slots.size() <= k) c.slots.resize(k + 1);
  Slot& s = c.slots[k];
  const SegTable& t = *c.table;
  if (s.d_ukeys == nullptr) {
    check(sanitizerAlloc(cctx, (void**)&s.d_ukeys, (size_t)g_ucap * 8), "sanitizerAlloc(unknown keys)");
    check(sanitizerAlloc(cctx, (void**)&s.d_uslot, (size_t)g_ucap * 8), "sanitizerAlloc(unknown slots)");
    check(sanitizerMemset(s.d_uslot, 0, (size_t)g_ucap * 8, hs), "sanitizerMemset(unknown slots)");
  }
  if (!s.hstate.ensure(cctx, sizeof(uvmt_state))) fatal("cannot allocate %zu bytes of host memory", sizeof(uvmt_state));
  s.h = (uvmt_state*)s.hstate.p;
  uint64_t slot_bytes = s.slot_cap * 8;
  if (!grow_dev(cctx, (void**)&s.d_slot_of, &slot_bytes, std::max<uint64_t>(t.total_pages, 1) * 8, hs, true))
    fatal("sanitizerAlloc(slots of %" PRIu64 " pages) failed", t.total_pages);
  s.slot_cap = slot_bytes / 8;
  uint64_t need_recs = t.total_pages + g_ucap;
  if (g_rec_cap_limit && need_recs > g_rec_cap_limit) need_recs = g_rec_cap_limit;
  if (need_recs > UVMT_MAX_RECS) need_recs = UVMT_MAX_RECS;  // record indices are 32-bit
  if (need_recs > s.rec_cap) {
    uint64_t cap = std::min<uint64_t>(need_recs + need_recs / 4, UVMT_MAX_RECS);
    if (s.d_arena) check(sanitizerFree(cctx, s.d_arena), "sanitizerFree(records)");
    check(sanitizerAlloc(cctx, (void**)&s.d_arena, UVMT_ARENA_HEAD + cap * sizeof(uvmt_rec)), "sanitizerAlloc(records)");
    s.d_state = (uvmt_state*)s.d_arena;
    s.d_recs = (uvmt_rec*)(s.d_arena + UVMT_ARENA_HEAD);
    s.rec_cap = cap;
  }
  if (s.unknown_dirty) {
    check(sanitizerMemset(s.d_ukeys, 0xFF, (size_t)g_ucap * 8, hs), "sanitizerMemset(unknown keys)");
    s.unknown_dirty = false;
  }
  s.n_blocks = n_blocks;
  s.stream_off = prepare_streams(cctx, s, k, n_blocks, t.total_pages, hs);
  if (++s.gen == 0xFFFFFFFFu) {
    // the generations ran out (after 4 billion launches of this slot): clear every slot word
    check(sanitizerMemset(s.d_slot_of, 0, s.slot_cap * 8, hs), "sanitizerMemset(slots)");
    check(sanitizerMemset(s.d_uslot, 0, (size_t)g_ucap * 8, hs), "sanitizerMemset(unknown slots)");
    if (s.d_ent_slot) check(sanitizerMemset(s.d_ent_slot, 0, (1ull << s.ent_bits) * 8, hs), "sanitizerMemset(stream slots)");
    if (s.d_blk_end) check(sanitizerMemset(s.d_blk_end, 0, s.blk_cap * 8, hs), "sanitizerMemset(block ends)");
    s.gen = 1;
  }
  s.table = c.table;
  uvmt_state& h = *s.h;
  h = uvmt_state{};
  h.segs = t.d;
  h.n_segs = (unsigned)t.segs.size();
  h.slot_of = s.d_slot_of;
  h.recs = s.d_recs;
  h.rec_cap = (unsigned)std::min<uint64_t>(need_recs, s.rec_cap);
  h.ukeys = s.d_ukeys;
  h.uslot = s.d_uslot;
  h.umask = g_ucap - 1;
  h.gen = s.gen;
  h.shift = UVMT_SHIFT0;
  h.slices_on = g_slices_on ? 1u : 0u;
  if (s.stream_off == nullptr) {
    h.streams_on = 1u;
    h.ent_slot = s.d_ent_slot;
    h.ents = s.d_ents;
    h.ent_cap = s.ent_cap;
    h.ent_bits = s.ent_bits;
    h.blk_end = s.d_blk_end;
    h.blk_cap = s.blk_cap;
  }
  check(sanitizerMemcpyHostToDeviceAsync(s.d_state, s.h, sizeof(uvmt_state), hs), "upload of launch state");
  ++g_tm.uploads;
  return s.d_state;
}

// Copies device memory back; counts it.
bool copy_back(void* dst, const void* src, size_t bytes, Sanitizer_StreamHandle hs, std::string* err) {
  if (bytes == 0) return true;
  SanitizerResult r = sanitizerMemcpyDeviceToHost(dst, (void*)src, bytes, hs);
  ++g_tm.copies;
  g_tm.readback_bytes += bytes;
  if (r != SANITIZER_SUCCESS) {
    *err = std::string("read-back: ") + rstr(r);
    return false;
  }
  return true;
}

// ---- launch attributes -------------------------------------------------------------------

void resolve_attr_fns() {
  if (g_func_attr_fn) return;
  g_func_attr_fn = (FuncGetAttributeFn)driver_sym("cuFuncGetAttribute");
  g_occupancy_fn = (OccupancyFn)driver_sym("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  g_dev_attr_fn = (DeviceGetAttributeFn)driver_sym("cuDeviceGetAttribute");
}

// Registers and static shared memory of f (cached); false when the driver cannot say.
const FuncAttr* func_attr(CUfunction f) {
  auto it = g_func_attr.find(f);
  if (it != g_func_attr.end()) return &it->second;
  resolve_attr_fns();
  FuncAttr a;
  int v = 0;
  if (g_func_attr_fn && g_func_attr_fn(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f) == 0) a.regs = v;
  else ++g_attr_errors;
  if (g_func_attr_fn && g_func_attr_fn(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) == 0) a.smem_static = v;
  else ++g_attr_errors;
  return &(g_func_attr[f] = a);
}

int64_t occupancy(CUfunction f, uint64_t threads, uint64_t dsmem) {
  OccKey key{f, threads, dsmem};
  auto it = g_occupancy.find(key);
  if (it != g_occupancy.end()) return it->second;
  resolve_attr_fns();
  int n = 0;
  int64_t v = -1;
  if (g_occupancy_fn && threads > 0 && threads <= 0x7FFFFFFF && g_occupancy_fn(&n, f, (int)threads, (size_t)dsmem) == 0) v = n;
  else ++g_attr_errors;
  return g_occupancy[key] = v;
}

int64_t sm_count(CUdevice dev) {
  auto it = g_sm_count.find((int)dev);
  if (it != g_sm_count.end()) return it->second;
  resolve_attr_fns();
  int v = 0;
  int64_t r = -1;
  if (g_dev_attr_fn && g_dev_attr_fn(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == 0) r = v;
  else ++g_attr_errors;
  return g_sm_count[(int)dev] = r;
}

// The attributes of launch p; dsmem_dev is what the device saw (-1: nothing seen).
LaunchAttr launch_attr(const Pending& p, int64_t dsmem_dev) {
  Stopwatch sw(&g_tm.attrs);
  LaunchAttr a;
  a.smem_dyn_dev = dsmem_dev;
  if (!g_attrs_on || p.function == nullptr) return a;
  const FuncAttr* f = func_attr(p.function);
  a.regs = f->regs;
  a.smem_static = f->smem_static;
  a.smem_dyn = p.dsmem_api >= 0 ? p.dsmem_api : dsmem_dev;
  a.sm_count = sm_count(p.device);
  if (a.smem_dyn >= 0) a.occupancy = occupancy(p.function, p.threads(), (uint64_t)a.smem_dyn);
  return a;
}

std::string attr_fields(const Pending& p, const LaunchAttr& a) {
  if (!g_attrs_on) return std::string();
  std::string o = ",\"n_blocks\":" + std::to_string(p.n_blocks()) + ",\"threads\":" + std::to_string(p.threads()) +
                  ",\"cluster\":" + std::to_string(p.cluster);
  const std::pair<const char*, int64_t> f[] = {{"regs", a.regs}, {"smem_static", a.smem_static}, {"smem_dyn", a.smem_dyn},
                                               {"smem_dyn_dev", a.smem_dyn_dev}, {"sm_count", a.sm_count}, {"occupancy", a.occupancy}};
  for (auto& kv : f)
    if (kv.second >= 0) o += std::string(",\"") + kv.first + "\":" + std::to_string(kv.second);
  return o;
}

// ---- read-back -------------------------------------------------------------------------

// The stream of the launch in slot s (header hdr): the `stream` line, its records appended to
// the streams file. `status` says why there is none.
std::string read_stream(CUcontext cctx, Slot& s, const Pending& p, const uvmt_state& hdr, uint64_t n_recs,
                        Sanitizer_StreamHandle hs, uint64_t seq) {
  const char* status = s.stream_off;
  std::string err;
  StreamOut out;
  uint64_t n_ent = 0;
  unsigned level = 0;
  if (status == nullptr) {
    level = std::min<unsigned>(hdr.ent_level, UVMT_LEVELS - 1);
    n_ent = std::min<uint64_t>(hdr.n_ent, s.ent_cap);
    if (p.merged > 1) status = "merged_graph_nodes";  // two launches share the state
    else if (hdr.dropped) status = "pages_dropped";
    else if (hdr.ent_dropped || hdr.n_ent > s.ent_cap) status = "table_full";
    else if (hdr.blk_dropped) status = "blocks_dropped";
  }
  if (status == nullptr && n_ent > 0) {  // (no entry: a stream of no rows, e.g. only unknown pages)
    size_t eb = (size_t)n_ent * sizeof(uvmt_ent), bb = (size_t)s.n_blocks * 8;
    Stopwatch sw(&g_tm.readback);
    if (!s.hstream.ensure(cctx, eb + bb) || !copy_back(s.hstream.p, s.d_ents, eb, hs, &err) ||
        !copy_back((char*)s.hstream.p + eb, s.d_blk_end, bb, hs, &err))
      status = "readback_failed";
  }
  if (status == nullptr) {
    Stopwatch sw(&g_tm.process);
    const uvmt_ent* ents = (const uvmt_ent*)s.hstream.p;
    const uint64_t* ends = (const uint64_t*)((char*)s.hstream.p + (size_t)n_ent * sizeof(uvmt_ent));
    const std::vector<uvmt_seg>& segs = s.table->segs;
    std::vector<StreamTouch> touch;
    touch.reserve(n_ent);
    for (uint64_t i = 0; i < n_ent && status == nullptr; ++i) {
      const uvmt_ent& e = ents[i];
      uint64_t slot = e.key & 0xFFFFFFFFull, blk = e.key >> 32;
      // the segment holding the unit's first page: the last with slot_base <= slot
      auto it = std::upper_bound(segs.begin(), segs.end(), slot,
                                 [](uint64_t v, const uvmt_seg& g) { return v < g.slot_base; });
      if (it == segs.begin() || blk >= s.n_blocks || e.flags == 0 || e.flags > 7) { status = "bad_entry"; break; }
      --it;
      uint64_t page = it->first_page + (slot - it->slot_base) + e.page_off;
      if (page >= it->end_page) { status = "bad_entry"; break; }
      touch.push_back({(uint32_t)blk, e.flags, page, e.t});
    }
    if (status == nullptr) {
      static const unsigned shifts[UVMT_LEVELS] = UVMT_LEVEL_SHIFTS;
      const uint32_t gen = s.gen;
      const uint64_t t0 = hdr.t0;
      out = build_stream(touch, 12 + (int)shifts[level], n_recs,
                         [&](uint32_t b) -> uint64_t {
                           uint64_t w = ends[b];
                           if ((uint32_t)(w >> 32) != gen || (uint32_t)w == 0) return 0;
                           return t0 + (((w & 0xFFFFFFFFull) - 1) << UVMT_END_SHIFT);
                         },
                         g_stream_factor, g_tick_bits);
      if (out.unit == 0) status = "over_bound";
    }
  }
  if (status == nullptr && hdr.ent_level > 0) grow_stream_table(cctx, s, hs);
  if (status != nullptr && strcmp(status, "table_full") == 0) grow_stream_table(cctx, s, hs);
  std::string line = "{\"t\":\"stream\",\"k\":" + std::to_string(seq) + ",\"entries\":" + std::to_string(hdr.n_ent) +
                     ",\"level\":" + std::to_string(hdr.ent_level) + ",\"entries_dropped\":" + std::to_string(hdr.ent_dropped);
  ++g_stream_status[status ? status : "ok"];
  if (status != nullptr) return line + ",\"status\":" + json_str(status) + (err.empty() ? "" : ",\"error\":" + json_str(err)) + "}";
  Stopwatch sw(&g_tm.write);
  uint64_t b_off = writer().append_streams(out.blocks.data(), out.blocks.size() * sizeof(StreamBlockRec));
  uint64_t r_off = writer().append_streams(out.rows.data(), out.rows.size() * sizeof(StreamRowRec));
  g_stream_rows += out.rows.size();
  g_stream_blocks += out.blocks.size();
  g_stream_entries += n_ent;
  g_kernel_span_ns += out.span_ns;
  return line + ",\"status\":\"ok\",\"unit\":" + std::to_string(out.unit) + ",\"tick_ns\":" + std::to_string(out.tick_ns) +
         ",\"span_ns\":" + std::to_string(out.span_ns) + ",\"b_off\":" + std::to_string(b_off) +
         ",\"b_n\":" + std::to_string(out.blocks.size()) + ",\"r_off\":" + std::to_string(r_off) +
         ",\"r_n\":" + std::to_string(out.rows.size()) + "}";
}

// Reads back slot k after its launch finished and returns the kernel's JSON line (and, with
// streams, its stream line after a newline).
std::string read_slot(Ctx& c, const Pending& p, Sanitizer_StreamHandle hs, SanitizerResult sync_rc) {
  uint64_t seq = g_kernels++;
  ++g_tm.launches;
  std::string head = "{\"t\":\"kernel\",\"k\":" + std::to_string(seq) + ",\"name\":" + json_str(demangle(p.mangled.c_str())) +
                     ",\"mangled\":" + json_str(p.mangled) + ",\"grid\":" + dims(p.grid) + ",\"block\":" + dims(p.block) +
                     ",\"stream\":" + std::to_string(p.stream);
  if (g_graph.active)
    head += ",\"graph_launch\":" + std::to_string(g_graph.index) + ",\"node\":" + std::to_string(p.node_index) +
            ",\"launch_cb\":" + (p.launch_cb_seen ? "true" : "false") + ",\"merged\":" + std::to_string(p.merged);
  head += ",\"rc_data\":[" + std::to_string(p.rc_launch_data) + "," + std::to_string(p.rc_function_data) + "]";
  const std::string no_stream = g_streams_on ? "\n{\"t\":\"stream\",\"k\":" + std::to_string(seq) : std::string();
  auto failed = [&](const std::string& what, uint64_t dropped, const char* status) {
    if (g_streams_on) ++g_stream_status[status];
    return head + attr_fields(p, launch_attr(p, -1)) + ",\"off\":0,\"n\":0,\"unknown\":0,\"dropped\":" + std::to_string(dropped) +
           ",\"error\":" + json_str(what) + "}" + (g_streams_on ? no_stream + ",\"status\":" + json_str(status) + "}" : "");
  };
  if (!p.instrumented) return failed("not instrumented", 0, "not_instrumented");
  if (sync_rc != SANITIZER_SUCCESS) return failed(std::string("synchronize: ") + rstr(sync_rc), 0, "sync_failed");
  Slot& s = c.slots[p.slot];
  // the header and the first records in one copy; the rest of the records if there are more
  std::string err;
  uint64_t cap = s.h->rec_cap, spec = std::min<uint64_t>(s.spec_recs, cap);
  {
    Stopwatch sw(&g_tm.readback);
    if (!s.hread.ensure(p.ctx, UVMT_ARENA_HEAD + spec * sizeof(uvmt_rec)) ||
        !copy_back(s.hread.p, s.d_arena, UVMT_ARENA_HEAD + spec * sizeof(uvmt_rec), hs, &err))
      return failed(err.empty() ? "read-back: no host memory" : err, 0, "readback_failed");
  }
  uvmt_state hdr;
  memcpy(&hdr, s.hread.p, UVMT_HEADER_BYTES);
  uint64_t n = std::min<uint64_t>(hdr.n_touched, cap);
  uint64_t dropped = hdr.dropped;
  if (n > spec) {
    Stopwatch sw(&g_tm.readback);
    if (!s.hread.ensure(p.ctx, UVMT_ARENA_HEAD + n * sizeof(uvmt_rec))) return failed("read-back: no host memory", dropped, "readback_failed");
    // ensure() may have moved the buffer: read everything again
    if (!copy_back(s.hread.p, s.d_arena, UVMT_ARENA_HEAD + n * sizeof(uvmt_rec), hs, &err)) return failed(err, dropped, "readback_failed");
    memcpy(&hdr, s.hread.p, UVMT_HEADER_BYTES);
  }
  // read this many records with the header next time: the last count, rounded up
  s.spec_recs = std::max<uint64_t>(64, std::min<uint64_t>(n + n / 4, 1u << 16));
  if (hdr.n_unknown) s.unknown_dirty = true;
  g_dropped_total += dropped;
  g_unknown_total += hdr.n_unknown;
  uvmt_rec* recs = (uvmt_rec*)((char*)s.hread.p + UVMT_ARENA_HEAD);
  std::string sl;
  {
    Stopwatch sw(&g_tm.process);
    // Slices: fold every record's mask to the launch's final width; the run spans slices
    // 0 .. the highest one any page was touched in.
    unsigned shift = hdr.shift;
    for (uint64_t i = 0; i < n; ++i) shift = std::max(shift, (unsigned)(recs[i].slices >> UVMT_MASK_BITS));
    uint64_t all = 0;
    for (uint64_t i = 0; i < n; ++i) {
      uvmt_rec& rc = recs[i];
      unsigned from = (unsigned)(rc.slices >> UVMT_MASK_BITS);
      uint64_t m = rc.slices & UVMT_MASK, f = 0;
      for (unsigned b = 0; b < UVMT_MASK_BITS; ++b)
        if (m >> b & 1ull) f |= 1ull << (b >> (shift - from));
      rc.slices = f ? f : 1ull;  // a record with no slice cannot exist; keep the format's rule
      all |= rc.slices;
    }
    gpu_took_pages(recs, n);
    if (g_slices_on)
      sl = ",\"n_slices\":" + std::to_string(all ? 64 - __builtin_clzll(all) : 1) + ",\"slice_ns\":" + std::to_string(1ull << shift);
  }
  LaunchAttr attr = launch_attr(p, hdr.dsmem_seen ? (int64_t)hdr.dsmem : -1);
  std::string stream_line;
  if (g_streams_on) stream_line = "\n" + read_stream(p.ctx, s, p, hdr, n, hs, seq);
  Stopwatch sw(&g_tm.write);
  uint64_t off = writer().append_bin(recs, n * sizeof(uvmt_rec));
  return head + attr_fields(p, attr) + ",\"off\":" + std::to_string(off) + ",\"n\":" + std::to_string(n) +
         ",\"unknown\":" + std::to_string(hdr.n_unknown) + ",\"dropped\":" + std::to_string(dropped) + sl + "}" + stream_line;
}

bool is_capturing(CUstream st) {
  if (g_is_capturing == nullptr) return false;
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  if (g_is_capturing(st, &status) != 0) return false;
  return status != 0;
}

Pending make_pending(const Sanitizer_LaunchData* l, size_t slot, int node) {
  Pending p;
  p.mangled = l->functionName ? l->functionName : "?";
  p.grid[0] = l->gridDim_x; p.grid[1] = l->gridDim_y; p.grid[2] = l->gridDim_z;
  p.block[0] = l->blockDim_x; p.block[1] = l->blockDim_y; p.block[2] = l->blockDim_z;
  p.stream = stream_id(l->stream);
  p.slot = slot;
  p.ctx = l->context;
  p.instrumented = true;
  p.node_index = node;
  p.function = l->function;
  p.device = l->device;
  p.cluster = std::max<uint32_t>(l->clusterDim_x, 1) * std::max<uint32_t>(l->clusterDim_y, 1) * std::max<uint32_t>(l->clusterDim_z, 1);
  // an ordinary launch's LAUNCH_BEGIN comes inside its launch call on this thread; graph
  // nodes have none
  if (node < 0 && t_api.active && t_api.grid[0] == p.grid[0] && t_api.grid[1] == p.grid[1] &&
      t_api.grid[2] == p.grid[2] && t_api.block[0] == p.block[0] && t_api.block[1] == p.block[1] &&
      t_api.block[2] == p.block[2]) {
    p.dsmem_api = t_api.dsmem;
    ++g_api_dsmem_matched;
  }
  t_api.active = false;
  return p;
}

// Hands the launch its state. Per-launch data first; per-function data as the fallback of
// older drivers, and also for graph nodes (`both`), where per-launch data alone may not
// reach the node. Launches are serialized by this pass, so per-function data is unambiguous.
// How graph kernel nodes get their state (UVMTRACE_GRAPH_DATA): 2 "function" (default)
// per-function data; 1 "launch" per-launch data; 0 "both". Seen on driver 580: per-launch
// data set in node callbacks reaches only one node of the graph (the others record nothing),
// per-function data reaches each node.
int g_graph_mode = 2;

bool set_launch_data(const Sanitizer_LaunchData* l, Sanitizer_StreamHandle hs, const void* data, Pending* p, bool both) {
  SanitizerResult r = SANITIZER_ERROR_NOT_INITIALIZED;
  if (!(both && g_graph_mode == 2)) {
    r = sanitizerSetLaunchCallbackData(l->hLaunch, l->function, hs, data);
    if (p) p->rc_launch_data = (int)r;
  }
  bool ok = r == SANITIZER_SUCCESS;
  if (both && g_graph_mode == 1) return ok;
  if (!ok || both) {
    SanitizerResult r2 = sanitizerSetCallbackData(l->function, data);
    if (p) p->rc_function_data = (int)r2;
    ok = ok || r2 == SANITIZER_SUCCESS;
    if (!ok && g_setdata_errors++ < 5)
      warn("cannot pass state to kernel %s: %s / %s", l->functionName ? l->functionName : "?", rstr(r), rstr(r2));
  }
  return ok;
}

thread_local std::vector<Pending> t_pending;

void on_launch(Sanitizer_CallbackId cbid, const Sanitizer_LaunchData* l) {
  if (g_graph.active) {
    // Graph kernel nodes are set up by their node callbacks; if a launch callback comes for
    // one too, hand the node's state over again here, where ordinary launches get theirs.
    if (cbid != SANITIZER_CBID_LAUNCH_BEGIN) return;
    ++g_launch_cb_in_graph;
    for (auto& p : g_graph.kernels) {
      if (!p.launch_cb_seen && p.function == l->function) {
        p.launch_cb_seen = true;
        Ctx& c = g_ctx[p.ctx];
        set_launch_data(l, l->hStream, c.slots[p.slot].d_state, &p, false);
        break;
      }
    }
    return;
  }
  if (cbid == SANITIZER_CBID_LAUNCH_BEGIN) {
    if (is_capturing(l->stream)) {  // not executed now; it runs later as a graph node
      ++g_skipped_capture;
      t_api.active = false;
      set_launch_data(l, l->hStream, nullptr, nullptr, false);
      t_pending.push_back(Pending{});
      t_pending.back().instrumented = false;
      t_pending.back().slot = ~(size_t)0;
      return;
    }
    scan_host();
    Ctx& c = g_ctx[l->context];
    Pending p = make_pending(l, 0, -1);
    uvmt_state* st = prepare_slot(l->context, c, 0, l->hStream, p.n_blocks());
    p.instrumented = set_launch_data(l, l->hStream, st, &p, false);
    t_pending.push_back(p);
  } else if (cbid == SANITIZER_CBID_LAUNCH_END) {
    if (t_pending.empty()) return;
    Pending p = t_pending.back();
    t_pending.pop_back();
    if (p.slot == ~(size_t)0) return;  // captured, see above
    SanitizerResult r;
    {
      Stopwatch sw(&g_tm.wait);
      r = sanitizerStreamSynchronize(l->hStream);
    }
    Ctx& c = g_ctx[p.ctx];
    writer().line(read_slot(c, p, l->hStream, r));
    c.slots[p.slot].table.reset();  // read back: its segment table may be reused
  }
}

uint64_t memcpy_bytes(const Sanitizer_MemcpyData* m) {
  uint64_t size = m->size;
  if (size == 0) size = m->width * std::max<uint64_t>(m->height, 1) * std::max<uint64_t>(m->depth, 1);
  return size;
}

uint64_t memset_bytes(const Sanitizer_MemsetData* m) {
  return m->width * std::max<uint32_t>(m->elementSize, 1) * std::max<uint64_t>(m->height, 1);
}

std::string memcpy_line(const Sanitizer_MemcpyData* m) {
  const char* dir = "unknown";
  switch (m->direction) {
    case SANITIZER_MEMCPY_DIRECTION_HOST_TO_HOST: dir = "htoh"; break;
    case SANITIZER_MEMCPY_DIRECTION_HOST_TO_DEVICE: dir = "htod"; break;
    case SANITIZER_MEMCPY_DIRECTION_DEVICE_TO_HOST: dir = "dtoh"; break;
    case SANITIZER_MEMCPY_DIRECTION_DEVICE_TO_DEVICE: dir = "dtod"; break;
    default: break;
  }
  uint64_t size = memcpy_bytes(m);
  return "{\"t\":\"memcpy\",\"dir\":\"" + std::string(dir) + "\",\"src\":" + std::to_string(m->srcAddress) +
         ",\"dst\":" + std::to_string(m->dstAddress) + ",\"size\":" + std::to_string(size) +
         ",\"stream\":" + std::to_string(stream_id(m->apiStream ? m->apiStream : m->dstStream)) +
         ",\"async\":" + std::to_string(m->isAsync) + "}";
}

std::string memset_line(const Sanitizer_MemsetData* m) {
  uint64_t size = memset_bytes(m);
  return "{\"t\":\"memset\",\"addr\":" + std::to_string(m->address) + ",\"size\":" + std::to_string(size) +
         ",\"stream\":" + std::to_string(stream_id(m->stream)) + ",\"async\":" + std::to_string(m->isAsync) + "}";
}

void on_graph(Sanitizer_CallbackId cbid, const void* data) {
  if (cbid == SANITIZER_CBID_GRAPHS_LAUNCH_BEGIN) {
    auto* g = (const Sanitizer_GraphLaunchData*)data;
    if (g->isGraphUpload) return;
    scan_host();
    g_graph = GraphLaunch{};
    g_graph.active = true;
    g_graph.index = g_graph_launches++;
    g_graph.stream = stream_id(g->stream);
    writer().line("{\"t\":\"graph_begin\",\"graph_launch\":" + std::to_string(g_graph.index) + ",\"stream\":" + std::to_string(g_graph.stream) + "}");
  } else if (cbid == SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN) {
    auto* n = (const Sanitizer_GraphNodeLaunchData*)data;
    if (n->isGraphUpload || !g_graph.active) return;
    if (n->nodeType == CU_GRAPH_NODE_TYPE_KERNEL) {
      const Sanitizer_LaunchData* l = &n->launchData;
      // Set the node's state up on the graph's own stream and wait: node streams are internal
      // to the graph, and this must be done before any node of the graph runs.
      Sanitizer_StreamHandle hs = l->hApiStream ? l->hApiStream : l->hStream;
      Ctx& c = g_ctx[l->context];
      // Per-function data cannot tell apart two nodes of one function: they share one state
      // and each is given the union of their pages (reported as "merged").
      Pending* same = nullptr;
      for (auto& q : g_graph.kernels)
        if (q.function == l->function && q.ctx == l->context) same = &q;
      size_t k = same ? same->slot : 1 + g_graph.kernels.size();
      Pending p = make_pending(l, k, (int)g_graph.kernels.size());
      uvmt_state* st;
      if (same) {
        st = c.slots[k].d_state;
      } else {
        st = prepare_slot(l->context, c, k, hs, p.n_blocks());
        check(sanitizerStreamSynchronize(hs), "sanitizerStreamSynchronize(graph node set-up)");
      }
      if (same) {
        int cnt = 1;
        for (auto& q : g_graph.kernels) cnt += q.slot == k;
        p.merged = cnt;
        for (auto& q : g_graph.kernels)
          if (q.slot == k) q.merged = cnt;
      }
      p.stream = g_graph.stream;  // node streams are the graph's internal ones
      p.hs_api = hs;
      p.hs_node = l->hStream;
      p.instrumented = set_launch_data(l, l->hStream, st, &p, true);
      g_graph.line_kernel.push_back((int)g_graph.kernels.size());
      g_graph.lines.emplace_back();
      g_graph.kernels.push_back(p);
    } else if (n->nodeType == CU_GRAPH_NODE_TYPE_MEMCPY) {
      g_graph.lines.push_back(memcpy_line(&n->memcpyData));
      g_graph.line_kernel.push_back(-1);
    } else if (n->nodeType == CU_GRAPH_NODE_TYPE_MEMSET) {
      g_graph.lines.push_back(memset_line(&n->memsetData));
      g_graph.line_kernel.push_back(-1);
    } else if (n->nodeType == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      add_alloc(n->memAllocData.address, n->memAllocData.size, "pool", "graph_mem_alloc", n->memAllocData.flags);
    } else if (n->nodeType == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      free_alloc(n->memFreeAddress, "graph_mem_free");
    }
  } else if (cbid == SANITIZER_CBID_GRAPHS_LAUNCH_END) {
    auto* g = (const Sanitizer_GraphLaunchData*)data;
    if (g->isGraphUpload || !g_graph.active) return;
    uint64_t w0 = now_ns();
    SanitizerResult r = sanitizerStreamSynchronize(g->hStream);
    g_tm.wait += now_ns() - w0;
    Sanitizer_StreamHandle hs = g->hStream;
    if (r != SANITIZER_SUCCESS) {
      // fall back to the handles the node callbacks gave
      ++g_graph_sync_fallbacks;
      for (auto& p : g_graph.kernels) {
        for (Sanitizer_StreamHandle h : {p.hs_api, p.hs_node}) {
          if (h && sanitizerStreamSynchronize(h) == SANITIZER_SUCCESS) {
            r = SANITIZER_SUCCESS;
            hs = h;
          }
        }
      }
    }
    for (size_t i = 0; i < g_graph.lines.size(); ++i) {
      int ki = g_graph.line_kernel[i];
      if (ki < 0) {
        writer().line(g_graph.lines[i]);
      } else {
        const Pending& p = g_graph.kernels[(size_t)ki];
        writer().line(read_slot(g_ctx[p.ctx], p, hs, r));
      }
    }
    for (const Pending& p : g_graph.kernels) g_ctx[p.ctx].slots[p.slot].table.reset();
    writer().line("{\"t\":\"graph_end\",\"graph_launch\":" + std::to_string(g_graph.index) + "}");
    g_graph.active = false;
  }
}

const char* kind_of(uint32_t flags, std::string* name) {
  if (flags & SANITIZER_MEMORY_FLAG_MODULE) { *name = "module_global"; return "device"; }
  if (flags & (SANITIZER_MEMORY_FLAG_CG_RUNTIME | SANITIZER_MEMORY_FLAG_CNP)) { *name = "cuda_runtime_internal"; return "device"; }
  if (flags & SANITIZER_MEMORY_FLAG_MANAGED) return "managed";
  if (flags & (SANITIZER_MEMORY_FLAG_HOST_MAPPED | SANITIZER_MEMORY_FLAG_HOST_PINNED)) return "host";
  return "device";
}

void on_resource(Sanitizer_CallbackId cbid, const void* data) {
  switch (cbid) {
    case SANITIZER_CBID_RESOURCE_MODULE_LOADED: {
      auto* m = (const Sanitizer_ResourceModuleData*)data;
      PatchingScope patching;
      Ctx& c = g_ctx[m->context];
      if (!c.patches_added) {
        check(sanitizerAddPatches(uvmt_patch_fatbin, m->context), "sanitizerAddPatches (embedded device patch)");
        c.patches_added = true;
      }
      struct { Sanitizer_InstructionId id; const char* fn; } P[] = {
          {SANITIZER_INSTRUCTION_GLOBAL_MEMORY_ACCESS, "uvmt_global_access"},
          {SANITIZER_INSTRUCTION_MEMCPY_ASYNC, "uvmt_memcpy_async"},
          {SANITIZER_INSTRUCTION_BULK_COPY_GLOBAL_TO_SHARED, "uvmt_bulk_g2s"},
          {SANITIZER_INSTRUCTION_BULK_COPY_SHARED_TO_GLOBAL, "uvmt_bulk_s2g"},
          {SANITIZER_INSTRUCTION_BULK_REDUCTION_SHARED_TO_GLOBAL, "uvmt_bulk_red_s2g"},
      };
      std::string errs;
      for (auto& p : P) {
        SanitizerResult r = sanitizerPatchInstructions(p.id, m->module, p.fn);
        if (r != SANITIZER_SUCCESS) errs += std::string(p.fn) + ":" + rstr(r) + ";";
      }
      SanitizerResult r = sanitizerPatchModule(m->module);
      if (r != SANITIZER_SUCCESS) errs += std::string("sanitizerPatchModule:") + rstr(r) + ";";
      ++g_modules;
      if (!errs.empty()) {
        ++g_module_errors;
        writer().line("{\"t\":\"module_error\",\"errors\":" + json_str(errs) + "}");
      }
      break;
    }
    case SANITIZER_CBID_RESOURCE_DEVICE_MEMORY_ALLOC:
    case SANITIZER_CBID_RESOURCE_HOST_MEMORY_ALLOC:
    case SANITIZER_CBID_RESOURCE_MEMORY_ALLOC_ASYNC: {
      auto* m = (const Sanitizer_ResourceMemoryData*)data;
      if (m->flags & SANITIZER_MEMORY_FLAG_PEER) break;  // a mapping of another device's allocation
      std::string name;
      const char* kind;
      if (cbid == SANITIZER_CBID_RESOURCE_MEMORY_ALLOC_ASYNC) {
        kind = "pool";
        name = "cudaMallocAsync";
      } else if (cbid == SANITIZER_CBID_RESOURCE_HOST_MEMORY_ALLOC) {
        kind = "host";
      } else {
        kind = kind_of(m->flags, &name);
      }
      add_alloc(m->address, m->size, kind, name, m->flags);
      break;
    }
    case SANITIZER_CBID_RESOURCE_DEVICE_MEMORY_FREE:
    case SANITIZER_CBID_RESOURCE_HOST_MEMORY_FREE:
    case SANITIZER_CBID_RESOURCE_MEMORY_FREE_ASYNC: {
      auto* m = (const Sanitizer_ResourceMemoryData*)data;
      if (m->flags & SANITIZER_MEMORY_FLAG_PEER) break;
      free_alloc(m->address, cbid == SANITIZER_CBID_RESOURCE_MEMORY_FREE_ASYNC ? "async" : "sync");
      break;
    }
    default:
      break;
  }
}

std::string loc_name(int type) {
  return type == 1 /* CU_MEM_LOCATION_TYPE_DEVICE */ ? "gpu" : "cpu";
}

void advise_line(uint64_t addr, uint64_t size, int advice, const std::string& where, int rc) {
  std::string arg;
  auto key = std::make_pair(addr, size);
  switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: arg = "set_read_mostly"; break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY: arg = "unset_read_mostly"; break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
      arg = "set_preferred_location_" + where;
      g_pref_loc[key] = where;
      break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: {
      // the call names no location: undo what was last set on this range
      auto it = g_pref_loc.find(key);
      arg = "unset_preferred_location_" + (it == g_pref_loc.end() ? std::string("gpu") : it->second);
      break;
    }
    case CU_MEM_ADVISE_SET_ACCESSED_BY: arg = "set_accessed_by_" + where; break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: arg = "unset_accessed_by_" + where; break;
    default: arg = "advice_" + std::to_string(advice); break;
  }
  writer().line("{\"t\":\"advise\",\"addr\":" + std::to_string(addr) + ",\"size\":" + std::to_string(size) +
                ",\"advice\":" + json_str(arg) + ",\"rc\":" + std::to_string(rc) + "}");
}

void prefetch_line(uint64_t addr, uint64_t size, const std::string& where, CUstream st, int rc) {
  writer().line("{\"t\":\"prefetch\",\"addr\":" + std::to_string(addr) + ",\"size\":" + std::to_string(size) +
                ",\"dst\":" + json_str(where) + ",\"stream\":" + std::to_string(stream_id(st)) + ",\"rc\":" + std::to_string(rc) + "}");
  if (rc == 0 && where == "gpu") gpu_took_range(addr, size);
}

// The launch call's geometry and dynamic shared memory, for the LAUNCH_BEGIN inside it. Calls
// nothing: see the file's head (lazy module loading).
bool is_launch_call(Sanitizer_CallbackId cbid) {
  switch (cbid) {
    case SANITIZER_CBID_DRIVER_API_cuLaunchKernel:
    case SANITIZER_CBID_DRIVER_API_cuLaunchKernel_ptsz:
    case SANITIZER_CBID_DRIVER_API_cuLaunchCooperativeKernel:
    case SANITIZER_CBID_DRIVER_API_cuLaunchCooperativeKernel_ptsz:
    case SANITIZER_CBID_DRIVER_API_cuLaunchKernelEx:
    case SANITIZER_CBID_DRIVER_API_cuLaunchKernelEx_ptsz:
      return true;
    default:
      return false;
  }
}

void on_launch_call(Sanitizer_CallbackId cbid, const void* params) {
  ApiLaunch a;
  a.active = true;
  switch (cbid) {
    case SANITIZER_CBID_DRIVER_API_cuLaunchKernel:
    case SANITIZER_CBID_DRIVER_API_cuLaunchKernel_ptsz: {
      auto* p = (const cuLaunchKernel_params*)params;
      a.grid[0] = p->gridDimX; a.grid[1] = p->gridDimY; a.grid[2] = p->gridDimZ;
      a.block[0] = p->blockDimX; a.block[1] = p->blockDimY; a.block[2] = p->blockDimZ;
      a.dsmem = p->sharedMemBytes;
      break;
    }
    case SANITIZER_CBID_DRIVER_API_cuLaunchCooperativeKernel:
    case SANITIZER_CBID_DRIVER_API_cuLaunchCooperativeKernel_ptsz: {
      auto* p = (const cuLaunchCooperativeKernel_params*)params;
      a.grid[0] = p->gridDimX; a.grid[1] = p->gridDimY; a.grid[2] = p->gridDimZ;
      a.block[0] = p->blockDimX; a.block[1] = p->blockDimY; a.block[2] = p->blockDimZ;
      a.dsmem = p->sharedMemBytes;
      break;
    }
    case SANITIZER_CBID_DRIVER_API_cuLaunchKernelEx:
    case SANITIZER_CBID_DRIVER_API_cuLaunchKernelEx_ptsz: {
      auto* p = (const cuLaunchKernelEx_params*)params;
      if (p->config == nullptr) return;
      a.grid[0] = p->config->gridDimX; a.grid[1] = p->config->gridDimY; a.grid[2] = p->config->gridDimZ;
      a.block[0] = p->config->blockDimX; a.block[1] = p->config->blockDimY; a.block[2] = p->config->blockDimZ;
      a.dsmem = p->config->sharedMemBytes;
      break;
    }
    default:
      return;
  }
  t_api = a;
}

void on_driver(Sanitizer_CallbackId cbid, const Sanitizer_CallbackData* d) {
  if (d->callbackSite == SANITIZER_API_ENTER) {
    if (is_launch_call(cbid)) on_launch_call(cbid, d->functionParams);
    // a prefetch is a GPU operation on managed memory: what the CPU touched before it first
    if (cbid == SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync || cbid == SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_ptsz ||
        cbid == SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_v2 || cbid == SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_v2_ptsz)
      scan_host();
    return;
  }
  if (d->callbackSite != SANITIZER_API_EXIT) return;
  if (is_launch_call(cbid)) {
    t_api.active = false;  // a call that launched nothing (an error) leaves nothing behind
    return;
  }
  int rc = d->functionReturnValue ? (int)*(const CUresult*)d->functionReturnValue : -1;
  switch (cbid) {
    case SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync:
    case SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_ptsz: {
      auto* p = (const cuMemPrefetchAsync_params*)d->functionParams;
      prefetch_line(p->devPtr, p->count, p->dstDevice == CU_DEVICE_CPU ? "cpu" : "gpu", p->hStream, rc);
      break;
    }
    case SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_v2:
    case SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_v2_ptsz: {
      auto* p = (const cuMemPrefetchAsync_v2_params*)d->functionParams;
      prefetch_line(p->devPtr, p->count, loc_name((int)p->location.type), p->hStream, rc);
      break;
    }
    case SANITIZER_CBID_DRIVER_API_cuMemAdvise: {
      auto* p = (const cuMemAdvise_params*)d->functionParams;
      advise_line(p->devPtr, p->count, (int)p->advice, p->device == CU_DEVICE_CPU ? "cpu" : "gpu", rc);
      break;
    }
    case SANITIZER_CBID_DRIVER_API_cuMemAdvise_v2: {
      auto* p = (const cuMemAdvise_v2_params*)d->functionParams;
      advise_line(p->devPtr, p->count, (int)p->advice, loc_name((int)p->location.type), rc);
      break;
    }
    default:
      break;
  }
}

void callback(void*, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid, const void* data) {
  // Our own allocations, copies and synchronizations are not the program's; but a module that
  // loads while we call into CUDA is the program's, and must be patched or its kernels record
  // nothing.
  // (Not while a module is being patched: what loads then is this library's own patch.)
  if (t_in_tool) {
    if (domain != SANITIZER_CB_DOMAIN_RESOURCE || cbid != SANITIZER_CBID_RESOURCE_MODULE_LOADED || t_patching) return;
    ++g_modules_in_tool;
  }
  std::lock_guard<std::recursive_mutex> g(g_mu);
  ToolScope scope;
  switch (domain) {
    case SANITIZER_CB_DOMAIN_RESOURCE: on_resource(cbid, data); break;
    case SANITIZER_CB_DOMAIN_LAUNCH: on_launch(cbid, (const Sanitizer_LaunchData*)data); break;
    case SANITIZER_CB_DOMAIN_GRAPHS: on_graph(cbid, data); break;
    case SANITIZER_CB_DOMAIN_MEMCPY:
      if (cbid == SANITIZER_CBID_MEMCPY_STARTING) {
        auto* m = (const Sanitizer_MemcpyData*)data;
        scan_host();
        writer().line(memcpy_line(m));
        if (m->direction != SANITIZER_MEMCPY_DIRECTION_DEVICE_TO_HOST) gpu_took_range(m->dstAddress, memcpy_bytes(m));
      }
      break;
    case SANITIZER_CB_DOMAIN_MEMSET:
      if (cbid == SANITIZER_CBID_MEMSET_STARTING) {
        auto* m = (const Sanitizer_MemsetData*)data;
        scan_host();
        writer().line(memset_line(m));
        gpu_took_range(m->address, memset_bytes(m));
      }
      break;
    case SANITIZER_CB_DOMAIN_SYNCHRONIZE: {
      auto* s = (const Sanitizer_SynchronizeData*)data;
      if (cbid == SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED)
        writer().line("{\"t\":\"sync\",\"scope\":\"stream\",\"stream\":" + std::to_string(stream_id(s->stream)) + "}");
      else if (cbid == SANITIZER_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED)
        writer().line("{\"t\":\"sync\",\"scope\":\"context\"}");
      break;
    }
    case SANITIZER_CB_DOMAIN_EVENTS:
      if (cbid == SANITIZER_CBID_EVENTS_SYNCHRONIZE) writer().line("{\"t\":\"sync\",\"scope\":\"event\"}");
      break;
    case SANITIZER_CB_DOMAIN_DRIVER_API: on_driver(cbid, (const Sanitizer_CallbackData*)data); break;
    default: break;
  }
}

void at_exit() {
  std::lock_guard<std::recursive_mutex> g(g_mu);
  std::string status = "{";
  for (auto& kv : g_stream_status) status += (status.size() > 1 ? "," : "") + json_str(kv.first) + ":" + std::to_string(kv.second);
  status += "}";
  const std::pair<const char*, uint64_t> tf[] = {
      {"launches", g_tm.launches}, {"prepare_ns", g_tm.prepare}, {"wait_ns", g_tm.wait}, {"readback_ns", g_tm.readback},
      {"process_ns", g_tm.process}, {"write_ns", g_tm.write}, {"attrs_ns", g_tm.attrs}, {"readback_bytes", g_tm.readback_bytes},
      {"copies", g_tm.copies}, {"uploads", g_tm.uploads}, {"table_uploads", g_tm.table_uploads}};
  std::string timers = "{";
  for (auto& kv : tf) timers += std::string(timers.size() > 1 ? "," : "") + "\"" + kv.first + "\":" + std::to_string(kv.second);
  timers += "}";
  writer().line("{\"t\":\"end\",\"kernels\":" + std::to_string(g_kernels) + ",\"modules\":" + std::to_string(g_modules) +
                ",\"module_errors\":" + std::to_string(g_module_errors) + ",\"unknown_frees\":" + std::to_string(g_unknown_frees) +
                ",\"dropped_accesses\":" + std::to_string(g_dropped_total) + ",\"unknown_pages\":" + std::to_string(g_unknown_total) +
                ",\"skipped_captured_launches\":" + std::to_string(g_skipped_capture) +
                ",\"launch_callbacks_in_graphs\":" + std::to_string(g_launch_cb_in_graph) +
                ",\"host_scans\":" + std::to_string(g_host_scans) + ",\"host_scan_ns\":" + std::to_string(g_host_scan_ns) +
                ",\"host_access_pages\":" + std::to_string(g_host_pages) + ",\"host_access_ranges\":" + std::to_string(g_host_ranges) +
                ",\"host_scan_error\":" + json_str(g_host_error) + ",\"pagemap_scan_fast\":" + std::to_string(g_pm_fast) +
                ",\"pagemap_scan_checked\":" + std::to_string(g_pm_checked) + ",\"pagemap_scan_off\":" + json_str(g_pm_off) + ",\"slices\":" + (g_slices_on ? "true" : "false") + ",\"graph_sync_fallbacks\":" + std::to_string(g_graph_sync_fallbacks) + ",\"live_allocations\":" + std::to_string(g_live.size()) +
                ",\"streams\":" + (g_streams_on ? "true" : "false") + ",\"stream_status\":" + status +
                ",\"stream_rows\":" + std::to_string(g_stream_rows) + ",\"stream_blocks\":" + std::to_string(g_stream_blocks) +
                ",\"stream_entries\":" + std::to_string(g_stream_entries) + ",\"kernel_span_ns\":" + std::to_string(g_kernel_span_ns) +
                ",\"attr_errors\":" + std::to_string(g_attr_errors) + ",\"dsmem_from_launch_call\":" + std::to_string(g_api_dsmem_matched) +
                ",\"modules_loaded_in_tool_calls\":" + std::to_string(g_modules_in_tool) +
                ",\"timers\":" + timers + ",\"t_ns\":" + std::to_string(now_ns()) + "}");
  if (g_timers_print && g_tm.launches) {
    double n = (double)g_tm.launches;
    fprintf(stderr,
            "uvmtrace: page pass, %" PRIu64 " launches, tool time per launch (us): prepare %.1f, wait for the kernel %.1f, "
            "read-back %.1f (%.1f copies, %.0f bytes), process %.1f, write %.1f, attributes %.1f, host scans %.1f; "
            "%" PRIu64 " state uploads, %" PRIu64 " segment-table uploads\n",
            g_tm.launches, g_tm.prepare / n / 1e3, g_tm.wait / n / 1e3, g_tm.readback / n / 1e3, g_tm.copies / n,
            g_tm.readback_bytes / n, g_tm.process / n / 1e3, g_tm.write / n / 1e3, g_tm.attrs / n / 1e3,
            g_host_scan_ns / n / 1e3, g_tm.uploads, g_tm.table_uploads);
  }
}

}  // namespace

bool pages_pass_available() { return true; }

int pages_pass_init() {
  uint64_t ucap = env_u64("UVMTRACE_UNKNOWN_PAGES", 1u << 16);
  g_ucap = 1;
  while (g_ucap < ucap && g_ucap < (1u << 30)) g_ucap <<= 1;
  g_rec_cap_limit = env_u64("UVMTRACE_MAX_PAGES_PER_KERNEL", 0);
  g_slices_on = env_flag("UVMTRACE_SLICES", true);
  g_host_on = env_flag("UVMTRACE_HOST_ACCESS", true);
  g_pm_on = env_flag("UVMTRACE_PAGEMAP_SCAN", true);
  g_streams_on = env_flag("UVMTRACE_STREAMS", true);
  g_attrs_on = env_flag("UVMTRACE_LAUNCH_ATTRS", true);
  g_timers_print = env_flag("UVMTRACE_TIMERS", false);
  g_ent_max = std::min<uint64_t>(std::max<uint64_t>(env_u64("UVMTRACE_STREAM_ENTRIES", g_ent_max), 1u << 12), 1ull << 30);
  g_ent_init = g_ent_max;
  g_ent_graph_init = std::min(g_ent_graph_init, g_ent_max);
  g_blk_max = std::min<uint64_t>(env_u64("UVMTRACE_STREAM_MAX_BLOCKS", g_blk_max), 0xFFFFFFF0ull);
  g_stream_factor = (int)std::min<uint64_t>(env_u64("UVMTRACE_STREAM_ROWS_FACTOR", (uint64_t)g_stream_factor), 1u << 20);
  g_tick_bits = (int)std::min<uint64_t>(std::max<uint64_t>(env_u64("UVMTRACE_STREAM_TICK_BITS", (uint64_t)g_tick_bits), 1), 31);
  if (const char* gm = getenv("UVMTRACE_GRAPH_DATA")) g_graph_mode = strcmp(gm, "launch") == 0 ? 1 : strcmp(gm, "function") == 0 ? 2 : 0;
  g_is_capturing = (StreamIsCapturingFn)driver_sym("cuStreamIsCapturing");
  Sanitizer_SubscriberHandle h;
  SanitizerResult r = sanitizerSubscribe(&h, callback, nullptr);
  if (r != SANITIZER_SUCCESS) fatal("sanitizerSubscribe failed: %s (%d); is another tool (compute-sanitizer, a profiler) attached?", rstr(r), (int)r);
  check(sanitizerEnableDomain(1, h, SANITIZER_CB_DOMAIN_RESOURCE), "enable resource callbacks");
  check(sanitizerEnableDomain(1, h, SANITIZER_CB_DOMAIN_LAUNCH), "enable launch callbacks");
  check(sanitizerEnableDomain(1, h, SANITIZER_CB_DOMAIN_GRAPHS), "enable graph callbacks");
  check(sanitizerEnableDomain(1, h, SANITIZER_CB_DOMAIN_MEMCPY), "enable memcpy callbacks");
  check(sanitizerEnableDomain(1, h, SANITIZER_CB_DOMAIN_MEMSET), "enable memset callbacks");
  check(sanitizerEnableDomain(1, h, SANITIZER_CB_DOMAIN_SYNCHRONIZE), "enable synchronize callbacks");
  check(sanitizerEnableCallback(1, h, SANITIZER_CB_DOMAIN_EVENTS, SANITIZER_CBID_EVENTS_SYNCHRONIZE), "enable event callbacks");
  const Sanitizer_CallbackId drv[] = {
      SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync, SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_ptsz,
      SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_v2, SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_v2_ptsz,
      SANITIZER_CBID_DRIVER_API_cuMemAdvise, SANITIZER_CBID_DRIVER_API_cuMemAdvise_v2,
      // launch calls: the function and dynamic shared memory of each launch (v1.2 attributes)
      SANITIZER_CBID_DRIVER_API_cuLaunchKernel, SANITIZER_CBID_DRIVER_API_cuLaunchKernel_ptsz,
      SANITIZER_CBID_DRIVER_API_cuLaunchKernelEx, SANITIZER_CBID_DRIVER_API_cuLaunchKernelEx_ptsz,
      SANITIZER_CBID_DRIVER_API_cuLaunchCooperativeKernel, SANITIZER_CBID_DRIVER_API_cuLaunchCooperativeKernel_ptsz};
  for (auto id : drv) check(sanitizerEnableCallback(1, h, SANITIZER_CB_DOMAIN_DRIVER_API, id), "enable driver API callbacks");
  writer().line("{\"t\":\"meta\",\"pass\":\"pages\",\"version\":" + json_str(kVersion) + ",\"unknown_table\":" + std::to_string(g_ucap) +
                ",\"patch_bytes\":" + std::to_string((size_t)(uvmt_patch_fatbin_end - uvmt_patch_fatbin)) +
                ",\"rec_bytes\":" + std::to_string(sizeof(uvmt_rec)) + ",\"slices\":" + (g_slices_on ? "true" : "false") +
                ",\"streams\":" + (g_streams_on ? "true" : "false") + ",\"stream_rec_bytes\":" + std::to_string(sizeof(StreamRowRec)) +
                ",\"launch_attrs\":" + (g_attrs_on ? "true" : "false") + ",\"stream_entries_max\":" + std::to_string(g_ent_max) +
                ",\"t_ns\":" + std::to_string(now_ns()) + "}");
  atexit(at_exit);
  return 0;
}

}  // namespace uvmt
