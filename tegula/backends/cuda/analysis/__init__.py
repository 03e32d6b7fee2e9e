"""What the CUDA passes share: analyses of the IR and builders of the IR they emit, none of them a
pass (the passes are ``backends/cuda/passes/``, listed in ``backends/cuda/pipeline.py``).

- :mod:`.pipelined_loop`: the parts of a ``T.Pipelined`` loop (:class:`~.pipelined_loop.PipelineParts`:
  stages, producer copies, consumers), its tiles given stages (:class:`~.pipelined_loop.Restage`),
  the buffers a statement writes or uses;
- :mod:`.attention`: the parts of an attention-shaped loop (:class:`~.attention.AttentionParts`) and
  the softmax overlap's schedule of it;
- :mod:`.tma`: mbarrier and TMA builders (``call_stmt``, ``barrier_addr``, ``one_thread``) and which
  copies the copy engine can do;
- :mod:`.shared_access`: the shared buffers a statement reads and writes, and what a barrier is;
- :mod:`.disjoint_stores`: loops whose iterations store to elements no other thread touches;
- :mod:`.smem_liveness`: when each shared buffer is live (for PlanSharedMemory);
- :mod:`.tma_multicast`: the cluster plan of a warp-specialized GEMM (TMA multicast).
"""
