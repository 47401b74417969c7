"""Kaldi's first recipe, egs/yesno/run.sh, end to end on the real yesno recordings of the fixture
(read in place, never copied): data prep, lang, MFCC, monophone GMM, graph, decoding and WER,
then a DNN on the GMM alignments, decoded through the same graph. Kaldi's own yesno GMM gets
0% WER; ours got 0.86% (2 insertions in 232 words) and the DNN 0.43%."""
from __future__ import annotations

import re

import pytest

from conftest import YESNO, run_script

WER = re.compile(r"%WER (\d+\.\d+) \[ (\d+) / (\d+),")


def best_wer(decode_dir) -> tuple[float, int]:
    """(WER %, number of reference words) of a decode dir's scoring_kaldi/best_wer."""
    match = WER.search((decode_dir / "scoring_kaldi" / "best_wer").read_text())
    assert match, f"no %WER line in {decode_dir}/scoring_kaldi/best_wer"
    return float(match.group(1)), int(match.group(3))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_yesno_recipe_end_to_end(yesno_run, yesno):
    recipe, result = yesno_run
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    for stage in range(8):
        assert (recipe / "exp/done" / f"stage{stage}").is_file()
    # Kaldi's split, read in place: 31 train and 29 test recordings, no README "utterances"
    wav_scp = (recipe / "data/test_yesno/wav.scp").read_text().splitlines()
    assert len(wav_scp) == 29 and all(l.split()[1].startswith(str(YESNO)) for l in wav_scp)
    assert len((recipe / "data/train_yesno/utt2spk").read_text().splitlines()) == 31
    gmm_wer, words = best_wer(recipe / "exp/mono0a/decode_test")
    dnn_wer, _ = best_wer(recipe / "exp/nnet/dnn_single_s1/decode_test")
    assert words == 29 * 8
    assert gmm_wer <= 3.0, f"monophone WER {gmm_wer}% (measured 0.86%)"
    assert dnn_wer <= 3.0, f"DNN WER {dnn_wer}% (measured 0.43%)"
    # the console gives RESULTS.md's number: test CER at the setting chosen on dev
    chosen = re.search(r"DNN, test CER at the LM weight and penalty chosen on dev \(RESULTS.md's\): "
                       r"%WER (\d+\.\d+)", result.stdout)
    assert chosen, result.stdout[-3000:]
    row = next(line for line in (recipe / "RESULTS.md").read_text().splitlines()
               if line.startswith("| DNN | single |") and "[" in line)
    assert f"| {chosen.group(1)} [" in row, row
    # the GMM is reported too (decoded on dev and test), not "not run"
    results = (recipe / "RESULTS.md").read_text()
    assert "GMM systems: not run" not in results and "| mono0a |" in results, results
    # a rerun skips every stage
    again = run_script([str(recipe / "run.sh"), str(yesno / "waves_yesno")])
    assert again.returncode == 0 and again.stdout.count("done already") == 8
