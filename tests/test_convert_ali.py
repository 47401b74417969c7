"""convert-ali (emasr.ali.convert, steps/nnet/convert_ali.sh): the real Kaldi yesno 3-state
monophone alignments converted to a skip-topology model at 30 ms and back, with triphone context,
Kaldi's length rules on hand-computed cases, and bad input that must name the file and utterance."""
from __future__ import annotations

import gzip
import shutil

import kaldiio
import numpy as np
import pytest
from click.testing import CliRunner

from conftest import REPO, YESNO, run_script
from emasr.kaldi.alignments import iter_alignment_file, open_alignment_dir
from emasr.ali.convert import (AlignmentConverter, ConversionError, ensure_min_lengths,
                               even_state_path, split_phones, subsampled_lengths)
from emasr.cli import main
from emasr.feats.pipeline import FeaturePipeline, PipelineConfig
from emasr.fst_stack import kaldi_hmm_gmm
from emasr.kaldi.model_io import (KaldiModel, read_model, read_tree, transition_table,
                                tree_from_text, write_model, write_tree)
from emasr.kaldi.transitions import load_transition_table
from emasr.lang.topo import make_topo

MONO = YESNO / "exp" / "mono"
SCRIPT = str(REPO / "steps" / "nnet" / "convert_ali.sh")
SIL, Y, N = 1, 2, 3
# The monophone tree with N's pdf class 0 split on its left phone (SIL -> 8, else 11) and its pdf
# class 2 on its right phone (SIL -> 10, else 12): a triphone tree in miniature (yesno has N N).
TRI_TREE = """ContextDependency 3 1 ToPdf TE 1 4 ( NULL TE -1 5 ( CE 0 CE 1 CE 2 CE 3 CE 4 )
TE -1 3 ( CE 5 CE 6 CE 7 )
TE -1 3 ( SE 0 [ 1 ] { CE 8 CE 11 } CE 9 SE 2 [ 1 ] { CE 10 CE 12 } )
)
EndContextDependency"""


def table_for(tree, topology: str):
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(make_topo([Y, N], [SIL], topology=topology))
    return transition_table(kaldi_hmm_gmm.TransitionModel(tree, topo))


@pytest.fixture(scope="module")
def kaldi_mono():
    return load_transition_table(MONO / "final.mdl"), read_tree(MONO / "tree")


@pytest.fixture(scope="module")
def yesno_alignments():
    return dict(iter_alignment_file(MONO / "ali.1.gz"))


@pytest.fixture(scope="module")
def skip_model_dir(tmp_path_factory):
    """Kaldi's monophone tree and GMMs over the skip topology: a network-style model dir."""
    out = tmp_path_factory.mktemp("skip")
    tree = read_tree(MONO / "tree")
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(make_topo([Y, N], [SIL], topology="skip"))
    write_model(out / "final.mdl", KaldiModel(kaldi_hmm_gmm.TransitionModel(tree, topo),
                                             read_model(MONO / "final.mdl").am_gmm))
    write_tree(out / "tree", tree)
    return out


def phones_and_lengths(table, alignment):
    segments = split_phones(table, alignment)  # also checks it is a path through table's HMMs
    return [s.phone for s in segments], [len(s.states) for s in segments]


def phone_labels(lengths):
    """The index of its phone instance for every frame."""
    return np.repeat(np.arange(len(lengths)), lengths)


# -- lengths: Kaldi's rules --

def test_subsampled_lengths_rounding():
    # boundaries 0 4 5 6 12: Kaldi's ceil(b/3) -> 0 2 2 2 4; centre floor((b+1)/3) -> 0 1 2 2 4
    assert subsampled_lengths([4, 1, 1, 6], 3, "start") == [2, 0, 0, 2]
    assert subsampled_lengths([4, 1, 1, 6], 3, "centre") == [1, 1, 0, 2]
    # the end is ceil(T/3) with either rule: T = 4 -> 2 frames
    assert subsampled_lengths([1, 3], 3, "centre") == [0, 2]
    assert subsampled_lengths([1, 3], 3, "start") == [1, 1]


@pytest.mark.parametrize("factor", [2, 3, 4])
def test_subsampled_lengths_match_the_feature_pipelines_labels(factor):
    """'centre' lengths are the run lengths of FeaturePipeline.subsample_labels of the phone
    instance labels (what make-targets would do), 'start' those of frames 0, F, 2F... (Kaldi)."""
    rng = np.random.default_rng(factor)
    pipeline = FeaturePipeline(PipelineConfig(cmvn="none", stack=factor))
    for _ in range(200):
        lengths = rng.integers(1, 12, size=rng.integers(1, 8)).tolist()
        labels = phone_labels(lengths)
        centre = np.bincount(pipeline.subsample_labels(labels), minlength=len(lengths))
        start = np.bincount(labels[::factor], minlength=len(lengths))
        assert subsampled_lengths(lengths, factor, "centre") == centre.tolist()
        assert subsampled_lengths(lengths, factor, "start") == start.tolist()


def test_short_phones_borrow_from_the_nearest_spare_frame():
    # Kaldi's ComputeNewPhoneLengths: phone 1 takes from phone 0 (distance 0, left wins the
    # tie), phone 2 from phone 3 (nothing to spare on its left)
    assert ensure_min_lengths([2, 0, 0, 2], [1, 1, 1, 1]) == [1, 1, 1, 1]
    assert ensure_min_lengths([3, 0, 3], [3, 3, 3]) is None
    assert ensure_min_lengths([5, 0, 2], [1, 1, 1]) == [4, 1, 2]


def test_even_state_paths(kaldi_mono):
    kaldi = table_for(read_tree(MONO / "tree"), "kaldi")
    skip = table_for(read_tree(MONO / "tree"), "skip")
    three = tuple(kaldi.topology.entry_for(Y))
    assert even_state_path(three, 9) == (0, 0, 0, 1, 1, 1, 2, 2, 2)
    assert even_state_path(three, 2) is None
    one = tuple(skip.topology.entry_for(Y))
    assert even_state_path(one, 1) == (0,)
    assert even_state_path(one, 2) == (0, 2)
    silence = tuple(skip.topology.entry_for(SIL))
    assert even_state_path(silence, 5) == (0, 1, 2, 3, 4)


# -- the yesno fixture's Kaldi alignments --

def test_kaldi_3state_alignments_to_skip_topology_at_30ms(kaldi_mono, yesno_alignments,
                                                          skip_model_dir, tmp_path):
    out = tmp_path / "ali_30ms"
    result = run_script([SCRIPT, "--frame-subsampling-factor", "3", str(MONO),
                         str(skip_model_dir), str(out)])
    assert result.returncode == 0, result.stderr
    for name in ("num_jobs", "final.mdl", "tree", "log/convert.1.log"):
        assert (out / name).is_file(), name
    assert (out / "frame_subsampling_factor").read_text() == "3\n"
    assert (out / "num_jobs").read_text() == "1\n"
    assert (out / "final.mdl").read_bytes() == (skip_model_dir / "final.mdl").read_bytes()
    old, _ = kaldi_mono
    new = load_transition_table(out / "final.mdl")
    pipeline = FeaturePipeline(PipelineConfig(cmvn="none", stack=3))
    converted = dict(iter_alignment_file(out / "ali.1.gz"))
    assert sorted(converted) == sorted(yesno_alignments)
    for utt, ali in yesno_alignments.items():
        phones, lengths = phones_and_lengths(old, ali)
        new_phones, new_lengths = phones_and_lengths(new, converted[utt])
        assert new_phones == phones
        assert len(converted[utt]) == -(-len(ali) // 3)
        # yesno's phones last >= 3 frames, so no phone borrows: exactly the pipeline's labels
        labels = pipeline.subsample_labels(phone_labels(lengths))
        assert new_lengths == np.bincount(labels, minlength=len(phones)).tolist()
    # make-targets reads the dir as one at the network's frame rate
    ali_dir = open_alignment_dir(out)
    assert ali_dir.frame_subsampling_factor == 3 and ali_dir.num_pdfs == 11
    assert sum(1 for _ in ali_dir.iter_pdfs()) == len(yesno_alignments)


def test_round_trip_10ms_30ms_10ms_with_triphone_context(kaldi_mono, yesno_alignments):
    old, _ = kaldi_mono
    tree = tree_from_text(TRI_TREE)
    skip = table_for(tree, "skip")
    down = AlignmentConverter(old, skip, tree, subsample=3)
    up = AlignmentConverter(skip, old, read_tree(MONO / "tree"), upsample=3)
    left_contexts = set()
    for utt, ali in yesno_alignments.items():
        at_30ms = down.convert(ali)
        back = up.convert(at_30ms)
        phones, lengths = phones_and_lengths(old, ali)
        phones_back, lengths_back = phones_and_lengths(old, back)
        assert phones_back == phones, utt
        assert np.all(np.abs(np.subtract(lengths_back, lengths)) < 3), utt
        assert len(back) == 3 * -(-len(ali) // 3)
        # the new tree's context: N's first and last pdfs depend on the phones around it
        segments = split_phones(skip, at_30ms)
        starts = np.cumsum([0] + [len(s.states) for s in segments])[:-1]
        for i, (seg, start) in enumerate(zip(segments, starts)):
            if seg.phone != N:
                continue
            left, right = segments[i - 1].phone, segments[i + 1].phone
            pdfs = skip.id2pdf[at_30ms[start:start + len(seg.states)]]
            assert pdfs[0] == (8 if left == SIL else 11)
            if seg.states[-1] == 2:
                assert pdfs[-1] == (10 if right == SIL else 12)
            left_contexts.add(left)
    assert left_contexts == {SIL, N}  # both branches of the split were taken


def test_reorder_option_only_moves_self_loops(kaldi_mono, yesno_alignments):
    old, tree = kaldi_mono
    plain = AlignmentConverter(old, old, tree, reorder=False)
    for utt, ali in list(yesno_alignments.items())[:5]:
        unordered = plain.convert(ali)
        assert not old.is_reordered(unordered) and old.is_reordered(ali)
        assert sorted(unordered) == sorted(ali)
        assert phones_and_lengths(old, unordered) == phones_and_lengths(old, ali)


# -- bad input --

def write_ark(path, alignments: dict):
    with gzip.open(path, "wb") as f:
        for utt, ali in alignments.items():
            kaldiio.save_ark(f, {utt: np.asarray(ali, dtype=np.int32)})


def run_cli(*args):
    return CliRunner().invoke(main, ["convert-ali", *map(str, args)])


def test_alignments_of_another_model_are_refused(skip_model_dir, tmp_path):
    result = run_cli(skip_model_dir / "final.mdl", skip_model_dir / "final.mdl",
                     skip_model_dir / "tree", MONO / "ali.1.gz", tmp_path / "ali.1.gz")
    assert result.exit_code != 0
    assert "ali.1.gz: utterance 0_0_0_0_1_1_1_1" in result.output
    assert "does not match the old model" in result.output
    assert not (tmp_path / "ali.1.gz").exists()
    write_ark(tmp_path / "bad.gz", {"u1": [4, 1, 9999]})
    result = run_cli(MONO / "final.mdl", skip_model_dir / "final.mdl", skip_model_dir / "tree",
                     tmp_path / "bad.gz", tmp_path / "out.gz")
    assert result.exit_code != 0 and "utterance u1" in result.output
    assert "transition id 9999 at frame 2" in result.output


def test_phone_sets_and_trees_that_differ_are_refused(tmp_path):
    tree = read_tree(MONO / "tree")
    topo = kaldi_hmm_gmm.HmmTopology()
    topo.read(make_topo([Y, N, 4], [SIL], topology="skip"))
    text = TRI_TREE.replace("TE 1 4 (", "TE 1 5 (").replace(
        "\n)\nEnd", "\nTE -1 3 ( CE 13 CE 14 CE 15 )\n)\nEnd")  # a phone 4 with 3 pdfs
    bigger_tree = tree_from_text(text)
    bigger = transition_table(kaldi_hmm_gmm.TransitionModel(bigger_tree, topo))
    old = load_transition_table(MONO / "final.mdl")
    with pytest.raises(ConversionError, match=r"phone sets differ: .*\[4\] only in the new"):
        AlignmentConverter(old, bigger, bigger_tree)
    with pytest.raises(ConversionError, match="the tree is not the new model's"):
        AlignmentConverter(old, table_for(tree_from_text(TRI_TREE), "skip"), tree)
    mapped = AlignmentConverter(old, bigger, bigger_tree, phone_map={1: 1, 2: 2, 3: 4})
    ali = next(iter_alignment_file(MONO / "ali.1.gz"))[1]
    assert set(bigger.id2phone[mapped.convert(ali)]) <= {1, 2, 4}


def test_utterances_too_short_for_their_phones(kaldi_mono, skip_model_dir, tmp_path):
    """One-frame phones (skip topology) cannot become 3-state phones at 30 ms: such an utterance
    is named in the log and left out; too many of them fail the job, writing nothing."""
    skip = load_transition_table(skip_model_dir / "final.mdl")
    tree = read_tree(MONO / "tree")
    encoder = AlignmentConverter(skip, skip, tree)
    one_frame = [encoder.encode([p], (0,))[0] for p in (SIL, Y, N, Y, SIL)]
    long = [t for p in (SIL, Y, SIL) for t in encoder.encode([p], (0,) * 9)]
    write_ark(tmp_path / "in.gz", {"short": one_frame * 2, "long": long})
    args = [skip_model_dir / "final.mdl", MONO / "final.mdl", MONO / "tree", tmp_path / "in.gz",
            tmp_path / "out.gz"]
    result = run_cli("--frame-subsampling-factor", "3", *args)
    assert result.exit_code != 0 and "1 of 2 utterances could not be converted" in result.output
    assert not (tmp_path / "out.gz").exists()
    result = run_cli("--frame-subsampling-factor", "3", "--max-failed", "0.5", *args)
    assert result.exit_code == 0, result.output
    converted = dict(iter_alignment_file(tmp_path / "out.gz"))
    assert list(converted) == ["long"] and len(converted["long"]) == 9


def test_script_checks_its_inputs(skip_model_dir, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(MONO, src)
    (src / "final.mdl").unlink()
    result = run_script([SCRIPT, str(src), str(skip_model_dir), str(tmp_path / "out")])
    assert result.returncode != 0 and f"expected file {src}/final.mdl to exist" in result.stderr
    shutil.copy(MONO / "final.mdl", src / "final.mdl")
    (src / "num_jobs").write_text("2\n")
    result = run_script([SCRIPT, str(src), str(skip_model_dir), str(tmp_path / "out")])
    assert result.returncode != 0 and f"expected file {src}/ali.2.gz to exist" in result.stderr
