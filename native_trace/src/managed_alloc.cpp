// libuvmmanaged: puts a program's CUDA memory on Unified Memory (cudaMallocManaged), for
// PyTorch on UVM as in the seed paper (docs/groundtruth.md). Two ways in:
//
// * torch.cuda.memory.CUDAPluggableAllocator(lib, "uvm_malloc", "uvm_free"): PyTorch calls these
//   instead of its caching allocator, so every tensor is its own managed allocation (caching
//   allocator off, whatever PYTORCH_NO_CUDA_MEMORY_CACHING says).
// * LD_PRELOAD=libuvmmanaged.so: the exported cudaMalloc interposes the CUDA runtime's, so a
//   program that calls cudaMalloc through the dynamic runtime (PyTorch's caching allocator does)
//   gets managed memory underneath. The caching allocator then still works as usual (on), or with
//   PYTORCH_NO_CUDA_MEMORY_CACHING=1 calls cudaMalloc/cudaFree per tensor (off). cudaFree frees
//   managed memory as it is, so it is not interposed. Programs linking the runtime statically
//   (nvcc's default) are not affected.
//
// Nothing here links the CUDA runtime: the program's own libcudart is found at the first call,
// so the process never holds two runtimes. UVMMANAGED_VERBOSE=1 prints counts at exit.
#include <dlfcn.h>
#include <sys/types.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
typedef int (*MallocManagedFn)(void**, size_t, unsigned int);
typedef int (*FreeFn)(void*);
constexpr unsigned int kAttachGlobal = 1;  // cudaMemAttachGlobal
constexpr int kErrorInitialization = 3;    // cudaErrorInitializationError

std::atomic<MallocManagedFn> g_malloc_managed{nullptr};
std::atomic<FreeFn> g_free{nullptr};
std::atomic<unsigned long long> g_allocs{0}, g_frees{0}, g_bytes{0}, g_failed{0};

void* runtime_sym(const char* name) {
  // The next definition after this library (the program's libcudart when it is global), else
  // any libcudart already loaded, e.g. PyTorch's, which Python loads with RTLD_LOCAL.
  if (void* f = dlsym(RTLD_NEXT, name)) return f;
  static const char* sonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};
  for (const char* so : sonames) {
    if (void* h = dlopen(so, RTLD_NOW | RTLD_NOLOAD)) {
      if (void* f = dlsym(h, name)) return f;
    }
  }
  return nullptr;
}

MallocManagedFn malloc_managed() {
  MallocManagedFn f = g_malloc_managed.load();
  if (f == nullptr) {
    f = (MallocManagedFn)runtime_sym("cudaMallocManaged");
    if (f == nullptr) {
      fprintf(stderr, "uvmmanaged: cudaMallocManaged not found (is the CUDA runtime loaded dynamically?)\n");
      return nullptr;
    }
    g_malloc_managed = f;
  }
  return f;
}

int alloc_managed(void** p, size_t size) {
  MallocManagedFn f = malloc_managed();
  if (f == nullptr) return kErrorInitialization;
  int rc = f(p, size, kAttachGlobal);
  if (rc == 0) {
    ++g_allocs;
    g_bytes += size;
  } else {
    ++g_failed;
  }
  return rc;
}

__attribute__((destructor)) void report() {
  if (getenv("UVMMANAGED_VERBOSE") && *getenv("UVMMANAGED_VERBOSE") == '1')
    fprintf(stderr, "uvmmanaged: %llu managed allocations (%llu bytes), %llu frees by uvm_free, %llu failed\n",
            g_allocs.load(), g_bytes.load(), g_frees.load(), g_failed.load());
}
}  // namespace

extern "C" {

// CUDAPluggableAllocator's allocation function: void* alloc(ssize_t size, int device, cudaStream_t)
__attribute__((visibility("default"))) void* uvm_malloc(ssize_t size, int device, void* stream) {
  void* p = nullptr;
  if (size <= 0) return nullptr;
  // cudaMallocManaged allocates for the current device, which PyTorch has set to `device`
  if (alloc_managed(&p, (size_t)size) != 0) return nullptr;  // PyTorch raises OutOfMemoryError
  return p;
}

// and its free function: void free(void* ptr, ssize_t size, int device, cudaStream_t)
__attribute__((visibility("default"))) void uvm_free(void* ptr, ssize_t size, int device, void* stream) {
  if (ptr == nullptr) return;
  FreeFn f = g_free.load();
  if (f == nullptr) {
    f = (FreeFn)runtime_sym("cudaFree");
    g_free = f;
  }
  if (f != nullptr && f(ptr) == 0) ++g_frees;
}

// The interposer (LD_PRELOAD): cudaError_t cudaMalloc(void** devPtr, size_t size)
__attribute__((visibility("default"))) int cudaMalloc(void** p, size_t size) {
  if (size == 0) {  // as the runtime does: success, null pointer
    *p = nullptr;
    return 0;
  }
  return alloc_managed(p, size);
}

// Counts so far: the tests and `uvmsim run` read them through ctypes.
__attribute__((visibility("default"))) void uvm_managed_counts(unsigned long long* allocs, unsigned long long* bytes) {
  *allocs = g_allocs.load();
  *bytes = g_bytes.load();
}
}
