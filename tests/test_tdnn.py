"""The TDNN (emasr.nnet.models.tdnn), registered as an architecture: Kaldi's affine over spliced frames,
trained by every sync rule and decoded, on the yesno recipe's targets and graph."""
from __future__ import annotations

import pytest
import torch

from emasr.nnet import config as configs
from emasr.nnet.models import build_model
from emasr.nnet.sync import RULES
from emasr.nnet.workers import can_stack
from test_yesno_variants import decode_wer, recipe, train  # noqa: F401  (the recipe fixture)


def test_a_layer_is_the_affine_over_its_offsets_frames():
    # one layer over {-2, 0, 2}: a window of 5 frames of 3 dimensions, no norm
    torch.manual_seed(0)
    net = build_model({"type": "tdnn", "hidden_dim": 4, "offsets": [2], "norm": "none"}, 15, 6)
    x = torch.randn(7, 15)
    conv = net.layers[0]
    frames = x.view(7, 5, 3)
    spliced = torch.cat([frames[:, 0], frames[:, 2], frames[:, 4]], dim=1)      # Append(-2,0,2)
    weight = conv.weight.permute(0, 2, 1).reshape(4, 9)                         # [out, 3 x 3]
    hidden = torch.relu(spliced @ weight.T + conv.bias)
    want = torch.log_softmax(net.output(hidden), dim=-1)
    torch.testing.assert_close(net(x), want)
    assert not can_stack(net)   # virtual workers run it as a loop of modules


def test_its_context_must_be_the_splice_and_its_keys_are_checked():
    c = configs.resolve(None, ["model.type=tdnn", "model.offsets=[1, 2]", "features.splice=3"])
    assert c.model.offsets == [1, 2] and c.architecture.mode.name == "frame"
    assert build_model(c.model, 7 * 10, 5)(torch.randn(2, 70)).shape == (2, 5)
    with pytest.raises(configs.ConfigError, match=r"set features.splice=3 \(it is 2\)"):
        configs.resolve(None, ["model.type=tdnn", "model.offsets=[1, 2]"])
    with pytest.raises(configs.ConfigError, match=r"model.offsets must be positive"):
        configs.resolve(None, ["model.type=tdnn", "model.offsets=[0, 2]", "features.splice=2"])
    with pytest.raises(ValueError, match=r"not 7 spliced frames"):
        build_model(c.model, 71, 5)


@pytest.mark.slow
def test_every_sync_rule_trains_the_tdnn_on_yesno_and_it_decodes(recipe):  # noqa: F811
    options = ("--nnet-config", "conf/nnet/tdnn.yaml", "--epochs", "6", "--set-opts",
               "model.hidden_dim=128 model.offsets=[1,1,2] features.splice=4 "
               "data.minibatch_frames=64 train.lr=0.1 sync.block_size=4")
    for name, rule in RULES.items():
        workers = 2 if rule.parallel else 1
        extra = ("--set-opts", options[-1] + " train.optimizer=adamw train.lr=0.003") \
            if name == "diloco" else ()
        train(recipe, f"exp/tdnn_{name}", workers, "--strategy", name, *options, *extra)
    # measured: 0.43% WER (1 insertion in 232 words) for one worker and for BMUF at 2 workers
    assert decode_wer(recipe, "exp/tdnn_single") <= 3.0
    assert decode_wer(recipe, "exp/tdnn_bmuf") <= 3.0
