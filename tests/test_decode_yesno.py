"""Kaldi interop: a graph from Kaldi's yesno lang dir and Kaldi's own monophone model (binary
final.mdl and tree), decoded with that model's GMM log-likelihoods on our MFCC + CMVN + deltas,
gives the yes/no sequences the file names encode; steps/decode.sh and scoring end to end."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import kaldi_native_fbank as knf
import kaldiio
import pytest

from conftest import YESNO, run_script
from emasr.feats.cmvn import apply_cmvn, sum_stats
from emasr.feats.deltas import add_deltas
from emasr.feats.framing import extract_all_frames
from emasr.feats.kaldi_options import mfcc_options, read_kaldi_config
from emasr.feats.wav import read_wav_spec
from emasr.io.table import read_table, write_table

MONO = YESNO / "exp" / "mono"
LANG = YESNO / "data" / "lang_test_tg"


def expected_words(utt: str) -> str:
    """0_1_1_0 -> NO YES YES NO (the corpus names each file by its sequence)."""
    return " ".join("YES" if bit == "1" else "NO" for bit in utt.split("_"))


@pytest.fixture(scope="module")
def test_data(tmp_path_factory):
    """The yesno test set as a Kaldi data dir with MFCC feats.scp and per-speaker cmvn.scp
    (Kaldi's yesno: mfcc.conf, one speaker 'global'). The fixture's README entries are dropped."""
    root = tmp_path_factory.mktemp("yesno")
    data = root / "data" / "test_yesno"
    data.mkdir(parents=True)
    opts = mfcc_options({**read_kaldi_config(YESNO / "conf" / "mfcc.conf"), "dither": "0"})
    wavs = {u: p for u, p in read_table(YESNO / "data/test_yesno/wav.scp").items()
            if p.endswith(".wav")}
    feats = {u: extract_all_frames(knf.OnlineMfcc(opts), 8000,
                                   read_wav_spec(str(YESNO / p)).samples) for u, p in wavs.items()}
    kaldiio.save_ark(str(root / "feats.ark"), feats, scp=str(data / "feats.scp"))
    kaldiio.save_ark(str(root / "cmvn.ark"), {"global": sum_stats(feats.values())},
                     scp=str(data / "cmvn.scp"))
    write_table(data / "utt2spk", {u: "global" for u in wavs})
    write_table(data / "spk2utt", {"global": " ".join(sorted(wavs))})
    write_table(data / "text", {u: expected_words(u) for u in wavs})
    write_table(data / "wav.scp", {u: str(YESNO / p) for u, p in wavs.items()})
    exp = root / "exp" / "mono"
    exp.mkdir(parents=True)
    for name in ("final.mdl", "tree", "cmvn_opts"):
        os.symlink(MONO / name, exp / name)
    return root, data, feats


def test_mkgraph_on_kaldi_lang_and_model(test_data):
    root, _, _ = test_data
    result = run_script(["mkgraph.sh", str(LANG), str(root / "exp/mono"),
                         str(root / "exp/mono/graph")])
    assert result.returncode == 0, result.stderr
    graph = root / "exp/mono/graph"
    assert int((graph / "num_pdfs").read_text()) == 11  # Kaldi's yesno mono: 11 pdfs
    assert (graph / "words.txt").read_text() == (LANG / "words.txt").read_text()
    log = (graph / "log/mkgraph.log").read_text()
    assert "HCLG:" in log and "states" in log and "built in" in log
    assert not (LANG / "tmp").exists()  # the read-only fixture is left alone


def test_kaldi_gmm_loglikes_decode_yesno(test_data):
    """All 29 test utterances come out as their names say, with Kaldi's own GMM."""
    from emasr.decode.cli import load_decoder
    from emasr.decode.decoder import DecodeConfig
    from emasr.decode.gmm_loglikes import gmm_loglikes, stack_gmms

    root, _, feats = test_data
    graph = root / "exp/mono/graph"
    if not (graph / "HCLG.fst").exists():
        test_mkgraph_on_kaldi_lang_and_model(test_data)
    decoder, model = load_decoder(str(MONO / "final.mdl"), str(graph / "HCLG.fst"),
                                  DecodeConfig(acwt=1 / 12))
    gmms = stack_gmms(model.am_gmm)
    stats = sum_stats(feats.values())
    words = {int(i): w for w, i in read_table(graph / "words.txt").items()}
    first = add_deltas(apply_cmvn(feats["1_0_0_0_0_0_0_0"], stats))
    loglikes = gmm_loglikes(gmms, first)
    for t in (0, 100, 300):  # the batched GMM agrees with Kaldi's DiagGmm per frame
        for pdf in range(model.am_gmm.num_pdfs):
            assert loglikes[t, pdf] == pytest.approx(model.am_gmm.log_likelihood(pdf, first[t]),
                                                     abs=1e-3)
    assert len(feats) == 29
    for utt, x in sorted(feats.items()):
        hyp = decoder.decode(utt, gmm_loglikes(gmms, add_deltas(apply_cmvn(x, stats))))
        assert " ".join(words[w] for w in hyp.words) == expected_words(utt)


def test_decode_sh_and_scoring_end_to_end(test_data):
    root, data, _ = test_data
    graph = root / "exp/mono/graph"
    if not (graph / "HCLG.fst").exists():
        test_mkgraph_on_kaldi_lang_and_model(test_data)
    decode = root / "exp/mono/decode_test_yesno"
    # One speaker, so one job (split_data.sh splits by speaker, as Kaldi's).
    result = run_script(["decode.sh", "--nj", "1", "--scoring-opts", "--min-lmwt 9 --max-lmwt 11",
                         str(graph), str(data), str(decode)], cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (decode / "lat.1.gz").exists() and (decode / "num_jobs").read_text().strip() == "1"
    hyps = read_table(decode / "hyp.1.txt")
    assert hyps == {u: expected_words(u) for u in read_table(data / "text")}
    assert (decode / "wer_10_0.5").read_text().splitlines()[0] == \
        "%WER 0.00 [ 0 / 232, 0 ins, 0 del, 0 sub ]"
    best = (decode / "scoring_kaldi/best_wer").read_text()
    assert best.startswith("%WER 0.00 [ 0 / 232, 0 ins, 0 del, 0 sub ] ")
    assert "decoded" in (decode / "log/decode.1.log").read_text()
    # local/score.sh (the recipe's scorer) adds CER over characters: 232 words, 697 letters.
    result = run_script([os.path.join(os.path.dirname(__file__), "..", "local", "score.sh"),
                         "--min-lmwt", "10", "--max-lmwt", "10", str(data), str(graph),
                         str(decode)])
    assert result.returncode == 0, result.stderr
    letters = sum(len(expected_words(u).replace(" ", "")) for u in read_table(data / "text"))
    assert (decode / "cer_10_0.0").read_text().splitlines()[0] == \
        f"%WER 0.00 [ 0 / {letters}, 0 ins, 0 del, 0 sub ]"
    assert (decode / "scoring_kaldi/best_cer").read_text().startswith("%WER 0.00 ")
    per_utt = (decode / "scoring_kaldi/cer_details/per_utt").read_text()
    assert "1_1_1_1_1_1_1_1 #csid 24 0 0 0\n" in per_utt
    # the report's counts at every setting scored, each utterance with its speaker
    from emasr.report.scoring import read_sweep
    sweep = read_sweep(str(decode))
    assert sweep.settings == ("10_0.0", "10_0.5", "10_1.0") and sweep.errors.sum() == 0
    assert sweep.chars.sum() == letters and set(sweep.speakers) == {"global"}
    result = run_script(["bash", "-c", f"grep WER {decode}/wer_* | best_wer.sh"])
    assert result.returncode == 0 and result.stdout.startswith("%WER 0.00 [ 0 / 232,")
    assert result.stdout.split()[-1].startswith(f"{decode}/wer_")


def test_gmm_decode_reports_bad_features_and_continues(test_data, tmp_path):
    from click.testing import CliRunner

    from emasr.cli import main

    root, data, feats = test_data
    graph = root / "exp/mono/graph"
    if not (graph / "HCLG.fst").exists():
        test_mkgraph_on_kaldi_lang_and_model(test_data)
    utts = sorted(feats)[:3]
    bad = dict((u, feats[u]) for u in utts)
    bad[utts[1]] = feats[utts[1]][:, :10]  # 10-dim MFCC: 30 dims after deltas, the GMM has 39
    subset = tmp_path / "data"
    subset.mkdir()
    kaldiio.save_ark(str(tmp_path / "feats.ark"), bad, scp=str(subset / "feats.scp"))
    for name in ("cmvn.scp", "spk2utt"):
        (subset / name).write_text((data / name).read_text())
    write_table(subset / "utt2spk", {u: "global" for u in utts})
    log = tmp_path / "decode.log"
    # Per-speaker CMVN stats are 13-dim; the bad utterance's 10 dims fail there or at the GMM.
    result = CliRunner().invoke(main, [
        "--log-file", str(log), "gmm-decode", "--word-symbol-table", str(graph / "words.txt"),
        str(MONO / "final.mdl"), str(graph / "HCLG.fst"), str(subset), str(tmp_path / "lat.1.gz")])
    text = log.read_text()
    assert result.exit_code == 0, result.output + text
    assert f"utterance {utts[1]}:" in text and "failed 1 (bad-input 1)" in text
    assert read_table(tmp_path / "hyp.1.txt") == {u: expected_words(u) for u in (utts[0], utts[2])}


def decoded_lattices(test_data) -> tuple[Path, Path]:
    """The graph and the decode dir of the yesno test decode (decoded first when needed)."""
    root = test_data[0]
    graph, decoded = root / "exp/mono/graph", root / "exp/mono/decode_test_yesno"
    if not (decoded / "lat.1.gz").exists():
        test_decode_sh_and_scoring_end_to_end(test_data)
    return graph, decoded


def test_utterances_without_a_lattice_are_deletions_and_too_many_fail(test_data, tmp_path):
    data = test_data[1]
    graph, decoded = decoded_lattices(test_data)
    decode = tmp_path / "decode"
    decode.mkdir()
    shutil.copy(decoded / "lat.1.gz", decode / "lat.1.gz")
    texts = read_table(data / "text")
    words = sum(len(t.split()) for t in texts.values())
    scored = tmp_path / "data"
    scored.mkdir()
    # one utterance whose decode "failed" (no lattice) among 30: 3.3%, under the 5% default
    write_table(scored / "text", {**texts, "9_9_9_9": "YES NO YES"})
    score = ["score_kaldi.sh", "--min-lmwt", "10", "--max-lmwt", "10", "--word-ins-penalty",
             "0.0", str(scored), str(graph), str(decode)]
    result = run_script(score)
    assert result.returncode == 0, result.stdout + result.stderr
    line = (decode / "wer_10_0.0").read_text().splitlines()[0]
    assert line == (f"%WER {100 * 3 / (words + 3):.2f} [ 3 / {words + 3}, 0 ins, 3 del, 0 sub ] "
                    f"[1 of {len(texts) + 1} utterances without a hypothesis, scored as deletions]")
    assert "9_9_9_9 #csid 0 0 0 3" in (decode / "scoring_kaldi/wer_details/per_utt").read_text()
    # three of 32 (9.4%): the step fails, names them, and leaves no score: the earlier ones were
    # of another reference text
    write_table(scored / "text", {**texts, "9_9_9_9": "YES", "8_8_8_8": "NO", "7_7_7_7": "NO"})
    failed = run_script(score)
    assert failed.returncode != 0
    message = failed.stdout + failed.stderr
    assert "3 of 32 utterances (9.4%) have no lattice" in message
    assert "7_7_7_7, 8_8_8_8, 9_9_9_9" in message and "--max-failed-fraction" in message
    assert not list(decode.glob("wer_*")) and not (decode / "scoring_kaldi/best_wer").exists()


def test_a_truncated_lattice_archive_is_named_not_aborted(test_data, tmp_path):
    data = test_data[1]
    graph, decoded = decoded_lattices(test_data)
    decode = tmp_path / "decode"
    decode.mkdir()
    whole = (decoded / "lat.1.gz").read_bytes()
    (decode / "lat.1.gz").write_bytes(whole[:len(whole) // 2])
    result = run_script(["score_kaldi.sh", str(data), str(graph), str(decode)])
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "Aborted!" not in result.stdout + result.stderr
    assert (f"Error: {decode}/lat.1.gz: cannot read the lattice archive (truncated or not gzip? "
            "EOFError") in result.stderr, result.stderr
