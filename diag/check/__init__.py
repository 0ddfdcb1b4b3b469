"""`diag check`: the CI gate (policy, baseline comparison, verdict renderers)."""
