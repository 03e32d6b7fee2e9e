"""Layout inference: what it costs."""
import tegula.language as T



def test_lowering_finds_the_layout_threads_once_per_kernel(monkeypatch):
    """InferLayouts and LowerTileOps each walk a kernel once for its layout threads (the layout
    plan's count is handed to choose_shared_layouts), on the wgmma path too."""
    import tegula
    from tegula.backends.cuda.passes import layout_inference as li

    calls: list = []
    real = li.layout_threads
    monkeypatch.setattr(li, "layout_threads", lambda k: calls.append(k) or real(k))
    M = N = K = 128

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            As = T.alloc_shared((M, 64), "float16")
            Bs = T.alloc_shared((64, N), "float16")
            Cl = T.alloc_fragment((M, N), "float32")
            T.clear(Cl)
            for k in T.Pipelined(K // 64, num_stages=2):
                T.copy(A[0, k * 64], As)
                T.copy(B[k * 64, 0], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C)

    tegula.compile(gemm, target="cuda-emu:sm_90a")
    assert len(calls) == 2  # InferLayouts, LowerTileOps
