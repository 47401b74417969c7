"""Learning-rate schedules applied once per epoch: newbob (halve on a dev frame-accuracy plateau,
then keep halving, as Kaldi's nnet1 does), exponential decay, or constant."""
from __future__ import annotations


class LearningRateSchedule:
    def __init__(self, kind: str, lr: float, factor: float = 0.5, threshold: float = 0.001,
                 min_lr: float = 0.0) -> None:
        self.kind, self.lr, self.factor = kind, lr, factor
        self.threshold, self.min_lr = threshold, min_lr
        self.previous_acc: float | None = None
        self.halving = False

    def end_epoch(self, dev_acc: float) -> float:
        """Update after an epoch with the global model's dev frame accuracy; returns the new LR."""
        if self.kind == "exponential":
            self.lr *= self.factor
        elif self.kind == "newbob":
            if self.previous_acc is not None and dev_acc - self.previous_acc < self.threshold:
                self.halving = True
            if self.halving:
                self.lr *= self.factor
            self.previous_acc = dev_acc
        self.lr = max(self.lr, self.min_lr)
        return self.lr

    def state_dict(self) -> dict:
        return {"lr": self.lr, "previous_acc": self.previous_acc, "halving": self.halving}

    def load_state_dict(self, state: dict) -> None:
        self.lr, self.previous_acc, self.halving = (state["lr"], state["previous_acc"],
                                                    state["halving"])
