// The UVM driver's own per-process counters: bytes migrated host to device and device to host,
// GPU and CPU page faults, summed by the driver for the program's VA space.
//
// Why: CUPTI's unified-memory records come through event queues that drop records when they
// are full, and in oversubscribed runs they lose up to all of a kernel's traffic
// (docs/model.md, "CUPTI's counters are lower bounds"). The driver also keeps counters that no
// queue stands between: a counters-only tracker on /dev/nvidia-uvm-tools gets a page of
// 64-bit counters that the driver adds to atomically as it migrates and services faults.
//
// The interface, from NVIDIA/open-gpu-kernel-modules 580 (kernel-open/nvidia-uvm; the ABI
// is the same from 580.65 through 580.142), without its headers:
// - uvm_ioctl.h: UVM_TOOLS_INIT_EVENT_TRACKER is request 56 and UVM_TOOLS_ENABLE_COUNTERS
//   60 (on Linux the request is the bare number); their parameter structs are below.
//   ioctl() returns 0 even when the driver refused: the answer is in rmStatus.
// - uvm_tools.c, create_event_tracker: queueBufferSize 0 makes a counters tracker; its
//   controlBuffer must be page-aligned, writable memory of this process (80 bytes are
//   pinned); uvmFd must be the process's VA-space fd, the /dev/nvidia-uvm fd that libcuda
//   initialised (its second, UVM_MM_INITIALIZE fd is refused with NV_ERR_ILLEGAL_ACTION).
//   allProcessors 1 counts every GPU and the CPU.
// - uvm_types.h, UvmCounterName: index 0 HtoD bytes, 1 DtoH bytes, 2 CPU page faults, 9 GPU
//   page faults (7 and 8, the prefetch bytes, are never added to on Linux). Counter i is the
//   i-th 64-bit word of the buffer and is added to only once enabled with bit (1 << i).
// - uvm_tools_record_migration counts every migration between the CPU and a GPU (faults,
//   prefetches, evictions), when its copy is pushed; not cudaMemcpy of device memory.
// Several trackers (CUPTI's among them) coexist on one VA space; each has its own buffer.
#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "common.h"

namespace uvmt {
namespace {

constexpr unsigned long kInitEventTracker = 56;
constexpr unsigned long kEnableCounters = 60;
constexpr uint64_t kHtoD = 0, kDtoH = 1, kCpuFaults = 2, kGpuFaults = 9;
constexpr uint64_t kMask = (1ull << kHtoD) | (1ull << kDtoH) | (1ull << kCpuFaults) | (1ull << kGpuFaults);

struct InitTrackerParams {  // UVM_TOOLS_INIT_EVENT_TRACKER_PARAMS: 56 bytes, 8-aligned
  uint64_t queue_buffer;
  uint64_t queue_buffer_size;
  uint64_t control_buffer;
  uint8_t processor[16];
  uint32_t all_processors;
  uint32_t uvm_fd;
  uint32_t rm_status;
  uint32_t pad;
};
static_assert(sizeof(InitTrackerParams) == 56, "UVM_TOOLS_INIT_EVENT_TRACKER_PARAMS");
static_assert(offsetof(InitTrackerParams, uvm_fd) == 44, "uvmFd at 44");
struct CountersParams {  // UVM_TOOLS_ENABLE_COUNTERS_PARAMS: 16 bytes
  uint64_t counter_type_flags;
  uint32_t rm_status;
  uint32_t pad;
};
static_assert(sizeof(CountersParams) == 16, "UVM_TOOLS_ENABLE_COUNTERS_PARAMS");

std::string hex(uint32_t v) {
  char b[16];
  snprintf(b, sizeof b, "0x%x", v);
  return b;
}

std::mutex g_mu;
bool g_on = false;          // counting
bool g_settled = false;     // counting, or no later attempt can succeed
int g_attempts = 0;
int g_tools_fd = -1;
uint64_t* g_buf = nullptr;  // the page the driver adds to
std::string g_status = "not started";

// The /dev/nvidia-uvm fds of this process (libcuda opens two: the VA space and its mm).
std::string try_uvm_fds() {
  std::string tried;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return std::string("cannot list /proc/self/fd: ") + strerror(errno);
  while (dirent* e = readdir(d)) {
    char path[300], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (strcmp(target, "/dev/nvidia-uvm") != 0) continue;
    InitTrackerParams p;
    memset(&p, 0, sizeof p);
    p.control_buffer = (uint64_t)(uintptr_t)g_buf;
    p.all_processors = 1;
    p.uvm_fd = (uint32_t)atoi(e->d_name);
    int rc = ioctl(g_tools_fd, kInitEventTracker, &p);
    if (rc == 0 && p.rm_status == 0) {
      closedir(d);
      return "";
    }
    tried += std::string(tried.empty() ? "" : ", ") + "fd " + e->d_name + ": " +
             (rc != 0 ? std::string("ioctl ") + strerror(errno) : "status " + hex(p.rm_status));
  }
  closedir(d);
  return tried.empty() ? "no /dev/nvidia-uvm fd open yet" : "refused (" + tried + ")";
}

}  // namespace

bool driver_counters_start() {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_settled) return true;
  // the VA space is set up by the first CUDA call that needs it; a program's first few
  // launches or allocations come after that, so a hundred tries are plenty and bound the
  // cost of a machine where it never works
  if (++g_attempts > 100) return g_settled = true;
  if (g_tools_fd < 0) {
    g_tools_fd = open("/dev/nvidia-uvm-tools", O_RDWR | O_CLOEXEC);
    if (g_tools_fd < 0) {
      g_status = std::string("cannot open /dev/nvidia-uvm-tools: ") + strerror(errno);
      return g_settled = true;
    }
    long page = sysconf(_SC_PAGESIZE);
    void* m = mmap(nullptr, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      g_status = std::string("mmap: ") + strerror(errno);
      close(g_tools_fd);
      g_tools_fd = -1;
      return g_settled = true;
    }
    g_buf = (uint64_t*)m;  // zeroed; the driver only adds
  }
  // a refused fd leaves the tools fd without a tracker: it can try again later, once the
  // CUDA driver has initialised its VA space
  std::string why = try_uvm_fds();
  if (!why.empty()) {
    g_status = why;
    return false;
  }
  CountersParams c;
  memset(&c, 0, sizeof c);
  c.counter_type_flags = kMask;
  int rc = ioctl(g_tools_fd, kEnableCounters, &c);
  if (rc != 0 || c.rm_status != 0) {
    g_status = rc != 0 ? std::string("enable: ioctl ") + strerror(errno) : "enable: status " + hex(c.rm_status);
    return g_settled = true;
  }
  g_on = g_settled = true;
  g_status = "ok";
  return true;
}

std::string driver_counters_fields() {
  std::lock_guard<std::mutex> g(g_mu);
  std::string s = ",\"driver_counters\":{\"status\":" + json_str(g_status);
  if (g_on) {
    auto at = [](uint64_t i) { return std::to_string(__atomic_load_n(&g_buf[i], __ATOMIC_RELAXED)); };
    s += ",\"htod_bytes\":" + at(kHtoD) + ",\"dtoh_bytes\":" + at(kDtoH) + ",\"cpu_faults\":" + at(kCpuFaults) +
         ",\"gpu_faults\":" + at(kGpuFaults);
  }
  return s + "}";
}

}  // namespace uvmt
