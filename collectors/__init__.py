"""What runs inside the recorded program: bootstrap, compiles, steps, profiling."""
