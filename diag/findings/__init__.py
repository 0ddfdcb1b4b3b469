"""Findings: the one model every analyzer returns, their grouping and rank merging, and the words,
colours and advice they are printed with."""
