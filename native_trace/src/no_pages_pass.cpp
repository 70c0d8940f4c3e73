// Built instead of pages_pass.cpp when CMake found no Compute Sanitizer headers/library.
#include "common.h"

namespace uvmt {
bool pages_pass_available() { return false; }
int pages_pass_init() {
  fatal("this libuvmtrace was built without the Compute Sanitizer API, so it has no page pass; "
        "rebuild with UVMTRACE_SANITIZER_ROOT pointing at compute-sanitizer (or pip install nvidia-cuda-sanitizer-api)");
}
}  // namespace uvmt
