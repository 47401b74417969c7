"""A time-delay neural network (TDNN; Peddinti et al. 2015), the model of Kaldi nnet3's AISHELL
recipe: affine layers over spliced frames, each with its own time offsets, ReLU then batch norm.

Layer i takes frames {-o_i, 0, +o_i} of the layer below (`model.offsets`, default {-1,0,1} x 3 then
{-3,0,3} x 3, as `tdnn` layers with `input=Append(-o, 0, o)` in Kaldi's xconfigs); the layers
narrow the window until one frame is left for the output layer. The network sees
sum(offsets) frames on each side, so it takes frame input spliced by exactly that
(`features.splice`, checked): a [B, (2c+1) x D] minibatch row is read as 2c+1 frames of D
dimensions, and each layer is a dilated convolution of kernel 3 over them, which is the affine
over the spliced frames of the layer below, computed once for all output positions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from emasr.nnet.sections import ConfigError, Section

NORMS = ("batchnorm", "none")


@dataclass
class TdnnConfig(Section):
    type: str = "tdnn"
    hidden_dim: int = 512
    offsets: list[int] = field(default_factory=lambda: [1, 1, 1, 3, 3, 3])
    norm: str = "batchnorm"       # batchnorm (Kaldi's relu-batchnorm layers) | none
    dropout: float = 0.0


def context(offsets: list[int]) -> int:
    """Frames the network sees on each side of the frame it classifies."""
    return sum(offsets)


def check(config) -> None:
    m = config.model
    if not m.offsets or any(o < 1 for o in m.offsets):
        raise ConfigError(f"model.offsets must be positive frame offsets, one per layer, got "
                          f"{m.offsets}")
    if m.norm not in NORMS:
        raise ConfigError(f"model.norm '{m.norm}': expected one of {', '.join(NORMS)}")
    if config.features.splice != context(m.offsets):
        raise ConfigError(f"model.offsets {m.offsets} see {context(m.offsets)} frames on each "
                          f"side: set features.splice={context(m.offsets)} (it is "
                          f"{config.features.splice})")


class TDNN(nn.Module):
    input_mode = "frame"

    def __init__(self, input_dim: int, num_pdfs: int, hidden_dim: int = 512,
                 offsets: list[int] = (1, 1, 1, 3, 3, 3), norm: str = "batchnorm",
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.window = 2 * context(list(offsets)) + 1
        if input_dim % self.window:
            raise ValueError(f"input dimension {input_dim} is not {self.window} spliced frames "
                             f"(offsets {list(offsets)})")
        self.frame_dim = input_dim // self.window
        layers: list[nn.Module] = []
        dim = self.frame_dim
        for offset in offsets:
            layers += [nn.Conv1d(dim, hidden_dim, kernel_size=3, dilation=offset), nn.ReLU()]
            if norm == "batchnorm":
                layers.append(nn.BatchNorm1d(hidden_dim))
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            dim = hidden_dim
        self.layers = nn.Sequential(*layers)
        self.output = nn.Linear(hidden_dim, num_pdfs)
        self.input_dim, self.num_pdfs = input_dim, num_pdfs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames = x.view(x.shape[0], self.window, self.frame_dim).transpose(1, 2)   # [B, D, T]
        hidden = self.layers(frames).squeeze(-1)                                   # [B, H]
        return torch.log_softmax(self.output(hidden).float(), dim=-1)   # fp32, as the DNN
