"""The compat smoke's hand-written loop: one compiled function, called at sizes 4, 4 and 8 (the
third call recompiles on the new size). Prints one checksum line per call."""

import torch

f = torch.compile(lambda x: torch.sin(x) * 2, backend="aot_eager")
for n in (4, 4, 8):
    print("loop", n, round(float(f(torch.arange(n, dtype=torch.float32)).sum()), 6), flush=True)
