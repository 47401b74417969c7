"""Acoustic models: a feed-forward DNN over stacked-and-spliced frames and a deep unidirectional
LSTM with projections (LSTMP). Both output pdf log-posteriors (log_softmax over num_pdfs).

Shapes: the DNN maps [B, D] -> [B, P]; the LSTM maps [B, T, D] -> [B, T, P], where output t sees
input frames up to t (unidirectional) and, trained with an output delay d, predicts the label of
frame t - d.
"""
from __future__ import annotations

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}
NORMS = {"none": None, "batchnorm": nn.BatchNorm1d, "layernorm": nn.LayerNorm}


class DNN(nn.Module):
    sequence_model = False

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
    sequence_model = True

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


def build_model(model_config: dict, input_dim: int, num_pdfs: int) -> nn.Module:
    """The model named by model_config['type'] with the config's other keys as its arguments."""
    options = {k: v for k, v in model_config.items() if k != "type"}
    kind = model_config["type"]
    if kind == "dnn":
        return DNN(input_dim, num_pdfs, **options)
    if kind == "lstm":
        return LSTMP(input_dim, num_pdfs, **options)
    raise ValueError(f"unknown model type '{kind}'; expected dnn or lstm")
