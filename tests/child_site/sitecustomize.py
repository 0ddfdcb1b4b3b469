"""Put first on PYTHONPATH by tests/conftest.py for every Python process the suite starts (the
tests' programs, the reference service, diag's commands), except in test files marked
`full_shutdown`.

It freezes the garbage collector after the last atexit hook has run, so that the interpreter's
shutdown does not walk the whole heap again. For a process that imported torch and compiled,
that walk is over a second of CPU: a one-function aot_eager program took 4.7-5.2 s of CPU
with it and 3.4-3.8 s with the heap frozen at its end (user + sys, three runs each). In the
suite, the started processes spent 293 s of 2010 after their atexit hooks.

What a process does up to its exit, diag's atexit hooks included, is unchanged: this hook is
registered before any other (diag's bootstrap imports this file before it registers its own),
so it runs last. What changes is that cyclic garbage left at exit is not collected, which Python
never promised; the test files about exits (codes, signals, crashes, forks, teardown) are marked
`full_shutdown` and keep Python's whole shutdown.

This folder must hold nothing but this file: every module in it shadows the program's own.
"""

import atexit
import gc

atexit.register(gc.freeze)
