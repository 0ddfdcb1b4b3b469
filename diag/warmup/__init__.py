"""`diag warmup-plan`: the smallest warmup that covers a day's live compiles, its pasteable forms,
and
its replay."""
