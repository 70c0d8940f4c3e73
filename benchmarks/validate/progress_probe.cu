// How warps progress through a grid-stride fill under oversubscription (docs/validation.md,
// "Warps' progress in a thrashing fill"): the kernel of fill_probe.cu's `stride` mode, with
// each warp's lane 0 logging the time it passed each iteration.
//
//   progress_probe MIB GRID BLOCK LOG store|readback
//
// a[i] = f(i) over one managed array of MIB MiB, grid-stride, one launch. With `readback`
// the thread reads each element back after its store (volatile), so a warp passes iteration
// it only once the page is resident and written; with `store` it goes on after the store, as
// fill_probe.cu's kernel does. Lane 0 then writes %globaltimer >> 10 (about microseconds)
// to log[warp * iters + it] in mapped pinned host memory, which takes no GPU memory (the
// balloon of `uvmsim run` sizes what is left for the managed array). LOG gets a header of
// four uint32 (warps, iters, grid, block), then the uint32 log; 0 = not reached; then one
// uint32 per warp: the SM it ran on (%smid), to see whether warps progress by SM.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void k_stride_log(float* a, size_t n, unsigned* log, int iters, int readback,
                             float* out, unsigned* sm) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
  const bool lane0 = (threadIdx.x & 31) == 0;
  if (lane0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    sm[warp] = id;
  }
  float s = 0.f;
  int it = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride, ++it) {
    a[i] = (float)(i & 1023);
    if (readback) s += ((volatile float*)a)[i];
    __syncwarp();
    if (lane0 && it < iters) {
      unsigned long long t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      log[warp * iters + it] = (unsigned)(t >> 10);
    }
  }
  if (s == -1.f) out[0] = s;  // keeps the loads
}

int main(int argc, char** argv) {
  if (argc != 6 || (strcmp(argv[5], "store") && strcmp(argv[5], "readback"))) {
    fprintf(stderr, "usage: %s MIB GRID BLOCK LOG store|readback\n", argv[0]);
    return 2;
  }
  size_t mib = strtoull(argv[1], nullptr, 10);
  int grid = atoi(argv[2]), blk = atoi(argv[3]);
  if (mib < 1 || grid < 1 || blk < 32 || blk > 1024 || blk % 32) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  size_t n = mib * (1 << 20) / 4, threads = (size_t)grid * blk;
  int iters = (int)((n + threads - 1) / threads);
  size_t warps = threads / 32, words = warps * iters;
  float *a, *o;
  unsigned* log;
  if (cudaHostAlloc(&log, (words + warps) * 4, cudaHostAllocMapped)) return 1;
  memset(log, 0, (words + warps) * 4);
  unsigned* dlog;
  if (cudaHostGetDevicePointer(&dlog, log, 0)) return 1;
  if (cudaMalloc(&o, 4) || cudaMallocManaged(&a, n * 4)) return 1;  // o before the balloon
  k_stride_log<<<grid, blk>>>(a, n, dlog, iters, !strcmp(argv[5], "readback"), o,
                                dlog + words);
  cudaError_t e = cudaDeviceSynchronize();
  if (e) {
    fprintf(stderr, "%s\n", cudaGetErrorString(e));
    return 1;
  }
  FILE* f = fopen(argv[4], "wb");
  uint32_t head[4] = {(uint32_t)warps, (uint32_t)iters, (uint32_t)grid, (uint32_t)blk};
  const size_t all = words + warps;
  if (!f || fwrite(head, 4, 4, f) != 4 || fwrite(log, 4, all, f) != all || fclose(f)) {
    fprintf(stderr, "cannot write %s\n", argv[4]);
    return 1;
  }
  cudaFree(a);
  cudaFree(o);
  cudaFreeHost(log);
  return 0;
}
