"""tegula kernels inside PyTorch models: custom ops, autograd, torch.compile.

Three fused kernels become differentiable ``torch.library`` ops with ``tegula.torch.op``:

- ``rms_norm(X, W)``: RMSNorm of the rows of X, forward and backward (dX) as tegula kernels;
- ``rope(X, C, S, heads)``: rotary embedding of rows laid out as (batch, seq, heads, dim); its
  backward is the same kernel rotating the other way;
- ``attention(Q, K, V, causal)``: flash attention, forward (online softmax, saving the row
  log-sum-exp) and backward (dQ, and dK/dV per key block) as tegula kernels.

A small transformer block built from them runs under ``torch.compile(fullgraph=True)``, forward
and backward. Every kernel's schema, fake (meta) function and dynamic shapes come from the
kernel; nothing is written by hand except each backward's formula.

Run it:  python examples/torch_ops.py [--target cpu]   (a CPU-only torch is enough for cpu)
"""
import argparse
import math
from types import SimpleNamespace

import torch

import tegula
import tegula.language as T
import tegula.torch

LOG2E = math.log2(math.e)


def kernels(dtype="float32", target="auto"):
    """The eager ``@tegula.jit`` kernels for tensors of ``dtype``, built for ``target``; they
    compute in float32 (float64 for float64 tensors)."""
    acc = "float64" if dtype == "float64" else "float32"

    @tegula.jit(target=target)
    def rms_norm_fwd(X, W, eps=1e-6, block_M=4, threads=128):
        """Y = X / sqrt(mean(X**2) + eps) * W per row; R = 1 / rms per row (for the backward)."""
        M, N = T.const("M, N")
        X: T.Tensor((M, N), dtype)
        W: T.Tensor((N,), dtype)
        Y = T.empty((M, N), dtype)
        R = T.empty((M,), acc)
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), acc)
            sq = T.alloc_fragment((block_M, N), acc)
            w = T.alloc_fragment((N,), acc)
            r = T.alloc_fragment((block_M,), acc)
            T.copy(X[bx * block_M, 0], x)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, r, dim=1)
            for i in T.Parallel(block_M):
                r[i] = T.rsqrt(r[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * r[i] * w[j]
            T.copy(x, Y[bx * block_M, 0])
            T.copy(r, R[bx * block_M])
        return Y, R

    @tegula.jit(target=target)
    def rms_norm_bwd(X, W, R, dY, block_M=4, threads=128):
        """dX = r * (g - x_hat * mean(g * x_hat)) with x_hat = X * r, g = dY * W."""
        M, N = T.const("M, N")
        X: T.Tensor((M, N), dtype)
        W: T.Tensor((N,), dtype)
        R: T.Tensor((M,), acc)
        dY: T.Tensor((M, N), dtype)
        dX = T.empty((M, N), dtype)
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), acc)
            g = T.alloc_fragment((block_M, N), acc)
            t = T.alloc_fragment((block_M, N), acc)
            w = T.alloc_fragment((N,), acc)
            r = T.alloc_fragment((block_M,), acc)
            c = T.alloc_fragment((block_M,), acc)
            T.copy(X[bx * block_M, 0], x)
            T.copy(dY[bx * block_M, 0], g)
            T.copy(W, w)
            T.copy(R[bx * block_M], r)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * r[i]
                g[i, j] = g[i, j] * w[j]
                t[i, j] = x[i, j] * g[i, j]
            T.reduce_sum(t, c, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = r[i] * (g[i, j] - x[i, j] * c[i] / N)
            T.copy(x, dX[bx * block_M, 0])
        return dX

    @tegula.jit(target=target)
    def rope_fwd(X, C, S, heads=1, block_M=16, threads=128):
        """Rows of X (batch * seq * heads, dim): the halves (x1, x2) of row r rotate by the angle
        of position (r // heads) % seq: (x1 C - x2 S, x2 C + x1 S)."""
        M, D, L, D2 = T.const("M, D, L, D2")
        X: T.Tensor((M, D), dtype)
        C: T.Tensor((L, D2), acc)
        S: T.Tensor((L, D2), acc)
        Y = T.empty((M, D), dtype)
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i, j in T.Parallel(block_M, D2):
                row = bx * block_M + i
                if row < M:
                    p = row // heads % L
                    x1 = T.Cast(acc, X[row, j])
                    x2 = T.Cast(acc, X[row, j + D2])
                    Y[row, j] = T.Cast(dtype, x1 * C[p, j] - x2 * S[p, j])
                    Y[row, j + D2] = T.Cast(dtype, x2 * C[p, j] + x1 * S[p, j])
        return Y

    @tegula.jit(target=target)
    def attention_fwd(Q, K, V, causal=False, block_M=32, block_N=32, threads=128):
        """O = softmax(Q K^T / sqrt(D)) V per (batch, head) by online softmax over key blocks;
        L = the natural log-sum-exp of each score row (for the backward)."""
        B, H, N, D = T.const("B, H, N, D")
        Q: T.Tensor((B, H, N, D), dtype)
        K: T.Tensor((B, H, N, D), dtype)
        V: T.Tensor((B, H, N, D), dtype)
        O = T.empty((B, H, N, D), dtype)
        L = T.empty((B, H, N), acc)
        scale = LOG2E / math.sqrt(D)
        with T.Kernel(T.ceildiv(N, block_M), H, B, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((block_M, D), dtype)
            k_s = T.alloc_shared((block_N, D), dtype)
            v_s = T.alloc_shared((block_N, D), dtype)
            s = T.alloc_fragment((block_M, block_N), acc)
            p = T.alloc_fragment((block_M, block_N), dtype)
            o = T.alloc_fragment((block_M, D), acc)
            m = T.alloc_fragment((block_M,), acc)
            m_old = T.alloc_fragment((block_M,), acc)
            corr = T.alloc_fragment((block_M,), acc)
            l = T.alloc_fragment((block_M,), acc)
            l_new = T.alloc_fragment((block_M,), acc)
            q0 = bx * block_M
            T.copy(Q[b, h, q0:q0 + block_M, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(acc))
            if causal:
                n_blocks = T.min(T.ceildiv(N, block_N), T.ceildiv(q0 + block_M, block_N))
            else:
                n_blocks = T.ceildiv(N, block_N)
            for kb in T.Pipelined(n_blocks, num_stages=1):
                k0 = kb * block_N
                T.copy(K[b, h, k0:k0 + block_N, :], k_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    if causal:
                        ok = (k0 + j < N) & (k0 + j <= q0 + i)
                    else:
                        ok = k0 + j < N
                    s[i, j] = T.if_then_else(ok, s[i, j] * scale, -T.infinity(acc))
                T.copy(m, m_old)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    corr[i] = T.exp2(m_old[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] - m[i])
                T.reduce_sum(s, l_new, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * corr[i] + l_new[i]
                for i, j in T.Parallel(block_M, D):
                    o[i, j] *= corr[i]
                T.copy(s, p)
                T.copy(V[b, h, k0:k0 + block_N, :], v_s)
                T.gemm(p, v_s, o)
            for i, j in T.Parallel(block_M, D):
                o[i, j] /= l[i]
            for i in T.Parallel(block_M):
                m[i] = (m[i] + T.log2(l[i])) / LOG2E
            T.copy(o, O[b, h, q0:q0 + block_M, :])
            T.copy(m, L[b, h, q0:q0 + block_M])
        return O, L

    @tegula.jit(target=target)
    def attention_bwd_dkv(Q, K, V, dO, L, Dl, causal=False, block_M=32, block_N=32, threads=128):
        """dK, dV of one key block, over the query blocks: P = exp(Q K^T / sqrt(D) - L),
        dV += P^T dO, dS = P * (dO V^T - Dl), dK += dS^T Q / sqrt(D)."""
        B, H, N, D = T.const("B, H, N, D")
        Q: T.Tensor((B, H, N, D), dtype)
        K: T.Tensor((B, H, N, D), dtype)
        V: T.Tensor((B, H, N, D), dtype)
        dO: T.Tensor((B, H, N, D), dtype)
        L: T.Tensor((B, H, N), acc)
        Dl: T.Tensor((B, H, N), acc)
        dK = T.empty((B, H, N, D), dtype)
        dV = T.empty((B, H, N, D), dtype)
        sm = 1.0 / math.sqrt(D)
        with T.Kernel(T.ceildiv(N, block_N), H, B, threads=threads) as (bx, h, b):
            k_s = T.alloc_shared((block_N, D), dtype)
            v_s = T.alloc_shared((block_N, D), dtype)
            q_s = T.alloc_shared((block_M, D), dtype)
            do_s = T.alloc_shared((block_M, D), dtype)
            p_s = T.alloc_shared((block_M, block_N), dtype)
            ds_s = T.alloc_shared((block_M, block_N), dtype)
            s = T.alloc_fragment((block_M, block_N), acc)
            dp = T.alloc_fragment((block_M, block_N), acc)
            lse = T.alloc_fragment((block_M,), acc)
            dl = T.alloc_fragment((block_M,), acc)
            dk = T.alloc_fragment((block_N, D), acc)
            dv = T.alloc_fragment((block_N, D), acc)
            k0 = bx * block_N
            T.copy(K[b, h, k0:k0 + block_N, :], k_s)
            T.copy(V[b, h, k0:k0 + block_N, :], v_s)
            T.fill(dk, 0)
            T.fill(dv, 0)
            first = k0 // block_M if causal else 0
            for qb in T.serial(first, T.ceildiv(N, block_M)):
                q0 = qb * block_M
                T.copy(Q[b, h, q0:q0 + block_M, :], q_s)
                T.copy(dO[b, h, q0:q0 + block_M, :], do_s)
                T.copy(L[b, h, q0:q0 + block_M], lse)
                T.copy(Dl[b, h, q0:q0 + block_M], dl)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    ok = (q0 + i < N) & (k0 + j < N)
                    if causal:
                        ok = ok & (k0 + j <= q0 + i)
                    s[i, j] = T.if_then_else(ok, T.exp(s[i, j] * sm - lse[i]), 0)
                T.copy(s, p_s)
                T.gemm(p_s, do_s, dv, transpose_A=True)
                T.gemm(do_s, v_s, dp, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = s[i, j] * (dp[i, j] - dl[i]) * sm
                T.copy(s, ds_s)
                T.gemm(ds_s, q_s, dk, transpose_A=True)
            T.copy(dk, dK[b, h, k0:k0 + block_N, :])
            T.copy(dv, dV[b, h, k0:k0 + block_N, :])
        return dK, dV

    @tegula.jit(target=target)
    def attention_bwd_dq(Q, K, V, dO, L, Dl, causal=False, block_M=32, block_N=32, threads=128):
        """dQ of one query block, over the key blocks: dQ += dS K / sqrt(D)."""
        B, H, N, D = T.const("B, H, N, D")
        Q: T.Tensor((B, H, N, D), dtype)
        K: T.Tensor((B, H, N, D), dtype)
        V: T.Tensor((B, H, N, D), dtype)
        dO: T.Tensor((B, H, N, D), dtype)
        L: T.Tensor((B, H, N), acc)
        Dl: T.Tensor((B, H, N), acc)
        dQ = T.empty((B, H, N, D), dtype)
        sm = 1.0 / math.sqrt(D)
        with T.Kernel(T.ceildiv(N, block_M), H, B, threads=threads) as (bx, h, b):
            q_s = T.alloc_shared((block_M, D), dtype)
            do_s = T.alloc_shared((block_M, D), dtype)
            k_s = T.alloc_shared((block_N, D), dtype)
            v_s = T.alloc_shared((block_N, D), dtype)
            ds_s = T.alloc_shared((block_M, block_N), dtype)
            s = T.alloc_fragment((block_M, block_N), acc)
            dp = T.alloc_fragment((block_M, block_N), acc)
            lse = T.alloc_fragment((block_M,), acc)
            dl = T.alloc_fragment((block_M,), acc)
            dq = T.alloc_fragment((block_M, D), acc)
            q0 = bx * block_M
            T.copy(Q[b, h, q0:q0 + block_M, :], q_s)
            T.copy(dO[b, h, q0:q0 + block_M, :], do_s)
            T.copy(L[b, h, q0:q0 + block_M], lse)
            T.copy(Dl[b, h, q0:q0 + block_M], dl)
            T.fill(dq, 0)
            if causal:
                n_blocks = T.min(T.ceildiv(N, block_N), T.ceildiv(q0 + block_M, block_N))
            else:
                n_blocks = T.ceildiv(N, block_N)
            for kb in T.serial(n_blocks):
                k0 = kb * block_N
                T.copy(K[b, h, k0:k0 + block_N, :], k_s)
                T.copy(V[b, h, k0:k0 + block_N, :], v_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
                T.gemm(do_s, v_s, dp, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    ok = (q0 + i < N) & (k0 + j < N)
                    if causal:
                        ok = ok & (k0 + j <= q0 + i)
                    s[i, j] = T.if_then_else(ok, T.exp(s[i, j] * sm - lse[i]) * (dp[i, j] - dl[i]) * sm, 0)
                T.copy(s, ds_s)
                T.gemm(ds_s, k_s, dq)
            T.copy(dq, dQ[b, h, q0:q0 + block_M, :])
        return dQ

    return SimpleNamespace(rms_norm_fwd=rms_norm_fwd, rms_norm_bwd=rms_norm_bwd, rope_fwd=rope_fwd,
                           attention_fwd=attention_fwd, attention_bwd_dkv=attention_bwd_dkv,
                           attention_bwd_dq=attention_bwd_dq)


def make_ops(dtype="float32", target="auto", namespace="tegula_examples"):
    """Register the differentiable ops for ``dtype`` on ``target``: ``rms_norm``, ``rope`` and
    ``attention`` (``torch.ops.<namespace>.<name>_<dtype>``)."""
    k = kernels(dtype, target)

    # RMSNorm: Y, R = op(X, W); the backward's dX is a tegula kernel, dW a torch reduction
    def rms_setup(ctx, inputs, output):
        X, W = inputs[0], inputs[1]
        ctx.save_for_backward(X, W, output[1])

    def rms_backward(ctx, dY, dR):
        X, W, R = ctx.saved_tensors
        dX = k.rms_norm_bwd(X, W, R, dY.contiguous())
        dW = (dY.to(R.dtype) * X.to(R.dtype) * R[:, None]).sum(0).to(W.dtype)
        return dX, dW, None, None, None

    # RoPE: the backward rotates the gradient back (the same kernel with -sin)
    def rope_setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[1], inputs[2])
        ctx.heads = inputs[3]

    def rope_backward(ctx, dY):
        C, S = ctx.saved_tensors
        return k.rope_fwd(dY.contiguous(), C, -S, heads=ctx.heads), None, None, None, None, None

    # attention: O, L = op(Q, K, V, causal); the backward is two tegula kernels
    def attn_setup(ctx, inputs, output):
        Q, K, V, causal = inputs[:4]
        ctx.save_for_backward(Q, K, V, *output)
        ctx.causal = causal

    def attn_backward(ctx, dO, dL):
        Q, K, V, O, L = ctx.saved_tensors
        dO = dO.contiguous()
        Dl = (dO.to(L.dtype) * O.to(L.dtype)).sum(-1)
        dK, dV = k.attention_bwd_dkv(Q, K, V, dO, L, Dl, causal=ctx.causal)
        dQ = k.attention_bwd_dq(Q, K, V, dO, L, Dl, causal=ctx.causal)
        return dQ, dK, dV, None, None, None, None

    reg = tegula.torch.op
    return SimpleNamespace(
        kernels=k,
        rms_norm=reg(f"{namespace}::rms_norm_{dtype}", k.rms_norm_fwd, backward=rms_backward,
                     setup_context=rms_setup),
        rope=reg(f"{namespace}::rope_{dtype}", k.rope_fwd, backward=rope_backward, setup_context=rope_setup),
        attention=reg(f"{namespace}::attention_{dtype}", k.attention_fwd, backward=attn_backward,
                      setup_context=attn_setup))


def rope_tables(seq, dim, base=10000.0, device="cpu", dtype=torch.float32):
    """cos and sin tables (seq, dim // 2) of the rotary embedding (float64 for float64 ops)."""
    inv = base ** (-torch.arange(0, dim // 2, dtype=torch.float64, device=device) * 2 / dim)
    ang = torch.arange(seq, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    return ang.cos().to(dtype), ang.sin().to(dtype)


class Block(torch.nn.Module):
    """A pre-norm transformer block: x + attention(rope(rmsnorm(x))), then x + mlp(rmsnorm(x)),
    with tegula's RMSNorm, RoPE and flash attention and torch's linear layers."""

    def __init__(self, ops, dim=64, heads=2, causal=True, dtype=torch.float32):
        super().__init__()
        self.ops, self.heads, self.causal = ops, heads, causal
        self.norm1 = torch.nn.Parameter(torch.ones(dim, dtype=dtype))
        self.norm2 = torch.nn.Parameter(torch.ones(dim, dtype=dtype))
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False, dtype=dtype)
        self.proj = torch.nn.Linear(dim, dim, bias=False, dtype=dtype)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim, dtype=dtype), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim, dtype=dtype))

    def forward(self, x, cos, sin):
        b, n, d = x.shape
        hd = d // self.heads
        h, _ = self.ops.rms_norm(x.reshape(b * n, d), self.norm1)
        q, k, v = self.qkv(h).reshape(b, n, 3, self.heads, hd).unbind(2)
        q = self.ops.rope(q.reshape(b * n * self.heads, hd).contiguous(), cos, sin, self.heads)
        k = self.ops.rope(k.reshape(b * n * self.heads, hd).contiguous(), cos, sin, self.heads)
        q, k, v = (t.reshape(b, n, self.heads, hd).transpose(1, 2).contiguous() for t in (q, k, v))
        o, _ = self.ops.attention(q, k, v, self.causal)
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, d))
        h, _ = self.ops.rms_norm(x.reshape(b * n, d), self.norm2)
        return x + self.mlp(h).reshape(b, n, d)


def reference_block(block, x, cos, sin):
    """The block in plain torch (float64 when the inputs are), for checking."""
    def rms(t, w):
        return t * torch.rsqrt((t * t).mean(-1, keepdim=True) + 1e-6) * w

    def rope(t):  # t: (b, n, heads, hd)
        half = t.shape[-1] // 2
        c, s = cos[:, None, :].to(t.dtype), sin[:, None, :].to(t.dtype)
        t1, t2 = t[..., :half], t[..., half:]
        return torch.cat([t1 * c - t2 * s, t2 * c + t1 * s], -1)

    b, n, d = x.shape
    hd = d // block.heads
    q, k, v = block.qkv(rms(x, block.norm1)).reshape(b, n, 3, block.heads, hd).unbind(2)
    q, k = rope(q), rope(k)
    o = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=block.causal)
    x = x + block.proj(o.transpose(1, 2).reshape(b, n, d))
    return x + block.mlp(rms(x, block.norm2))


def main(target="auto", seed=0):
    """Run the block eagerly and under torch.compile(fullgraph=True), forward and backward, and
    compare both with torch in float64; print and return the largest gradient error."""
    torch.manual_seed(seed)
    on_gpu = torch.cuda.is_available() if target == "auto" else not target.startswith("cpu")
    device = "cuda" if on_gpu else "cpu"
    dtype = "float16" if on_gpu else "float32"
    ops = make_ops(dtype, target)
    block = Block(ops, dim=64, heads=2, dtype=getattr(torch, dtype)).to(device)
    x = torch.randn(2, 48, 64, device=device, dtype=getattr(torch, dtype), requires_grad=True)
    cos, sin = rope_tables(48, 32, device=device)
    ref_block = Block(ops, dim=64, heads=2, dtype=torch.float64).to(device)
    ref_block.load_state_dict({n: p.double() for n, p in block.state_dict().items()})
    x64 = x.detach().double().requires_grad_()
    ref = reference_block(ref_block, x64, cos.double(), sin.double())
    ref.sum().backward()
    worst = 0.0
    for name, fn in (("eager", block), ("compiled", torch.compile(block, fullgraph=True))):
        x.grad = None
        y = fn(x, cos, sin)
        y.float().sum().backward()
        err_y = (y.double() - ref).abs().max().item()
        err_g = (x.grad.double() - x64.grad).abs().max().item()
        print(f"block {name:8s}  target={target}  max |y - ref| {err_y:.2e}  max |dx - ref| {err_g:.2e}")
        worst = max(worst, err_g)
    return worst


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="tegula kernels as differentiable torch ops")
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.target)
