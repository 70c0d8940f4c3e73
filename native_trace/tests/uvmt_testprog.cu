// CUDA program whose page sets are known exactly; tests/gpu/test_collector.py traces it and
// checks every kernel's pages, flags and counts. Buffers have distinct sizes so the test can
// find them in the trace's allocation table.
//
//   uvmt_testprog all     every scenario below, prints checksums
//   uvmt_testprog crash   one kernel, then abort()
//   uvmt_testprog exit3   one kernel, then exit status 3
//   uvmt_testprog host    managed memory written by the CPU between two kernels (the pages
//                         are listed in host_pages below; the test derives the expected
//                         host_access events from them)
//   uvmt_testprog retouch a kernel that stores once to each page, then one whose single block
//                         reads the same buffer in RETOUCH_PASSES passes (time slices)
//   uvmt_testprog blocks  per-thread-block streams and launch attributes (uvmtrace v1.2): a
//                         grid-stride fill whose blocks spread over a 1 MiB array, a kernel with
//                         static and dynamic shared memory (launched directly and from a graph),
//                         a 2-D grid whose block (x, y) writes page x + 4 y; prints each
//                         kernel's attributes as the runtime gives them (`attr` lines)
//
// Managed memory stays small (5 MiB): never ask a shared GPU for more than it has free.
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

__global__ void k_seq_write(float* a, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) a[i] = (float)(i % 1000);
}
__global__ void k_strided_read(const float* a, float* out, size_t m, size_t stride) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < m) out[i] = a[i * stride];
}
__global__ void k_random_read(const float* a, const unsigned* idx, float* out, size_t m) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < m) out[i] = a[idx[i]];
}
__global__ void k_rmw(float* a, size_t lo, size_t hi) {
  size_t i = lo + blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < hi) a[i] += 1.0f;
}
__global__ void k_atomics(unsigned* ctr, unsigned* flag, size_t m) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < m) {
    unsigned old = atomicAdd(&ctr[(i % 4) * 1024], 1u);
    if (old == 0xFFFFFFFFu) flag[0] = 1;  // never true; keeps the returning form of the atomic
  }
}
__global__ void k_fill(float* a, size_t n, float v) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) a[i] = v;
}
__global__ void k_scale(const float* src, float* dst, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) dst[i] = 2.0f * src[i];
}

static unsigned grid_for(size_t n) { return (unsigned)((n + 255) / 256); }

// one store per 4 KiB page: every page is touched exactly once
__global__ void k_page_once(float* a, size_t pages) {
  size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (p < pages) a[p * 1024] = (float)p;
}

// one block reads a[0, n) `passes` times over, so each page is read once per pass, the passes
// one after another in time
__global__ void k_repass(const float* a, float* out, size_t n, int passes) {
  float acc = 0.f;
  for (int r = 0; r < passes; ++r) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) acc += a[i];
    __syncthreads();
  }
  out[threadIdx.x] = acc;
}

#define RETOUCH_PASSES 4

// grid-stride fill: block b writes [(k grid + b) blockDim, +blockDim) floats at iteration k
__global__ void k_gstride(float* a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    a[i] = (float)(i & 1023);
}

// 2 KiB of static and DYN_SMEM bytes of dynamic shared memory, staged through both
#define DYN_SMEM 3072
__global__ void k_smem(const float* in, float* out, size_t n) {
  __shared__ float st[512];
  extern __shared__ float dyn[];
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  st[threadIdx.x % 512] = i < n ? in[i] : 0.f;
  dyn[threadIdx.x % (DYN_SMEM / 4)] = 2.f * st[threadIdx.x % 512];
  __syncthreads();
  if (i < n) out[i] = dyn[threadIdx.x % (DYN_SMEM / 4)] + st[(threadIdx.x + 1) % 512];
}

// a 2-D grid: block (x, y) writes page x + gridDim.x y of `a`
__global__ void k_grid2d(float* a) {
  size_t b = blockIdx.x + (size_t)gridDim.x * blockIdx.y;
  a[b * 1024 + threadIdx.x] = (float)b;
}

template <class K>
static void print_attr(const char* name, K kernel, int threads, size_t dyn) {
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, kernel));
  int occ = 0, sms = 0, dev = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, threads, dyn));
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  printf("attr %s regs %d smem_static %zu smem_dynamic %zu occupancy %d sm_count %d\n", name, fa.numRegs,
         fa.sharedSizeBytes, dyn, occ, sms);
}

static int run_blocks() {
  const int grid = 64, threads = 256, iters = 16;
  const size_t n = (size_t)grid * threads * iters;  // 1 MiB
  float *A, *S, *Q, *G2;
  CK(cudaMalloc(&A, n * 4));
  CK(cudaMalloc(&S, 64 * 1024 * 4 + 4096));  // 260 KiB each; A (1 MiB) and G2 (32 KiB) are found by size
  CK(cudaMalloc(&Q, 64 * 1024 * 4 + 4096));
  CK(cudaMalloc(&G2, 8 * 4096));
  k_gstride<<<grid, threads>>>(A, n);
  CK(cudaGetLastError());
  const size_t m = 64 * 1024;
  k_smem<<<(unsigned)(m / 128), 128, DYN_SMEM>>>(A, S, m);
  CK(cudaGetLastError());
  k_grid2d<<<dim3(4, 2), 256>>>(G2);
  CK(cudaGetLastError());
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  k_smem<<<(unsigned)(m / 128), 128, DYN_SMEM, st>>>(S, Q, m);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaStreamSynchronize(st));
  std::vector<float> h(m);
  CK(cudaMemcpy(h.data(), Q, m * 4, cudaMemcpyDeviceToHost));
  double sum = 0;
  for (float x : h) sum += x;
  printf("checksum blocks %.1f\n", sum);
  print_attr("k_gstride", k_gstride, threads, 0);
  print_attr("k_smem", k_smem, 128, DYN_SMEM);
  print_attr("k_grid2d", k_grid2d, 256, 0);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(st));
  for (void* p : {(void*)A, (void*)S, (void*)Q, (void*)G2}) CK(cudaFree(p));
  return 0;
}

// Pages of the 1 MiB managed buffer the host mode writes before the first kernel and before
// the second (plus page 250, only read before the second). Each list ends with -1. The driver
// moves 64 KiB blocks (16 pages) to the host on a CPU fault, and prefetches a block to the
// host when more than half of an aligned group of blocks has faulted; the lists touch at most
// half of every aligned group of 64 KiB blocks other than whole pairs, so what moves is
// exactly the blocks of these pages.
static const int host_pages_1[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 50, 100, 101, 102, 103, 104, 105, 106, 107,
                                   108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 255, -1};
static const int host_pages_2[] = {3, 7, 200, 201, 202, 203, 204, 205, 206, 207, -1};
static const int host_read_2 = 250;

static int run_host() {
  const size_t pages = 256, n = pages * 1024;
  float* M;
  CK(cudaMallocManaged(&M, pages * 4096));
  for (const int* p = host_pages_1; *p >= 0; ++p) M[*p * 1024 + 17] = 1.0f;
  k_seq_write<<<grid_for(n), 256>>>(M, n);
  CK(cudaDeviceSynchronize());
  for (const int* p = host_pages_2; *p >= 0; ++p) M[*p * 1024 + 5] += 2.0f;
  volatile float r = M[host_read_2 * 1024 + 3];
  k_seq_write<<<grid_for(n), 256>>>(M, n);
  CK(cudaDeviceSynchronize());
  printf("checksum host %.1f\n", (double)r);
  CK(cudaFree(M));
  return 0;
}

static int run_retouch() {
  const size_t pages = 1024, n = pages * 1024;  // 4 MiB
  float *A, *out;
  CK(cudaMalloc(&A, pages * 4096));
  CK(cudaMalloc(&out, 1024 * 4));
  k_page_once<<<grid_for(pages), 256>>>(A, pages);
  k_repass<<<1, 1024>>>(A, out, n, RETOUCH_PASSES);
  CK(cudaGetLastError());
  float h[1024];
  CK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  double s = 0;
  for (float x : h) s += x;
  printf("checksum retouch %.1f\n", s);
  CK(cudaFree(A));
  CK(cudaFree(out));
  return 0;
}

static double sum(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s;
}

static void prefetch(void* p, size_t bytes, int dev, cudaStream_t s) {
#if CUDART_VERSION >= 13000
  cudaMemLocation loc{};
  loc.type = dev >= 0 ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = dev >= 0 ? dev : 0;
  CK(cudaMemPrefetchAsync(p, bytes, loc, 0, s));
#else
  CK(cudaMemPrefetchAsync(p, bytes, dev >= 0 ? dev : cudaCpuDeviceId, s));
#endif
}

static void advise(void* p, size_t bytes, cudaMemoryAdvise a, int dev) {
#if CUDART_VERSION >= 13000
  cudaMemLocation loc{};
  loc.type = dev >= 0 ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = dev >= 0 ? dev : 0;
  CK(cudaMemAdvise(p, bytes, a, loc));
#else
  CK(cudaMemAdvise(p, bytes, a, dev >= 0 ? dev : cudaCpuDeviceId));
#endif
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  const size_t KiB = 1024, MiB = 1024 * KiB;
  int dev = 0;
  CK(cudaSetDevice(dev));
  if (strcmp(mode, "host") == 0) return run_host();
  if (strcmp(mode, "retouch") == 0) return run_retouch();
  if (strcmp(mode, "blocks") == 0) return run_blocks();

  // A: 4 MiB, 1024 pages, sequential write
  const size_t nA = 4 * MiB / 4;
  float* A;
  CK(cudaMalloc(&A, 4 * MiB));
  k_seq_write<<<grid_for(nA), 256>>>(A, nA);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  if (strcmp(mode, "crash") == 0) abort();
  if (strcmp(mode, "exit3") == 0) return 3;

  // B: 12 KiB; strided read of A, one float every 64 KiB -> pages 0,16,...,1008 of A
  const size_t mB = 64, stride = 64 * KiB / 4;
  float* B;
  CK(cudaMalloc(&B, 12 * KiB));
  k_strided_read<<<1, 256>>>(A, B, mB, stride);

  // C: 20 KiB out, I: 12 KiB indices; seeded random reads of A (LCG, seed 12345)
  const size_t mC = 2000;
  std::vector<unsigned> idx(mC);
  unsigned long long x = 12345;
  for (size_t i = 0; i < mC; ++i) {
    x = (x * 1103515245ull + 12345ull) % 2147483648ull;
    idx[i] = (unsigned)(x % nA);
  }
  unsigned* I;
  float* C;
  CK(cudaMalloc(&I, 12 * KiB + 4 * KiB));
  CK(cudaMalloc(&C, 20 * KiB));
  CK(cudaMemcpy(I, idx.data(), mC * 4, cudaMemcpyHostToDevice));
  k_random_read<<<grid_for(mC), 256>>>(A, I, C, mC);

  // read-modify-write of A[100*1024, 109*1024+512): pages 100..109 of A
  const size_t lo = 100 * 1024, hi = 109 * 1024 + 512;
  k_rmw<<<grid_for(hi - lo), 256>>>(A, lo, hi);

  // D: 24 KiB counters, atomics on pages 0..3; Fl: 28 KiB flag (never written)
  unsigned *D, *Fl;
  CK(cudaMalloc(&D, 24 * KiB));
  CK(cudaMalloc(&Fl, 28 * KiB));
  CK(cudaMemset(D, 0, 24 * KiB));
  k_atomics<<<grid_for(4096), 256>>>(D, Fl, 4096);
  CK(cudaDeviceSynchronize());

  // two streams: E (1 MiB) on s1, F (512 KiB) on s2
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  float *E, *F;
  CK(cudaMalloc(&E, 1 * MiB));
  CK(cudaMalloc(&F, 512 * KiB));
  k_fill<<<grid_for(MiB / 4), 256, 0, s1>>>(E, MiB / 4, 1.0f);
  k_fill<<<grid_for(128 * KiB), 256, 0, s2>>>(F, 128 * KiB, 2.0f);
  CK(cudaStreamSynchronize(s1));
  CK(cudaStreamSynchronize(s2));

  // a CUDA graph of two kernels, launched twice: G (256 KiB) filled, H (260 KiB) = 2*G
  float *G, *H;
  CK(cudaMalloc(&G, 256 * KiB));
  CK(cudaMalloc(&H, 260 * KiB));
  const size_t nG = 256 * KiB / 4;
  cudaGraph_t graph;
  cudaGraphExec_t gexec;
  CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  k_fill<<<grid_for(nG), 256, 0, s1>>>(G, nG, 3.0f);
  k_scale<<<grid_for(nG), 256, 0, s1>>>(G, H, nG);
  CK(cudaStreamEndCapture(s1, &graph));
  CK(cudaGraphInstantiate(&gexec, graph, 0));
  CK(cudaGraphLaunch(gexec, s1));
  CK(cudaGraphLaunch(gexec, s1));
  CK(cudaStreamSynchronize(s1));

  // managed M: 2 MiB, host-initialised, hints, prefetches, then written by the GPU
  float* M;
  const size_t nM = 2 * MiB / 4;
  CK(cudaMallocManaged(&M, 2 * MiB));
  for (size_t i = 0; i < nM; ++i) M[i] = 0.5f;
  advise(M, 2 * MiB, cudaMemAdviseSetReadMostly, dev);
  advise(M, 2 * MiB, cudaMemAdviseSetPreferredLocation, dev);
  advise(M, 2 * MiB, cudaMemAdviseSetAccessedBy, dev);
  prefetch(M, 2 * MiB, dev, 0);
  advise(M, 2 * MiB, cudaMemAdviseUnsetReadMostly, dev);
  k_seq_write<<<grid_for(nM), 256>>>(M, nM);
  CK(cudaDeviceSynchronize());
  prefetch(M, 1 * MiB, -1, 0);
  CK(cudaDeviceSynchronize());
  double msum = 0;
  for (size_t i = 0; i < nM; ++i) msum += M[i];

  // managed N: 3 MiB, host-initialised, written by the GPU with no prefetch: GPU page faults
  float* N;
  const size_t nN = 3 * MiB / 4;
  CK(cudaMallocManaged(&N, 3 * MiB));
  for (size_t i = 0; i < nN; ++i) N[i] = 0.25f;
  k_seq_write<<<grid_for(nN), 256>>>(N, nN);
  CK(cudaDeviceSynchronize());
  for (size_t i = 0; i < nN; i += 1024) msum += N[i];

  // a graph whose two kernel nodes run the same function (fill G, fill the first 256 KiB of H)
  cudaGraph_t graph2;
  cudaGraphExec_t gexec2;
  CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  k_fill<<<grid_for(nG), 256, 0, s1>>>(G, nG, 4.0f);
  k_fill<<<grid_for(nG), 256, 0, s1>>>(H, nG, 5.0f);
  CK(cudaStreamEndCapture(s1, &graph2));
  CK(cudaGraphInstantiate(&gexec2, graph2, 0));
  CK(cudaGraphLaunch(gexec2, s1));
  CK(cudaStreamSynchronize(s1));

  // stream-ordered allocation: P (40 KiB) from the default pool, filled on s2, freed on s2
  float* P;
  CK(cudaMallocAsync((void**)&P, 40 * KiB, s2));
  k_fill<<<grid_for(10 * KiB), 256, 0, s2>>>(P, 10 * KiB, 6.0f);
  CK(cudaFreeAsync(P, s2));
  CK(cudaStreamSynchronize(s2));

  // copies and a memset: H2D into E, D2D A->F, memset of E, D2H of results
  std::vector<float> host(64 * KiB, 7.0f);
  CK(cudaMemcpy(E, host.data(), 64 * KiB * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpyAsync(F, A, 256 * KiB, cudaMemcpyDeviceToDevice, s2));
  CK(cudaStreamSynchronize(s2));
  CK(cudaMemset(E, 0, 4 * KiB));
  std::vector<float> hB(mB), hC(mC), hA(nA), hH(nG), hF(128 * KiB);
  std::vector<unsigned> hD(6 * KiB);
  CK(cudaMemcpy(hB.data(), B, mB * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hC.data(), C, mC * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hA.data(), A, nA * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hH.data(), H, nG * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hF.data(), F, 128 * KiB * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hD.data(), D, 24 * KiB, cudaMemcpyDeviceToHost));
  printf("checksum B %.1f\n", sum(hB));
  printf("checksum C %.1f\n", sum(hC));
  printf("checksum A %.1f\n", sum(hA));
  printf("checksum H %.1f\n", sum(hH));
  printf("checksum F %.1f\n", sum(hF));
  printf("checksum D %u %u %u %u\n", hD[0], hD[1024], hD[2048], hD[3072]);
  printf("checksum M %.1f\n", msum);

  CK(cudaGraphExecDestroy(gexec2));
  CK(cudaGraphDestroy(graph2));
  CK(cudaGraphExecDestroy(gexec));
  CK(cudaGraphDestroy(graph));
  CK(cudaStreamDestroy(s1));
  CK(cudaStreamDestroy(s2));
  for (void* p : {(void*)A, (void*)B, (void*)C, (void*)I, (void*)D, (void*)Fl, (void*)E, (void*)F, (void*)G, (void*)H, (void*)M, (void*)N}) CK(cudaFree(p));
  return 0;
}
