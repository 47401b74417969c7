"""The stacked LSTMP (emasr.nnet.workers.lstmp): K workers' LSTMPs as one computation give nn.LSTM's
outputs and gradients (the reference: emasr's LSTMP model, nn.LSTM with proj_size), and K stacked
workers train as K real workers do, one worker too."""
import copy

import pytest
import torch
import torch.nn.functional as F

from emasr.nnet import config as configs
from emasr.nnet.workers import lstmp
from emasr.nnet.data import IGNORE
from emasr.nnet.models import build_model
from emasr.nnet.workers import LoopWorkers, StackedWorkers, can_stack, make_workers
from nnet_synthetic import TINY_LSTM

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# 2 layers of 16 cells projected to 8, chunks of 5 frames after 2 of context, delay 1
SHAPE = TINY_LSTM + ["model.num_layers=2"]


def models(k: int, dtype=torch.float32):
    c = configs.resolve(None, SHAPE)
    torch.manual_seed(3)
    return [build_model(c.model, 6, 5).to(dtype) for _ in range(k)], c


def stacked(nets):
    return {name: torch.stack([dict(n.named_parameters())[name] for n in nets]).detach()
            .requires_grad_() for name, _ in nets[0].named_parameters()}


@pytest.mark.parametrize("k", [1, 3])
def test_outputs_and_gradients_equal_nn_lstm(k):
    # float64, so that any difference is the computation's, not rounding's
    nets, c = models(k, torch.float64)
    d = c.data
    x = torch.randn(k, 4, d.left_context + d.chunk_frames + d.output_delay, 6,
                    dtype=torch.float64)
    y = torch.randint(0, 5, (k, 4, d.chunk_frames))
    y[0, 1, 3:] = IGNORE   # an utterance's end
    start = d.left_context + d.output_delay
    # LSTMP.forward as it is, less its log-softmax's rounding to float32: [B, C, P]
    want = [torch.log_softmax(net.output(net.lstm(x[i])[0]), -1)[:, start:start + d.chunk_frames]
            for i, net in enumerate(nets)]
    params = stacked(nets)
    got = lstmp.forward(params, x, layers=2, start=start, frames=d.chunk_frames)
    torch.testing.assert_close(got, torch.stack(want).transpose(1, 2).reshape(k, -1, 5),
                               rtol=0, atol=1e-12)
    labels = lstmp.labels_of(y)
    torch.testing.assert_close(labels, y.transpose(1, 2).reshape(k, -1), rtol=0, atol=0)
    F.nll_loss(got.reshape(-1, 5), labels.reshape(-1), ignore_index=IGNORE,
               reduction="sum").backward()
    for i, net in enumerate(nets):
        F.nll_loss(want[i].reshape(-1, 5), y[i].reshape(-1), ignore_index=IGNORE,
                   reduction="sum").backward()
        for name, p in net.named_parameters():
            torch.testing.assert_close(params[name].grad[i], p.grad, rtol=0, atol=1e-12,
                                       msg=name)


def test_stacked_lstmps_train_as_real_workers():
    # three steps of 3 stacked LSTMPs (clipping at a norm the first step's gradients exceed,
    # SGD momentum, a short minibatch, a worker sitting a step out) against each worker alone
    # as nn.LSTM trains it (LoopWorkers); and one LSTMP alone is stacked (make_workers)
    (net,), c = models(1)
    assert can_stack(net) and not can_stack(net, precision="bf16")
    assert not can_stack(net, compile_mode="default")
    assert not can_stack(build_model(configs.resolve(None, SHAPE + ["model.dropout=0.2"]).model,
                                     6, 5))

    def sgd(params):
        return torch.optim.SGD(params, lr=0.5, momentum=0.9)

    seeds = [1000, 1001, 1002]
    cpu = torch.device("cpu")
    assert isinstance(make_workers(net, sgd, seeds[:1], cpu, 0.2, c.data), StackedWorkers)
    workers = StackedWorkers(copy.deepcopy(net), sgd, seeds, cpu, 0.2, data_config=c.data)
    rng = torch.Generator().manual_seed(0)
    width = c.data.left_context + c.data.chunk_frames + c.data.output_delay

    def batch(n):
        y = torch.randint(0, 5, (n, c.data.chunk_frames), generator=rng)
        y[0, -2:] = IGNORE
        return torch.randn(n, width, 6, generator=rng), y

    steps = [[batch(n) for n in sizes] for sizes in ((4, 4, 4), (4, 3, 4), (4, 4, 4))]
    steps[2][2] = None
    got = [workers.step(s) for s in steps]
    for k in range(3):
        one = LoopWorkers(copy.deepcopy(net), sgd, [seeds[k]], cpu, 0.2, c.data)
        for s, stats in zip(steps, got):
            if s[k] is not None:
                torch.testing.assert_close(one.step([s[k]])[0], stats[k], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(workers.vectors()[k], one.vectors()[0], rtol=0, atol=1e-5)
        momentum = workers.state(k)["optimizer"]["state"]
        for i, entry in one.state(0)["optimizer"]["state"].items():
            torch.testing.assert_close(momentum[i]["momentum_buffer"], entry["momentum_buffer"],
                                       rtol=0, atol=1e-5)
