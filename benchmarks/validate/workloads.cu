// Validation workloads on CUDA managed memory (benchmarks/validate/README.md, docs/groundtruth.md).
//
//   uvm_workloads MODE [--mib N] [--iters K] [--init host|gpu]
//
// Every mode allocates its data with cudaMallocManaged (footprint about N MiB), initialises it on
// the host (host writes: the pages start on the CPU and migrate on first GPU touch) or on the GPU
// (a kernel writes them: zero-fill on the GPU), runs its kernels, then checks a sample of the
// result on the host and prints one `checksum` line. Modes and their access patterns:
//
//   stream     triad a = b + s*c over three arrays, K times (streaming, no reuse within a kernel)
//   stencil2d  5-point Jacobi on two N x N grids, K sweeps (neighbour reuse, streaming)
//   stencil3d  7-point Jacobi on two N^3 grids, K sweeps (plane reuse, streaming)
//   mv_row     y = A x, A row-major, one thread per row walking its columns: every row advances
//              together, so every 2 MiB block of A is live at every moment of the kernel
//   mv_col     y = A x, A column-major, one thread per row: a warp reads a contiguous column
//              segment, the live window slides through A once
//   gemm       C = A B, 64x64 shared-memory tiles: each block re-reads a row panel of A and a
//              column panel of B; later waves re-read what earlier waves read
//   gather     out[i] = sum of table[h(i, r)] over r (random pages of a large table)
//   pipeline   four buffers, kernels each reading one or two and writing one (multi-kernel)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

static const size_t MiB = 1 << 20;

struct Opt {
  std::string mode;
  size_t mib = 1024;
  int iters = 0;  // 0: the mode's default
  bool host_init = true;
};

template <class T>
static T* managed(size_t n) {
  T* p = nullptr;
  CK(cudaMallocManaged(&p, n * sizeof(T)));
  return p;
}

__device__ __host__ inline uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return (uint32_t)x;
}
__device__ __host__ inline float val(uint64_t i, uint32_t seed) { return (float)(hash32(i * 2654435761ull + seed) & 1023) / 1024.0f; }

__global__ void k_fill(float* a, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) a[i] = val(i, seed);
}
static void fill(float* a, size_t n, uint32_t seed, bool host) {
  if (host) {
    for (size_t i = 0; i < n; ++i) a[i] = val(i, seed);
  } else {
    k_fill<<<1024, 256>>>(a, n, seed);
    CK(cudaGetLastError());
  }
}

static double sample_sum(const float* a, size_t n) {  // host reads a few pages only
  double s = 0;
  for (size_t k = 0; k < 64; ++k) s += a[(size_t)hash32(k) % n];
  return s;
}

// ---------------------------------------------------------------------------- stream
__global__ void k_triad(float* a, const float* b, const float* c, size_t n, float s) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) a[i] = b[i] + s * c[i];
}
static double run_stream(const Opt& o) {
  size_t n = o.mib * MiB / 3 / sizeof(float);
  float *a = managed<float>(n), *b = managed<float>(n), *c = managed<float>(n);
  fill(b, n, 1, o.host_init);
  fill(c, n, 2, o.host_init);
  int it = o.iters ? o.iters : 4;
  for (int k = 0; k < it; ++k) {
    if (k % 2 == 0) k_triad<<<2048, 256>>>(a, b, c, n, 0.5f);
    else k_triad<<<2048, 256>>>(b, a, c, n, 0.5f);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  double s = sample_sum(it % 2 ? a : b, n);
  CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(c));
  return s;
}

// ---------------------------------------------------------------------------- stencils
__global__ void k_jacobi2d(const float* in, float* out, int n) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= n || y >= n) return;
  size_t i = (size_t)y * n + x;
  if (x == 0 || y == 0 || x == n - 1 || y == n - 1) {
    out[i] = in[i];
    return;
  }
  out[i] = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - n] + in[i + n]);
}
static double run_stencil2d(const Opt& o) {
  int n = (int)std::sqrt((double)(o.mib * MiB / 2 / sizeof(float)));
  n &= ~31;
  size_t cells = (size_t)n * n;
  float *a = managed<float>(cells), *b = managed<float>(cells);
  fill(a, cells, 3, o.host_init);
  fill(b, cells, 4, o.host_init);
  dim3 blk(32, 8), grd((n + 31) / 32, (n + 7) / 8);
  int it = o.iters ? o.iters : 6;
  for (int k = 0; k < it; ++k) {
    k_jacobi2d<<<grd, blk>>>(k % 2 ? b : a, k % 2 ? a : b, n);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  double s = sample_sum(it % 2 ? b : a, cells);
  CK(cudaFree(a)); CK(cudaFree(b));
  return s;
}

__global__ void k_jacobi3d(const float* in, float* out, int n) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= n || y >= n) return;
  size_t plane = (size_t)n * n;
  for (int z = 0; z < n; ++z) {  // each thread marches along z: three planes live at a time
    size_t i = z * plane + (size_t)y * n + x;
    if (x == 0 || y == 0 || z == 0 || x == n - 1 || y == n - 1 || z == n - 1) {
      out[i] = in[i];
      continue;
    }
    out[i] = (1.0f / 7.0f) * (in[i] + in[i - 1] + in[i + 1] + in[i - n] + in[i + n] + in[i - plane] + in[i + plane]);
  }
}
static double run_stencil3d(const Opt& o) {
  int n = (int)std::cbrt((double)(o.mib * MiB / 2 / sizeof(float)));
  n &= ~31;
  size_t cells = (size_t)n * n * n;
  float *a = managed<float>(cells), *b = managed<float>(cells);
  fill(a, cells, 5, o.host_init);
  fill(b, cells, 6, o.host_init);
  dim3 blk(32, 8), grd((n + 31) / 32, (n + 7) / 8);
  int it = o.iters ? o.iters : 4;
  for (int k = 0; k < it; ++k) {
    k_jacobi3d<<<grd, blk>>>(k % 2 ? b : a, k % 2 ? a : b, n);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  double s = sample_sum(it % 2 ? b : a, cells);
  CK(cudaFree(a)); CK(cudaFree(b));
  return s;
}

// ---------------------------------------------------------------------------- matrix-vector
__global__ void k_mv_row(const float* A, const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* row = A + (size_t)r * cols;
  float s = 0;
  for (int c = 0; c < cols; ++c) s += row[c] * x[c];
  y[r] = s;
}
__global__ void k_mv_col(const float* A, const float* x, float* y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0;
  for (int c = 0; c < cols; ++c) s += A[(size_t)c * rows + r] * x[c];
  y[r] = s;
}
static double run_mv(const Opt& o, bool row_major) {
  // A is rows x cols with rows = 2 cols (cols a multiple of 256): 11,264 x 5,632 for 256 MiB
  size_t cells = o.mib * MiB / sizeof(float);
  int cols = ((int)std::sqrt((double)cells / 2) / 256) * 256;
  int rows = 2 * cols;
  float* A = managed<float>((size_t)rows * cols);
  float* x = managed<float>(cols);
  float* y = managed<float>(rows);
  fill(A, (size_t)rows * cols, 7, o.host_init);
  fill(x, cols, 8, o.host_init);
  int it = o.iters ? o.iters : 2;
  for (int k = 0; k < it; ++k) {
    if (row_major) k_mv_row<<<(rows + 127) / 128, 128>>>(A, x, y, rows, cols);
    else k_mv_col<<<(rows + 127) / 128, 128>>>(A, x, y, rows, cols);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  double s = sample_sum(y, rows);
  CK(cudaFree(A)); CK(cudaFree(x)); CK(cudaFree(y));
  return s;
}

// ---------------------------------------------------------------------------- gemm
// C = A B (n x n, row-major), 64x64 tiles of C per 256-thread block, 4x4 per thread.
__global__ void k_gemm(const float* A, const float* B, float* C, int n) {
  __shared__ float As[16][64 + 1], Bs[16][64];
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < n; k0 += 16) {
    for (int i = threadIdx.x; i < 64 * 16; i += 256) {
      int r = i / 16, c = i % 16;  // A tile 64 x 16, stored transposed
      As[c][r] = A[(size_t)(row0 + r) * n + k0 + c];
      int br = i / 64, bc = i % 64;  // B tile 16 x 64
      Bs[br][bc] = B[(size_t)(k0 + br) * n + col0 + bc];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[k][ty * 4 + i], b[i] = Bs[k][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) C[(size_t)(row0 + ty * 4 + i) * n + col0 + tx * 4 + j] = acc[i][j];
}
static double run_gemm(const Opt& o) {
  int n = (int)std::sqrt((double)(o.mib * MiB / 3 / sizeof(float)));
  n &= ~63;
  size_t cells = (size_t)n * n;
  float *A = managed<float>(cells), *B = managed<float>(cells), *C = managed<float>(cells);
  fill(A, cells, 9, o.host_init);
  fill(B, cells, 10, o.host_init);
  int it = o.iters ? o.iters : 1;
  dim3 grd(n / 64, n / 64);
  for (int k = 0; k < it; ++k) {
    k_gemm<<<grd, 256>>>(A, B, C, n);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  double s = sample_sum(C, cells);
  CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C));
  return s;
}

// ---------------------------------------------------------------------------- gather
__global__ void k_gather(const float* table, size_t n, float* out, size_t m, int per, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x) {
    float s = 0;
    for (int r = 0; r < per; ++r) s += table[hash32(i * 131 + r + seed) % n];
    out[i] = s;
  }
}
static double run_gather(const Opt& o) {
  // the table is the footprint less 512 KiB of outputs: 2^17 outputs, 2 random reads each
  size_t m = 1 << 17;
  size_t n = (o.mib * MiB - m * sizeof(float)) / sizeof(float);
  float* table = managed<float>(n);
  float* out = managed<float>(m);
  fill(table, n, 11, o.host_init);
  int it = o.iters ? o.iters : 2;
  for (int k = 0; k < it; ++k) {
    k_gather<<<1024, 256>>>(table, n, out, m, 2, 1000u * k);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  double s = sample_sum(out, m);
  CK(cudaFree(table)); CK(cudaFree(out));
  return s;
}

// ---------------------------------------------------------------------------- pipeline
__global__ void k_map(const float* in, float* out, size_t n, float s) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) out[i] = in[i] * s + 1.0f;
}
__global__ void k_combine(const float* a, const float* b, float* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) out[i] = 0.5f * (a[i] + b[n - 1 - i]);
}
static double run_pipeline(const Opt& o) {
  size_t n = o.mib * MiB / 4 / sizeof(float);
  float* buf[4];
  for (auto& b : buf) b = managed<float>(n);
  fill(buf[0], n, 12, o.host_init);
  int it = o.iters ? o.iters : 2;
  for (int k = 0; k < it; ++k) {
    k_map<<<2048, 256>>>(buf[0], buf[1], n, 0.5f);         // B1 = f(B0)
    k_map<<<2048, 256>>>(buf[1], buf[2], n, 0.25f);        // B2 = f(B1)
    k_combine<<<2048, 256>>>(buf[2], buf[1], buf[3], n);   // B3 = g(B2, reversed B1)
    k_combine<<<2048, 256>>>(buf[3], buf[2], buf[0], n);   // B0 = g(B3, reversed B2)
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  double s = sample_sum(buf[0], n);
  for (auto& b : buf) CK(cudaFree(b));
  return s;
}

int main(int argc, char** argv) {
  Opt o;
  if (argc < 2) {
    fprintf(stderr, "usage: %s stream|stencil2d|stencil3d|mv_row|mv_col|gemm|gather|pipeline [--mib N] [--iters K] [--init host|gpu]\n", argv[0]);
    return 2;
  }
  o.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) o.mib = strtoull(argv[++i], nullptr, 10);
    else if (a == "--iters" && i + 1 < argc) o.iters = atoi(argv[++i]);
    else if (a == "--init" && i + 1 < argc) {
      std::string v = argv[++i];
      if (v != "host" && v != "gpu") { fprintf(stderr, "--init: host or gpu, got %s\n", v.c_str()); return 2; }
      o.host_init = v == "host";
    } else {
      fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (o.mib < 16 || o.mib > 8192) { fprintf(stderr, "--mib %zu: expected 16..8192\n", o.mib); return 2; }
  double s;
  if (o.mode == "stream") s = run_stream(o);
  else if (o.mode == "stencil2d") s = run_stencil2d(o);
  else if (o.mode == "stencil3d") s = run_stencil3d(o);
  else if (o.mode == "mv_row") s = run_mv(o, true);
  else if (o.mode == "mv_col") s = run_mv(o, false);
  else if (o.mode == "gemm") s = run_gemm(o);
  else if (o.mode == "gather") s = run_gather(o);
  else if (o.mode == "pipeline") s = run_pipeline(o);
  else { fprintf(stderr, "unknown mode %s\n", o.mode.c_str()); return 2; }
  printf("checksum %s %.6f\n", o.mode.c_str(), s);
  return 0;
}
