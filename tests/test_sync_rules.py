"""The sync rules' maths against hand-computed numbers and an independent numpy reference.

Toy problem: each worker r minimizes a quadratic 0.5 * (w - c_r)^T A_r (w - c_r) with plain SGD, so
its gradient sequence is known; the torch driver below uses the rule objects, the numpy reference
writes the update formulas of docs/design.md ("Training") again from scratch.
"""
import numpy as np
import pytest
import torch

from emasr.nnet import config as configs
from emasr.nnet.averages import ExponentialMovingAverage, decay_from_half_life
from emasr.nnet.sync import BlockMomentum, ModelAveraging, NoSync, make_rule
from emasr.nnet.sync.diloco import DiLoCo


def run_rule(rule, workers, w0, blocks, tau, lr, ema=None):
    """Local SGD on each worker for tau steps, then rule.step(mean); returns W_g per block."""
    rule.start(torch.tensor(w0, dtype=torch.float64))
    restart = rule.global_model.clone()
    trajectory, ema_trajectory = [], []
    for _ in range(blocks):
        locals_ = []
        for a, c in workers:
            w = restart.clone()
            for _ in range(tau):
                w = w - lr * (torch.tensor(a) @ (w - torch.tensor(c)))
            locals_.append(w)
        restart = rule.step(torch.stack(locals_).mean(0))
        trajectory.append(rule.global_model.clone().numpy())
        if ema is not None:
            ema.update(rule.global_model)
            ema_trajectory.append(ema.average.clone().numpy())
    return np.array(trajectory), np.array(ema_trajectory)


def numpy_reference(strategy, workers, w0, blocks, tau, lr, eta=0.0, zeta=1.0, nesterov=False,
                    alpha=None):
    w_g = np.array(w0, dtype=np.float64)
    d = np.zeros_like(w_g)
    start = w_g.copy()
    w_ema = None
    out, out_ema = [], []
    for _ in range(blocks):
        finals = []
        for a, c in workers:
            w = start.copy()
            for _ in range(tau):
                w = w - lr * a.dot(w - c)
            finals.append(w)
        w_bar = sum(finals) / len(finals)
        if strategy == "ma":
            w_g = w_bar
            start = w_g
        else:
            g = w_bar - start   # the workers' progress from where they started
            d = eta * d + zeta * g
            w_g = w_g + d
            start = w_g + eta * d if nesterov else w_g
        out.append(w_g.copy())
        if alpha is not None:
            w_ema = w_g.copy() if w_ema is None else alpha * w_ema + (1 - alpha) * w_g
            out_ema.append(w_ema.copy())
    return np.array(out), np.array(out_ema)


def toy_workers(n, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    workers = []
    for _ in range(n):
        m = rng.normal(size=(dim, dim))
        workers.append((m @ m.T / dim + np.eye(dim) * 0.5, rng.normal(size=dim)))
    return workers


def run_constant(rule, moves, blocks, ema=None, restarts=None):
    """1-parameter workers whose local block moves w by a fixed amount (a known gradient sum)."""
    rule.start(torch.zeros(1, dtype=torch.float64))
    restart = rule.global_model.clone()
    w_gs, emas = [], []
    for _ in range(blocks):
        restart = rule.step(torch.stack([restart + m for m in moves]).mean(0))
        w_gs.append(float(rule.global_model))
        if restarts is not None:
            restarts.append(float(restart))
        if ema is not None:
            ema.update(rule.global_model)
            emas.append(float(ema.average))
    return w_gs, emas


def test_bmuf_classic_hand_computed():
    # two workers moving +1 and +3 per block: G = 2 every block; D = 2, 3, 3.5; W_g = 2, 5, 8.5
    ema = ExponentialMovingAverage(0.5)
    w_g, emas = run_constant(BlockMomentum(0.5, 1.0, nesterov=False), [1.0, 3.0], 3, ema)
    assert w_g == [2.0, 5.0, 8.5]
    assert emas == [2.0, 3.5, 6.0]   # started at the first W_g, then 0.5*old + 0.5*new


def test_bmuf_nesterov_hand_computed():
    # G is the progress from the restart point, 2 every block: D = 2, 3, 3.5 and W_g = 2, 5, 8.5
    # as in classic BMUF, but the workers restart from W_g + eta*D = 3, 6.5, 10.25
    restarts = []
    w_g, _ = run_constant(BlockMomentum(0.5, 1.0, nesterov=True), [1.0, 3.0], 3,
                          restarts=restarts)
    assert w_g == [2.0, 5.0, 8.5]
    assert restarts == [3.0, 6.5, 10.25]


def test_bmuf_warmup_is_model_averaging_then_momentum_from_zero():
    # two warm-up blocks: W_g = 2, 4 (MA: G = 2 each), D reset to 0; then classic BMUF from there:
    # D = 2, 3 and W_g = 6, 9
    rule = BlockMomentum(0.5, 1.0, nesterov=True, warmup_blocks=2)
    restarts = []
    w_g, _ = run_constant(rule, [1.0, 3.0], 4, restarts=restarts)
    assert w_g == [2.0, 4.0, 6.0, 9.0]
    assert restarts == [2.0, 4.0, 7.0, 10.5]   # Nesterov's look-ahead only after the warm-up
    again = BlockMomentum(0.5, 1.0, nesterov=True, warmup_blocks=2)
    again.load_state_dict(rule.state_dict())
    assert again.steps == 4 and again.momentum == 0.5


def test_bmuf_momentum_decays_when_the_workers_stop_moving():
    # after one block of progress 2 the workers make none: D = 2, then eta^k * 2 (Nesterov and
    # classic), so W_g converges to 2 / (1 - eta) = 4 instead of drifting on
    for nesterov in (False, True):
        rule = BlockMomentum(0.5, 1.0, nesterov=nesterov)
        rule.start(torch.zeros(1, dtype=torch.float64))
        restart = rule.step(torch.tensor([2.0], dtype=torch.float64) + rule.start_point())
        for _ in range(30):
            restart = rule.step(restart.clone())
        assert float(rule.global_model) == pytest.approx(4.0, abs=1e-6), nesterov


def test_ma_hand_computed():
    w_g, _ = run_constant(ModelAveraging(), [1.0, 3.0], 3)
    assert w_g == [2.0, 4.0, 6.0]


@pytest.mark.parametrize("rule", [ModelAveraging(), NoSync()])
def test_ma_keeps_its_own_copy_of_the_buffer_the_trainer_reuses(rule):
    rule.start(torch.zeros(3))
    buffer = torch.tensor([1.0, 2.0, 3.0])
    first = rule.step(buffer)
    buffer.fill_(7.0)   # the trainer writes the next sync's average into the same buffer
    assert torch.equal(rule.global_model, torch.tensor([1.0, 2.0, 3.0]))
    assert rule.step(buffer) is first   # W_g's buffer is written in place, not reallocated
    assert torch.equal(rule.global_model, torch.full((3,), 7.0))


@pytest.mark.parametrize("nesterov", [False, True])
def test_bmuf_restarts_from_one_buffer_and_keeps_its_state_apart_from_the_average(nesterov):
    # eta = 0.5: W_g = 2, then D = 0.5 * 2 + (7 - S) with S = W_g + eta * D (Nesterov) or W_g
    rule = BlockMomentum(0.5, 1.0, nesterov=nesterov)
    rule.start(torch.zeros(3))
    buffer = torch.full((3,), 2.0)
    first = rule.step(buffer)
    buffer.fill_(7.0)   # the trainer writes the next sync's average into the same buffer
    assert torch.equal(rule.global_model, torch.full((3,), 2.0))
    assert torch.equal(first, torch.full((3,), 3.0 if nesterov else 2.0))
    assert rule.step(buffer) is first   # the start point is rewritten in place at every sync
    delta = 0.5 * 2.0 + (7.0 - (3.0 if nesterov else 2.0))
    assert torch.equal(rule.global_model, torch.full((3,), 2.0 + delta))
    assert torch.equal(first, torch.full((3,), 2.0 + delta + (0.5 * delta if nesterov else 0.0)))


@pytest.mark.parametrize("n", [2, 4])
def test_ma_matches_reference(n):
    workers = toy_workers(n)
    got, got_ema = run_rule(ModelAveraging(), workers, [1.0, -2.0, 0.5], 6, 3, 0.1,
                            ExponentialMovingAverage(0.7))
    want, want_ema = numpy_reference("ma", workers, [1.0, -2.0, 0.5], 6, 3, 0.1, alpha=0.7)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_ema, want_ema, rtol=0, atol=1e-12)


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("n,zeta", [(2, 1.0), (4, 1.0), (4, 0.8)])
def test_bmuf_matches_reference(n, zeta, nesterov):
    workers = toy_workers(n, seed=n)
    eta = 1 - 1 / n
    sync = configs.resolve(None, [f"sync.block_lr={zeta}",
                                  f"sync.nesterov={str(nesterov).lower()}"]).sync
    rule = make_rule(sync, n)   # the default block momentum, 1 - 1/N
    assert rule.eta == pytest.approx(eta)
    got, got_ema = run_rule(rule, workers, [0.3, 0.2, -1.0], 8, 2, 0.05,
                            ExponentialMovingAverage(0.9))
    want, want_ema = numpy_reference("bmuf", workers, [0.3, 0.2, -1.0], 8, 2, 0.05, eta=eta,
                                     zeta=zeta, nesterov=nesterov, alpha=0.9)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_ema, want_ema, rtol=0, atol=1e-12)


def test_bmuf_one_worker_no_momentum_is_local_sgd():
    workers = toy_workers(1, seed=7)
    a, c = workers[0]
    got, _ = run_rule(BlockMomentum(0.0, 1.0, nesterov=True), workers, [1.0, 1.0, 1.0], 5, 4, 0.1)
    w = np.ones(3)
    for block in range(5):
        for _ in range(4):
            w = w - 0.1 * a.dot(w - c)
        np.testing.assert_allclose(got[block], w, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rule_factory", [NoSync, ModelAveraging,
                                          lambda: BlockMomentum(0.75, 1.0, nesterov=True)])
def test_ema_never_changes_the_global_trajectory(rule_factory):
    workers = toy_workers(1 if rule_factory is NoSync else 4, seed=3)
    without, _ = run_rule(rule_factory(), workers, [1.0, 2.0, 3.0], 6, 3, 0.1)
    with_ema, emas = run_rule(rule_factory(), workers, [1.0, 2.0, 3.0], 6, 3, 0.1,
                              ExponentialMovingAverage(0.95))
    assert np.array_equal(without, with_ema)
    assert not np.allclose(emas[-1], with_ema[-1])   # the EMA itself is a different model


def test_single_rule_rejects_several_workers():
    with pytest.raises(configs.ConfigError, match="single"):
        make_rule(configs.resolve(None, ["sync.strategy=single"]).sync, 2)


def test_the_registry_builds_each_rule_from_its_keys():
    bmuf = make_rule(configs.resolve(None, ["sync.block_lr=0.5", "sync.nesterov=false",
                                            "sync.warmup_blocks=3"]).sync, 8)
    assert (bmuf.eta, bmuf.zeta, bmuf.nesterov, bmuf.warmup_blocks) == (0.875, 0.5, False, 3)
    eta = make_rule(configs.resolve(None, ["sync.block_momentum=0.5"]).sync, 8).eta
    assert eta == 0.5
    assert isinstance(make_rule(configs.resolve(None, ["sync.strategy=ma"]).sync, 4),
                      ModelAveraging)
    with pytest.raises(configs.ConfigError, match=r"sync.block_momentum must be in \[0, 1\)"):
        configs.resolve(None, ["sync.block_momentum=1.2"])


def test_decay_from_half_life():
    assert decay_from_half_life(1000, 1000) == pytest.approx(0.5)
    alpha = decay_from_half_life(256 * 16 * 4, 1_000_000)
    assert alpha ** (1_000_000 / (256 * 16 * 4)) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        decay_from_half_life(100, 0)


@pytest.mark.parametrize("make", [lambda: BlockMomentum(0.5, 1.0), lambda: DiLoCo(0.7, 0.9)],
                         ids=["bmuf", "diloco"])
def test_rule_state_round_trip(make):
    rule = make()
    rule.start(torch.zeros(2, dtype=torch.float64))
    rule.step(torch.ones(2, dtype=torch.float64))
    copy = make()
    copy.load_state_dict(rule.state_dict())
    assert torch.equal(copy.step(torch.full((2,), 3.0, dtype=torch.float64)),
                       rule.step(torch.full((2,), 3.0, dtype=torch.float64)))


def test_diloco_hand_computed():
    # two workers moving +1 and +3 per block from W_g: the pseudo-gradient W_g - W̄ is -2 every
    # block; outer lr 0.5, momentum 0.5: m = -2, -3, -3.5; the step -2 + 0.5 m = -3, -3.5, -3.75;
    # W_g = 1.5, 3.25, 5.125, and the workers restart from W_g
    restarts = []
    w_g, _ = run_constant(DiLoCo(0.5, 0.5), [1.0, 3.0], 3, restarts=restarts)
    assert w_g == [1.5, 3.25, 5.125]
    assert restarts == w_g
    # lr 1, momentum 0: model averaging
    assert run_constant(DiLoCo(1.0, 0.0), [1.0, 3.0], 3)[0] == [2.0, 4.0, 6.0]


@pytest.mark.parametrize("n", [2, 4])
def test_diloco_equals_nesterov_sgd_on_the_pseudo_gradient_block_by_block(n):
    """The paper's outer step is torch.optim.SGD(nesterov=True) on W_g with W_g - W̄ as its
    gradient: that optimizer, driven by the same workers, is the reference."""
    workers, w0 = toy_workers(n, seed=10 + n), [0.5, -1.0, 2.0]
    sync = configs.resolve(None, ["sync.strategy=diloco"]).sync
    rule = make_rule(sync, n)
    assert (rule.lr, rule.mu) == (0.7, 0.9)   # the paper's defaults
    got, got_ema = run_rule(rule, workers, w0, 8, 3, 0.05, ExponentialMovingAverage(0.8))
    w_g = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
    outer = torch.optim.SGD([w_g], lr=0.7, momentum=0.9, nesterov=True)
    want, want_ema, ema = [], [], None
    for _ in range(8):
        finals = []
        for a, c in workers:
            w = w_g.detach().numpy().copy()
            for _ in range(3):
                w = w - 0.05 * a.dot(w - c)
            finals.append(w)
        w_g.grad = w_g.detach() - torch.tensor(sum(finals) / n)
        outer.step()
        want.append(w_g.detach().numpy().copy())
        ema = want[-1] if ema is None else 0.8 * ema + 0.2 * want[-1]
        want_ema.append(ema)
    np.testing.assert_allclose(got, np.array(want), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_ema, np.array(want_ema), rtol=0, atol=1e-12)


def test_diloco_keys_are_checked():
    with pytest.raises(configs.ConfigError, match=r"sync.outer_momentum must be in \[0, 1\)"):
        configs.resolve(None, ["sync.strategy=diloco", "sync.outer_momentum=1"])
