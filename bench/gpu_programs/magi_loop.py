"""A hand-written denoising loop over MagiCompiler-compiled DiT blocks, as a user writes one
without any serving framework: no request or step markers, so diag infers the steps.

Eight Wan-like blocks (width 1536, bf16) each `magi_compile`d with the token axis declared
dynamic; two resolutions warmed, then live requests at a third; between model calls a small
torch.compile'd helper (the CFG combine) that compiles in the first live request. Needs CUDA,
Python 3.12 and magi_compiler.

    diag record -o OUT -- python3 magi_loop.py [--split-op OP]
"""

import sys

import torch
import torch.nn.functional as F
from magi_compiler import magi_compile

DIM, HEADS = 1536, 12


#: `--split-op OP`: declare a subgraph boundary, as a user does after reading a profile (the
#: cuDNN attention kernel's op, which never appears in the graph Dynamo traces: no split).
SPLIT_OPS = sys.argv[sys.argv.index("--split-op") + 1 :][:1] if "--split-op" in sys.argv else []


def _patch(conf):
    conf.splitting_ops = list(dict.fromkeys([*conf.splitting_ops, *SPLIT_OPS]))
    return conf


@magi_compile(dynamic_arg_dims={"x": 1}, config_patch=_patch)
class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(DIM)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM)
        self.out = torch.nn.Linear(DIM, DIM)
        self.norm2 = torch.nn.LayerNorm(DIM)
        self.ffn = torch.nn.Sequential(
            torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(), torch.nn.Linear(4 * DIM, DIM)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, HEADS, DIM // HEADS).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.out(a.transpose(1, 2).reshape(b, n, DIM))
        return x + self.ffn(self.norm2(x))


@torch.compile
def combine(cond: torch.Tensor, uncond: torch.Tensor, scale: float) -> torch.Tensor:
    return uncond + scale * (cond - uncond)


torch.manual_seed(0)
blocks = [Block().cuda().to(torch.bfloat16) for _ in range(8)]


def model(x: torch.Tensor) -> torch.Tensor:
    for block in blocks:
        x = block(x)
    return x


def serve(tokens: int, steps: int = 8) -> float:
    latents = torch.randn(2, tokens, DIM, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(steps):
            out = model(latents)
            cond, uncond = out.chunk(2)
            noise = combine(cond, uncond, 5.0)
            latents = latents - 0.05 * torch.cat([noise, noise])
    torch.cuda.synchronize()
    return float(latents.float().sum())


for tokens in (1024, 2048):  # warmup, as the program does it: not marked for diag
    serve(tokens, 2)
for tokens in (3072, 3072, 2048):
    print(tokens, serve(tokens), flush=True)
