// Host-side helpers shared by both passes. This header includes neither cupti.h nor
// sanitizer.h: the two cannot share a translation unit (both define CUDA_MEMCPY2D_v1_st).
#pragma once
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace uvmt {

constexpr const char* kVersion = "0.1.0";

// Raw output of one pass of one process: <dir>/<pass>.<pid>.jsonl (one JSON object per line)
// and, for the page pass, <dir>/<pass>.<pid>.bin (uvmt_rec records) and, with streams,
// <dir>/<pass>.<pid>.streams.bin (stream block and row records, streams_host.h). Every line is
// handed to the kernel with write(2) at once, so a crash loses at most the line being built.
class RawWriter {
 public:
  bool open(const std::string& dir, const std::string& pass, bool with_bin);
  void line(const std::string& json);             // appends '\n'
  uint64_t append_bin(const void* data, size_t bytes);  // returns the offset written at
  uint64_t append_streams(const void* data, size_t bytes);  // the streams file (made on first use)
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  int bin_fd_ = -1;
  int streams_fd_ = -1;
  uint64_t bin_off_ = 0, streams_off_ = 0;
  std::string path_, stem_;
  std::mutex mu_;
};

RawWriter& writer();

std::string json_str(const std::string& s);        // quoted, escaped JSON string
std::string demangle(const char* name);             // as is when it is not a C++ mangled name
uint64_t now_ns();                                   // CLOCK_REALTIME
[[noreturn]] void fatal(const char* fmt, ...);
void warn(const char* fmt, ...);
bool env_flag(const char* name, bool dflt);
uint64_t env_u64(const char* name, uint64_t dflt);

// Dense ids for CUstream handles: the legacy default stream (nullptr) is 0, others are
// numbered in order of first sight. Thread-safe.
int64_t stream_id(const void* handle);

// A CUDA driver entry point. libcuda is usually dlopen'ed RTLD_LOCAL by the runtime, so
// RTLD_DEFAULT alone does not find it.
void* driver_sym(const char* name);

// Entry points of the passes (defined in pages_pass.cpp / timing_pass.cpp or their stubs).
int pages_pass_init();
int timing_pass_init();
bool pages_pass_available();

// The balloon of a real oversubscribed run (balloon.cpp). balloon_init reads its settings
// from the environment and returns whether a balloon is configured; `on_timeout` runs on the
// watchdog thread when UVMTRACE_DEADLINE_S passes, then the process exits with 124.
bool balloon_init(void (*on_timeout)());
void balloon_before_gpu_use();   // makes the balloon once a context is current (idempotent)
std::string balloon_end_fields();  // ",\"balloon_made\":..." for the end line

// The UVM driver's own per-process counters (driver_counters.cpp): HtoD and DtoH bytes, CPU and
// GPU page faults, which no event queue can drop. driver_counters_start returns true once
// settled (counting, or refused for good: the end line's status says which); false means
// the CUDA driver has not set up its VA space yet, and a later call tries again.
bool driver_counters_start();
std::string driver_counters_fields();  // ",\"driver_counters\":{\"status\":...}" for the end line

// One unified-memory counter record as the timing pass writes it to timing.<pid>.bin
// (uvmsim.groundtruth.UM_DTYPE).
struct UmRecord {
  uint32_t counter;  // CUpti_ActivityUnifiedMemoryCounterKind
  uint32_t flags;    // migration cause / access type, as CUPTI defines it per counter
  uint64_t value;
  uint64_t start;
  uint64_t end;
  uint64_t address;
  uint32_t src;
  uint32_t dst;
};
static_assert(sizeof(UmRecord) == 48, "UmRecord layout is read by Python");

}  // namespace uvmt

// Balloon size for `free_bytes` free, leaving `free_target` free (rounded down to 2 MiB, never
// above free); returns 1, with *balloon = 0, when `footprint` exceeds `free_bytes` (refused).
extern "C" __attribute__((visibility("default"))) int uvmt_balloon_plan(uint64_t free_bytes, uint64_t footprint, uint64_t free_target, uint64_t* balloon);
