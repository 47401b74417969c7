"""Bad input the module tests did not cover (docs/reliability.md lists every case and its test):
NaN features, duplicated keys and empty files into CMVN and training, corrupt checkpoints and
models, empty inputs to feature extraction and targets. Each must fail with a message naming the
file (and the utterance or line) and what is wrong, and leave earlier outputs as they were."""
import gzip
import hashlib
import os
import shutil

import kaldiio
import numpy as np
import pytest
from click.testing import CliRunner

from emasr.cli import main
from emasr.nnet.training import checkpoint
from conftest import REPO, YESNO, run_script
from nnet_synthetic import TINY_DNN, make_problem

SETS = sum((["--set", o] for o in TINY_DNN + ["sync.strategy=single", "average.ema_decay=0.5"]), [])


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    return make_problem(str(tmp_path_factory.mktemp("bad")))


@pytest.fixture(scope="module")
def trained(problem, tmp_path_factory):
    """An exp dir trained for one epoch: its checkpoint and models must survive bad resumes."""
    exp = str(tmp_path_factory.mktemp("trained") / "exp")
    result = emasr(["train", *SETS, *problem, exp])
    assert result.exit_code == 0, result.output
    return exp


def emasr(args):
    return CliRunner().invoke(main, args)


def snapshot(directory):
    """{relative path: sha256} of every file under `directory`."""
    out = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            out[os.path.relpath(path, directory)] = digest
    return out


def copy_data(src, dst, feats=None, scp_lines=None):
    """A copy of data dir `src`; `feats` replaces its features, `scp_lines` its feats.scp text."""
    shutil.copytree(src, dst)
    if feats is not None:
        kaldiio.save_ark(os.path.join(dst, "feats.ark"), feats, scp=os.path.join(dst, "feats.scp"))
    if scp_lines is not None:
        with open(os.path.join(dst, "feats.scp"), "w") as f:
            f.writelines(scp_lines)
    return str(dst)


def with_nan(train_dir, tmp_path):
    feats = dict(kaldiio.load_scp(os.path.join(train_dir, "feats.scp")))
    victim = sorted(feats)[3]
    feats[victim] = feats[victim].copy()
    feats[victim][5, 1] = np.nan
    return copy_data(train_dir, tmp_path / "nan", feats=feats), victim


def with_duplicate(train_dir, tmp_path):
    lines = open(os.path.join(train_dir, "feats.scp")).readlines()
    lines.insert(4, lines[3])
    return copy_data(train_dir, tmp_path / "dup", scp_lines=lines), lines[3].split()[0]


# -- NaN features ---------------------------------------------------------------------------
def test_nan_features_stop_training_naming_the_utterance(problem, trained, tmp_path):
    targets, train_dir, dev_dir = problem
    data, victim = with_nan(train_dir, tmp_path)
    models = lambda: {k: v for k, v in snapshot(trained).items()   # noqa: E731
                      if k.startswith("checkpoints") or k.endswith(".pt")}
    before = models()
    result = emasr(["train", *SETS, "--epochs", "2", "--resume", targets, data, dev_dir, trained])
    assert result.exit_code != 0
    assert (f"{data}/feats.scp: utterance {victim} has NaN or infinite feature values"
            in result.output)
    # no new checkpoint, the models and the checkpoint it resumed from untouched (metrics.jsonl
    # has the blocks trained before the bad utterance; a later resume drops them)
    assert models() == before


def test_nan_features_stop_cmvn_naming_the_utterance(problem, tmp_path):
    data, victim = with_nan(problem[1], tmp_path)
    before = snapshot(data)
    for flags in ([], ["--global"]):
        result = emasr(["compute-cmvn-stats", *flags, str(data), str(tmp_path / "cmvn")])
        assert result.exit_code != 0
        assert f"{data}/feats.scp: utterance {victim} has NaN or infinite values" in result.output
        assert snapshot(data) == before   # cmvn.scp of the earlier run untouched, no global_cmvn
    assert not os.path.exists(tmp_path / "cmvn")


# -- duplicated keys and empty files ----------------------------------------------------------
def test_duplicated_feature_keys_are_an_error_in_training_and_cmvn(problem, tmp_path):
    targets, train_dir, dev_dir = problem
    data, utt = with_duplicate(train_dir, tmp_path)
    expected = f"{data}/feats.scp:5: duplicate key '{utt}' (first on line 4)"
    result = emasr(["train", *SETS, targets, data, dev_dir, str(tmp_path / "exp")])
    assert result.exit_code != 0 and expected in result.output
    assert not os.path.exists(tmp_path / "exp" / "checkpoints")
    before = snapshot(data)
    result = emasr(["compute-cmvn-stats", data])
    assert result.exit_code != 0 and expected in result.output
    assert snapshot(data) == before


def test_empty_feats_scp_is_an_error_in_training_and_cmvn(problem, tmp_path):
    targets, train_dir, dev_dir = problem
    data = copy_data(train_dir, tmp_path / "empty", scp_lines=[])
    result = emasr(["train", *SETS, targets, data, dev_dir, str(tmp_path / "exp")])
    assert result.exit_code != 0 and f"{data}/feats.scp is empty" in result.output
    before = snapshot(data)
    result = emasr(["compute-cmvn-stats", data])
    assert result.exit_code != 0 and "feats.scp is empty" in result.output
    assert snapshot(data) == before


def test_empty_targets_are_an_error_in_training(problem, tmp_path):
    targets, train_dir, dev_dir = problem
    empty = shutil.copytree(targets, tmp_path / "targets")
    open(empty / "pdf.scp", "w").close()
    result = emasr(["train", *SETS, str(empty), train_dir, dev_dir, str(tmp_path / "exp")])
    assert result.exit_code != 0
    assert f"none of its 16 utterances has targets in {empty}/pdf.scp" in result.output


def test_empty_data_dir_makes_no_features(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("wav.scp", "utt2spk", "spk2utt", "text"):
        (data / name).write_text("")
    (tmp_path / "fbank.conf").write_text("--num-mel-bins=23\n")
    result = run_script([str(REPO / "steps" / "make_fbank.sh"), "--fbank-config",
                         str(tmp_path / "fbank.conf"), str(data), str(tmp_path / "log"),
                         str(tmp_path / "fbank")])
    assert result.returncode != 0
    assert f"{data}/utt2spk: empty file; expected at least one utterance" in result.stderr
    assert not (data / "feats.scp").exists()


def test_empty_alignments_write_no_targets(problem, tmp_path):
    ali = tmp_path / "ali"
    ali.mkdir()
    shutil.copy(YESNO / "exp" / "mono" / "final.mdl", ali / "final.mdl")
    with gzip.open(ali / "ali.1.gz", "wb"):
        pass
    (ali / "num_jobs").write_text("1\n")
    result = emasr(["make-targets", str(ali), problem[1], str(tmp_path / "targets")])
    assert result.exit_code != 0
    assert "ali" in result.output
    assert not os.path.exists(tmp_path / "targets" / "pdf.scp")


# -- corrupt checkpoints and models ---------------------------------------------------------
@pytest.mark.parametrize("name", [checkpoint.STATE, "rank0.pt"])
def test_corrupt_checkpoint_on_resume_names_the_file(problem, trained, tmp_path, name):
    exp = shutil.copytree(trained, tmp_path / "exp")
    where = checkpoint.latest(str(exp))
    path = os.path.join(where, name)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2])   # truncated, as by a copy that ran out of space
    before = snapshot(exp)
    result = emasr(["train", *SETS, "--epochs", "2", "--resume", *problem, str(exp)])
    assert result.exit_code != 0
    assert f"cannot read {path} (truncated or corrupt?)" in result.output
    assert f"Delete its directory {where}" in result.output
    assert snapshot(exp) == before


def test_corrupt_model_in_nnet_forward_names_the_file(problem, trained, tmp_path):
    exp = shutil.copytree(trained, tmp_path / "exp")
    (exp / "ema.pt").write_bytes(b"not a model")
    result = emasr(["nnet-forward", "--model", "ema", str(exp), problem[2],
                    f"ark:{tmp_path / 'll.ark'}"])
    assert result.exit_code != 0
    assert f"cannot read {exp}/ema.pt" in result.output
    assert not os.path.exists(tmp_path / "ll.ark")


def test_check_compatible_reads_a_network_without_torch_and_names_a_corrupt_one(
        problem, trained, tmp_path):
    """check-compatible reads the network's plain values from the file's pickle alone: the same
    num_pdfs and config as torch.load gives, and a clear error for a truncated file."""
    from emasr.io.torch_header import read_plain_values

    final = os.path.join(trained, "final.pt")
    header, full = read_plain_values(final), checkpoint.load(final)
    assert header["num_pdfs"] == full["num_pdfs"] > 0
    assert header["model_config"] == full["model_config"] and header["kind"] == "global"
    assert emasr(["check-compatible", "--network", final, "--targets", problem[0]]).exit_code == 0
    other = tmp_path / "other.pt"
    checkpoint.save({**full, "num_pdfs": full["num_pdfs"] + 1}, str(other))
    result = emasr(["check-compatible", "--network", str(other), "--targets", problem[0]])
    assert result.exit_code != 0 and f"{other} has {full['num_pdfs'] + 1}:" in result.output
    data = open(final, "rb").read()
    (tmp_path / "cut.pt").write_bytes(data[:len(data) // 2])
    result = emasr(["check-compatible", "--network", str(tmp_path / "cut.pt")])
    assert result.exit_code != 0
    assert f"cannot read {tmp_path / 'cut.pt'} (truncated or corrupt" in result.output


# -- a diverging run -----------------------------------------------------------------------
def test_diverging_training_stops_instead_of_writing_a_nan_model(problem, tmp_path):
    exp = tmp_path / "exp"
    result = emasr(["train", *SETS, "--set", "train.lr=1e4", "--set", "train.epochs=3",
                    "--set", "train.checkpoint_every_blocks=1", *problem, str(exp)])
    assert result.exit_code != 0
    assert "training diverged: the loss of epoch 1 block" in result.output
    assert "lower train.lr" in result.output
    assert not (exp / "final.pt").exists()


def test_lang_dir_from_another_dict_is_refused_by_the_gmm_steps(tmp_path):
    # Kaldi's yesno model (phones SIL 1, Y 2, N 3) with a lang dir whose dict numbers Y and N the
    # other way round: aligning or building a tree with it would silently swap the two phones
    lang = tmp_path / "lang"
    shutil.copytree(YESNO / "data" / "lang", lang)
    table = (lang / "phones.txt").read_text()
    assert "Y 2\nN 3" in table
    (lang / "phones.txt").write_text(table.replace("Y 2\nN 3", "N 2\nY 3"))
    model = tmp_path / "mono"
    shutil.copytree(YESNO / "exp" / "mono", model)
    shutil.copyfile(YESNO / "data" / "lang" / "phones.txt", model / "phones.txt")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("feats.scp", "text"):
        (data / name).write_text("")
    for script, args in (("align_si.sh", [data, lang, model, tmp_path / "ali"]),
                         ("train_deltas.sh", [10, 100, data, lang, model, tmp_path / "tri"])):
        result = run_script([str(REPO / "steps" / script)] + [str(a) for a in args], cwd=tmp_path)
        assert result.returncode == 1, script
        assert "not compatible" in result.stderr and str(lang / "phones.txt") in result.stderr
        assert not (tmp_path / "ali").exists() and not (tmp_path / "tri").exists()
