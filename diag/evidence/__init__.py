"""What happened in a recording: the evidence every analyzer, check, the TUI and the report share
(a recompile's cause, a spike's cause, fallbacks, regions, offload, shapes, step and request
names)."""
