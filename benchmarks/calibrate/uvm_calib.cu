// uvm_calib: kernels over managed memory with known page patterns, for calibrating uvmsim's
// time layer (docs/calibration.md). Prints one JSON object per line on stdout.
//
//   uvm_calib [REPS]        (default 2)
//
// Memory: one managed buffer A of 1 GiB (host-populated, every page), one managed buffer Z of
// 256 MiB (never populated: zero-fill faults), one 64 MiB device buffer and one 64 MiB pinned
// host buffer. Never more managed memory than that (1.25 GiB): the card must have it free.
//
// Per (pattern, N, rep): A is prefetched back to the CPU (reset), then a kernel touching N
// pages of A (one 4-byte read per page, one thread per page) is timed with cudaEvents while it
// faults ("fault"), then launched again with its pages resident ("resident": compute time).
// Patterns: seq (pages 0..N-1), s64k (one page per 64 KiB), s2m (one page per 2 MiB), rand
// (N distinct pages from a bijective hash over A's 262,144 pages), zf (N sequential pages of a
// fresh part of Z, written: zero-fill faults, no transfer).
// Then: cudaMemcpy pinned->device and cudaMemPrefetchAsync of A to the GPU and back to the CPU
// for sizes 4 KiB .. 64 MiB, each timed with cudaEvents.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(2);                                                                              \
    }                                                                                       \
  } while (0)

static const size_t KiB = 1024, MiB = 1024 * KiB;
static const size_t PAGE = 4096;
static const size_t A_BYTES = 1024 * MiB;            // 262,144 pages
static const size_t A_PAGES = A_BYTES / PAGE;
static const size_t Z_BYTES = 256 * MiB;
static const size_t FPP = PAGE / sizeof(float);      // floats per page

enum { P_SEQ = 0, P_S64K = 1, P_S2M = 2, P_RAND = 3, P_ZF = 4 };
static const char* PNAME[] = {"seq", "s64k", "s2m", "rand", "zf"};

__device__ __forceinline__ size_t page_of(int mode, unsigned i, size_t start) {
  switch (mode) {
    case P_S64K: return start + (size_t)i * 16;
    case P_S2M: return start + (size_t)i * 512;
    case P_RAND: return ((size_t)i * 2654435761ull + 12345ull) & (A_PAGES - 1);  // odd * i: bijection
    default: return start + i;
  }
}

// reads one float per page; the store never happens (keeps the load alive, no other access)
__global__ void k_touch(const float* a, int mode, unsigned n, size_t start, float* sink) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = a[page_of(mode, i, start) * FPP];
  if (v == 1234.5f) sink[0] = v;
}
// writes one float per page of fresh memory: zero-fill faults
__global__ void k_write(float* z, unsigned n, size_t start) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[(start + i) * FPP] = 1.0f;
}

static int g_dev = 0;
static unsigned long g_launch = 0;  // kernel launch index (trace kernel order)

static void prefetch(void* p, size_t bytes, bool to_gpu, cudaStream_t s) {
#if CUDART_VERSION >= 13000
  cudaMemLocation loc{};
  loc.type = to_gpu ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = to_gpu ? g_dev : 0;
  CK(cudaMemPrefetchAsync(p, bytes, loc, 0, s));
#else
  CK(cudaMemPrefetchAsync(p, bytes, to_gpu ? g_dev : cudaCpuDeviceId, s));
#endif
}

struct Timer {
  cudaEvent_t a, b;
  Timer() { CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); }
  void start() { CK(cudaEventRecord(a, 0)); }
  double stop_ms() {
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  }
};

int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 2;
  CK(cudaSetDevice(g_dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, g_dev));
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  printf("{\"t\":\"info\",\"gpu\":\"%s\",\"cc\":\"%d.%d\",\"driver_api\":%d,\"runtime\":%d,"
         "\"free\":%zu,\"total\":%zu,\"pci_gen_note\":\"see nvidia-smi\"}\n",
         prop.name, prop.major, prop.minor, drv, rt, free_b, total_b);
  if (free_b < A_BYTES + Z_BYTES + 512 * MiB) {
    fprintf(stderr, "not enough free GPU memory (%zu)\n", free_b);
    return 3;
  }
  float *A = nullptr, *Z = nullptr, *D = nullptr, *H = nullptr, *sink = nullptr;
  CK(cudaMallocManaged(&A, A_BYTES));
  CK(cudaMallocManaged(&Z, Z_BYTES));
  CK(cudaMalloc(&D, 64 * MiB));
  CK(cudaMallocHost(&H, 64 * MiB));
  CK(cudaMalloc(&sink, 4096));  // never written (the guarded store is never taken)
  memset(H, 0, 64 * MiB);
  Timer tm;

  // warm-up launches (module load) on device memory: in the trace, never faulting
  k_touch<<<1, 32>>>(D, P_SEQ, 32, 0, sink); ++g_launch;
  k_write<<<1, 32>>>(D, 32, 0); ++g_launch;
  CK(cudaDeviceSynchronize());

  // populate A: the GPU zero-fills it (prefetch), back to the CPU, then the host writes it
  prefetch(A, A_BYTES, true, 0);
  prefetch(A, A_BYTES, false, 0);
  CK(cudaDeviceSynchronize());
  for (size_t i = 0; i < A_BYTES / sizeof(float); i += 1024) A[i] = 1.0f;

  struct Case { int mode; unsigned n; };
  std::vector<Case> cases;
  for (unsigned n : {16u, 64u, 256u, 1024u, 4096u, 16384u}) cases.push_back({P_SEQ, n});
  for (unsigned n : {16u, 64u, 256u, 1024u, 4096u, 16384u}) cases.push_back({P_S64K, n});
  for (unsigned n : {4u, 16u, 64u, 256u, 512u}) cases.push_back({P_S2M, n});
  for (unsigned n : {64u, 256u, 1024u, 4096u, 16384u}) cases.push_back({P_RAND, n});
  for (unsigned n : {256u, 4096u, 16384u}) cases.push_back({P_ZF, n});
  size_t zf_next = 0;  // next fresh page of Z

  for (int rep = 0; rep < reps; ++rep) {
    for (const Case& c : cases) {
      unsigned grid = (c.n + 255) / 256, block = c.n < 256 ? c.n : 256;
      size_t start = 0;
      if (c.mode == P_ZF) {
        start = zf_next;
        zf_next += c.n;
        if (zf_next * PAGE > Z_BYTES) { fprintf(stderr, "Z exhausted\n"); return 4; }
      } else {
        prefetch(A, A_BYTES, false, 0);  // reset: every page of A back on the CPU
        CK(cudaDeviceSynchronize());
      }
      double ms[2];
      unsigned long kid[2];
      for (int ph = 0; ph < 2; ++ph) {
        tm.start();
        if (c.mode == P_ZF) k_write<<<grid, block>>>(Z, c.n, start);
        else k_touch<<<grid, block>>>(A, c.mode, c.n, start, sink);
        CK(cudaGetLastError());
        ms[ph] = tm.stop_ms();
        kid[ph] = g_launch++;
      }
      printf("{\"t\":\"kern\",\"pattern\":\"%s\",\"n\":%u,\"rep\":%d,\"fault_ms\":%.6f,"
             "\"resident_ms\":%.6f,\"k_fault\":%lu,\"k_resident\":%lu}\n",
             PNAME[c.mode], c.n, rep, ms[0], ms[1], kid[0], kid[1]);
      fflush(stdout);
    }
  }

  // bandwidth: pinned cudaMemcpy HtoD, and managed prefetches to the GPU and back
  std::vector<size_t> sizes = {4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 2 * MiB,
                               4 * MiB, 16 * MiB, 64 * MiB};
  for (size_t s : sizes) {
    for (int r = 0; r < 5; ++r) {
      tm.start();
      CK(cudaMemcpyAsync(D, H, s, cudaMemcpyHostToDevice, 0));
      double ms = tm.stop_ms();
      printf("{\"t\":\"memcpy_htod\",\"bytes\":%zu,\"rep\":%d,\"ms\":%.6f}\n", s, r, ms);
    }
  }
  for (size_t s : sizes) {
    for (int r = 0; r < 3; ++r) {
      prefetch(A, A_BYTES, false, 0);
      CK(cudaDeviceSynchronize());
      tm.start();
      prefetch(A, s, true, 0);
      double up = tm.stop_ms();
      tm.start();
      prefetch(A, s, false, 0);
      double down = tm.stop_ms();
      printf("{\"t\":\"prefetch\",\"bytes\":%zu,\"rep\":%d,\"htod_ms\":%.6f,\"dtoh_ms\":%.6f}\n",
             s, r, up, down);
    }
  }
  CK(cudaDeviceSynchronize());
  printf("{\"t\":\"done\",\"launches\":%lu}\n", g_launch);
  CK(cudaFree(A));
  CK(cudaFree(Z));
  CK(cudaFree(D));
  CK(cudaFreeHost(H));
  CK(cudaFree(sink));
  return 0;
}
