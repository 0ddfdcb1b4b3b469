"""The compat smoke's lowered-limit loop: one compiled function under
`torch._dynamo.config.patch(cache_size_limit=2)` (the limit's old name: the only one on torch 2.6,
an alias of recompile_limit after), called at sizes 4, 8 and 1. The second call makes the size
dynamic (2 entries); size 1, which Dynamo specialises, needs a third entry, and the lowered
limit refuses it: that call runs eagerly. Prints one checksum line per call."""

import torch

f = torch.compile(lambda x: torch.sin(x) * 2, backend="aot_eager")
with torch._dynamo.config.patch(cache_size_limit=2):
    for n in (4, 8, 1):
        y = f(torch.arange(n, dtype=torch.float32))
        print("limit", n, round(float(y.sum()), 6), flush=True)
