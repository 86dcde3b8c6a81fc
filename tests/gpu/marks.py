"""What marks a test of the GPU suite: the `gpu` marker (deselected in CI)
and a skip where torch finds no CUDA device."""

from __future__ import annotations

import pytest


def cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


GPU = [pytest.mark.gpu,
       pytest.mark.skipif(not cuda(), reason="needs torch and an NVIDIA GPU (gpu marker)")]
