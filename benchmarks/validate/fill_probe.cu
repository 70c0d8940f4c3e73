// Controlled kernels for docs/validation.md ("What the GPU does when a fill thrashes"): one
// managed array, written or read by a grid-stride loop or by one contiguous slice per
// thread block, under `uvmsim run --oversub F`.
//
//   fill_probe MIB GRID BLOCK MODE ITERS
//   MODE stride   a[i] = f(i), grid-stride (a first touch on the GPU: zero-filled pages)
//        chunk    the same, each thread block writing its own contiguous slice
//        rw       a GPU fill, then ITERS grid-stride a[i] += 1
//        read     a GPU fill, then ITERS grid-stride reads
//        hostread a CPU fill, then ITERS grid-stride reads
//        hash     a[p(i)] = f(i), grid-stride over i, p a fixed permutation of the
//                 elements (multiplicative hash), so every block writes all over the array
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void k_stride(float* a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    a[i] = (float)(i & 1023);
}
__global__ void k_chunk(float* a, size_t n) {
  size_t per = (n + gridDim.x - 1) / gridDim.x, b = blockIdx.x * per, e = b + per < n ? b + per : n;
  for (size_t i = b + threadIdx.x; i < e; i += blockDim.x) a[i] = (float)(i & 1023);
}
__global__ void k_hash(float* a, size_t n) {
  // n is a power of two times 2^18 (whole MiB of floats): an odd multiplier permutes 0..n-1
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    a[(i * 2654435761ull) & (n - 1)] = (float)(i & 1023);
}
__global__ void k_rw(float* a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    a[i] += 1.0f;
}
__global__ void k_read(const float* a, size_t n, float* out) {
  float s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    s += a[i];
  if (s == -1.f) out[0] = s;  // keeps the loads
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s MIB GRID BLOCK stride|chunk|rw|read|hostread|hash ITERS\n", argv[0]);
    return 2;
  }
  size_t mib = strtoull(argv[1], nullptr, 10);
  int grid = atoi(argv[2]), blk = atoi(argv[3]), it = atoi(argv[5]);
  const char* mode = argv[4];
  if (mib < 1 || grid < 1 || blk < 1 || blk > 1024 || it < 1) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  size_t n = mib * (1 << 20) / 4;
  float *a, *o;
  if (cudaMallocManaged(&a, n * 4) || cudaMallocManaged(&o, 4096)) return 1;
  if (!strcmp(mode, "stride")) {
    for (int k = 0; k < it; ++k) k_stride<<<grid, blk>>>(a, n);
  } else if (!strcmp(mode, "chunk")) {
    for (int k = 0; k < it; ++k) k_chunk<<<grid, blk>>>(a, n);
  } else if (!strcmp(mode, "hash")) {
    if (n & (n - 1)) {
      fprintf(stderr, "hash needs a power-of-two MIB\n");
      return 2;
    }
    for (int k = 0; k < it; ++k) k_hash<<<grid, blk>>>(a, n);
  } else if (!strcmp(mode, "rw")) {
    k_stride<<<1024, 256>>>(a, n);
    for (int k = 0; k < it; ++k) k_rw<<<grid, blk>>>(a, n);
  } else if (!strcmp(mode, "read")) {
    k_stride<<<1024, 256>>>(a, n);
    for (int k = 0; k < it; ++k) k_read<<<grid, blk>>>(a, n, o);
  } else if (!strcmp(mode, "hostread")) {
    for (size_t i = 0; i < n; ++i) a[i] = (float)(i & 1023);
    for (int k = 0; k < it; ++k) k_read<<<grid, blk>>>(a, n, o);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  cudaError_t e = cudaDeviceSynchronize();
  if (e) {
    fprintf(stderr, "%s\n", cudaGetErrorString(e));
    return 1;
  }
  cudaFree(a);
  cudaFree(o);
  return 0;
}
