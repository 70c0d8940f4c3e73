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
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common.h"
#include "uvmt_layout.h"

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

struct Slot {
  uvmt_state host{};  // uploaded before each launch; lives until the launch is read back
  uvmt_state* d_state = nullptr;
  unsigned* d_slot_of = nullptr;
  uint64_t slot_cap = 0;
  uvmt_rec* d_recs = nullptr;
  uint64_t rec_cap = 0;
  unsigned long long* d_ukeys = nullptr;
  unsigned* d_uslot = nullptr;
  bool slots_dirty = true;
  bool unknown_dirty = true;
};

struct Ctx {
  bool patches_added = false;
  uvmt_seg* d_segs = nullptr;
  uint64_t segs_cap = 0;
  std::vector<uvmt_seg> segs;
  uint64_t total_pages = 0;
  uint64_t table_gen = ~0ull;
  std::vector<Slot> slots;  // [0]: ordinary launches; [1..]: kernel nodes of one graph launch
};

struct Pending {  // a launch between its begin callback and its read-back
  std::string mangled;
  uint32_t grid[3], block[3];
  int64_t stream;
  size_t slot;
  CUcontext ctx;
  bool instrumented;
  int node_index;
  CUfunction function = nullptr;
  Sanitizer_StreamHandle hs_api = nullptr, hs_node = nullptr;  // graph nodes
  int rc_launch_data = -1, rc_function_data = -1;  // results of handing over the state
  bool launch_cb_seen = false;  // a LAUNCH_BEGIN callback also came for this graph node
  int merged = 1;  // graph nodes sharing this node's function (and so its state)
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
std::unordered_map<CUcontext, Ctx> g_ctx;
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

struct ToolScope {
  ToolScope() { ++t_in_tool; }
  ~ToolScope() { --t_in_tool; }
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
  static std::vector<uint64_t> ent(1u << 16);  // one pagemap entry per page
  std::vector<uint64_t> now;
  for (auto& kv : g_live) {
    Alloc& a = kv.second;
    if (a.kind != "managed") continue;
    uint64_t first = kv.first >> 12;
    uint64_t last = (kv.first + a.size - 1) >> 12;
    now.assign(a.cpu_mapped.size(), 0);
    bool any_new = false;
    for (uint64_t p = first; p <= last;) {
      uint64_t n = std::min<uint64_t>(ent.size(), last + 1 - p);
      ssize_t got = pread(g_pagemap_fd, ent.data(), n * 8, (off_t)(p * 8));
      if (got != (ssize_t)(n * 8)) {
        g_host_error = std::string("read /proc/self/pagemap: ") + (got < 0 ? strerror(errno) : "short read");
        writer().line("{\"t\":\"host_scan_error\",\"error\":" + json_str(g_host_error) + "}");
        ::close(g_pagemap_fd);
        g_pagemap_fd = -1;
        g_host_on = false;
        return;
      }
      for (uint64_t k = 0; k < n; ++k)
        if (ent[k] >> 63) {  // bit 63: present in RAM
          uint64_t i = p - first + k;
          now[i / 64] |= 1ull << (i % 64);
        }
      p += n;
    }
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

void gpu_took_pages(const std::vector<uvmt_rec>& recs) {
  if (g_managed_live == 0) return;
  for (const uvmt_rec& r : recs) {
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
  c.segs.clear();
  uint64_t slot = 0;
  for (auto& kv : g_live) {
    uint64_t first = kv.first >> 12, end = ((kv.first + kv.second.size - 1) >> 12) + 1;
    if (!c.segs.empty() && first <= c.segs.back().end_page) {  // shares a page with the previous run
      if (end > c.segs.back().end_page) {
        slot += end - c.segs.back().end_page;
        c.segs.back().end_page = end;
      }
      continue;
    }
    c.segs.push_back(uvmt_seg{first, end, slot});
    slot += end - first;
  }
  c.total_pages = slot;
  if (c.segs.size() > c.segs_cap) {
    if (c.d_segs) check(sanitizerFree(cctx, c.d_segs), "sanitizerFree(segments)");
    c.segs_cap = std::max<uint64_t>(c.segs.size() + c.segs.size() / 2, 64);
    check(sanitizerAlloc(cctx, (void**)&c.d_segs, c.segs_cap * sizeof(uvmt_seg)), "sanitizerAlloc(segments)");
  }
  if (!c.segs.empty()) {
    check(sanitizerMemcpyHostToDeviceAsync(c.d_segs, c.segs.data(), c.segs.size() * sizeof(uvmt_seg), hs), "upload of segments");
    // the host vector changes at the next rebuild: make sure the copy has left it
    check(sanitizerStreamSynchronize(hs), "sanitizerStreamSynchronize(segments)");
  }
  c.table_gen = g_live_gen;
}

// Sizes the buffers of slot k for the current table, clears what the last launch left and
// uploads its state. Everything is queued on hs, ahead of the launch that will use it.
uvmt_state* prepare_slot(CUcontext cctx, Ctx& c, size_t k, Sanitizer_StreamHandle hs) {
  rebuild_table(cctx, c, hs);
  if (c.slots.size() <= k) c.slots.resize(k + 1);
  Slot& s = c.slots[k];
  if (s.d_state == nullptr) {
    check(sanitizerAlloc(cctx, (void**)&s.d_state, sizeof(uvmt_state)), "sanitizerAlloc(state)");
    check(sanitizerAlloc(cctx, (void**)&s.d_ukeys, (size_t)g_ucap * 8), "sanitizerAlloc(unknown keys)");
    check(sanitizerAlloc(cctx, (void**)&s.d_uslot, (size_t)g_ucap * 4), "sanitizerAlloc(unknown slots)");
  }
  uint64_t need_slots = std::max<uint64_t>(c.total_pages, 1);
  if (need_slots > s.slot_cap) {
    if (s.d_slot_of) check(sanitizerFree(cctx, s.d_slot_of), "sanitizerFree(slots)");
    s.slot_cap = need_slots + need_slots / 4;
    check(sanitizerAlloc(cctx, (void**)&s.d_slot_of, s.slot_cap * 4), "sanitizerAlloc(slots)");
    s.slots_dirty = true;
  }
  uint64_t need_recs = c.total_pages + g_ucap;
  if (g_rec_cap_limit && need_recs > g_rec_cap_limit) need_recs = g_rec_cap_limit;
  if (need_recs > 0xFFFFFFF0ull) need_recs = 0xFFFFFFF0ull;  // record indices are 32-bit
  if (need_recs > s.rec_cap) {
    if (s.d_recs) check(sanitizerFree(cctx, s.d_recs), "sanitizerFree(records)");
    s.rec_cap = need_recs + need_recs / 4;
    if (s.rec_cap > 0xFFFFFFF0ull) s.rec_cap = 0xFFFFFFF0ull;
    check(sanitizerAlloc(cctx, (void**)&s.d_recs, s.rec_cap * sizeof(uvmt_rec)), "sanitizerAlloc(records)");
  }
  if (s.slots_dirty) {
    check(sanitizerMemset(s.d_slot_of, 0, s.slot_cap * 4, hs), "sanitizerMemset(slots)");
    s.slots_dirty = false;
  }
  if (s.unknown_dirty) {
    check(sanitizerMemset(s.d_ukeys, 0xFF, (size_t)g_ucap * 8, hs), "sanitizerMemset(unknown keys)");
    check(sanitizerMemset(s.d_uslot, 0, (size_t)g_ucap * 4, hs), "sanitizerMemset(unknown slots)");
    s.unknown_dirty = false;
  }
  s.host = uvmt_state{};
  s.host.segs = c.d_segs;
  s.host.n_segs = (unsigned)c.segs.size();
  s.host.slot_of = s.d_slot_of;
  s.host.recs = s.d_recs;
  s.host.rec_cap = (unsigned)std::min<uint64_t>(need_recs, s.rec_cap);
  s.host.ukeys = s.d_ukeys;
  s.host.uslot = s.d_uslot;
  s.host.umask = g_ucap - 1;
  s.host.shift = UVMT_SHIFT0;
  s.host.slices_on = g_slices_on ? 1u : 0u;
  check(sanitizerMemcpyHostToDeviceAsync(s.d_state, &s.host, sizeof(uvmt_state), hs), "upload of launch state");
  return s.d_state;
}

// Reads back slot k after its launch finished and returns the kernel's JSON line.
std::string read_slot(Ctx& c, const Pending& p, Sanitizer_StreamHandle hs, SanitizerResult sync_rc) {
  uint64_t seq = g_kernels++;
  std::string head = "{\"t\":\"kernel\",\"k\":" + std::to_string(seq) + ",\"name\":" + json_str(demangle(p.mangled.c_str())) +
                     ",\"mangled\":" + json_str(p.mangled) + ",\"grid\":" + dims(p.grid) + ",\"block\":" + dims(p.block) +
                     ",\"stream\":" + std::to_string(p.stream);
  if (g_graph.active)
    head += ",\"graph_launch\":" + std::to_string(g_graph.index) + ",\"node\":" + std::to_string(p.node_index) +
            ",\"launch_cb\":" + (p.launch_cb_seen ? "true" : "false") + ",\"merged\":" + std::to_string(p.merged);
  head += ",\"rc_data\":[" + std::to_string(p.rc_launch_data) + "," + std::to_string(p.rc_function_data) + "]";
  if (!p.instrumented) return head + ",\"off\":0,\"n\":0,\"unknown\":0,\"dropped\":0,\"error\":\"not instrumented\"}";
  if (sync_rc != SANITIZER_SUCCESS)
    return head + ",\"off\":0,\"n\":0,\"unknown\":0,\"dropped\":0,\"error\":" + json_str(std::string("synchronize: ") + rstr(sync_rc)) + "}";
  Slot& s = c.slots[p.slot];
  uvmt_state hdr{};
  SanitizerResult r = sanitizerMemcpyDeviceToHost(&hdr, s.d_state, UVMT_HEADER_BYTES, hs);
  if (r != SANITIZER_SUCCESS)
    return head + ",\"off\":0,\"n\":0,\"unknown\":0,\"dropped\":0,\"error\":" + json_str(std::string("read-back: ") + rstr(r)) + "}";
  uint64_t n = std::min<uint64_t>(hdr.n_touched, s.host.rec_cap);
  uint64_t dropped = hdr.dropped;
  std::vector<uvmt_rec> recs(n);
  if (n) {
    r = sanitizerMemcpyDeviceToHost(recs.data(), s.d_recs, n * sizeof(uvmt_rec), hs);
    if (r != SANITIZER_SUCCESS)
      return head + ",\"off\":0,\"n\":0,\"unknown\":0,\"dropped\":" + std::to_string(dropped) + ",\"error\":" +
             json_str(std::string("read-back: ") + rstr(r)) + "}";
  }
  if (hdr.n_touched) s.slots_dirty = true;
  if (hdr.n_unknown) s.unknown_dirty = true;
  g_dropped_total += dropped;
  g_unknown_total += hdr.n_unknown;
  // Slices: fold every record's mask to the launch's final width; the run spans slices
  // 0 .. the highest one any page was touched in.
  unsigned shift = hdr.shift;
  for (const uvmt_rec& rc : recs) shift = std::max(shift, (unsigned)(rc.slices >> UVMT_MASK_BITS));
  uint64_t all = 0;
  for (uvmt_rec& rc : recs) {
    unsigned from = (unsigned)(rc.slices >> UVMT_MASK_BITS);
    uint64_t m = rc.slices & UVMT_MASK, f = 0;
    for (unsigned b = 0; b < UVMT_MASK_BITS; ++b)
      if (m >> b & 1ull) f |= 1ull << (b >> (shift - from));
    rc.slices = f ? f : 1ull;  // a record with no slice cannot exist; keep the format's rule
    all |= rc.slices;
  }
  gpu_took_pages(recs);
  uint64_t off = writer().append_bin(recs.data(), n * sizeof(uvmt_rec));
  std::string sl;
  if (g_slices_on)
    sl = ",\"n_slices\":" + std::to_string(all ? 64 - __builtin_clzll(all) : 1) + ",\"slice_ns\":" + std::to_string(1ull << shift);
  return head + ",\"off\":" + std::to_string(off) + ",\"n\":" + std::to_string(n) + ",\"unknown\":" + std::to_string(hdr.n_unknown) +
         ",\"dropped\":" + std::to_string(dropped) + sl + "}";
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
      set_launch_data(l, l->hStream, nullptr, nullptr, false);
      t_pending.push_back(Pending{});
      t_pending.back().instrumented = false;
      t_pending.back().slot = ~(size_t)0;
      return;
    }
    scan_host();
    Ctx& c = g_ctx[l->context];
    uvmt_state* st = prepare_slot(l->context, c, 0, l->hStream);
    Pending p = make_pending(l, 0, -1);
    p.instrumented = set_launch_data(l, l->hStream, st, &p, false);
    t_pending.push_back(p);
  } else if (cbid == SANITIZER_CBID_LAUNCH_END) {
    if (t_pending.empty()) return;
    Pending p = t_pending.back();
    t_pending.pop_back();
    if (p.slot == ~(size_t)0) return;  // captured, see above
    SanitizerResult r = sanitizerStreamSynchronize(l->hStream);
    writer().line(read_slot(g_ctx[p.ctx], p, l->hStream, r));
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
      uvmt_state* st;
      if (same) {
        st = c.slots[k].d_state;
      } else {
        st = prepare_slot(l->context, c, k, hs);
        check(sanitizerStreamSynchronize(hs), "sanitizerStreamSynchronize(graph node set-up)");
      }
      Pending p = make_pending(l, k, (int)g_graph.kernels.size());
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
    SanitizerResult r = sanitizerStreamSynchronize(g->hStream);
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

void on_driver(Sanitizer_CallbackId cbid, const Sanitizer_CallbackData* d) {
  if (d->callbackSite == SANITIZER_API_ENTER) {
    // a prefetch is a GPU operation on managed memory: what the CPU touched before it first
    if (cbid == SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync || cbid == SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_ptsz ||
        cbid == SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_v2 || cbid == SANITIZER_CBID_DRIVER_API_cuMemPrefetchAsync_v2_ptsz)
      scan_host();
    return;
  }
  if (d->callbackSite != SANITIZER_API_EXIT) return;
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
  if (t_in_tool) return;  // our own allocations, copies and synchronizations are not the program's
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
  writer().line("{\"t\":\"end\",\"kernels\":" + std::to_string(g_kernels) + ",\"modules\":" + std::to_string(g_modules) +
                ",\"module_errors\":" + std::to_string(g_module_errors) + ",\"unknown_frees\":" + std::to_string(g_unknown_frees) +
                ",\"dropped_accesses\":" + std::to_string(g_dropped_total) + ",\"unknown_pages\":" + std::to_string(g_unknown_total) +
                ",\"skipped_captured_launches\":" + std::to_string(g_skipped_capture) +
                ",\"launch_callbacks_in_graphs\":" + std::to_string(g_launch_cb_in_graph) +
                ",\"host_scans\":" + std::to_string(g_host_scans) + ",\"host_scan_ns\":" + std::to_string(g_host_scan_ns) +
                ",\"host_access_pages\":" + std::to_string(g_host_pages) + ",\"host_access_ranges\":" + std::to_string(g_host_ranges) +
                ",\"host_scan_error\":" + json_str(g_host_error) + ",\"slices\":" + (g_slices_on ? "true" : "false") + ",\"graph_sync_fallbacks\":" + std::to_string(g_graph_sync_fallbacks) + ",\"live_allocations\":" + std::to_string(g_live.size()) +
                ",\"t_ns\":" + std::to_string(now_ns()) + "}");
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
      SANITIZER_CBID_DRIVER_API_cuMemAdvise, SANITIZER_CBID_DRIVER_API_cuMemAdvise_v2};
  for (auto id : drv) check(sanitizerEnableCallback(1, h, SANITIZER_CB_DOMAIN_DRIVER_API, id), "enable driver API callbacks");
  writer().line("{\"t\":\"meta\",\"pass\":\"pages\",\"version\":" + json_str(kVersion) + ",\"unknown_table\":" + std::to_string(g_ucap) +
                ",\"patch_bytes\":" + std::to_string((size_t)(uvmt_patch_fatbin_end - uvmt_patch_fatbin)) +
                ",\"rec_bytes\":" + std::to_string(sizeof(uvmt_rec)) + ",\"slices\":" + (g_slices_on ? "true" : "false") + ",\"t_ns\":" + std::to_string(now_ns()) + "}");
  atexit(at_exit);
  return 0;
}

}  // namespace uvmt
