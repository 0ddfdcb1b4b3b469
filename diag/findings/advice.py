"""Advice several findings give word for word, named once so the text renderer can print it once.

Why: a trace with no warmup marked has every compile-related finding end in the same paragraph
on how to mark warmup; printed under each, it was ten copies of 400 characters. The analyzers
write the whole text into their findings (the JSON, the TUI and the report keep it there); the
text renderer (diag.findings.model) replaces each copy by a pointer to its name and prints the text
once at the end.
"""

from __future__ import annotations

HOW_TO_MARK = (
    "mark them: `diag record --warmup-fn MOD:QUALNAME` (calls of that function are warmup), "
    "`--request-fn MOD:QUALNAME` / `--step-fn MOD:QUALNAME` (each call is one request / step), "
    "`--warmup-requests N` (the first N requests are warmup); or in the program with diag.api: "
    '`with diag.phase("warmup"):` around warmup, `with diag.request():` around each request, '
    "`with diag.step():` around each denoising step"
)

#: (name, text): the advice the text renderer prints once, under its name.
SHARED: tuple[tuple[str, str], ...] = (("how to mark warmup", HOW_TO_MARK),)
