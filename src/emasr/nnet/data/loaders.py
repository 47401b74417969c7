"""The training data paths by name (`data.loader`; the one registry: the config check reads it):
`stream` reads a worker's shard every epoch through a bounded shuffle buffer
(emasr.nnet.data.TrainingData); `resident` holds it in memory, whole or in parts, and gathers
minibatches by index (emasr.nnet.data.resident)."""
from __future__ import annotations

import torch

from emasr.nnet.data import Source, TrainingData
from emasr.nnet.data.resident import ResidentData, ResidentParts

LOADERS = ("stream", "resident")


def training_data(loader: str, source: Source, utts: list[str], data_config, sequence: bool,
                  rank: int, device: torch.device):
    """Worker `rank`'s minibatches through the data path `loader`."""
    if loader == "stream":
        return TrainingData(source, utts, data_config, sequence, rank,
                            pin_memory=device.type == "cuda")
    if loader == "resident":
        whole = data_config.resident_part_frames == 0
        return (ResidentData if whole else ResidentParts)(source, utts, data_config, sequence,
                                                          rank, device)
    raise ValueError(f"unknown data.loader '{loader}'; expected one of {', '.join(LOADERS)}")
