"""`diag bench`: the sign-off the LightX2V posts describe, measured so it cannot lie.

Configurations run as interleaved trials under `diag record`; the tables (steady state from
step 3 and step 6 with 95% intervals, pairs, variable resolution) leave out every trial whose
measured window the trace shows was not steady state, and say why. docs/BENCH.md is the method.
Modules: layout (bench.json), spec (--config), capture (the program's output), runner (trials),
program_clock (LightX2V's infer_main log), trial (one trace read), validity, tables, render.
"""
