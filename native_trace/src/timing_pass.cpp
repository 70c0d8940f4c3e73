// Timing pass: CUPTI activity records give every kernel's uninstrumented start and end on the
// GPU. Before each launch, live managed allocations are prefetched to the launching device and
// waited for, so a kernel's duration holds no UVM faults (trace-format.md, kernels.duration_ns).
// Optionally (UVMTRACE_UM_COUNTERS=1) it tries CUPTI's unified-memory counters, and
// (UVMTRACE_DRIVER_COUNTERS=1, the default with CUPTI's counters) reads the UVM driver's own
// lossless totals (driver_counters.cpp) into the end line.
//
// The same pass measures real oversubscribed runs (`uvmsim run`, docs/groundtruth.md): with
// prefetching off, the balloon of balloon.cpp in place and the counters on, kernel durations
// hold the program's real faults and migrations.
//
// Each kact line also carries the uninstrumented launch's shared memory (from the activity
// record) and, for launches made through a launch call, the function's registers
// (cuFuncGetAttribute, or cuKernelGetAttribute when the call names a context-less CUkernel, as
// the runtime's launches do) and the occupancy the hardware allows
// (cuOccupancyMaxActiveBlocksPerMultiprocessor), computed in the call's driver API callback
// and matched to the record by correlation id: uvmtrace v1.2's launch columns, free of the page
// pass's instrumentation. The activity record's own registersPerThread is written as
// `regs_cupti` only: it is not the function's register count (seen on an H100, driver 580:
// 16 for kernels of 8 to 14 registers).
//
// This pass patches nothing, so a module that these queries load early is harmless here (the
// page pass must not query at the launch call: pages_pass.cpp).
//
// Raw output: timing.<pid>.jsonl with one "kact" line per kernel activity record; counter
// records as "um" lines, or with UVMTRACE_UM_BINARY=1 as UmRecord structs in timing.<pid>.bin
// (an oversubscribed run can produce millions).
#include <cupti.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "common.h"

namespace uvmt {
namespace {

std::mutex g_mu;
std::map<uint64_t, uint64_t> g_managed;  // live managed allocations: base -> size
uint64_t g_managed_live = 0, g_managed_peak = 0;  // bytes
bool g_prefetch = true;
bool g_um = false;
bool g_um_enabled = false;
bool g_um_binary = false;
bool g_balloon = false;
bool g_driver_counters = false;  // the driver's totals (driver_counters.cpp)
uint64_t g_prefetches = 0, g_prefetch_errors = 0, g_kernels = 0, g_um_records = 0, g_dropped_records = 0;
thread_local int t_launch_depth = 0;  // >0 inside a launch call (runtime wraps driver)

typedef CUresult (*PrefetchV2Fn)(CUdeviceptr, size_t, CUmemLocation, unsigned int, CUstream);
typedef CUresult (*CtxGetDeviceFn)(CUdevice*);
typedef CUresult (*StreamSyncFn)(CUstream);
typedef CUresult (*IsCapturingFn)(CUstream, CUstreamCaptureStatus*);
typedef CUresult (*ExchangeModeFn)(CUstreamCaptureMode*);
PrefetchV2Fn p_prefetch = nullptr;
CtxGetDeviceFn p_ctx_get_device = nullptr;
StreamSyncFn p_stream_sync = nullptr;
IsCapturingFn p_is_capturing = nullptr;
ExchangeModeFn p_exchange_mode = nullptr;
uint64_t g_prefetch_skipped_capture = 0;

// occupancy and registers by correlation id (v1.2 launch attributes): filled by launch
// calls, taken by the activity records (which may arrive on another thread); -1: unknown
typedef CUresult (*OccupancyFn)(int*, CUfunction, int, size_t);
typedef CUresult (*FuncGetAttributeFn)(int*, CUfunction_attribute, CUfunction);
typedef CUresult (*KernelGetAttributeFn)(int*, CUfunction_attribute, CUkernel, CUdevice);
OccupancyFn p_occupancy = nullptr;
FuncGetAttributeFn p_func_attr = nullptr;
KernelGetAttributeFn p_kernel_attr = nullptr;
struct CallAttr {
  int occ = -1, regs = -1;
};
std::mutex g_occ_mu;
std::unordered_map<uint32_t, CallAttr> g_occ_by_corr;
std::map<std::tuple<CUfunction, uint64_t, uint64_t>, int> g_occ_cache;
std::unordered_map<CUfunction, int> g_regs_cache;
thread_local uint32_t t_outer_corr = 0;  // correlation id of the outermost launch call

const char* cstr(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "?";
}

void resolve_driver() {
  if (p_prefetch) return;
  p_prefetch = (PrefetchV2Fn)driver_sym("cuMemPrefetchAsync_v2");
  p_ctx_get_device = (CtxGetDeviceFn)driver_sym("cuCtxGetDevice");
  p_stream_sync = (StreamSyncFn)driver_sym("cuStreamSynchronize");
  p_is_capturing = (IsCapturingFn)driver_sym("cuStreamIsCapturing");
  p_exchange_mode = (ExchangeModeFn)driver_sym("cuThreadExchangeStreamCaptureMode");
}

// Makes the live managed allocations resident on this thread's device before a launch on
// `stream`, and waits for that, so the kernel's duration holds no faults. Nothing is done
// while the stream is being captured into a graph (the launch does not run then).
void prefetch_managed(CUstream stream) {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_prefetch || g_managed.empty()) return;
  resolve_driver();
  if (!p_prefetch || !p_ctx_get_device || !p_stream_sync || !p_is_capturing || !p_exchange_mode) {
    if (g_prefetch_errors++ == 0) warn("timing pass: driver entry points for prefetching not found; managed kernels are timed with their faults");
    return;
  }
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  if (p_is_capturing(stream, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE) {
    ++g_prefetch_skipped_capture;
    return;
  }
  CUdevice dev = 0;
  if (p_ctx_get_device(&dev) != CUDA_SUCCESS) return;
  CUmemLocation loc;
  memset(&loc, 0, sizeof loc);
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = dev;
  // relaxed: a capture in progress on another stream must not be invalidated by our calls
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  p_exchange_mode(&mode);
  for (auto& kv : g_managed) {
    ++g_prefetches;
    if (p_prefetch((CUdeviceptr)kv.first, (size_t)kv.second, loc, 0, stream) != CUDA_SUCCESS) ++g_prefetch_errors;
  }
  if (p_stream_sync(stream) != CUDA_SUCCESS) ++g_prefetch_errors;
  p_exchange_mode(&mode);
}

void CUPTIAPI buffer_requested(uint8_t** buf, size_t* size, size_t* max_records) {
  *size = 8u << 20;
  *buf = (uint8_t*)aligned_alloc(8, *size);
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = (const CUpti_ActivityKernel10*)r;
      ++g_kernels;
      std::string mangled = k->name ? k->name : "?";
      std::string occ;
      {
        std::lock_guard<std::mutex> g(g_occ_mu);
        auto it = g_occ_by_corr.find(k->correlationId);
        if (it != g_occ_by_corr.end()) {
          if (it->second.occ >= 0) occ = ",\"occupancy\":" + std::to_string(it->second.occ);
          if (it->second.regs >= 0) occ += ",\"regs\":" + std::to_string(it->second.regs);
          if (k->graphId == 0) g_occ_by_corr.erase(it);  // a graph's nodes share one id
        }
      }
      writer().line("{\"t\":\"kact\",\"corr\":" + std::to_string(k->correlationId) + ",\"name\":" + json_str(demangle(mangled.c_str())) +
                    ",\"mangled\":" + json_str(mangled) + ",\"start\":" + std::to_string(k->start) + ",\"end\":" + std::to_string(k->end) +
                    ",\"grid\":\"" + std::to_string(k->gridX) + "," + std::to_string(k->gridY) + "," + std::to_string(k->gridZ) +
                    "\",\"block\":\"" + std::to_string(k->blockX) + "," + std::to_string(k->blockY) + "," + std::to_string(k->blockZ) +
                    "\",\"stream\":" + std::to_string(k->streamId) + ",\"graph\":" + std::to_string(k->graphId) +
                    ",\"graph_node\":" + std::to_string(k->graphNodeId) + ",\"device\":" + std::to_string(k->deviceId) +
                    // the uninstrumented launch's resources, to check the page pass's (v1.2)
                    ",\"regs_cupti\":" + std::to_string(k->registersPerThread) + ",\"smem_static\":" + std::to_string(k->staticSharedMemory) +
                    ",\"smem_dyn\":" + std::to_string(k->dynamicSharedMemory) + occ + "}");
    } else if (r->kind == CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) {
      auto* u = (const CUpti_ActivityUnifiedMemoryCounter3*)r;
      ++g_um_records;
      if (g_um_binary) {
        UmRecord b{(uint32_t)u->counterKind, u->flags, u->value, u->start, u->end, u->address, u->srcId, u->dstId};
        writer().append_bin(&b, sizeof b);
        continue;
      }
      writer().line("{\"t\":\"um\",\"counter\":" + std::to_string((int)u->counterKind) + ",\"value\":" + std::to_string(u->value) +
                    ",\"start\":" + std::to_string(u->start) + ",\"end\":" + std::to_string(u->end) + ",\"address\":" +
                    std::to_string(u->address) + ",\"src\":" + std::to_string(u->srcId) + ",\"dst\":" + std::to_string(u->dstId) +
                    ",\"stream\":" + std::to_string(u->streamId) + ",\"flags\":" + std::to_string(u->flags) + "}");
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped) g_dropped_records += dropped;
  free(buf);
}

// Tries one way to switch the unified-memory counters on; returns the enable result. With
// `driver_events`, also the driver's thrashing, throttling and remote-map records. With
// UVMTRACE_UM_NO_CPU_FAULTS=1 the CPU page-fault counter is left off: a program whose CPU
// first-touches a large buffer makes one driver event per CPU fault, and a run without them
// tells whether they crowd out the GPU's fault records (docs/groundtruth.md).
CUptiResult try_um(CUpti_ActivityUnifiedMemoryCounterScope scope, const char* when, bool driver_events = false) {
  CUpti_ActivityUnifiedMemoryCounterConfig c[7];
  memset(c, 0, sizeof c);
  const bool cpu_faults = !env_flag("UVMTRACE_UM_NO_CPU_FAULTS", false);
  CUpti_ActivityUnifiedMemoryCounterKind kinds[7];
  uint32_t n = 0;
  kinds[n++] = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
  kinds[n++] = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH;
  kinds[n++] = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT;
  if (cpu_faults) kinds[n++] = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT;
  if (driver_events) {
    kinds[n++] = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING;
    kinds[n++] = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING;
    kinds[n++] = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP;
  }
  for (uint32_t i = 0; i < n; ++i) {
    c[i].scope = scope;
    c[i].kind = kinds[i];
    c[i].deviceId = 0;
    c[i].enable = 1;
  }
  CUptiResult rc_cfg = cuptiActivityConfigureUnifiedMemoryCounter(c, n);
  CUptiResult rc_en = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  writer().line(std::string("{\"t\":\"um_attempt\",\"when\":\"") + when + "\",\"scope\":" + std::to_string((int)scope) +
                ",\"kinds\":" + std::to_string(n) +
                ",\"configure\":" + std::to_string((int)rc_cfg) + ",\"configure_msg\":" + json_str(cstr(rc_cfg)) +
                ",\"enable\":" + std::to_string((int)rc_en) + ",\"enable_msg\":" + json_str(cstr(rc_en)) + "}");
  if (rc_en == CUPTI_SUCCESS) g_um_enabled = true;
  return rc_en;
}

// The stream a launch call names (0 in a _ptsz call means the per-thread default stream).
CUstream launch_stream(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params) {
  CUstream st = nullptr;
  bool ptsz = false;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: ptsz = true; [[fallthrough]];
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: st = ((const cuLaunchKernel_params*)params)->hStream; break;
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: ptsz = true; [[fallthrough]];
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
        auto* c = ((const cuLaunchKernelEx_params*)params)->config;
        st = c ? c->hStream : nullptr;
        break;
      }
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: ptsz = true; [[fallthrough]];
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: st = ((const cuLaunchCooperativeKernel_params*)params)->hStream; break;
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz: ptsz = true; [[fallthrough]];
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch: st = ((const cuGraphLaunch_params*)params)->hStream; break;
      default: break;
    }
  } else {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000: ptsz = true; [[fallthrough]];
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:  // same parameter layout
        st = (CUstream)((const cudaLaunchKernel_v7000_params*)params)->stream;
        break;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: ptsz = true; [[fallthrough]];
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060: {
        auto* c = ((const cudaLaunchKernelExC_v11060_params*)params)->config;
        st = c ? (CUstream)c->stream : nullptr;
        break;
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
        st = (CUstream)((const cudaLaunchCooperativeKernel_v9000_params*)params)->stream;
        break;
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000: ptsz = true; [[fallthrough]];
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000: st = (CUstream)((const cudaGraphLaunch_v10000_params*)params)->stream; break;
      default: break;
    }
  }
  if (st == nullptr && ptsz) st = CU_STREAM_PER_THREAD;
  return st;
}

// The occupancy of a driver launch call, stored under its correlation id and the outermost
// call's (a runtime launch's record carries the runtime call's id).
void note_occupancy(CUpti_CallbackId cbid, const void* params, uint32_t corr) {
  CUfunction f = nullptr;
  uint64_t threads = 0, dsmem = 0;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      auto* p = (const cuLaunchKernel_params*)params;
      f = p->f;
      threads = (uint64_t)p->blockDimX * p->blockDimY * p->blockDimZ;
      dsmem = p->sharedMemBytes;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
      auto* p = (const cuLaunchCooperativeKernel_params*)params;
      f = p->f;
      threads = (uint64_t)p->blockDimX * p->blockDimY * p->blockDimZ;
      dsmem = p->sharedMemBytes;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      auto* p = (const cuLaunchKernelEx_params*)params;
      if (p->config == nullptr) return;
      f = p->f;
      threads = (uint64_t)p->config->blockDimX * p->config->blockDimY * p->config->blockDimZ;
      dsmem = p->config->sharedMemBytes;
      break;
    }
    default:
      return;
  }
  if (f == nullptr || threads == 0 || threads > 0x7FFFFFFF) return;
  if (p_occupancy == nullptr) {
    p_occupancy = (OccupancyFn)driver_sym("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    p_func_attr = (FuncGetAttributeFn)driver_sym("cuFuncGetAttribute");
    p_kernel_attr = (KernelGetAttributeFn)driver_sym("cuKernelGetAttribute");
    resolve_driver();
  }
  std::lock_guard<std::mutex> g(g_occ_mu);
  CallAttr a;
  auto key = std::make_tuple(f, threads, dsmem);
  auto it = g_occ_cache.find(key);
  if (it != g_occ_cache.end()) {
    a.occ = it->second;
  } else {
    int n = 0;
    if (p_occupancy && p_occupancy(&n, f, (int)threads, (size_t)dsmem) == CUDA_SUCCESS) a.occ = n;
    g_occ_cache[key] = a.occ;
  }
  auto rt = g_regs_cache.find(f);
  if (rt != g_regs_cache.end()) {
    a.regs = rt->second;
  } else {
    int n = 0;
    CUdevice dev = 0;
    if (p_func_attr && p_func_attr(&n, CU_FUNC_ATTRIBUTE_NUM_REGS, f) == CUDA_SUCCESS) a.regs = n;
    else if (p_kernel_attr && p_ctx_get_device && p_ctx_get_device(&dev) == CUDA_SUCCESS &&
             p_kernel_attr(&n, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUkernel)f, dev) == CUDA_SUCCESS)
      a.regs = n;
    g_regs_cache[f] = a.regs;
  }
  if (g_occ_by_corr.size() > (1u << 20)) g_occ_by_corr.clear();  // ids no record claimed
  g_occ_by_corr[corr] = a;
  if (t_outer_corr != 0) g_occ_by_corr[t_outer_corr] = a;
}

// Starts the driver's counters before anything can migrate: at the context's creation, the
// first managed allocation's return and the first launch (a module's __managed__ variables
// need no allocation call). Until the CUDA driver has set up its VA space it fails, and the
// next of these tries again.
void start_driver_counters() {
  static std::atomic<bool> settled{false};  // driver_counters_start locks; this only skips it
  if (g_driver_counters && !settled.load(std::memory_order_relaxed) && driver_counters_start()) settled = true;
}

void on_launch_enter(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  if (g_balloon) balloon_before_gpu_use();  // at every depth: a runtime launch may create its context
  start_driver_counters();
  if (t_launch_depth == 0) t_outer_corr = cb->correlationId;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) note_occupancy(cbid, cb->functionParams, cb->correlationId);
  if (t_launch_depth++ == 0) prefetch_managed(launch_stream(domain, cbid, cb->functionParams));
}
void on_launch_exit() {
  if (t_launch_depth > 0) --t_launch_depth;
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) start_driver_counters();
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED && g_um && !g_um_enabled) {
      // a real run also asks for the driver's thrashing/throttling records, and falls back
      // to the four basic counters where those are refused
      if ((!g_balloon || try_um(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE, "context_created", true) != CUPTI_SUCCESS) &&
          try_um(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE, "context_created") != CUPTI_SUCCESS)
        try_um(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES, "context_created");
    }
    return;
  }
  auto* cb = (const CUpti_CallbackData*)data;
  bool enter = cb->callbackSite == CUPTI_API_ENTER;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
        if (enter && g_balloon) balloon_before_gpu_use();  // before any managed data exists
        if (!enter && *(const CUresult*)cb->functionReturnValue == CUDA_SUCCESS) {
          start_driver_counters();
          auto* p = (const cuMemAllocManaged_params*)cb->functionParams;
          std::lock_guard<std::mutex> g(g_mu);
          g_managed[(uint64_t)*p->dptr] = (uint64_t)p->bytesize;
          g_managed_live += (uint64_t)p->bytesize;
          g_managed_peak = std::max(g_managed_peak, g_managed_live);
        }
        return;
      case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        if (enter) {
          auto* p = (const cuMemFree_v2_params*)cb->functionParams;
          std::lock_guard<std::mutex> g(g_mu);
          auto it = g_managed.find((uint64_t)p->dptr);
          if (it != g_managed.end()) {
            g_managed_live -= it->second;
            g_managed.erase(it);
          }
        }
        return;
      default:  // one of the launch calls
        enter ? on_launch_enter(domain, cbid, cb) : on_launch_exit();
        return;
    }
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) enter ? on_launch_enter(domain, cbid, cb) : on_launch_exit();
}

void end_line(const char* how) {
  writer().line(std::string("{\"t\":\"end\",\"how\":\"") + how + "\",\"kernels\":" + std::to_string(g_kernels) +
                ",\"prefetches\":" + std::to_string(g_prefetches) + ",\"prefetch_errors\":" + std::to_string(g_prefetch_errors) +
                ",\"prefetch_skipped_capture\":" + std::to_string(g_prefetch_skipped_capture) + ",\"um_records\":" + std::to_string(g_um_records) +
                ",\"dropped_records\":" + std::to_string(g_dropped_records) +
                ",\"managed_peak\":" + std::to_string(g_managed_peak) + balloon_end_fields() +
                (g_driver_counters ? driver_counters_fields() : std::string()) + ",\"t_ns\":" + std::to_string(now_ns()) + "}");
}

void at_exit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  end_line("exit");
}

// Watchdog of a real run (balloon.cpp): keep what was measured, then the process exits 124.
void at_timeout() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  end_line("timeout");
}

void need(CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) fatal("%s failed: %s (%d)", what, cstr(r), (int)r);
}

}  // namespace

int timing_pass_init() {
  g_prefetch = env_flag("UVMTRACE_PREFETCH_MANAGED", true);
  g_um = env_flag("UVMTRACE_UM_COUNTERS", false);
  g_um_binary = env_flag("UVMTRACE_UM_BINARY", false);
  g_balloon = balloon_init(at_timeout);
  // off by default in plain timing runs: the driver's tools callbacks cost it time in every
  // fault service (docs/groundtruth.md, "The counters' cost")
  g_driver_counters = env_flag("UVMTRACE_DRIVER_COUNTERS", g_um);
  writer().line("{\"t\":\"meta\",\"pass\":\"timing\",\"version\":" + json_str(kVersion) + ",\"prefetch_managed\":" +
                (g_prefetch ? "true" : "false") + ",\"t_ns\":" + std::to_string(now_ns()) + "}");
  if (g_um) {
    if (try_um(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE, "init") != CUPTI_SUCCESS)
      try_um(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES, "init");
  }
  need(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  need(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityEnable(CONCURRENT_KERNEL)");
  CUpti_SubscriberHandle sub;
  CUptiResult r = cuptiSubscribe(&sub, callback, nullptr);
  if (r != CUPTI_SUCCESS) fatal("cuptiSubscribe failed: %s (%d); is another CUPTI client (a profiler) attached?", cstr(r), (int)r);
  const CUpti_CallbackId drv[] = {
      CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};
  for (auto id : drv) need(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id), "cuptiEnableCallback(driver)");
  const CUpti_CallbackId rt[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000};
  for (auto id : rt) need(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id), "cuptiEnableCallback(runtime)");
  if (g_um || g_driver_counters)
    need(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED), "cuptiEnableCallback(resource)");
  atexit(at_exit);
  return 0;
}

}  // namespace uvmt
