"""The fidelity harness of bench/fidelity.py (issue 24): an oracle that records torch's own
record of a program without diag, a generator of programs as users write them, and the
comparison of diag's claims with that record. Nothing here imports diag."""
