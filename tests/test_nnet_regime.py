"""regime.json (emasr.nnet.training.regime): the numbers of a training's regime and BMUF's data rule."""
from __future__ import annotations

import json
import math

import pytest

from emasr.nnet import config as configs
from emasr.nnet.training import regime
from emasr.nnet.averages import decay_from_half_life


def small_profile(workers: int, extra=()) -> dict:
    config = configs.resolve(None, ["sync.strategy=bmuf", "sync.block_size=16", "train.epochs=3",
                                    "data.minibatch_frames=256", *extra])
    fps = 256 * 16 * workers
    return regime.compute(config, workers, 410_000, {"ema": decay_from_half_life(fps, 90_000)})


def test_the_small_profiles_8_worker_regime_by_hand():
    r = small_profile(8)
    # a sync covers 256 frames x tau 16 x 8 workers; an epoch of 410k frames holds 12 of them
    # and a short 13th of the 16,784 frames left: every frame is trained
    assert (r["frames_per_sync"], r["syncs_per_epoch"], r["syncs_total"]) == (32768, 13, 39)
    assert (r["frames_trained_per_epoch"], r["frames_trained_total"]) == (410_000, 1_230_000)
    assert r["init_model"] is None
    assert r["block_momentum"] == 0.875 and r["block_lr"] == 1.0     # 1 - 1/N
    assert r["time_constant_frames"] == pytest.approx(32768 / -math.log(0.875))   # 245,395.5
    assert r["data_rule_frames"] == pytest.approx(8 * 245_395.5, rel=1e-6)       # 1.96M
    assert r["data_rule_met"] is False
    [ema] = r["emas"]
    assert ema["decay_per_sync"] == pytest.approx(0.777, abs=1e-3)
    assert ema["half_life_syncs"] == pytest.approx(90_000 / 32768)      # 2.75 syncs
    assert ema["half_life_epochs"] == pytest.approx(90_000 / 410_000)   # 0.22 epoch
    assert ema["half_life_frames"] == pytest.approx(90_000)
    assert (r["workers"], r["processes"], r["epochs"], r["tau"]) == (8, 8, 3, 16)


def test_the_data_rule_warns_where_it_is_broken_and_not_where_it_holds():
    broken = regime.warning(small_profile(8))
    assert broken.startswith("BMUF's data rule is not met: an epoch has 410000 frames, 0.21x "
                             "the 1963164 that block momentum 0.875 at 8 workers asks for")
    # 2 workers: 8192 frames a sync, eta 0.5: 23,637 frames asked for
    assert small_profile(2)["data_rule_met"] is True and regime.warning(small_profile(2)) is None
    # a lower block momentum shortens the filter: 8 workers at eta 0.5 meet it too
    assert regime.warning(small_profile(8, ["sync.block_momentum=0.5"])) is None
    # the rule is BMUF's: MA and one worker have none
    single = regime.compute(configs.resolve(None, ["sync.strategy=single"]), 1, 1000)
    assert single["data_rule_met"] is None and regime.warning(single) is None


def test_an_lstm_minibatch_is_its_chunks_and_the_file_round_trips(tmp_path):
    config = configs.resolve(None, ["model.type=lstm", "data.chunks_per_minibatch=8",
                                    "data.chunk_frames=20", "sync.block_size=4"])
    r = regime.compute(config, 2, 10_000, hardware={"device": "cpu"})
    assert r["minibatch_frames"] == 160 and r["frames_per_sync"] == 160 * 4 * 2
    regime.write(r, str(tmp_path))
    assert regime.read(str(tmp_path)) == json.loads(json.dumps(r))
    assert regime.read(str(tmp_path / "none")) is None
    (tmp_path / "regime.json").write_text("{")
    with pytest.raises(ValueError, match=r"regime.json: not a JSON object"):
        regime.read(str(tmp_path))
