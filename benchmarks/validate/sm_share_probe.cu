// Does a thread block that faults slow down the other blocks on its SM? (docs/validation.md,
// "Which blocks run ahead"). In a grid-stride fill the blocks progress by their age rank on
// their SM, even where their own pages are resident; this tests whether the cause is the SM:
// a block whose stores never fault (a "hitter", on memory the GPU already holds) shares each
// SM with a block whose stores all fault (a "faulter", first touches of a fresh managed
// array), older or younger than it.
//
//   sm_share_probe [HIT_MIB] [FRESH_MIB] [REPS]       (defaults 256, 512, 20)
//
// Two blocks of 1,024 threads per SM, all resident at once; each block takes its age rank on
// its SM from a per-SM ticket at its start. Modes (one launch each, a new fresh array each):
//   alone          rank 0 hits, rank 1 ends at once
//   old_faulter    rank 0 faults, rank 1 hits
//   young_faulter  rank 0 hits, rank 1 faults
//   faulter_alone  rank 0 faults, rank 1 ends at once
// Hitters write the held array REPS times over, grid-stride among the hitters; faulters write
// the fresh array once, grid-stride among the faulters. One JSON line per mode: each role's
// blocks' run times (%globaltimer, ns) and the launch's time.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Rec {
  unsigned long long t0, t1;
  int sm, rank, role;  // role: 0 idle, 1 hitter, 2 faulter
};

__device__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void k_pair(float* held, size_t n_held, float* fresh, size_t n_fresh, int reps,
                       int mode, unsigned* tickets, unsigned* counts, Rec* rec) {
  __shared__ int role, idx;
  __shared__ unsigned long long t0;
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    const int rank = (int)atomicAdd(&tickets[sm], 1u);
    const bool fault_old = mode == 1 || mode == 3, idle_young = mode == 0 || mode == 3;
    role = rank == 0 ? (fault_old ? 2 : 1) : (idle_young ? 0 : (fault_old ? 1 : 2));
    idx = role ? (int)atomicAdd(&counts[role], 1u) : 0;
    t0 = now();
    rec[blockIdx.x].sm = (int)sm;
    rec[blockIdx.x].rank = rank;
    rec[blockIdx.x].role = role;
  }
  __syncthreads();
  const size_t n_role = gridDim.x / 2;  // one block of each role per SM
  const size_t stride = n_role * blockDim.x;
  const size_t first = (size_t)idx * blockDim.x + threadIdx.x;
  if (role == 1) {
    for (int r = 0; r < reps; ++r)
      for (size_t i = first; i < n_held; i += stride) held[i] = (float)(i & 1023) + r;
  } else if (role == 2) {
    for (size_t i = first; i < n_fresh; i += stride) fresh[i] = (float)(i & 1023);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    rec[blockIdx.x].t0 = t0;
    rec[blockIdx.x].t1 = now();
  }
}

__global__ void k_warm(float* a, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    a[i] = 0.f;
}

static double pct(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[(size_t)(q * (v.size() - 1))];
}

int main(int argc, char** argv) {
  const size_t hit_mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 256;
  const size_t fresh_mib = argc > 2 ? strtoull(argv[2], nullptr, 10) : 512;
  const int reps = argc > 3 ? atoi(argv[3]) : 20;
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_pair, 1024, 0);
  if (per_sm < 2) {
    fprintf(stderr, "k_pair: %d resident blocks of 1,024 threads per SM, need 2\n", per_sm);
    return 1;
  }
  const size_t n_held = hit_mib << 18, n_fresh = fresh_mib << 18;
  const int grid = 2 * sms;
  float* held;
  unsigned *tickets, *counts;
  Rec* rec;
  if (cudaMallocManaged(&held, n_held * 4) || cudaMalloc(&tickets, 4096 * 4) ||
      cudaMalloc(&counts, 16) || cudaMallocManaged(&rec, grid * sizeof(Rec)))
    return 1;
  k_warm<<<2 * sms, 1024>>>(held, n_held);
  if (cudaDeviceSynchronize()) return 1;
  const char* names[] = {"alone", "old_faulter", "young_faulter", "faulter_alone"};
  for (int mode = 0; mode < 4; ++mode) {
    float* fresh;
    if (cudaMallocManaged(&fresh, n_fresh * 4)) return 1;
    cudaMemset(tickets, 0, 4096 * 4);
    cudaMemset(counts, 0, 16);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    k_pair<<<grid, 1024>>>(held, n_held, fresh, n_fresh, reps, mode, tickets, counts, rec);
    cudaEventRecord(b);
    cudaError_t e = cudaDeviceSynchronize();
    if (e) {
      fprintf(stderr, "%s\n", cudaGetErrorString(e));
      return 1;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    unsigned long long start = ~0ull;
    for (int i = 0; i < grid; ++i) start = std::min(start, rec[i].t0);
    std::vector<double> hit, fault;
    int bad_rank = 0;
    for (int i = 0; i < grid; ++i) {
      const double d = (rec[i].t1 - start) / 1e6;  // ms from the launch's first block
      if (rec[i].rank > 1) ++bad_rank;
      if (rec[i].role == 1) hit.push_back(d);
      if (rec[i].role == 2) fault.push_back(d);
    }
    printf("{\"mode\": \"%s\", \"sms\": %d, \"kernel_ms\": %.3f, \"hitters\": %zu, "
           "\"hitters_end_ms_p10_p50_p90\": [%.3f, %.3f, %.3f], \"faulters\": %zu, "
           "\"faulters_end_ms_p10_p50_p90\": [%.3f, %.3f, %.3f], \"blocks_rank_over_1\": %d}\n",
           names[mode], sms, ms, hit.size(), pct(hit, .1), pct(hit, .5), pct(hit, .9),
           fault.size(), pct(fault, .1), pct(fault, .5), pct(fault, .9), bad_rank);
    fflush(stdout);
    cudaFree(fresh);
  }
  return 0;
}
