#include "common.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

namespace uvmt {

static bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

bool RawWriter::open(const std::string& dir, const std::string& pass, bool with_bin) {
  std::lock_guard<std::mutex> g(mu_);
  if (fd_ >= 0) return true;
  ::mkdir(dir.c_str(), 0777);  // uvmsim record normally creates it; EEXIST is fine
  std::string stem = dir + "/" + pass + "." + std::to_string((long)getpid());
  stem_ = stem;
  path_ = stem + ".jsonl";
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return false;
  if (with_bin) {
    std::string b = stem + ".bin";
    bin_fd_ = ::open(b.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (bin_fd_ < 0) return false;
  }
  return true;
}

void RawWriter::line(const std::string& json) {
  std::string l = json;
  l.push_back('\n');
  std::lock_guard<std::mutex> g(mu_);
  if (fd_ < 0) return;
  if (!write_all(fd_, l.data(), l.size())) warn("cannot write %s: %s", path_.c_str(), strerror(errno));
}

uint64_t RawWriter::append_bin(const void* data, size_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t off = bin_off_;
  if (bin_fd_ < 0 || bytes == 0) return off;
  if (!write_all(bin_fd_, (const char*)data, bytes)) fatal("cannot write the page records of %s: %s", path_.c_str(), strerror(errno));
  bin_off_ += bytes;
  return off;
}

uint64_t RawWriter::append_streams(const void* data, size_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t off = streams_off_;
  if (bytes == 0 || stem_.empty()) return off;
  if (streams_fd_ < 0) {
    std::string p = stem_ + ".streams.bin";
    streams_fd_ = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (streams_fd_ < 0) fatal("cannot create %s: %s", p.c_str(), strerror(errno));
  }
  if (!write_all(streams_fd_, (const char*)data, bytes)) fatal("cannot write the stream records of %s: %s", path_.c_str(), strerror(errno));
  streams_off_ += bytes;
  return off;
}

RawWriter& writer() {
  static RawWriter* w = new RawWriter();  // never destroyed: atexit handlers still write
  return *w;
}

std::string json_str(const std::string& s) {
  std::string o;
  o.reserve(s.size() + 2);
  o.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o.push_back((char)c);
        }
    }
  }
  o.push_back('"');
  return o;
}

std::string demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status == 0 && d != nullptr) {
    std::string r(d);
    free(d);
    return r;
  }
  return std::string(name);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "uvmtrace: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

void fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "uvmtrace: fatal: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  _exit(86);
}

bool env_flag(const char* name, bool dflt) {
  const char* v = getenv(name);
  if (v == nullptr || *v == 0) return dflt;
  return !(strcmp(v, "0") == 0 || strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0);
}

uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = getenv(name);
  if (v == nullptr || *v == 0) return dflt;
  char* end = nullptr;
  unsigned long long x = strtoull(v, &end, 0);
  if (end == v || *end != 0) fatal("%s=%s is not a number", name, v);
  return (uint64_t)x;
}

int64_t stream_id(const void* handle) {
  static std::mutex mu;
  static std::unordered_map<const void*, int64_t>* ids = new std::unordered_map<const void*, int64_t>();
  if (handle == nullptr || handle == (const void*)0x1) return 0;  // CU_STREAM_LEGACY too
  std::lock_guard<std::mutex> g(mu);
  auto it = ids->find(handle);
  if (it != ids->end()) return it->second;
  int64_t id = (int64_t)ids->size() + 1;
  ids->emplace(handle, id);
  return id;
}

void* driver_sym(const char* name) {
  static void* h = nullptr;  // retried: with LD_PRELOAD, libcuda may not be loaded yet
  if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void* f = h ? dlsym(h, name) : nullptr;
  return f ? f : dlsym(RTLD_DEFAULT, name);
}

}  // namespace uvmt
