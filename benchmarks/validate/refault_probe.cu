// What the driver moves when a GPU store faults on a VA block it evicted (docs/validation.md,
// "What a refault brings back"). The thrashing fill moves its 2 MiB blocks in about 160 times
// each; the replay brings back only the pages a block faults on. This separates the two.
//
//   refault_probe MIB K
//
// One managed array of MIB MiB, 1 <= K <= MIB / 8 (in 2 MiB blocks). Five launches, in this
// order (the timing pass lists them in launch order):
//   k_fill    every element written, grid-stride by 128 blocks of 1,024 threads (one per SM,
//             so none runs ahead and the fill does not thrash; GPU-populated: under
//             oversubscription the first blocks written are evicted first)
//   k_touch   one thread per block stores one word into the first page of blocks 0..K-1
//   k_read    "rest": every word of blocks 0..K-1 (what k_touch did not bring back faults now)
//   k_read    "ctrl": every word of blocks K..2K-1 (evicted and not touched since: the cost
//             of bringing K whole blocks back by reads)
//   k_read    "again": blocks K..2K-1 again (resident now, or read in place if they were
//             mapped remotely)
// If a store's refault brings its whole block back, "rest" costs like "again"; if it brings
// back only the faulted page (and what the prefetcher adds), "rest" costs like "ctrl".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

__global__ void k_fill(float* a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    a[i] = (float)(i & 1023);
}

__global__ void k_touch(float* a, int k) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < k) a[(size_t)b * (1 << 19)] += 1.f;  // 2^19 floats = 2 MiB
}

// blocks [first, first + k): one thread block per 2 MiB block, every word read
__global__ void k_read(const float* a, int first, float* out) {
  const float* p = a + (size_t)(first + blockIdx.x) * (1 << 19);
  float s = 0.f;
  for (int i = threadIdx.x; i < (1 << 19); i += blockDim.x) s += p[i];
  if (s == -1.f) out[0] = s;  // keeps the loads
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MIB K\n", argv[0]);
    return 2;
  }
  const size_t mib = strtoull(argv[1], nullptr, 10);
  const int k = atoi(argv[2]);
  if (mib < 16 || k < 1 || (size_t)k * 2 * 2 > mib / 2) {
    fprintf(stderr, "bad arguments: need MIB >= 16 and 1 <= K <= MIB / 8\n");
    return 2;
  }
  const size_t n = mib << 18;  // floats
  float *a, *o;
  if (cudaMalloc(&o, 4) || cudaMallocManaged(&a, n * 4)) return 1;
  k_fill<<<128, 1024>>>(a, n);  // one block per SM or fewer: no block runs far ahead
  k_touch<<<(k + 127) / 128, 128>>>(a, k);
  k_read<<<k, 1024>>>(a, 0, o);
  k_read<<<k, 1024>>>(a, k, o);
  k_read<<<k, 1024>>>(a, k, o);
  cudaError_t e = cudaDeviceSynchronize();
  if (e) {
    fprintf(stderr, "%s\n", cudaGetErrorString(e));
    return 1;
  }
  cudaFree(a);
  cudaFree(o);
  return 0;
}
