"""How a network takes its input (`Architecture.input_mode`): the one place that knows it.

- ``frame``: a minibatch is `data.minibatch_frames` frames, each with its spliced context
  (features.splice); the model maps [B, D] -> [B, P] (the DNN, the TDNN).
- ``sequence``: utterances are cut into chunks of `data.chunk_frames` frames, each run with
  `data.left_context` frames before it and `data.output_delay` after, `data.chunks_per_minibatch`
  to a minibatch; the model maps [B, T, D] -> [B, T, P] and its output at left + delay + m
  predicts the label of the chunk's frame m (the LSTMP).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from emasr.nnet.data import make_chunks


@dataclass(frozen=True)
class InputMode:
    name: str
    sequence: bool      # the data paths cut chunks (True) or take frames (False)

    def minibatch_frames(self, data) -> int:
        """Target frames a worker's minibatch holds (a sequence's: chunks x chunk frames)."""
        return data.chunks_per_minibatch * data.chunk_frames if self.sequence \
            else data.minibatch_frames

    def minibatches(self, lengths: list[int], data) -> int:
        """Minibatches an epoch of utterances of these target lengths gives, every one full but
        the last (an utterance's last chunk is padded)."""
        if self.sequence:
            examples = sum(-(-n // data.chunk_frames) for n in lengths)
            return -(-examples // data.chunks_per_minibatch)
        return -(-sum(lengths) // data.minibatch_frames)

    def aligned(self, out: torch.Tensor, data) -> torch.Tensor:
        """A model's output aligned with the labels: [B, P], or a chunk's part [B, C, P]."""
        if not self.sequence:
            return out
        start = data.left_context + data.output_delay
        return out[:, start:start + data.chunk_frames]

    def log_posteriors(self, model, feats: np.ndarray, data) -> np.ndarray:
        """[T, P] of one utterance, cut as in training."""
        if not self.sequence:
            return model(torch.from_numpy(np.ascontiguousarray(feats, dtype=np.float32))).numpy()
        chunks, _ = make_chunks(feats.astype(np.float32), None, data.chunk_frames,
                                data.left_context, data.output_delay)
        out = self.aligned(model(torch.from_numpy(chunks)), data)
        return out.reshape(-1, out.shape[-1])[:len(feats)].numpy()


INPUT_MODES = {m.name: m for m in (InputMode("frame", False), InputMode("sequence", True))}
