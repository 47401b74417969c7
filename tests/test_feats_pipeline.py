"""The network feature pipeline: stacking, splicing, label subsampling, CMVN order, save/load."""
from __future__ import annotations

import kaldiio
import numpy as np
import pytest
from click.testing import CliRunner

from emasr.cli import main
from emasr.feats.cmvn import apply_cmvn, cmvn_stats
from emasr.feats.pipeline import FeaturePipeline, PipelineConfig, lengths_agree, stack_frames
from test_feats_cmvn import make_data_dir


def frames(T, D=2):
    """Frame t holds [t, 100 + t, ...]: every output value says which input frame it came from."""
    return (np.arange(T)[:, None] + 100 * np.arange(D)[None, :]).astype(np.float32)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("T", [1, 2, 3, 4, 5, 7, 12])
def test_stacking_shapes_and_edge_values(k, T):
    pipe = FeaturePipeline(PipelineConfig(cmvn="none", stack=k))
    out = pipe.transform(frames(T), None)
    assert out.shape == (pipe.num_output_frames(T), pipe.output_dim(2)) == (-(-T // k), 2 * k)
    for t in range(out.shape[0]):
        sources = [min(t * k + i, T - 1) for i in range(k)]  # last window repeats frame T-1
        np.testing.assert_array_equal(out[t], np.concatenate([frames(T)[s] for s in sources]))


def test_stacking_k3_by_hand():
    out = stack_frames(frames(5, D=1), 3)
    np.testing.assert_array_equal(out, [[0, 1, 2], [3, 4, 4]])


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("T", [1, 2, 3, 5, 7, 12])
def test_subsampled_labels_are_window_centres(k, T):
    pipe = FeaturePipeline(PipelineConfig(cmvn="none", stack=k))
    labels = np.arange(T) * 10
    sub = pipe.subsample_labels(labels)
    assert len(sub) == pipe.num_output_frames(T) == len(pipe.transform(frames(T), None))
    assert list(sub) == [10 * min(t * k + k // 2, T - 1) for t in range(len(sub))]


def test_subsample_k3_by_hand():
    pipe = FeaturePipeline(PipelineConfig(stack=3))
    assert list(pipe.subsample_labels(np.array([5, 6, 7, 8, 9, 10, 11]))) == [6, 9, 11]
    assert list(pipe.subsample_labels(np.array([5, 6, 7, 8]))) == [6, 8]


def test_splicing_replicates_edge_stacked_frames():
    pipe = FeaturePipeline(PipelineConfig(cmvn="none", stack=2, splice=1))
    out = pipe.transform(frames(5, D=1), None)  # stacked: [0 1] [2 3] [4 4]
    assert out.shape == (3, pipe.output_dim(1)) == (3, 6)
    np.testing.assert_array_equal(out, [[0, 1, 0, 1, 2, 3], [0, 1, 2, 3, 4, 4], [2, 3, 4, 4, 4, 4]])


@pytest.mark.parametrize("norm_vars", [False, True])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_cmvn_then_stack_equals_stack_then_cmvn(norm_vars, k):
    rng = np.random.default_rng(k)
    feats = (rng.standard_normal((11, 3)) * 4 + 2).astype(np.float32)
    stats = cmvn_stats(rng.standard_normal((50, 3)) * 2 + 1)
    pipe = FeaturePipeline(PipelineConfig(cmvn="speaker", norm_vars=norm_vars, stack=k))
    # CMVN of stacked frames uses the same per-dimension stats tiled k times
    stacked_stats = np.concatenate([np.tile(stats[:, :3], k), stats[:, 3:]], axis=1)
    reference = apply_cmvn(stack_frames(feats, k), stacked_stats, norm_vars)
    np.testing.assert_allclose(pipe.transform(feats, stats), reference, rtol=1e-5, atol=1e-5)


def test_missing_stats_is_an_error():
    with pytest.raises(ValueError, match="no stats"):
        FeaturePipeline(PipelineConfig(cmvn="global")).transform(frames(4), None)


def test_config_validation():
    with pytest.raises(ValueError, match="cmvn must be one of"):
        PipelineConfig(cmvn="utterance")
    with pytest.raises(ValueError, match="stack must be"):
        PipelineConfig(stack=0)
    with pytest.raises(ValueError, match="unknown feature pipeline option"):
        FeaturePipeline.from_dict({"stack": 3, "stacking": 2})


def test_save_and_load_round_trip(tmp_path):
    pipe = FeaturePipeline(PipelineConfig(cmvn="global", norm_vars=True, stack=4, splice=2),
                           global_stats=cmvn_stats(frames(9, D=3)))
    pipe.save(str(tmp_path / "feature_pipeline.yaml"))
    back = FeaturePipeline.load(str(tmp_path / "feature_pipeline.yaml"))
    assert back.config == pipe.config
    np.testing.assert_array_equal(back.global_stats, pipe.global_stats)
    feats = frames(10, D=3) * 0.5
    np.testing.assert_array_equal(back.transform(feats, back.global_stats),
                                  pipe.transform(feats, pipe.global_stats))
    assert FeaturePipeline.from_dict(FeaturePipeline(PipelineConfig()).to_dict()).config == \
        PipelineConfig()


def test_iterate_data_dir_with_speaker_cmvn(tmp_path):
    data, feats = make_data_dir(tmp_path)
    assert CliRunner().invoke(main, ["compute-cmvn-stats", str(data)]).exit_code == 0
    pipe = FeaturePipeline(PipelineConfig(cmvn="speaker", stack=3))
    out = dict(pipe.iterate(str(data)))
    assert sorted(out) == sorted(feats)
    stats = kaldiio.load_scp(str(data / "cmvn.scp"))["spkA"]
    np.testing.assert_allclose(out["spkA-u1"], stack_frames(apply_cmvn(feats["spkA-u1"], stats), 3))
    assert out["spkA-u1"].shape == (6, 12)  # 17 frames -> ceil(17/3)
    only = list(pipe.iterate(str(data), utts=["spkB-u0"]))
    assert [u for u, _ in only] == ["spkB-u0"]


def test_iterate_global_reads_data_dir_stats_unless_pipeline_has_them(tmp_path):
    data, feats = make_data_dir(tmp_path)
    assert CliRunner().invoke(main, ["compute-cmvn-stats", "--global", str(data)]).exit_code == 0
    pipe = FeaturePipeline(PipelineConfig(cmvn="global", stack=1))
    everything = np.concatenate(list(feats.values()))
    mean = everything.astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(dict(pipe.iterate(str(data)))["spkB-u0"], feats["spkB-u0"] - mean,
                               rtol=1e-5, atol=1e-5)
    pipe.set_global_stats(cmvn_stats(np.zeros((3, 4))))  # e.g. the training set's stats
    np.testing.assert_array_equal(dict(pipe.iterate(str(data)))["spkB-u0"], feats["spkB-u0"])


def test_length_tolerance():
    assert lengths_agree(10, 12) and not lengths_agree(10, 13)
