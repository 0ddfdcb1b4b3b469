"""One analyzer per module: pure functions from a recorded Run to findings."""
