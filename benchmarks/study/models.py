"""Training iterations of the seed paper's six models on CUDA managed memory (the study's
workloads, docs/study-dl-oversubscription.md).

    python3 models.py --model alexnet|resnet50|resnet101|gpt2|bert|whisper [--batch N] [--steps N]

Managed memory comes from native_trace's libuvmmanaged.so in LD_PRELOAD (docs/groundtruth.md):
PyTorch's caching allocator (PCA) runs on top of managed memory, or is off with
PYTORCH_NO_CUDA_MEMORY_CACHING=1. The script exits 3 when the parameters are not managed.

Weights are random (nothing is downloaded): torchvision's models built with ``weights=None``,
transformers' models built from their published configs (GPT-2 small, BERT-base uncased,
Whisper-small). Without transformers the three are equivalent torch modules built from the same
configs (``--impl torch`` forces that).

Iterations are marked for the real runs: before each training step the script launches
``torch.cuda._sleep`` (a kernel named ``spin_kernel`` that touches no memory), so the kernels
after the last marker are one steady training step (``iter_s`` in results/real_runs.csv).
Before the model exists, a tiny forward/backward of a matmul and a convolution creates the
cuBLAS and cuDNN handles of this thread and of autograd's thread: created later, when managed
data fills the GPU, their plain device allocations fail (docs/groundtruth.md, "Limit seen").
TF32 is off, as in benchmarks/validate/torch_models.py (the collector cannot see TMA copies).
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

#: the study's batch sizes (the paper's in PAPER_BATCH): chosen so that a record and real runs at
#: factors 1-3 of all twelve workloads fit the device budget (docs/study-dl-oversubscription.md)
BATCH = {"alexnet": 32, "resnet50": 4, "resnet101": 2, "gpt2": 2, "bert": 4, "whisper": 1}
PAPER_BATCH = {"alexnet": 128, "resnet50": 32, "resnet101": 32, "gpt2": 8, "bert": 16,
               "whisper": 16}
SEQ = {"gpt2": 256, "bert": 128, "whisper": 64}   # tokens (Whisper: decoder tokens)
MODELS = tuple(BATCH)


def _vision(name: str, batch: int, g: torch.Generator):
    import torchvision
    model = getattr(torchvision.models, name)(weights=None)
    x = torch.randn(batch, 3, 224, 224, generator=g)
    y = torch.randint(0, 1000, (batch,), generator=g)
    return model, (x,), y, lambda out, y: F.cross_entropy(out, y)


def _hf(name: str, batch: int, g: torch.Generator):
    import transformers as tf
    seq = SEQ[name]
    if name == "gpt2":        # GPT-2 small: 12 layers, width 768, 12 heads, context 1024
        cfg = tf.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024,
                            vocab_size=50257)
        model = tf.GPT2LMHeadModel(cfg)
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g)
        return model, (), ids, {"input_ids": ids, "labels": ids}
    if name == "bert":        # BERT-base uncased: 12 layers, width 768, 12 heads, vocab 30522
        cfg = tf.BertConfig(num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
                            intermediate_size=3072, vocab_size=30522)
        model = tf.BertForMaskedLM(cfg)
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g)
        return model, (), ids, {"input_ids": ids, "labels": ids}
    # Whisper-small: 12+12 layers, width 768, 12 heads, 80 mel bins, 30 s of audio (3000 frames)
    cfg = tf.WhisperConfig(vocab_size=51865, num_mel_bins=80, d_model=768, encoder_layers=12,
                           decoder_layers=12, encoder_attention_heads=12,
                           decoder_attention_heads=12, encoder_ffn_dim=3072,
                           decoder_ffn_dim=3072, max_source_positions=1500,
                           max_target_positions=448)
    model = tf.WhisperForConditionalGeneration(cfg)
    feats = torch.randn(batch, 80, 3000, generator=g)
    labels = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g)
    return model, (), labels, {"input_features": feats, "labels": labels}


class _Block(nn.Module):
    """A pre-/post-norm transformer block with optional cross-attention (the HF models' shapes)."""

    def __init__(self, d: int, heads: int, ff: int, cross: bool, pre_norm: bool, causal: bool):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.cross = nn.MultiheadAttention(d, heads, batch_first=True) if cross else None
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))
        self.pre, self.causal = pre_norm, causal

    def forward(self, x, mem=None):
        mask = None
        if self.causal:
            n = x.shape[1]
            mask = torch.triu(torch.full((n, n), float("-inf"), device=x.device), 1)
        h = self.n1(x) if self.pre else x
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        x = x if self.pre else self.n1(x)
        if self.cross is not None:
            h = self.n3(x)
            x = x + self.cross(h, mem, mem, need_weights=False)[0]
        h = self.n2(x) if self.pre else x
        x = x + self.ff(h)
        return x if self.pre else self.n2(x)


class _TorchLM(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, ff: int, ctx: int,
                 pre_norm: bool, causal: bool, tied: bool):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(_Block(d, heads, ff, False, pre_norm, causal)
                                    for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=not tied)
        if tied:
            self.head.weight = self.emb.weight

    def forward(self, ids):
        x = self.emb(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


class _TorchWhisper(nn.Module):
    def __init__(self, vocab=51865, d=768, layers=12, heads=12, ff=3072, mels=80):
        super().__init__()
        self.c1 = nn.Conv1d(mels, d, 3, padding=1)
        self.c2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.epos = nn.Embedding(1500, d)
        self.enc = nn.ModuleList(_Block(d, heads, ff, False, True, False) for _ in range(layers))
        self.dec_emb, self.dpos = nn.Embedding(vocab, d), nn.Embedding(448, d)
        self.dec = nn.ModuleList(_Block(d, heads, ff, True, True, True) for _ in range(layers))
        self.ne, self.nd = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, feats, ids):
        x = F.gelu(self.c2(F.gelu(self.c1(feats)))).transpose(1, 2)
        x = x + self.epos.weight[: x.shape[1]]
        for b in self.enc:
            x = b(x)
        mem = self.ne(x)
        y = self.dec_emb(ids) + self.dpos(torch.arange(ids.shape[1], device=ids.device))
        for b in self.dec:
            y = b(y, mem)
        return self.nd(y) @ self.dec_emb.weight.t()


def _plain(name: str, batch: int, g: torch.Generator):
    seq = SEQ[name]
    if name == "gpt2":
        model = _TorchLM(50257, 768, 12, 12, 3072, 1024, pre_norm=True, causal=True, tied=True)
    elif name == "bert":
        model = _TorchLM(30522, 768, 12, 12, 3072, 512, pre_norm=False, causal=False,
                         tied=True)
    else:
        model = _TorchWhisper()
        feats = torch.randn(batch, 80, 3000, generator=g)
        ids = torch.randint(0, 51865, (batch, seq), generator=g)
        return model, (feats, ids), ids, lambda out, y: F.cross_entropy(
            out.reshape(-1, out.shape[-1]), y.reshape(-1))
    vocab = 50257 if name == "gpt2" else 30522
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    return model, (ids,), ids, lambda out, y: F.cross_entropy(
        out.reshape(-1, out.shape[-1]), y.reshape(-1))


def build(name: str, batch: int, impl: str):
    """(model, positional inputs, target, loss function or HF keyword inputs)."""
    g = torch.Generator().manual_seed(1)
    if name in ("alexnet", "resnet50", "resnet101"):
        return _vision(name, batch, g)
    if impl == "auto":
        try:
            import transformers  # noqa: F401
            impl = "hf"
        except ImportError:
            impl = "torch"
    return _hf(name, batch, g) if impl == "hf" else _plain(name, batch, g)


def _prime(dev: torch.device) -> None:
    a = torch.randn(64, 64, device=dev, requires_grad=True)
    w = torch.randn(8, 3, 3, 3, device=dev, requires_grad=True)
    x = torch.randn(2, 3, 16, 16, device=dev)
    ((a @ a).sum() + F.conv2d(x, w).sum()).backward()
    torch.cuda.synchronize()


def _is_managed(ptr: int) -> bool:
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
    at = Attr()
    return rt.cudaPointerGetAttributes(ctypes.byref(at), ctypes.c_void_p(ptr)) == 0 \
        and at.type == 3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=MODELS)
    ap.add_argument("--batch", type=int, default=0, help="0: the study's batch (BATCH)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--impl", choices=("auto", "hf", "torch"), default="auto")
    ap.add_argument("--no-managed-check", action="store_true",
                    help="run on PyTorch's own device memory (no LD_PRELOAD)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.enable_cudnn_sdp(False)  # cuDNN attention copies through TMA too
    torch.manual_seed(0)
    dev = torch.device("cuda")
    if not a.no_managed_check and "libuvmmanaged" not in os.environ.get("LD_PRELOAD", ""):
        print("LD_PRELOAD does not name libuvmmanaged.so", file=sys.stderr)
        return 3
    _prime(dev)
    model, args, y, loss_or_kw = build(a.model, a.batch or BATCH[a.model], a.impl)
    model = model.to(dev).train()
    args = tuple(t.to(dev) for t in args)
    y = y.to(dev)
    kw = {k: v.to(dev) for k, v in loss_or_kw.items()} if isinstance(loss_or_kw, dict) else None
    # plain SGD (no momentum): the optimizer touches weights and gradients only
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    if not a.no_managed_check and not _is_managed(next(model.parameters()).data_ptr()):
        print("the model's parameters are not in managed memory", file=sys.stderr)
        return 3
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in range(a.steps):
        torch.cuda._sleep(1000)  # iteration marker (spin_kernel)
        if kw is not None:
            loss = model(**kw).loss
        else:
            loss = loss_or_kw(model(*args), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item()!r}", flush=True)
    torch.cuda.synchronize()
    print(f"train_wall_s {time.perf_counter() - t0:.3f}", flush=True)
    print(f"params {sum(p.numel() for p in model.parameters())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
