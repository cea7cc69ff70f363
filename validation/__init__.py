"""Measured ground truth for the memory model (measuring needs the ``validate`` extra: torch).

``models`` builds Llama-style dense and MoE models from a ModelSpec in plain PyTorch,
``measure`` measures one training step's per-GPU memory on fake tensors with PyTorch's memory
trackers, and ``run_all`` measures every configuration and writes ``results.json``. ``report``
(torch-free) prints the stored measurements against the estimator. The app never imports this
package; it reads the stored JSON through ``explorer.validation_data``.
"""
