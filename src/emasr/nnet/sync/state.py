"""State copies for the rules' state_dict: a saved state must not alias the live buffers."""
from __future__ import annotations

import torch


def copy_or_none(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.detach().clone()
