"""What runs inside the recorded program: bootstrap, compile/guard/cache, steps, profiler windows."""
