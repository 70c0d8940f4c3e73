"""Small PyTorch training runs on CUDA managed memory, for the validation suite.

    python3 torch_models.py --model mlp|cnn|transformer [--steps N] [--alloc interpose|pluggable]

Managed memory comes from native_trace's libuvmmanaged.so (docs/groundtruth.md):

* ``--alloc interpose`` (default): the library is expected in LD_PRELOAD, where it turns the
  CUDA runtime's cudaMalloc into cudaMallocManaged underneath PyTorch's caching allocator. The
  caching allocator is on, or off with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every tensor is then
  its own managed allocation).
* ``--alloc pluggable``: torch.cuda.memory.CUDAPluggableAllocator with the library's
  uvm_malloc/uvm_free replaces the caching allocator (so it is always off).
* ``--alloc none``: PyTorch's own device memory (for comparison only).

The script checks that memory really is managed (it exits 3 otherwise), prints one
``step <i> loss <value>`` line per step and a final ``managed_allocations`` line. TF32 is off:
on Hopper its kernels copy through the tensor memory accelerator, which the collector's page
pass cannot see (docs/collector.md, Limits).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(HERE, "..", "..", "native_trace", "build", "libuvmmanaged.so")


def managed_lib(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(os.path.abspath(path))


def is_managed(ptr: int) -> bool:
    """cudaPointerGetAttributes(ptr).type == cudaMemoryTypeManaged (3)."""
    class Attr(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                    ("devicePointer", ctypes.c_void_p), ("hostPointer", ctypes.c_void_p),
                    ("reserved", ctypes.c_long * 8)]
    for so in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            rt = ctypes.CDLL(so, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
            break
        except OSError:
            continue
    else:
        return False
    a = Attr()
    if rt.cudaPointerGetAttributes(ctypes.byref(a), ctypes.c_void_p(ptr)) != 0:
        return False
    return a.type == 3


def build(name: str, batch: int):
    g = torch.Generator().manual_seed(1)
    if name == "mlp":
        # two 4096 x 4096 layers and a 4096 x 1000 head: weights, grads and momentum ~0.6 GiB
        width = 4096
        model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width),
                              nn.ReLU(), nn.Linear(width, 1000))
        x = torch.randn(batch or 1024, width, generator=g)
        y = torch.randint(0, 1000, (x.shape[0],), generator=g)
    elif name == "cnn":
        # a VGG-style stack on 64x64 images: activations dominate (batch 16)
        def blk(i, o):
            return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU()]
        model = nn.Sequential(*blk(3, 64), *blk(64, 64), nn.MaxPool2d(2),
                              *blk(64, 128), *blk(128, 128), nn.MaxPool2d(2),
                              *blk(128, 256), *blk(256, 256), nn.MaxPool2d(2),
                              *blk(256, 512), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(512, 100))
        x = torch.randn(batch or 16, 3, 64, 64, generator=g)
        y = torch.randint(0, 100, (x.shape[0],), generator=g)
    elif name == "transformer":
        # 4 encoder layers, width 768, 12 heads, feed-forward 3072, sequence 128, batch 8
        d, vocab, seq = 768, 8192, 128

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                layer = nn.TransformerEncoderLayer(d, 12, 4 * d, dropout=0.0, batch_first=True,
                                                   norm_first=True)
                self.enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
                self.head = nn.Linear(d, vocab)

            def forward(self, idx):
                return self.head(self.enc(self.emb(idx)))
        model = Net()
        x = torch.randint(0, vocab, (batch or 8, seq), generator=g)
        y = torch.randint(0, vocab, (x.shape[0], seq), generator=g)
    else:
        raise SystemExit(f"--model {name!r}: expected mlp, cnn or transformer")
    return model, x, y


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=("mlp", "cnn", "transformer"))
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--batch", type=int, default=0, help="batch size (0: the model's default)")
    ap.add_argument("--alloc", choices=("interpose", "pluggable", "none"), default="interpose")
    ap.add_argument("--lib", default=os.environ.get("UVMMANAGED_LIB", DEFAULT_LIB),
                    help="libuvmmanaged.so (default: native_trace/build/)")
    a = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    lib = None
    if a.alloc == "pluggable":
        alloc = torch.cuda.memory.CUDAPluggableAllocator(os.path.abspath(a.lib), "uvm_malloc",
                                                         "uvm_free")
        torch.cuda.memory.change_current_allocator(alloc)
        lib = managed_lib(a.lib)
    elif a.alloc == "interpose":
        if "libuvmmanaged" not in os.environ.get("LD_PRELOAD", ""):
            print("--alloc interpose: LD_PRELOAD does not name libuvmmanaged.so",
                  file=sys.stderr)
            return 3
        lib = managed_lib(a.lib)

    model, x, y = build(a.model, a.batch)
    dev = torch.device("cuda")
    model = model.to(dev)
    x, y = x.to(dev), y.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if a.alloc != "none" and not is_managed(next(model.parameters()).data_ptr()):
        print(f"--alloc {a.alloc}: the model's parameters are not in managed memory",
              file=sys.stderr)
        return 3
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in range(a.steps):
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item()!r}", flush=True)
    torch.cuda.synchronize()
    print(f"train_wall_s {time.perf_counter() - t0:.3f}", flush=True)
    if lib is not None:
        n, b = ctypes.c_ulonglong(), ctypes.c_ulonglong()
        lib.uvm_managed_counts(ctypes.byref(n), ctypes.byref(b))
        print(f"managed_allocations {n.value} bytes {b.value}", flush=True)
    if a.alloc != "pluggable":  # a pluggable allocator keeps no statistics
        print(f"max_reserved_bytes {torch.cuda.max_memory_reserved()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
