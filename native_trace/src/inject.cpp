// Entry of the injection library. The CUDA driver calls InitializeInjection when
// CUDA_INJECTION64_PATH names this library; with LD_PRELOAD (UVMTRACE_PRELOAD=1) a
// constructor does the same before main(). Either way the pass is chosen by UVMTRACE_PASS
// and the raw files go to UVMTRACE_OUT.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common.h"

namespace {
std::atomic<int> g_state{0};  // 0 not started, 1 running init, 2 done (ok or not)

int init_once(const char* how) {
  int expected = 0;
  if (!g_state.compare_exchange_strong(expected, 1)) return 1;  // second mechanism: ignore
  const char* pass = getenv("UVMTRACE_PASS");
  const char* out = getenv("UVMTRACE_OUT");
  if (pass == nullptr || out == nullptr || *out == 0) {
    uvmt::warn("UVMTRACE_PASS and UVMTRACE_OUT must both be set (got %s, %s); not tracing",
               pass ? pass : "(unset)", out ? out : "(unset)");
    g_state = 2;
    return 1;  // returning 0 would make the driver fail every CUDA call of the program
  }
  int rc;
  if (strcmp(pass, "pages") == 0) {
    if (!uvmt::writer().open(out, "pages", true)) uvmt::fatal("cannot create raw files under %s", out);
    rc = uvmt::pages_pass_init();
  } else if (strcmp(pass, "timing") == 0) {
    // counter records go to a binary file when asked (UVMTRACE_UM_BINARY, timing_pass.cpp)
    if (!uvmt::writer().open(out, "timing", uvmt::env_flag("UVMTRACE_UM_BINARY", false))) uvmt::fatal("cannot create raw files under %s", out);
    rc = uvmt::timing_pass_init();
  } else {
    uvmt::fatal("UVMTRACE_PASS=%s: expected 'pages' or 'timing'", pass);
  }
  uvmt::writer().line(std::string("{\"t\":\"init\",\"how\":\"") + how + "\",\"rc\":" + std::to_string(rc) + "}");
  g_state = 2;
  return 1;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  return init_once("injection");
}

__attribute__((constructor)) static void uvmt_preload_ctor() {
  if (uvmt::env_flag("UVMTRACE_PRELOAD", false)) init_once("preload");
}
