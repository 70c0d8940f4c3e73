# Sourced by the device probes of this folder (probe_fill.sh, probe_rounds.sh), from the
# repository root: builds native_trace for this GPU (the collector `uvmsim run` loads) and
# the two probe programs. Sets SMCC (the GPU's compute capability), P (fill_probe) and W
# (the suite's workloads); exits the calling script if a build fails.
SMCC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
B=native_trace/build
cmake -S native_trace -B $B -DUVMTRACE_PATCH_ARCHS=$SMCC -DUVMT_TEST_ARCH=$SMCC > /tmp/b.log 2>&1 \
  && cmake --build $B -j "$(nproc)" >> /tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
P=/tmp/fill_probe W=/tmp/uvm_workloads
nvcc -O2 -arch=sm_$SMCC -o $P benchmarks/validate/fill_probe.cu || exit 1
nvcc -O2 -arch=sm_$SMCC -o $W benchmarks/validate/workloads.cu || exit 1
