"""Small, deterministic PyTorch training runs for the collector's tests, traces and benchmark.

    python native_trace/tests/torch_train.py --model mlp|resnet50|mobilenet_v2|densenet121|gpt2
                                             [--batch N] [--steps N]

Prints one line per step, ``step <i> loss <repr(float)>``, so a traced run's output can be
compared with an untraced one exactly, and ``train_wall_s <seconds>`` for the timed steps
(after CUDA initialisation and model construction).
"""
from __future__ import annotations

import argparse
import math
import os
import time

# deterministic cuBLAS needs this before CUDA initialises
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    """GPT-2 block: pre-norm causal self-attention and a 4x MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """A GPT-2-style decoder (learned positions, tied embedding), small by default."""

    def __init__(self, vocab: int, ctx: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=("mlp", "resnet50", "mobilenet_v2", "densenet121", "gpt2"),
                    default="mlp")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--image", type=int, default=224, help="input size of the torchvision models")
    ap.add_argument("--seq", type=int, default=64, help="gpt2 sequence length")
    ap.add_argument("--layers", type=int, default=2, help="gpt2 layers")
    ap.add_argument("--width", type=int, default=256, help="gpt2 model width")
    ap.add_argument("--vocab", type=int, default=8192, help="gpt2 vocabulary")
    ap.add_argument("--no-tf32", action="store_true",
                    help="disable TF32 in cuDNN and cuBLAS (on Hopper this avoids the TMA "
                         "kernels whose loads Compute Sanitizer cannot see)")
    a = ap.parse_args()

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    if a.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    g = torch.Generator(device="cpu").manual_seed(1)
    if a.model == "mlp":
        model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
        x = torch.randn(a.batch, 512, generator=g)
        y = torch.randint(0, 10, (a.batch,), generator=g)
    elif a.model in ("resnet50", "mobilenet_v2", "densenet121"):
        import torchvision
        model = getattr(torchvision.models, a.model)(weights=None)  # random weights
        x = torch.randn(a.batch, 3, a.image, a.image, generator=g)
        y = torch.randint(0, 1000, (a.batch,), generator=g)
    else:
        model = GPT(a.vocab, a.seq, a.width, a.layers, heads=max(1, a.width // 64))
        x = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
        y = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    model = model.to(dev)
    x, y = x.to(dev), y.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
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


if __name__ == "__main__":
    main()
