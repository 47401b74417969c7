"""Acoustic models: a feed-forward DNN over stacked-and-spliced frames and a deep unidirectional
LSTM with projections (LSTMP). Both output pdf log-posteriors (log_softmax over num_pdfs).

Shapes: the DNN maps [B, D] -> [B, P]; the LSTM maps [B, T, D] -> [B, T, P], where output t sees
input frames up to t (unidirectional) and, trained with an output delay d, predicts the label of
frame t - d.

ARCHITECTURES is the one registry: an architecture is its module (or class here) plus one entry,
and the entry carries its `model` section (a Section dataclass whose fields are the model's
arguments), its input mode (emasr.nnet.models.input_modes), what the config check asks of the other
sections, and the report's label.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from emasr.nnet.models import tdnn
from emasr.nnet.models.input_modes import INPUT_MODES, InputMode
from emasr.nnet.sections import ConfigError, Section

ACTIVATIONS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}
NORMS = {"none": None, "batchnorm": nn.BatchNorm1d, "layernorm": nn.LayerNorm}


class DNN(nn.Module):
    input_mode = "frame"

    def __init__(self, input_dim: int, num_pdfs: int, hidden_layers: int = 6,
                 hidden_dim: int = 1024, activation: str = "relu", norm: str = "none",
                 dropout: float = 0.0) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation '{activation}'; expected {', '.join(ACTIVATIONS)}")
        if norm not in NORMS:
            raise ValueError(f"unknown norm '{norm}'; expected {', '.join(NORMS)}")
        layers: list[nn.Module] = []
        dim = input_dim
        for _ in range(hidden_layers):
            layers.append(nn.Linear(dim, hidden_dim))
            if NORMS[norm] is not None:
                layers.append(NORMS[norm](hidden_dim))
            layers.append(ACTIVATIONS[activation]())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            dim = hidden_dim
        layers.append(nn.Linear(dim, num_pdfs))
        self.layers = nn.Sequential(*layers)
        self.input_dim, self.num_pdfs = input_dim, num_pdfs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # .float(): under bf16 autocast the log-softmax (and so the loss) is computed in fp32;
        # a no-op in fp32
        return torch.log_softmax(self.layers(x).float(), dim=-1)


class LSTMP(nn.Module):
    input_mode = "sequence"

    def __init__(self, input_dim: int, num_pdfs: int, num_layers: int = 3,
                 hidden_size: int = 1024, proj_size: int = 256, dropout: float = 0.0) -> None:
        super().__init__()
        if proj_size >= hidden_size:
            raise ValueError(f"proj_size ({proj_size}) must be smaller than hidden_size "
                             f"({hidden_size})")
        self.lstm = nn.LSTM(input_dim, hidden_size, num_layers=num_layers, batch_first=True,
                            proj_size=proj_size, dropout=dropout if num_layers > 1 else 0.0)
        self.output = nn.Linear(proj_size if proj_size > 0 else hidden_size, num_pdfs)
        self.input_dim, self.num_pdfs = input_dim, num_pdfs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(x)
        return torch.log_softmax(self.output(hidden).float(), dim=-1)   # fp32, as the DNN


@dataclass
class DnnConfig(Section):
    type: str = "dnn"
    hidden_layers: int = 6
    hidden_dim: int = 1024
    activation: str = "relu"       # relu | sigmoid | tanh
    norm: str = "none"             # none | batchnorm | layernorm
    dropout: float = 0.0


def check_dnn(config) -> None:
    m = config.model
    if m.activation not in ACTIVATIONS:
        raise ConfigError(f"model.activation '{m.activation}': expected one of "
                          f"{', '.join(ACTIVATIONS)}")
    if m.norm not in NORMS:
        raise ConfigError(f"model.norm '{m.norm}': expected one of {', '.join(NORMS)}")


@dataclass
class LstmConfig(Section):
    type: str = "lstm"
    num_layers: int = 3
    hidden_size: int = 1024
    proj_size: int = 256
    dropout: float = 0.0


def check_lstm(config) -> None:
    m = config.model
    if m.proj_size >= m.hidden_size:
        raise ConfigError(f"model.proj_size ({m.proj_size}) must be smaller than "
                          f"model.hidden_size ({m.hidden_size})")


@dataclass(frozen=True)
class Architecture:
    name: str                  # model.type; the recipe's --archs
    label: str                 # how the report names it
    config: type               # its `model` section (its fields but `type` are the arguments)
    module: Callable           # (input_dim, num_pdfs, **arguments) -> nn.Module
    input_mode: str            # emasr.nnet.models.input_modes
    check: Callable | None = None   # (config) -> None, or a ConfigError

    @property
    def mode(self) -> InputMode:
        return INPUT_MODES[self.input_mode]


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (
    Architecture("dnn", "DNN", DnnConfig, DNN, "frame", check_dnn),
    Architecture("lstm", "LSTMP", LstmConfig, LSTMP, "sequence", check_lstm),
    Architecture("tdnn", "TDNN", tdnn.TdnnConfig, tdnn.TDNN, "frame", tdnn.check),
)}


def architecture(model_config) -> Architecture:
    kind = model_config.type if isinstance(model_config, Section) else model_config["type"]
    if kind not in ARCHITECTURES:
        raise ConfigError(f"unknown model.type '{kind}'; expected one of {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[kind]


def model_config(values: dict, where: str = "model"):
    """A `model` section from a mapping (a saved config's or a model file's)."""
    return architecture(values).config.build(values, where)


def build_model(config, input_dim: int, num_pdfs: int) -> nn.Module:
    """The model of a `model` section (or of the mapping a model file stores)."""
    if not isinstance(config, Section):
        config = model_config(config)
    arguments = {k: v for k, v in config.to_dict().items() if k != "type"}
    return architecture(config).module(input_dim, num_pdfs, **arguments)
