"""Learning-rate schedules of hybrid recipes (`train.schedule`):

- ``exponential`` (the default; Kaldi nnet3's train_dnn.py): the rate decays geometrically from
  ``train.lr`` to ``train.final_lr`` over the run, as a function of the training frames processed
  by all workers together: lr(p) = lr * (final_lr / lr) ** p with p = frames done / frames planned
  (epochs x the training set's labelled frames). The same frame sees the same rate for any number
  of workers. It is set before every block.
- ``linear``: the rate falls in a straight line from ``train.lr`` to ``train.final_lr`` over the
  same progress, lr(p) = lr + (final_lr - lr) * p; ``final_lr`` 0 anneals it to zero at the run's
  end (how far the rate anneals decides how much an iterate average can add: Sandler et al.
  2023, Morales-Brotons et al. 2024).
- ``newbob`` (Kaldi nnet1's steps/nnet/train_scheduler.sh): after every epoch the global model's
  dev loss decides. An epoch whose dev loss is not lower than the best so far is rejected: the
  trainer restores the state the epoch started from. The relative improvement of the best dev loss
  over the epoch, (best_before - best_after) / best_before, starts halving once it falls under
  ``newbob_start_halving``; once halving, the rate is multiplied by ``lr_decay`` after every epoch,
  and training stops when the improvement falls under ``newbob_end_halving`` (or at
  ``train.epochs``). The first comparison is against the initial model's dev loss.
- ``constant``.

The rate never falls under ``train.min_lr``.
"""
from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("exponential", "linear", "newbob", "constant")


@dataclass
class EpochDecision:
    accepted: bool      # False: restore the model the epoch started from
    stop: bool          # True: no further epoch
    lr: float           # the rate of the next epoch
    improvement: float | None = None   # relative dev-loss improvement of the best model


class LearningRateSchedule:
    def __init__(self, kind: str, lr: float, final_lr: float | None = None, factor: float = 0.5,
                 start_halving: float = 0.01, end_halving: float = 0.001,
                 min_lr: float = 0.0) -> None:
        if kind not in SCHEDULES:
            raise ValueError(f"unknown schedule '{kind}'; expected one of {', '.join(SCHEDULES)}")
        self.kind, self.initial_lr, self.lr, self.factor = kind, lr, lr, factor
        self.final_lr = lr / 10.0 if final_lr is None else final_lr
        self.start_halving, self.end_halving, self.min_lr = start_halving, end_halving, min_lr
        self.best_loss: float | None = None   # newbob: dev loss of the last accepted model
        self.halving = False
        self.stopped = False

    @property
    def needs_initial_loss(self) -> bool:
        return self.kind == "newbob" and self.best_loss is None

    def set_initial_loss(self, dev_loss: float) -> None:
        self.best_loss = dev_loss

    def lr_at(self, progress: float) -> float:
        """The rate at `progress` (frames done / frames planned, 0..1) of the run."""
        p = min(max(progress, 0.0), 1.0)
        if self.kind == "exponential":
            self.lr = self.initial_lr * (self.final_lr / self.initial_lr) ** p
        elif self.kind == "linear":
            self.lr = self.initial_lr + (self.final_lr - self.initial_lr) * p
        return max(self.lr, self.min_lr)

    def end_epoch(self, dev_loss: float) -> EpochDecision:
        """After an epoch, with the global model's dev loss per frame."""
        if self.kind != "newbob":
            return EpochDecision(True, False, max(self.lr, self.min_lr))
        before = self.best_loss
        accepted = before is None or dev_loss < before
        if accepted:
            self.best_loss = dev_loss
        improvement = None if before is None else (before - self.best_loss) / abs(before)
        if improvement is not None:
            if self.halving and improvement < self.end_halving:
                self.stopped = True
            elif improvement < self.start_halving:
                self.halving = True
        if self.halving and not self.stopped:
            self.lr = max(self.lr * self.factor, self.min_lr)
        return EpochDecision(accepted, self.stopped, self.lr, improvement)

    def state_dict(self) -> dict:
        return {"kind": self.kind, "lr": self.lr, "best_loss": self.best_loss,
                "halving": self.halving, "stopped": self.stopped}

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind", self.kind) != self.kind:
            raise ValueError(f"the checkpoint's schedule is {state['kind']}, not {self.kind}")
        self.lr, self.best_loss = state["lr"], state["best_loss"]
        self.halving, self.stopped = state["halving"], state["stopped"]
