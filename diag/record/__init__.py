"""`diag record`'s launcher side: run the program with collectors injected, and write the trace
directory's manifest."""
