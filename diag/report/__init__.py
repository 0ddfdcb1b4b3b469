"""`diag report`: one self-contained HTML file of a trace directory's findings and figures."""
