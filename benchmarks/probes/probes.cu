// Probes of what the UVM driver does with host-written data, partial 2 MiB blocks, small
// allocations and CPU re-touches (docs/model.md, "What the driver does, and the probe that
// shows it"; benchmarks/probes/README.md). One managed-memory program with modes; each mode
// is a few simple kernels, each timed on its own, so that per-kernel times and per-kernel
// CUPTI counters (`uvmsim run`) separate the phases.
//
//   uvm_probes MODE [--mib N] [--iters K] [--init host|gpu] [--extra-kib K] [--count N]
//              [--kib K] [--sleep-ms MS] [--touch read|write] [--stride-kib K] [--footprint]
//
// --footprint prints the mode's managed bytes and exits without touching the GPU (the
// runner gives it to `uvmsim run --footprint`). Otherwise the program prints `PROBE {json}`
// lines on stdout:
//   alloc   every managed allocation: group, base, size
//   maps    the /dev/nvidia-uvm mappings (the driver's managed VA ranges, whose 2 MiB-aligned
//           windows are its VA blocks) that hold the allocations: count, sizes, alignment
//   attr    the range attributes the runtime reports for each group (read-mostly, preferred
//           location, accessed-by): advice set behind the program's back would show here
//   phase   after each kernel or host step: its cudaEvent time, and per group the pages the
//           CPU page table maps (/proc/self/pagemap present bit). The driver maps a managed
//           page on the CPU only while its data is on the host and unmaps it when a GPU takes
//           the page, so a page still mapped after a GPU pass was read in place, not moved.
//
// Modes (N = --mib, default 256; every read mode makes --iters passes, default 2):
//   host_read_stream  CPU writes A (N MiB), then grid-stride reads of A
//   host_read_rows    CPU writes matrix A, then y = A x with one thread per row walking its
//                     columns (every 2 MiB block live at once)
//   host_read_cols    CPU writes matrix A, then the transposed product (a warp reads a
//                     contiguous column segment: a window sliding through A)
//   host_rw           CPU writes A, then grid-stride a[i] += 1 (host data written by the GPU)
//   host_firstread    CPU first touches A by reading every page, then GPU reads
//   gpu_read          GPU writes A (zero-filled pages), then GPU reads
//   memset_read       cudaMemset(A), then GPU reads
//   memcpy_read       cudaMemcpy from a malloc'ed host buffer into A, then GPU reads
//   dtod_read         A initialised per --init (default gpu), then a device-to-device
//                     cudaMemcpy of A into B (as large), then GPU reads of B: whether the
//                     copy engine's faults leave B resident for the reads
//   host_read_drain   as host_read_stream, with --sleep-ms (default 2000) between the CPU
//                     writes and the first kernel (lets a profiler drain its event queue)
//   flood_gpu_read    GPU writes A; CPU writes B (as large, never on the GPU); GPU reads A
//   partial           three arrays: two of --mib (default 64) MiB + --extra-kib (default 16)
//                     KiB and one of --mib MiB, initialised per --init (default host), then
//                     --iters (default 2) time steps of three kernels each
//   small_allocs      --count (default 1000) allocations of --kib (default 256) KiB each,
//                     initialised per --init (default gpu), then --iters passes reading them
//   cpu_retouch       GPU writes A; then --iters (default 3) rounds of: the CPU reads or
//                     writes (--touch) one word every --stride-kib (default 64) KiB of A,
//                     then a GPU a[i] += 1 pass
//   evict_order       GPU writes the first 64 KiB of blocks 0..Q-1 (Q = 0.4 * blocks), one
//                     kernel per block in order; then the rest of block 0; then blocks Q..end
//                     whole (past capacity at factor > 1); then reads block 0 and block 1.
//                     First-arrival order evicts block 0 first; order by last residency
//                     change keeps it until after blocks 1..Q-1
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

static const size_t KiB = 1024, MiB = 1024 * KiB, PAGE = 4096, BLOCK = 2 * MiB;

// ------------------------------------------------------------------------------ kernels
__global__ void k_fill(float* a, size_t n, float v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    a[i] = v + (float)(i & 1023);
}
__global__ void k_read(const float* a, size_t n, float* sink) {
  float s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) s += a[i];
  if (s == -1.f) sink[0] = s;  // never true: keeps the loads
}
__global__ void k_rw(float* a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) a[i] += 1.0f;
}
__global__ void k_rows(const float* A, int rows, int cols, float* y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* row = A + (size_t)r * cols;
  float s = 0;
  for (int c = 0; c < cols; ++c) s += row[c];
  y[r] = s;
}
__global__ void k_cols(const float* A, int rows, int cols, float* y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0;
  for (int c = 0; c < cols; ++c) s += A[(size_t)c * rows + r];
  y[r] = s;
}
// dst[i] = 0.5 dst[i] + src[i mod nsrc]: one time step's update of one array from another
__global__ void k_step(float* dst, size_t ndst, const float* src, size_t nsrc) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < ndst; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = 0.5f * dst[i] + src[i % nsrc];
}
// small_allocs: the allocations' pointers live in constant memory, so that the kernels touch
// no memory besides the allocations (a device-memory table would be one more block in a trace)
static const int kMaxAllocs = 8192;
__constant__ float* c_ptrs[kMaxAllocs];
// one allocation per blockIdx.y
__global__ void k_list_fill(size_t n) {
  float* a = c_ptrs[blockIdx.y];
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) a[i] = (float)(i & 1023);
}
__global__ void k_list_read(size_t n, float* sink) {
  const float* a = c_ptrs[blockIdx.y];
  float s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) s += a[i];
  if (s == -1.f) sink[0] = s;
}
// evict_order: distinct names so that per-kernel counters name the phase
#define EV_WRITE(name) \
  __global__ void name(float* a, size_t n) { \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) a[i] = 1.0f; }
#define EV_READ(name) \
  __global__ void name(const float* a, size_t n, float* sink) { \
    float s = 0; \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) s += a[i]; \
    if (s == -1.f) sink[0] = s; }
EV_WRITE(k_ev_head)
EV_WRITE(k_ev_rest)
EV_WRITE(k_ev_fill)
EV_READ(k_ev_probe_first)
EV_READ(k_ev_probe_second)

// ------------------------------------------------------------------------------ options
struct Opt {
  std::string mode;
  size_t mib = 0;  // 0: the mode's default
  int iters = 0;
  int init_host = -1;  // -1: the mode's default
  size_t extra_kib = 16, kib = 256, stride_kib = 64;
  int count = 1000, sleep_ms = 2000;
  bool touch_write = false, footprint = false;
};

struct Alloc {
  std::string group;
  size_t bytes;
  char* p = nullptr;
};

// The mode's managed allocations, in allocation order (also what --footprint adds up).
static std::vector<Alloc> plan(const Opt& o) {
  std::vector<Alloc> v;
  size_t mb = o.mib ? o.mib : 256;
  const std::string& m = o.mode;
  if (m == "partial") {
    size_t each = (o.mib ? o.mib : 64) * MiB;
    v.push_back({"a", each + o.extra_kib * KiB});
    v.push_back({"b", each + o.extra_kib * KiB});
    v.push_back({"c", each});
  } else if (m == "small_allocs") {
    for (int i = 0; i < o.count; ++i) v.push_back({"small", o.kib * KiB});
  } else if (m == "flood_gpu_read" || m == "dtod_read") {
    v.push_back({"A", mb * MiB});
    v.push_back({"B", mb * MiB});
  } else if (m == "host_read_rows" || m == "host_read_cols") {
    v.push_back({"A", mb * MiB});
    v.push_back({"xy", 2 * MiB});  // the result vector
  } else {
    v.push_back({"A", mb * MiB});
  }
  return v;
}

// ------------------------------------------------------------------------------ reporting
static std::vector<Alloc> g_allocs;
static float* g_sink = nullptr;
static int g_pagemap = -1;

// pages of [p, p + bytes) that the CPU page table maps (present bit of /proc/self/pagemap)
static size_t cpu_mapped_pages(const char* p, size_t bytes) {
  if (g_pagemap < 0) return (size_t)-1;
  uintptr_t first = (uintptr_t)p / PAGE, n = (bytes + PAGE - 1) / PAGE, present = 0;
  std::vector<uint64_t> buf(4096);
  for (uintptr_t done = 0; done < n;) {
    size_t k = std::min<uintptr_t>(buf.size(), n - done);
    ssize_t got = pread(g_pagemap, buf.data(), k * 8, (off_t)((first + done) * 8));
    if (got <= 0) return (size_t)-1;
    for (size_t i = 0; i < (size_t)got / 8; ++i) present += (buf[i] >> 63) & 1;
    done += (size_t)got / 8;
  }
  return present;
}

// one `phase` line: the step's time and, per group, the pages still mapped on the CPU
static void phase(const char* name, double ms) {
  std::map<std::string, std::pair<size_t, size_t>> g;  // group -> (mapped, pages)
  for (auto& a : g_allocs) {
    auto& e = g[a.group];
    size_t m = cpu_mapped_pages(a.p, a.bytes);
    e.first = (m == (size_t)-1 || e.first == (size_t)-1) ? (size_t)-1 : e.first + m;
    e.second += (a.bytes + PAGE - 1) / PAGE;
  }
  printf("PROBE {\"t\":\"phase\",\"phase\":\"%s\",\"ms\":%.4f,\"cpu_mapped\":{", name, ms);
  bool first = true;
  for (auto& kv : g) {
    printf("%s\"%s\":[%lld,%zu]", first ? "" : ",", kv.first.c_str(),
           kv.second.first == (size_t)-1 ? -1LL : (long long)kv.second.first, kv.second.second);
    first = false;
  }
  printf("}}\n");
  fflush(stdout);
}

// The /dev/nvidia-uvm mappings that hold each group's allocations.
static void report_maps() {
  struct R { uintptr_t lo, hi; };
  std::vector<R> uvm;
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    if (!strstr(line, "nvidia-uvm")) continue;
    unsigned long lo = 0, hi = 0;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) uvm.push_back({lo, hi});
  }
  if (f) fclose(f);
  std::map<std::string, std::map<uintptr_t, uintptr_t>> held;  // group -> ranges holding it
  std::map<std::string, size_t> outside;
  for (auto& a : g_allocs) {
    bool found = false;
    for (auto& r : uvm)
      if ((uintptr_t)a.p >= r.lo && (uintptr_t)a.p < r.hi) {
        held[a.group][r.lo] = r.hi;
        found = true;
      }
    if (!found) ++outside[a.group];
  }
  printf("PROBE {\"t\":\"maps\",\"uvm_ranges\":%zu,\"groups\":{", uvm.size());
  bool first = true;
  for (auto& kv : held) {
    size_t bytes = 0, aligned = 0;
    for (auto& r : kv.second) {
      bytes += r.second - r.first;
      aligned += (r.first % BLOCK == 0 && r.second % BLOCK == 0);
    }
    printf("%s\"%s\":{\"ranges\":%zu,\"range_bytes\":%zu,\"ranges_2m_aligned\":%zu,\"first\":[", first ? "" : ",",
           kv.first.c_str(), kv.second.size(), bytes, aligned);
    int k = 0;
    for (auto& r : kv.second) {
      if (k++ == 4) break;
      printf("%s[%lu,%lu]", k > 1 ? "," : "", (unsigned long)r.first, (unsigned long)(r.second - r.first));
    }
    printf("]}");
    first = false;
  }
  printf("},\"allocs_outside_uvm_maps\":{");
  first = true;
  for (auto& kv : outside) {
    printf("%s\"%s\":%zu", first ? "" : ",", kv.first.c_str(), kv.second);
    first = false;
  }
  printf("}}\n");
}

static void report_attrs() {
  std::map<std::string, bool> done;
  for (auto& a : g_allocs) {
    if (done[a.group]) continue;
    done[a.group] = true;
    int rm = -9, ptype = -9, pid = -9, by[4] = {-9, -9, -9, -9};
    cudaMemRangeGetAttribute(&rm, sizeof rm, cudaMemRangeAttributeReadMostly, a.p, a.bytes);
    cudaMemRangeGetAttribute(&ptype, sizeof ptype, cudaMemRangeAttributePreferredLocationType, a.p, a.bytes);
    cudaMemRangeGetAttribute(&pid, sizeof pid, cudaMemRangeAttributePreferredLocationId, a.p, a.bytes);
    cudaMemRangeGetAttribute(by, sizeof by, cudaMemRangeAttributeAccessedBy, a.p, a.bytes);
    cudaGetLastError();
    printf("PROBE {\"t\":\"attr\",\"group\":\"%s\",\"read_mostly\":%d,\"preferred_type\":%d,\"preferred_id\":%d,"
           "\"accessed_by\":[%d,%d,%d,%d]}\n", a.group.c_str(), rm, ptype, pid, by[0], by[1], by[2], by[3]);
  }
}

// ------------------------------------------------------------------------------ steps
struct Timer {
  cudaEvent_t a, b;
  Timer() { CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); }
  void start() { CK(cudaEventRecord(a, 0)); }
  double stop_ms() {
    CK(cudaGetLastError());
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  }
};
static Timer* g_t = nullptr;
static double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
#define GPU_STEP(name, launch)         \
  do {                                 \
    g_t->start();                      \
    launch;                            \
    phase(name, g_t->stop_ms());       \
  } while (0)
#define HOST_STEP(name, body)          \
  do {                                 \
    double t0_ = now_ms();             \
    body;                              \
    phase(name, now_ms() - t0_);       \
  } while (0)

static size_t nfl(const Alloc& a) { return a.bytes / sizeof(float); }
static void host_write(Alloc& a, float v) {
  float* f = (float*)a.p;
  for (size_t i = 0, n = nfl(a); i < n; ++i) f[i] = v + (float)(i & 1023);
}
static double host_read_pages(const Alloc& a) {  // one read per page: first touch by reading
  volatile float s = 0;
  for (size_t off = 0; off < a.bytes; off += PAGE) s = s + *(const float*)(a.p + off);
  return s;
}
static void gpu_fill(const char* name, Alloc& a) { GPU_STEP(name, (k_fill<<<1024, 256>>>((float*)a.p, nfl(a), 1.0f))); }
static void gpu_reads(Alloc& a, int iters) {
  for (int k = 0; k < iters; ++k) GPU_STEP("k_read", (k_read<<<1024, 256>>>((const float*)a.p, nfl(a), g_sink)));
}

static int run(const Opt& o) {
  const std::string& m = o.mode;
  int iters = o.iters ? o.iters : (m == "cpu_retouch" ? 3 : 2);
  for (auto& a : g_allocs) {
    CK(cudaMallocManaged((void**)&a.p, a.bytes));
    printf("PROBE {\"t\":\"alloc\",\"group\":\"%s\",\"base\":%lu,\"size\":%zu}\n", a.group.c_str(), (unsigned long)a.p, a.bytes);
  }
  report_maps();
  report_attrs();
  Alloc& A = g_allocs[0];
  if (m == "host_read_stream" || m == "host_read_drain" || m == "host_rw") {
    HOST_STEP("host_write", host_write(A, 1.0f));
    if (m == "host_read_drain") HOST_STEP("sleep", usleep(o.sleep_ms * 1000));
    if (m == "host_rw") {
      for (int k = 0; k < iters; ++k) GPU_STEP("k_rw", (k_rw<<<1024, 256>>>((float*)A.p, nfl(A))));
    } else {
      gpu_reads(A, iters);
    }
  } else if (m == "host_read_rows" || m == "host_read_cols") {
    // A is rows x cols with rows = 2 cols, cols a multiple of 256 (as the validation's mv_row)
    size_t cells = A.bytes / sizeof(float);
    int cols = 256;
    while ((size_t)(cols + 256) * (cols + 256) * 2 <= cells) cols += 256;
    int rows = 2 * cols;
    HOST_STEP("host_write", host_write(A, 1.0f));
    float* y = (float*)g_allocs[1].p;
    for (int k = 0; k < iters; ++k) {
      if (m == "host_read_rows") GPU_STEP("k_rows", (k_rows<<<(rows + 127) / 128, 128>>>((const float*)A.p, rows, cols, y)));
      else GPU_STEP("k_cols", (k_cols<<<(rows + 127) / 128, 128>>>((const float*)A.p, rows, cols, y)));
    }
  } else if (m == "host_firstread") {
    HOST_STEP("host_firstread", host_read_pages(A));
    gpu_reads(A, iters);
  } else if (m == "gpu_read") {
    gpu_fill("k_fill", A);
    gpu_reads(A, iters);
  } else if (m == "memset_read") {
    GPU_STEP("memset", CK(cudaMemset(A.p, 0, A.bytes)));
    gpu_reads(A, iters);
  } else if (m == "memcpy_read") {
    std::vector<float> h(nfl(A), 1.0f);
    GPU_STEP("memcpy", CK(cudaMemcpy(A.p, h.data(), A.bytes, cudaMemcpyHostToDevice)));
    gpu_reads(A, iters);
  } else if (m == "dtod_read") {
    Alloc& B = g_allocs[1];
    if (o.init_host == 1) HOST_STEP("host_write", host_write(A, 1.0f));
    else gpu_fill("k_fill", A);
    GPU_STEP("memcpy_dtod", CK(cudaMemcpy(B.p, A.p, B.bytes, cudaMemcpyDeviceToDevice)));
    gpu_reads(B, iters);
  } else if (m == "flood_gpu_read") {
    gpu_fill("k_fill", A);
    HOST_STEP("host_write_B", host_write(g_allocs[1], 2.0f));
    gpu_reads(A, iters);
  } else if (m == "partial") {
    bool host = o.init_host != 0;
    for (auto& a : g_allocs) {
      if (host) HOST_STEP("host_write", host_write(a, 1.0f));
      else gpu_fill("k_fill", a);
    }
    Alloc &a = g_allocs[0], &b = g_allocs[1], &c = g_allocs[2];
    for (int k = 0; k < iters; ++k) {
      GPU_STEP("k_step_a", (k_step<<<1024, 256>>>((float*)a.p, nfl(a), (const float*)b.p, nfl(b))));
      GPU_STEP("k_step_b", (k_step<<<1024, 256>>>((float*)b.p, nfl(b), (const float*)c.p, nfl(c))));
      GPU_STEP("k_step_c", (k_step<<<1024, 256>>>((float*)c.p, nfl(c), (const float*)a.p, nfl(a))));
    }
  } else if (m == "small_allocs") {
    std::vector<float*> ptrs;
    for (auto& a : g_allocs) ptrs.push_back((float*)a.p);
    CK(cudaMemcpyToSymbol(c_ptrs, ptrs.data(), ptrs.size() * sizeof(float*)));
    size_t n = o.kib * KiB / sizeof(float);
    dim3 grid(std::max<size_t>(1, std::min<size_t>(64, n / 4096)), (unsigned)ptrs.size());
    if (o.init_host == 1) {
      HOST_STEP("host_write", for (auto& a : g_allocs) host_write(a, 1.0f));
    } else {
      GPU_STEP("k_list_fill", (k_list_fill<<<grid, 256>>>(n)));
    }
    for (int k = 0; k < iters; ++k) GPU_STEP("k_list_read", (k_list_read<<<grid, 256>>>(n, g_sink)));
  } else if (m == "cpu_retouch") {
    gpu_fill("k_fill", A);
    size_t stride = o.stride_kib * KiB;
    for (int k = 0; k < iters; ++k) {
      if (o.touch_write) {
        HOST_STEP("host_touch_write", for (size_t off = 0; off < A.bytes; off += stride) *(float*)(A.p + off) += 1.0f);
      } else {
        HOST_STEP("host_touch_read", { volatile float s = 0; for (size_t off = 0; off < A.bytes; off += stride) s = s + *(float*)(A.p + off); });
      }
      GPU_STEP("k_rw", (k_rw<<<1024, 256>>>((float*)A.p, nfl(A))));
    }
  } else if (m == "evict_order") {
    uintptr_t base = ((uintptr_t)A.p + BLOCK - 1) & ~(uintptr_t)(BLOCK - 1);
    int nblk = (int)(((uintptr_t)A.p + A.bytes - base) / BLOCK), q = std::max(2, (int)(0.4 * nblk));
    auto blk = [&](int b) { return (float*)(base + (size_t)b * BLOCK); };
    const size_t per = BLOCK / sizeof(float), head = 64 * KiB / sizeof(float);
    printf("PROBE {\"t\":\"evict_order\",\"blocks\":%d,\"q\":%d,\"block0\":%lu}\n", nblk, q, (unsigned long)base);
    for (int b = 0; b < q; ++b) GPU_STEP("k_ev_head", (k_ev_head<<<16, 256>>>(blk(b), head)));
    GPU_STEP("k_ev_rest", (k_ev_rest<<<64, 256>>>(blk(0) + head, per - head)));
    for (int b = q; b < nblk; ++b) GPU_STEP("k_ev_fill", (k_ev_fill<<<64, 256>>>(blk(b), per)));
    GPU_STEP("k_ev_probe_first", (k_ev_probe_first<<<64, 256>>>(blk(0), per, g_sink)));
    GPU_STEP("k_ev_probe_second", (k_ev_probe_second<<<64, 256>>>(blk(1), per, g_sink)));
  }
  CK(cudaDeviceSynchronize());
  for (auto& a : g_allocs) CK(cudaFree(a.p));
  printf("PROBE {\"t\":\"done\",\"mode\":\"%s\"}\n", m.c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODE [--mib N] [--iters K] [--init host|gpu] [--extra-kib K] [--count N] [--kib K] "
                    "[--sleep-ms MS] [--touch read|write] [--stride-kib K] [--footprint]\n", argv[0]);
    return 2;
  }
  Opt o;
  o.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto num = [&](const char* what) -> long long {
      if (i + 1 >= argc) { fprintf(stderr, "%s needs a value\n", what); exit(2); }
      char* end = nullptr;
      long long v = strtoll(argv[++i], &end, 10);
      if (*end || v < 0) { fprintf(stderr, "%s %s: expected a non-negative integer\n", what, argv[i]); exit(2); }
      return v;
    };
    if (a == "--mib") o.mib = num("--mib");
    else if (a == "--iters") o.iters = (int)num("--iters");
    else if (a == "--extra-kib") o.extra_kib = num("--extra-kib");
    else if (a == "--count") o.count = (int)num("--count");
    else if (a == "--kib") o.kib = num("--kib");
    else if (a == "--stride-kib") o.stride_kib = num("--stride-kib");
    else if (a == "--sleep-ms") o.sleep_ms = (int)num("--sleep-ms");
    else if (a == "--footprint") o.footprint = true;
    else if ((a == "--init" || a == "--touch") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--init" && (v == "host" || v == "gpu")) o.init_host = v == "host";
      else if (a == "--touch" && (v == "read" || v == "write")) o.touch_write = v == "write";
      else { fprintf(stderr, "%s %s: unexpected value\n", a.c_str(), v.c_str()); return 2; }
    } else {
      fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if ((o.mib && (o.mib < 4 || o.mib > 8192)) || o.count < 1 || o.count > kMaxAllocs || o.kib < 4 || o.stride_kib < 4) {
    fprintf(stderr, "bad sizes: --mib 4..8192, --count 1..8192, --kib and --stride-kib >= 4\n");
    return 2;
  }
  static const char* kModes[] = {"host_read_stream", "host_read_rows", "host_read_cols", "host_rw", "host_firstread",
                                 "gpu_read", "memset_read", "memcpy_read", "dtod_read", "host_read_drain", "flood_gpu_read",
                                 "partial", "small_allocs", "cpu_retouch", "evict_order"};
  bool known = false;
  for (const char* k : kModes) known |= o.mode == k;
  if (!known) {
    fprintf(stderr, "unknown mode %s\n", o.mode.c_str());
    return 2;
  }
  g_allocs = plan(o);
  if (o.footprint) {
    size_t s = 0;
    for (auto& a : g_allocs) s += a.bytes;
    printf("%zu\n", s);
    return 0;
  }
  g_pagemap = open("/proc/self/pagemap", O_RDONLY);
  CK(cudaMalloc(&g_sink, 4096));  // device memory: never written (the guarded store is never taken)
  Timer t;
  g_t = &t;
  return run(o);
}
