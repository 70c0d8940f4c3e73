#!/bin/bash
# Regenerates the captures in traces/ (run on a GPU machine from the repository root after
# building native_trace). Each must stay <= 8 MiB: a capture over that is retried smaller.
#   ONLY="resnet50_pca gpt2_small"   capture only these
#   RESNET_FLAGS=--no-tf32            extra torch_train.py flags for the ResNet-50 captures
#   TRACES_DIR=/tmp/t                 write the captures there instead of traces/
#   MAX_KIB=0                         no size limit, so no smaller retry (device_run.sh
#                                     traces12 compares each capture with the bundled one of
#                                     the same command)
set -u
MAX_KIB=${MAX_KIB:-8192}
B=${B:-native_trace/build}
T=native_trace/tests/torch_train.py
RF=${RESNET_FLAGS:-}
ONLY=${ONLY:-microbench resnet50_pca resnet50_nopca gpt2_small}
TD=${TRACES_DIR:-traces}
cap() {  # cap NAME NOTES -- CMD...
  local name=$1 notes=$2; shift 3
  case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
  python3 -m uvmsim.record -o $TD/$name.uvmtrace --overwrite --notes "$notes" -- "$@"
  local rc=$? size=$(du -sk $TD/$name.uvmtrace 2>/dev/null | cut -f1)
  echo "capture $name rc=$rc size_kib=$size"
  [ "$MAX_KIB" -eq 0 ] || [ "${size:-99999}" -le "$MAX_KIB" ]
}
mkdir -p $TD
cap microbench "uvmt_testprog all: sequential, strided, random, RMW, atomics, 2 streams, a graph, managed memory, copies, prefetch/advise" -- $B/uvmt_testprog all
cap resnet50_pca "ResNet-50 (torchvision, random weights), 1 SGD step, batch 4, 128x128, PyTorch caching allocator on $RF" -- python3 $T --model resnet50 --batch 4 --image 128 --steps 1 $RF \
  || cap resnet50_pca "ResNet-50 (torchvision, random weights), 1 SGD step, batch 2, 96x96, PyTorch caching allocator on" -- python3 $T --model resnet50 --batch 2 --image 96 --steps 1 $RF
PYTORCH_NO_CUDA_MEMORY_CACHING=1 cap resnet50_nopca "ResNet-50 (torchvision, random weights), 1 SGD step, batch 4, 128x128, PYTORCH_NO_CUDA_MEMORY_CACHING=1 $RF" -- python3 $T --model resnet50 --batch 4 --image 128 --steps 1 $RF \
  || PYTORCH_NO_CUDA_MEMORY_CACHING=1 cap resnet50_nopca "ResNet-50 (torchvision, random weights), 1 SGD step, batch 2, 96x96, PYTORCH_NO_CUDA_MEMORY_CACHING=1" -- python3 $T --model resnet50 --batch 2 --image 96 --steps 1 $RF
cap gpt2_small "GPT-2-style decoder (2 layers, width 256, 4 heads, vocab 8192, seq 64), 1 SGD step, batch 4" -- python3 $T --model gpt2 --batch 4 --seq 64 --layers 2 --width 256 --steps 1
du -sh $TD/*.uvmtrace
