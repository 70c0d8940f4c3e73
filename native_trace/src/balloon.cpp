// The balloon of a real oversubscribed run (`uvmsim run`, docs/groundtruth.md): GPU memory taken
// with plain cuMemAlloc inside the program's own process so that only `free_target` bytes stay
// free for its managed memory. The UVM driver can evict managed pages but never a cuMemAlloc
// allocation, so the program's managed footprint then oversubscribes what is left.
//
// It is made once, at the first use of the GPU that could put managed data there (the first
// cuMemAllocManaged or kernel launch, both after the context exists): before the first managed
// allocation nothing managed can be resident. Safety: the program's managed footprint must fit
// in the free memory seen before the balloon (else the run is refused, exit 87), and the balloon
// never asks for more than cuMemGetInfo's free.
//
// Configured by UVMTRACE_BALLOON_FOOTPRINT (bytes) and UVMTRACE_BALLOON_FREE_TARGET (bytes);
// UVMTRACE_DEADLINE_S starts a watchdog when the balloon is made (or at start without one).
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <string>
#include <thread>

#include "common.h"

namespace {
constexpr uint64_t kGranule = 2ull << 20;  // cuMemAlloc's granularity on current GPUs

typedef CUresult (*MemGetInfoFn)(size_t*, size_t*);
typedef CUresult (*MemAllocFn)(CUdeviceptr*, size_t);
typedef CUresult (*CtxGetCurrentFn)(CUcontext*);

std::mutex g_mu;
bool g_configured = false;
std::atomic<bool> g_done{false};
uint64_t g_footprint = 0, g_free_target = 0;
double g_deadline_s = 0;
void (*g_on_timeout)() = nullptr;

void start_watchdog() {
  if (g_deadline_s <= 0 || g_on_timeout == nullptr) return;
  std::thread([] {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(g_deadline_s);
    while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // the handler flushes CUPTI; that can block while the program is inside a faulting
    // kernel (seen on the H200), and then the alarm's default action ends the process
    alarm(5);
    uvmt::writer().line("{\"t\":\"timeout\",\"deadline_s\":" + std::to_string(g_deadline_s) + ",\"t_ns\":" + std::to_string(uvmt::now_ns()) + "}");
    g_on_timeout();
    _exit(124);
  }).detach();
}

void make_balloon() {
  auto* alloc = (MemAllocFn)uvmt::driver_sym("cuMemAlloc_v2");
  auto* p_get_info = (MemGetInfoFn)uvmt::driver_sym("cuMemGetInfo_v2");
  if (alloc == nullptr || p_get_info == nullptr) uvmt::fatal("balloon: cuMemAlloc_v2/cuMemGetInfo_v2 not found in libcuda");
  size_t free0 = 0, total = 0;
  CUresult rc = p_get_info(&free0, &total);
  if (rc != CUDA_SUCCESS) uvmt::fatal("balloon: cuMemGetInfo failed (%d)", (int)rc);
  uint64_t want = 0;
  int plan = uvmt_balloon_plan(free0, g_footprint, g_free_target, &want);
  std::string head = "{\"t\":\"balloon\",\"free_before\":" + std::to_string(free0) + ",\"total\":" + std::to_string(total) +
                     ",\"footprint\":" + std::to_string(g_footprint) + ",\"free_target\":" + std::to_string(g_free_target);
  if (plan != 0) {
    uvmt::writer().line(head + ",\"status\":\"refused\",\"t_ns\":" + std::to_string(uvmt::now_ns()) + "}");
    uvmt::warn("refusing to run: the managed footprint (%llu bytes) exceeds the GPU's free memory (%llu bytes)",
               (unsigned long long)g_footprint, (unsigned long long)free0);
    _exit(87);
  }
  // Take `want`, then top up: the first allocation's own bookkeeping and rounding leave the
  // free memory a little off target. A failed request is retried in smaller pieces.
  uint64_t taken = 0, chunk = std::max<uint64_t>(want, kGranule);
  int allocs = 0, failures = 0;
  size_t free_now = free0;
  for (int round = 0; round < 6 && want >= kGranule; ++round) {
    uint64_t left = want;
    while (left >= kGranule) {
      uint64_t n = std::min(left, chunk) & ~(kGranule - 1);
      CUdeviceptr p = 0;
      if (alloc(&p, (size_t)n) == CUDA_SUCCESS) {
        taken += n;
        left -= n;
        ++allocs;
      } else {
        ++failures;
        if (chunk <= kGranule) break;
        chunk = std::max(kGranule, chunk / 2);
      }
    }
    if (p_get_info(&free_now, &total) != CUDA_SUCCESS) break;
    want = free_now > g_free_target ? (free_now - g_free_target) & ~(kGranule - 1) : 0;
  }
  uvmt::writer().line(head + ",\"status\":\"ok\",\"balloon\":" + std::to_string(taken) + ",\"allocs\":" + std::to_string(allocs) +
                      ",\"alloc_failures\":" + std::to_string(failures) + ",\"free_after\":" + std::to_string(free_now) +
                      ",\"t_ns\":" + std::to_string(uvmt::now_ns()) + "}");
}
}  // namespace

extern "C" int uvmt_balloon_plan(uint64_t free_bytes, uint64_t footprint, uint64_t free_target, uint64_t* balloon) {
  *balloon = 0;
  if (footprint > free_bytes) return 1;  // refuse: the managed data alone would not fit
  if (free_target >= free_bytes) return 0;
  *balloon = (free_bytes - free_target) & ~(kGranule - 1);  // never above free
  return 0;
}

namespace uvmt {

bool balloon_init(void (*on_timeout)()) {
  g_on_timeout = on_timeout;
  const char* fp = getenv("UVMTRACE_BALLOON_FOOTPRINT");
  const char* ft = getenv("UVMTRACE_BALLOON_FREE_TARGET");
  const char* dl = getenv("UVMTRACE_DEADLINE_S");
  if (dl && *dl) {
    char* end = nullptr;
    g_deadline_s = strtod(dl, &end);
    if (end == dl || *end != 0 || !(g_deadline_s > 0)) fatal("UVMTRACE_DEADLINE_S=%s is not a positive number", dl);
  }
  if ((fp && *fp) != (ft && *ft)) fatal("UVMTRACE_BALLOON_FOOTPRINT and UVMTRACE_BALLOON_FREE_TARGET must be set together");
  g_configured = fp && *fp;
  if (g_configured) {
    g_footprint = env_u64("UVMTRACE_BALLOON_FOOTPRINT", 0);
    g_free_target = env_u64("UVMTRACE_BALLOON_FREE_TARGET", 0);
  } else {
    start_watchdog();  // no balloon to wait for: the deadline runs from the start
  }
  return g_configured;
}

void balloon_before_gpu_use() {
  if (!g_configured || g_done.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> g(g_mu);
  if (g_done) return;
  auto* cur = (CtxGetCurrentFn)driver_sym("cuCtxGetCurrent");
  CUcontext ctx = nullptr;
  if (cur == nullptr || cur(&ctx) != CUDA_SUCCESS || ctx == nullptr) return;  // no context yet: next time
  make_balloon();
  g_done = true;
  start_watchdog();
}

std::string balloon_end_fields() {
  if (!g_configured) return "";
  std::string s = ",\"balloon_made\":" + std::string(g_done ? "true" : "false");
  // Free memory at exit: with the program's managed memory freed, what the balloon left free
  // minus this is what the context itself took after the balloon (module code, local memory).
  auto* cur = (CtxGetCurrentFn)driver_sym("cuCtxGetCurrent");
  auto* info = (MemGetInfoFn)driver_sym("cuMemGetInfo_v2");
  CUcontext ctx = nullptr;
  size_t f = 0, t = 0;
  if (g_done && cur && info && cur(&ctx) == CUDA_SUCCESS && ctx && info(&f, &t) == CUDA_SUCCESS)
    s += ",\"free_at_exit\":" + std::to_string(f);
  return s;
}

}  // namespace uvmt
