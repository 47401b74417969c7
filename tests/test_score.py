"""Scoring in Kaldi's formats: compute-wer lines, CER over characters, filters, per-utterance and
per-speaker details, best_wer.sh, and the bootstrap comparison of two systems."""
from __future__ import annotations

from click.testing import CliRunner

from conftest import run_script
from emasr.cli import main
from emasr.io.table import write_table
from emasr.score.compare import bootstrap
from emasr.score.wer import (count_errors, filter_words, per_spk_table, per_utt_lines, score_texts,
                             to_units, wer_lines)


def test_compute_wer_lines_exactly_as_kaldi():
    refs = {"u1": "a b c d".split(), "u2": "e f".split(), "u3": "g h".split()}
    hyps = {"u1": "a x c d e".split(), "u2": "e".split(), "u3": "g h".split()}
    counts = score_texts(refs, hyps)
    assert wer_lines(counts) == ("%WER 37.50 [ 3 / 8, 1 ins, 1 del, 1 sub ]\n"
                                 "%SER 66.67 [ 2 / 3 ]\n"
                                 "Scored 3 sentences, 0 not present in hyp.\n")
    # utterances without a hypothesis are all deletions (Kaldi's --mode=present would drop them)
    partial = score_texts(refs, {"u1": hyps["u1"]})
    assert wer_lines(partial) == ("%WER 75.00 [ 6 / 8, 1 ins, 4 del, 1 sub ] [2 of 3 utterances "
                                  "without a hypothesis, scored as deletions]\n"
                                  "%SER 100.00 [ 3 / 3 ]\n"
                                  "Scored 3 sentences, 2 not present in hyp.\n")


def test_cer_splits_words_into_characters_and_filters_noise():
    ref = filter_words("北京 <UNK> 天气 <SIL>".split())
    hyp = filter_words("北 京天 汽 <SPOKEN_NOISE>".split())
    assert to_units(ref, "cer") == ["北", "京", "天", "气"]
    counts = count_errors(to_units(ref, "cer"), to_units(hyp, "cer"))
    assert (counts.errors, counts.subs, counts.ref_len) == (1, 1, 4)
    assert count_errors(to_units(ref, "wer"), to_units(hyp, "wer")).errors == 3


def test_per_utt_and_per_spk_details():
    lines = per_utt_lines("spk1-u1", "a b c".split(), "a x c d".split()).splitlines()
    assert lines[0].split() == ["spk1-u1", "ref", "a", "b", "c", "***"]
    assert lines[1].split() == ["spk1-u1", "hyp", "a", "x", "c", "d"]
    assert lines[2].split() == ["spk1-u1", "op", "C", "S", "C", "I"]
    assert lines[3] == "spk1-u1 #csid 2 1 1 0"
    table = per_spk_table({"s1-a": ["x", "y"], "s2-b": ["z"]}, {"s1-a": ["x"], "s2-b": ["z"]},
                          {"s1-a": "s1", "s2-b": "s2"}).splitlines()
    assert table[0].split() == ["SPEAKER", "id", "#SENT", "#WORD", "Corr", "Sub", "Ins", "Del",
                                "Err", "S.Err"]
    assert table[1].split() == ["s1", "raw", "1", "2", "1", "0", "0", "1", "1", "1"]
    assert table[2].split() == ["s1", "sys", "1", "2", "50.00", "0.00", "0.00", "50.00", "50.00",
                                "100.00"]
    assert table[-1].split()[:4] == ["SUM", "sys", "2", "3"]


def test_best_wer_sh_picks_the_lowest(tmp_path):
    for name, line in [("wer_7_0.0", "%WER 12.50 [ 5 / 40, 1 ins, 2 del, 2 sub ]"),
                       ("wer_9_0.5", "%WER 7.50 [ 3 / 40, 0 ins, 1 del, 2 sub ]"),
                       ("wer_11_1.0", "%WER 10.00 [ 4 / 40, 0 ins, 2 del, 2 sub ]")]:
        (tmp_path / name).write_text(f"{line}\n%SER 5.00 [ 1 / 20 ]\n")
    result = run_script(["bash", "-c", f"grep WER {tmp_path}/wer_* | best_wer.sh"])
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"%WER 7.50 [ 3 / 40, 0 ins, 1 del, 2 sub ] {tmp_path}/wer_9_0.5\n"


def test_compare_cer_bootstrap(tmp_path):
    refs = {f"u{i:02d}": list("北京天气怎么样") for i in range(40)}
    items = list(enumerate(refs.items()))
    worse = {u: list("北京天汽怎么") if i % 2 else list(r) for i, (u, r) in items}
    better = {u: list(r) if i % 8 else list("北经天气怎么样") for i, (u, r) in items}
    result = bootstrap(refs, worse, better, replications=2000)
    assert result["p_s2_improv_over_s1"] > 0.99
    low, high = result["system1"]["ci95min"], result["system1"]["ci95max"]
    assert low < 2 * 20 / 280 < high  # the true CER of A: 2 errors in every other utterance
    write_table(tmp_path / "text", {u: "".join(c) for u, c in refs.items()})
    write_table(tmp_path / "a.txt", {u: "".join(c) for u, c in worse.items()})
    write_table(tmp_path / "b.txt", {u: "".join(c) for u, c in better.items()})
    out = CliRunner().invoke(main, ["compare-cer", "--replications", "500", str(tmp_path / "text"),
                                    str(tmp_path / "a.txt"), str(tmp_path / "b.txt")])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith(f"A {tmp_path / 'a.txt'}: CER 14.") and "95% interval" in lines[0]
    assert lines[2].startswith("P(B improves on A) = 1.0000 (40 utterances")


def test_a_pseudo_speaker_is_scored_as_its_real_speaker():
    from emasr.score.cli import real_speaker

    # utils/data/modify_speaker_info.sh's pseudo-speakers (per-utterance CMVN) and real ids
    assert real_speaker("S0764-00003") == "S0764"
    assert real_speaker("S0764") == "S0764" and real_speaker("spk-1") == "spk-1"
