"""The tile-level IR: dtypes, expressions, buffers, statements, functions."""
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.dtype import DType, as_dtype
from tegula.ir.expr import (BinOp, BufferLoad, Call, Cast, Compare, Const, Expr, Select, UnaryOp,
                            Var, as_expr, const)
from tegula.ir.span import Span
from tegula.ir.stmt import (Atomic, Break, Continue, Copy, CumSum, Evaluate, Fill, For, Gemm,
                            IfThenElse, Kernel, LetStmt, Print, PrimFunc, Reduce, SeqStmt, Stmt,
                            BufferStore, TileOp, While, seq)
from tegula.ir import printer  # noqa: E402 (fills tegula.ir.hooks: str() of nodes prints through it)
