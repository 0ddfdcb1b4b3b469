"""The readers, in the order a newcomer reads them: the trace directory's format (format.py),
its manifest (manifest.py), the event writer (events.py), the Run model read from it (run.py),
the Kineto parser (kineto.py) and its on-disk cache (kinetocache.py), the TORCH_TRACE importer
(torchtrace.py), and the cutting of profiler windows into steps (profiles.py).

Nothing is imported here: `diag record`'s collectors and `diag check` load only the modules
they use.
"""
