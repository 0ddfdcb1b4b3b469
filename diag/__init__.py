"""diag: profiling and diagnostics for torch.compile'd diffusion-transformer inference."""

__version__ = "0.1.0"
