#!/usr/bin/python3
"""Reference training throughput of the PonderTTT tiny/small models in eager PyTorch (CPU; float32, or bf16 products).

An optional reference for issue 3's benchmark note ("at least 2x a mainstream eager framework on these
exact configs"); not part of the build, the tests or the README's commands. See bench/README.md.

The model is the one `ponder bench train --config tiny|small` trains with the dual form, K = 1:
byte vocabulary 256, tied embeddings, pre-RMSNorm blocks (eps 1e-6), TTT-Linear on the Transformer
backbone (separate wq/wk/wv/wo, no convs, no pre-conv) with the GELU-tanh output gate, SwiGLU MLP with
hidden ceil(8d/3 / 32)*32, final RMSNorm. The TTT layer is written the way ttt-lm-pytorch writes it
(docs/ttt.md §1.2-1.10): RoPE on Q/K with the in-mini-batch position t % 16 on interleaved pairs; the
per-token inner learning rate eta[i, j] = base_lr * relu(1/(i+1) + token_idx[i]) * sigmoid(u_j . lr_w
+ lr_b) / head_dim; a Python loop over the mini-batches, batched over (B, H) with torch.matmul; the
inner gradient in closed form (ln_fused_l2_bwd); the dual-form output and carried state; post
LayerNorm, gate, output projection. No rematerialisation (our default, remat_group 0). Training step:
mean next-token cross-entropy, backward, global-norm clipping 1.0, AdamW (beta 0.9/0.95, eps 1e-8,
weight decay 0.1 on every parameter, lr 3e-3).

Output: one JSON object per line (framework, config, threads, tokens_per_s, step_ms, params, ...).
Run with Debian's torch: apt-get install -y python3-torch; /usr/bin/python3 bench/torch_ttt.py --config tiny
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time



def blas_core_override():
    """The OPENBLAS_CORETYPE that `ponder` sets for itself (tensor/cpu/runtime.h), so both sides of the comparison
    run the same GEMM kernels: where Debian's OpenBLAS falls back to its SSE3 "Prescott" kernels on a CPU model it
    does not know, the kernels the CPU has (SkylakeX for AVX-512, Haswell for AVX2 and FMA). OpenBLAS reads the
    variable when it loads, so this asks a child process, before torch loads it here."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return None
    probe = "import ctypes; f = ctypes.CDLL('libblas.so.3').openblas_get_corename; f.restype = ctypes.c_char_p; print(f().decode())"
    try:
        core = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if core != "Prescott":
        return None
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def loaded_blas_core():
    """The kernels the OpenBLAS that torch loaded runs (the same library: dlopen returns the loaded copy)."""
    import ctypes
    try:
        f = ctypes.CDLL("libblas.so.3").openblas_get_corename
    except (OSError, AttributeError):
        return "unknown"
    f.restype = ctypes.c_char_p
    return f().decode()


_core = blas_core_override()
if _core:
    os.environ["OPENBLAS_CORETYPE"] = _core

import torch  # noqa: E402  (after OPENBLAS_CORETYPE is settled)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

CONFIGS = {
    # d, layers, heads, seq_len, batch  (issue 3, configs/tiny.yaml and configs/small.yaml)
    "tiny": dict(d=128, layers=2, heads=2, seq_len=128, batch=4),
    "small": dict(d=256, layers=4, heads=4, seq_len=256, batch=8),
}
VOCAB = 256
MINI_BATCH = 16
BASE_LR = 1.0  # ttt_base_lr of TTT-Linear
MLP_BASE_LR = 0.1  # and of TTT-MLP
ROPE_THETA = 10000.0
INIT_STD = 0.02
EPS = 1e-6


def swiglu_hidden(d):
    return (8 * d // 3 + 31) // 32 * 32


def normal_(t):
    return nn.init.normal_(t, 0.0, INIT_STD)


# --precision bf16: the outer model's matrix products (projections, gate, MLP, η's projection, the tied head) take
# bf16 operands, as `ponder`'s model.precision bf16 rounds every matmul op's operands; the TTT inner loop stays
# float32 (ponder's fused dual form computes in float32 at every precision). Activations, parameters and AdamW
# stay float32. PyTorch's CPU bf16 product (oneDNN, AVX512-BF16 where the CPU has it) sums in float32 and rounds
# its result to bf16, one rounding more than ponder's float32 result.
MM_BF16 = False


def linear(x, w, b=None):
    if MM_BF16:
        y = F.linear(x.bfloat16(), w.bfloat16()).float()
        return y if b is None else y + b
    return F.linear(x, w, b)


class Linear(nn.Linear):
    def forward(self, x):
        return linear(x, self.weight, self.bias)


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def ln_fwd(x, gamma, beta):
    """Per-head LayerNorm of the inner model (biased variance, eps 1e-6)."""
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    x_hat = (x - mu) / torch.sqrt(var + EPS)
    return gamma * x_hat + beta


def ln_fused_l2_bwd(x, target, gamma, beta):
    """d/dx of 0.5 * ||LN(x) - target||^2 row by row, in closed form (ttt-lm-pytorch's ln_fused_l2_bwd)."""
    D = x.shape[-1]
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    std = torch.sqrt(var + EPS)
    x_hat = (x - mu) / std
    y = gamma * x_hat + beta
    grad_x_hat = (y - target) * gamma
    return (
        (1.0 / D)
        * (D * grad_x_hat - grad_x_hat.sum(dim=-1, keepdim=True) - x_hat * (grad_x_hat * x_hat).sum(dim=-1, keepdim=True))
        / std
    )


def rope_tables(seq_len, head_dim):
    """cos/sin (seq_len, head_dim/2) for the in-mini-batch position t % MINI_BATCH."""
    pos = (torch.arange(seq_len, dtype=torch.float64) % MINI_BATCH)[:, None]
    inv = ROPE_THETA ** (-2.0 * torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
    ang = pos * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    """x (B, H, N, f); rotates the interleaved pairs (x[2i], x[2i+1])."""
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


def prefix_pairs(b):
    """The causal pairs (j, i), j <= i, j-major: their index j*b + i in the b x b grid, j, i, and the pairs of i = b-1."""
    flat, jj, ii, last = [], [], [], []
    for j in range(b):
        for i in range(j, b):
            if i == b - 1:
                last.append(len(flat))
            flat.append(j * b + i)
            jj.append(j)
            ii.append(i)
    return [torch.tensor(v, dtype=torch.long) for v in (flat, jj, ii, last)]


def at_pairs(x, flat):
    """x (B, H, b(i), b(j)) read at the pairs: x[i, j] for j <= i, as (B, H, P, 1)."""
    B, H, b, _ = x.shape
    return x.transpose(-2, -1).reshape(B, H, b * b)[:, :, flat].unsqueeze(-1)


def prefix_unit(W, bias, xq, xk, xv, e, gamma, beta, K, pairs):
    """Prefix mode, K steps, in the dual form (docs/ttt.md §3.3): position i's weights are W - XK^T A_i and
    bias - 1^T A_i, so Z_i = Z0 - (XK XK^T + 1) A_i; A is kept at the causal pairs only. Returns the outputs and
    the state the next mini-batch starts from."""
    flat, jj, ii, last = pairs
    B, H, b, f = xk.shape
    z0, target = xk @ W + bias, xv - xk
    w = at_pairs(e, flat)  # (B, H, P, 1): eta[i, j]
    neg_m = -(xk @ xk.transpose(-2, -1) + 1.0)
    z0p, tp = z0[:, :, jj], target[:, :, jj]
    A = None
    for _ in range(K):
        if A is None:
            G = ln_fused_l2_bwd(z0, target, gamma, beta)[:, :, jj]
        else:
            grid = A.new_zeros(B, H, b * b, f).index_add(2, flat, A).reshape(B, H, b, b * f)
            Z = z0p + (neg_m @ grid).reshape(B, H, b * b, f)[:, :, flat]
            G = ln_fused_l2_bwd(Z, tp, gamma, beta)
        G = w * G
        A = G if A is None else A + G
    neg_p = at_pairs(-(xq @ xk.transpose(-2, -1) + 1.0), flat)
    zq = xq @ W + bias + A.new_zeros(B, H, b, f).index_add(2, ii, neg_p * A)
    a_last = A[:, :, last]
    return xq + ln_fwd(zq, gamma, beta), W - xk.transpose(-2, -1) @ a_last, bias - a_last.sum(dim=-2, keepdim=True)


def mlp_unit(state, xq, xk, xv, e, gamma, beta):
    """TTT-MLP's dual form on one mini-batch (docs/ttt.md §1.8), as ttt-lm-pytorch writes it: the gradients at the
    start-of-mini-batch weights through both layers, the queries' outputs in closed form, the carried state."""
    W1, b1, W2, b2 = state
    Z1 = xk @ W1 + b1
    X2 = F.gelu(Z1, approximate="tanh")
    Z2 = X2 @ W2 + b2
    G2 = ln_fused_l2_bwd(Z2, xv - xk, gamma, beta)
    G1 = (G2 @ W2.transpose(-2, -1)) * gelu_tanh_grad(Z1)
    e_tril = torch.tril(e)
    Zb1 = xq @ W1 - (e_tril * (xq @ xk.transpose(-2, -1))) @ G1 + b1 - e_tril @ G1
    Xb2 = F.gelu(Zb1, approximate="tanh")
    Zb2 = Xb2 @ W2 - (e_tril * (Xb2 @ X2.transpose(-2, -1))) @ G2 + b2 - e_tril @ G2
    out = xq + ln_fwd(Zb2, gamma, beta)
    e_last = e[:, :, -1, :, None]  # (B, H, b, 1): eta of the last row
    W1 = W1 - (e_last * xk).transpose(-2, -1) @ G1
    b1 = b1 - (e_last * G1).sum(dim=-2, keepdim=True)
    W2 = W2 - (e_last * X2).transpose(-2, -1) @ G2
    b2 = b2 - (e_last * G2).sum(dim=-2, keepdim=True)
    return out, (W1, b1, W2, b2)


def gelu_tanh_grad(x):
    """d/dx gelu_tanh: 0.5(1 + t) + 0.5x(1 - t^2)c(1 + 3a x^2), t = tanh(c(x + a x^3))."""
    c, a = 0.7978845608028654, 0.044715
    t = torch.tanh(c * (x + a * x * x * x))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x)


class TTTLinear(nn.Module):
    """TTT-Linear, Transformer backbone, GELU gate, dual form (docs/ttt.md §1.7); with prefix_k > 1, prefix mode
    with that many steps in every mini-batch (docs/ttt.md §3.3)."""

    def __init__(self, d, heads, prefix_k=1, mlp=False):
        super().__init__()
        self.prefix_k = prefix_k
        self.mlp = mlp
        self.pairs = prefix_pairs(MINI_BATCH)
        self.d, self.H, self.f = d, heads, d // heads
        f = self.f
        self.wq = Linear(d, d, bias=False)
        self.wk = Linear(d, d, bias=False)
        self.wv = Linear(d, d, bias=False)
        self.wo = Linear(d, d, bias=False)
        self.wg = Linear(d, d, bias=False)
        self.lr_proj = Linear(d, heads)  # theta_lr (d, H) and its bias (H)
        self.token_idx = nn.Parameter(torch.zeros(MINI_BATCH))  # learnable offsets of 1/(i+1)
        self.ttt_norm_weight = nn.Parameter(torch.ones(heads, f))
        self.ttt_norm_bias = nn.Parameter(torch.zeros(heads, f))
        h = 4 * f if mlp else f  # TTT-MLP's hidden width
        self.W1 = nn.Parameter(torch.empty(heads, f, h))  # inner W0
        self.b1 = nn.Parameter(torch.zeros(heads, 1, h))
        if mlp:
            self.W2 = nn.Parameter(torch.empty(heads, h, f))
            self.b2 = nn.Parameter(torch.zeros(heads, 1, f))
            normal_(self.W2)
        self.post_norm = nn.LayerNorm(d, eps=EPS)
        for lin in (self.wq, self.wk, self.wv, self.wo, self.wg, self.lr_proj):
            normal_(lin.weight)
        nn.init.zeros_(self.lr_proj.bias)
        normal_(self.W1)
        self.register_buffer("inv_pos", 1.0 / torch.arange(1, MINI_BATCH + 1, dtype=torch.float32), persistent=False)

    def forward(self, u, cos, sin):
        B, N, d = u.shape
        H, f, b = self.H, self.f, MINI_BATCH
        n = N // b

        def heads(x):  # (B, N, d) -> (B, H, N, f)
            return x.view(B, N, H, f).transpose(1, 2)

        XQ = apply_rope(heads(self.wq(u)), cos, sin)
        XK = apply_rope(heads(self.wk(u)), cos, sin)
        XV = heads(self.wv(u))

        # eta[b, h, m, i, j] = base_lr * tok[i] * sigmoid(u_j . lr_w + lr_b) / f
        lr = torch.sigmoid(self.lr_proj(u))  # (B, N, H)
        lr = lr.permute(0, 2, 1).reshape(B, H, n, 1, b)
        tok = torch.clamp_min(self.inv_pos + self.token_idx, 0.0)  # relu(1/(i+1) + token_idx[i])
        eta = ((MLP_BASE_LR if self.mlp else BASE_LR) / f) * tok.view(b, 1) * lr  # (B, H, n, b, b)

        # Mini-batches first, so the scan slices contiguous (B, H, b, ·) blocks.
        def mb(x):  # (B, H, N, f) -> (n, B, H, b, f)
            return x.reshape(B, H, n, b, f).permute(2, 0, 1, 3, 4).contiguous()

        XQ, XK, XV = mb(XQ), mb(XK), mb(XV)
        eta = eta.permute(2, 0, 1, 3, 4).contiguous()  # (n, B, H, b, b)
        gamma = self.ttt_norm_weight.view(1, H, 1, f)
        beta = self.ttt_norm_bias.view(1, H, 1, f)

        # Inner state starts from the learned W0 for every sequence.
        W = self.W1.unsqueeze(0).expand(B, H, *self.W1.shape[1:])
        bias = self.b1.unsqueeze(0).expand(B, H, *self.b1.shape[1:])
        if self.mlp:
            state = (W, bias, self.W2.unsqueeze(0).expand(B, H, *self.W2.shape[1:]),
                     self.b2.unsqueeze(0).expand(B, H, 1, f))
        outs = []
        for m in range(n):
            xq, xk, xv, e = XQ[m], XK[m], XV[m], eta[m]
            if self.mlp:
                out_m, state = mlp_unit(state, xq, xk, xv, e, gamma, beta)
                outs.append(out_m)
                continue
            if self.prefix_k > 1:
                out_m, W, bias = prefix_unit(W, bias, xq, xk, xv, e, gamma, beta, self.prefix_k, self.pairs)
                outs.append(out_m)
                continue
            Z1 = xk @ W + bias
            G1 = ln_fused_l2_bwd(Z1, xv - xk, gamma, beta)  # dl/dZ1 at the start-of-mini-batch weights
            e_tril = torch.tril(e)
            attn = torch.tril(xq @ xk.transpose(-2, -1))
            b_bar = bias - e_tril @ G1
            Z_bar = xq @ W - (e * attn) @ G1 + b_bar
            outs.append(xq + ln_fwd(Z_bar, gamma, beta))
            e_last = e[:, :, -1, :, None]  # (B, H, b, 1): eta of the last row
            W = W - (e_last * xk).transpose(-2, -1) @ G1
            bias = bias - (e_last * G1).sum(dim=-2, keepdim=True)

        out = torch.stack(outs, dim=2)  # (B, H, n, b, f)
        z = out.permute(0, 2, 3, 1, 4).reshape(B, N, d)
        z = self.post_norm(z)
        z = F.gelu(self.wg(u), approximate="tanh") * z
        return self.wo(z)


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = Linear(d, hidden, bias=False)
        self.w3 = Linear(d, hidden, bias=False)
        self.w2 = Linear(hidden, d, bias=False)
        for lin in (self.w1, self.w3, self.w2):
            normal_(lin.weight)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d, heads, prefix_k=1, mlp=False):
        super().__init__()
        self.seq_norm = RMSNorm(d)
        self.ttt = TTTLinear(d, heads, prefix_k, mlp)
        self.ffn_norm = RMSNorm(d)
        self.ffn = SwiGLU(d, swiglu_hidden(d))

    def forward(self, h, cos, sin):
        h = h + self.ttt(self.seq_norm(h), cos, sin)
        return h + self.ffn(self.ffn_norm(h))


class TTTModel(nn.Module):
    def __init__(self, d, layers, heads, seq_len, prefix_k=1, mlp=False):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        normal_(self.emb.weight)
        self.blocks = nn.ModuleList(Block(d, heads, prefix_k, mlp) for _ in range(layers))
        self.final_norm = RMSNorm(d)
        cos, sin = rope_tables(seq_len, d // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, ids):
        h = self.emb(ids)
        for blk in self.blocks:
            h = blk(h, self.cos, self.sin)
        return linear(self.final_norm(h), self.emb.weight)  # tied head


def torch_version():
    """Debian's python3-torch 1.13.1 reports torch.__version__ = 1.13.0a0; prefer the package version."""
    try:
        v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "python3-torch"], capture_output=True, text=True,
                           check=True).stdout
        if v and torch.__version__.startswith(v.split(".")[0] + "."):
            return v.split("+")[0]
    except (OSError, subprocess.CalledProcessError):
        pass
    return torch.__version__.split("+")[0]


def load_tokens(source):
    if source == "random":
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "data", "moby_dick", "moby_dick.txt")
    with open(path, "rb") as fh:
        return torch.frombuffer(bytearray(fh.read()), dtype=torch.uint8).long()


def sample_batch(tokens, batch, seq_len, gen):
    if tokens is None:  # uniform random bytes
        w = torch.randint(0, VOCAB, (batch, seq_len + 1), generator=gen)
    else:  # uniform random windows of the text
        starts = torch.randint(0, tokens.numel() - seq_len - 1, (batch,), generator=gen)
        w = torch.stack([tokens[s : s + seq_len + 1] for s in starts.tolist()])
    return w[:, :-1], w[:, 1:]


def parse_args():
    """The options, and K of the prefix variant (1: the dual form)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per repetition")
    ap.add_argument("--reps", type=int, default=3, help="repetitions; tokens_per_s is the best one")
    ap.add_argument("--data", choices=["moby_dick", "random"], default="moby_dick")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variant", default="dual",
                    help="dual (K = 1), or prefix-K: prefix mode with K >= 2 steps in every mini-batch, the algorithm "
                    "of ponder's prefix-closed-K variant")
    ap.add_argument("--inner", choices=["linear", "mlp"], default="linear",
                    help="the TTT inner model: linear (TTT-Linear) or mlp (TTT-MLP, hidden 4f; dual form only), as "
                    "ponder's configs/small_mlp.yaml")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="the outer model's matrix products: f32, or bf16 operands (the TTT inner loop stays f32), "
                    "as ponder's --precision")
    args = ap.parse_args()
    global MM_BF16
    MM_BF16 = args.precision == "bf16"
    prefix_k = 1
    if args.variant != "dual":
        if not args.variant.startswith("prefix-") or not args.variant[7:].isdigit() or int(args.variant[7:]) < 2:
            ap.error("--variant: expected dual or prefix-K with K >= 2, got '%s'" % args.variant)
        prefix_k = int(args.variant[7:])
    if args.inner == "mlp" and prefix_k > 1:
        ap.error("--inner mlp runs the dual form only (--variant dual)")
    return args, prefix_k


def main():
    args, prefix_k = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    c = CONFIGS[args.config]
    model = TTTModel(c["d"], c["layers"], c["heads"], c["seq_len"], prefix_k, args.inner == "mlp")
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    tokens = load_tokens(args.data)
    gen = torch.Generator().manual_seed(args.seed)
    tokens_per_step = c["batch"] * c["seq_len"]

    def step():
        x, y = sample_batch(tokens, c["batch"], c["seq_len"], gen)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item(), float(norm)

    initial_loss, initial_grad_norm = step()
    for _ in range(args.warmup - 1):
        step()
    times = []
    loss = initial_loss
    for _ in range(args.reps):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            loss, _ = step()
        times.append((time.perf_counter() - t0) / args.steps)
    best = min(times)
    print(
        json.dumps(
            {
                "framework": "pytorch " + torch_version(),
                "torch_version": torch.__version__,
                "config": args.config,
                "variant": "dual" if prefix_k == 1 else "prefix",
                "inner": args.inner,
                "precision": args.precision,
                "K": prefix_k,
                "threads": args.threads,
                "tokens_per_s": tokens_per_step / best,
                "step_ms": best * 1e3,
                "step_ms_reps": [round(t * 1e3, 2) for t in times],
                "params": params,
                "batch_size": c["batch"],
                "seq_len": c["seq_len"],
                "data": args.data,
                "initial_loss": initial_loss,
                "ln_vocab": math.log(VOCAB),
                "initial_grad_norm": initial_grad_norm,
                "loss": loss,
                "steps": args.steps,
                "reps": args.reps,
                "warmup": args.warmup,
                "python": platform.python_version(),
                "load_avg_1m": os.getloadavg()[0],
                "blas_core": loaded_blas_core(),
            }
        )
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
