"""Live counters of a recording in progress (Prometheus text), and the launcher's HTTP server for
them."""
