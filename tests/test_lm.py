"""LM: modified Kneser-Ney against hand-computed numbers, ARPA I/O, G.fst against Kaldi's, train_lms."""
from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

from conftest import REPO, YESNO, run_script
from emasr.lang.arpa import ArpaError, perplexity, read_arpa, write_arpa
from emasr.lang.kneser_ney import adjusted_counts, count_ngrams, estimate_discounts, train_kneser_ney
from emasr.lang.symbols import read_symbols
from emasr.fst_stack import kaldifst

FORMAT_LM = str(REPO / "utils" / "format_lm.sh")
TRAIN_LMS = str(REPO / "local" / "train_lms.sh")


def test_bigram_kneser_ney_matches_hand_computation():
    # <s> a b </s> twice, <s> b a </s>; every discount 0.5.
    model = train_kneser_ney([["a", "b"], ["a", "b"], ["b", "a"]], order=2,
                             discounts=[(0.5, 0.5, 0.5)] * 2)
    # Unigrams: continuation counts a=2 ({<s>, b}), b=2 ({a, <s>}), </s>=2 ({b, a}); total 6;
    # gamma = 0.5 * 3 / 6 = 0.25, spread over |V| = 3: p = 1.5/6 + 0.25/3 = 1/3.
    for w in ("a", "b", "</s>"):
        assert 10 ** model.ngrams[0][(w,)][0] == pytest.approx(1 / 3)
    # Context <s>: counts a=2, b=1, total 3, gamma = 0.5 * 2 / 3 = 1/3.
    assert 10 ** model.ngrams[1][("<s>", "a")][0] == pytest.approx(1.5 / 3 + 1 / 9)
    assert 10 ** model.ngrams[1][("<s>", "b")][0] == pytest.approx(0.5 / 3 + 1 / 9)
    assert 10 ** model.ngrams[0][("<s>",)][1] == pytest.approx(1 / 3)         # back-off weight
    assert 10 ** model.logprob("</s>", ("<s>",)) == pytest.approx(1 / 9)      # backed off
    assert 10 ** model.logprob("</s>", ("b",)) == pytest.approx(1.5 / 3 + 1 / 9)
    assert ("a", "</s>") in model.ngrams[1] and ("b", "b") not in model.ngrams[1]


def test_continuation_counts_and_discounts():
    counts = count_ngrams([["a", "b", "c"], ["a", "b", "c"], ["d", "b", "c"]], order=3)
    adjusted = adjusted_counts(counts)
    assert counts[1][("b", "c")] == 3
    assert adjusted[1][("b", "c")] == 2             # distinct words to the left: a, d
    assert adjusted[0][("b",)] == 2                 # a, d
    assert adjusted[0][("</s>",)] == 1              # only c precedes </s>
    assert adjusted[1][("<s>", "a")] == 2           # <s>-initial: raw count
    assert adjusted[2][("a", "b", "c")] == 2        # top order: raw count
    # t1=4, t2=2, t3=1, t4=1: Y = 4/8 = 0.5; D1 = 1 - 2*.5*2/4 = .5; D2 = 2 - 3*.5*1/2 = 1.25;
    # D3+ = 3 - 4*.5*1/1 = 1.
    assert estimate_discounts([1, 1, 1, 1, 2, 2, 3, 4, 7]) == pytest.approx((0.5, 1.25, 1.0))
    assert estimate_discounts([1, 1, 2]) == pytest.approx((0.5, 0.5, 0.5))   # no t3: plain KN


def test_trigram_model_is_normalized_and_round_trips_through_arpa(tmp_path):
    text = ["a b c", "a b", "b c a", "c a b c", "a c", "b b a c", "c c"]
    model = train_kneser_ney([s.split() for s in text], order=3, vocabulary=["d"])
    vocab = sorted(model.vocabulary() - {"<s>"})
    assert "d" in vocab
    for history in [(), ("<s>",), ("a",), ("a", "b"), ("<s>", "a"), ("c", "c"), ("d", "a")]:
        assert sum(10 ** model.logprob(w, history) for w in vocab) == pytest.approx(1.0)
    write_arpa(model, tmp_path / "lm.arpa.gz")
    with gzip.open(tmp_path / "lm.arpa.gz", "rt") as f:
        header = [line for line in f.read().splitlines() if line.startswith("ngram ")]
    assert header == [f"ngram {n + 1}={len(t)}" for n, t in enumerate(model.ngrams)]
    again = read_arpa(tmp_path / "lm.arpa.gz")
    for history in [("a", "b"), ("b", "b"), ()]:
        for w in vocab:
            assert again.logprob(w, history) == pytest.approx(model.logprob(w, history), abs=1e-6)


def test_perplexity_and_oov_rate_on_kaldis_yesno_lm():
    model = read_arpa(YESNO / "lm" / "task.arpabo")   # every word (and </s>) has log10 p = -1
    result = perplexity(model, [["YES", "NO"], ["YES", "MAYBE"]])
    assert (result.words, result.oovs, result.sentences) == (4, 1, 2)
    assert result.logprob == pytest.approx(-5.0)      # 3 words + 2 </s>, MAYBE skipped
    assert result.perplexity == pytest.approx(10.0)
    assert result.oov_rate == pytest.approx(0.25)


def test_malformed_arpa_names_the_line(tmp_path):
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0 a b c d\n\\end\\\n")
    with pytest.raises(ArpaError, match=r"bad.arpa:5: expected 'logprob w1..w1 \[backoff\]'"):
        read_arpa(bad)


def g_cost(fst, words: list[int], epsilons: set[int]) -> float:
    """Lowest cost of a path of G whose non-epsilon input labels spell `words` (#0 = epsilon)."""
    dist = {(fst.start, 0): 0.0}
    changed = True
    while changed:
        changed = False
        for (state, pos), cost in list(dist.items()):
            for arc in kaldifst.ArcIterator(fst, state):
                if arc.ilabel in epsilons:
                    key = (arc.nextstate, pos)
                elif pos < len(words) and arc.ilabel == words[pos]:
                    key = (arc.nextstate, pos + 1)
                else:
                    continue
                if cost + arc.weight.value < dist.get(key, math.inf) - 1e-9:
                    dist[key] = cost + arc.weight.value
                    changed = True
    return min((c + fst.final(s).value for (s, p), c in dist.items() if p == len(words)),
               default=math.inf)


def test_g_fst_from_yesno_arpa_has_kaldis_paths_and_weights(tmp_path):
    out = tmp_path / "lang_test"
    result = run_script([FORMAT_LM, str(YESNO / "data/lang"), str(YESNO / "lm/task.arpabo"),
                         str(YESNO / "dict/lexicon.txt"), str(out)])
    assert result.returncode == 0, result.stderr
    assert "header declares 3 1-grams, found 4" in result.stderr   # Kaldi's file, fixed for kaldilm
    ours = kaldifst.StdVectorFst.read(str(out / "G.fst"))
    kaldi = kaldifst.StdVectorFst.read(str(YESNO / "data/lang_test_tg/G.fst"))
    words = read_symbols(out / "words.txt")
    eps = {0, words["#0"]}
    vocab = [words[w] for w in ("<SIL>", "NO", "YES")]
    sequences = [[]] + [[a] for a in vocab] + [[a, b] for a in vocab for b in vocab] + [
        [a, b, c] for a in vocab[1:] for b in vocab[1:] for c in vocab[1:]]
    finite = 0
    for seq in sequences:
        expected = g_cost(kaldi, seq, eps)
        got = g_cost(ours, seq, eps)
        assert got == pytest.approx(expected, abs=1e-4) or got == expected == math.inf, seq
        finite += math.isfinite(expected)
    assert finite == 15   # every sequence over NO/YES; none with <SIL>
    assert g_cost(ours, [words["YES"], words["NO"]], eps) == pytest.approx(3 * math.log(10), 1e-5)
    assert (out / "L.fst").read_bytes() == (YESNO / "data/lang/L.fst").read_bytes()


def test_format_lm_reports_and_drops_words_missing_from_the_lexicon(tmp_path):
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=5\nngram 2=2\n\n\\1-grams:\n-0.5\tNO\t-0.2\n-0.5\tYES\n"
                    "-0.7\tMAYBE\t-0.1\n-99\t<s>\t-0.3\n-0.6\t</s>\n\n\\2-grams:\n-0.2\tNO YES\n"
                    "-0.1\tMAYBE NO\n\n\\end\\\n")
    out = tmp_path / "lang_test"
    result = run_script([FORMAT_LM, str(YESNO / "data/lang"), str(arpa),
                         str(YESNO / "dict/lexicon.txt"), str(out)])
    assert result.returncode == 0, result.stderr
    assert "1 LM word(s) are not in" in result.stderr and "lexicon.txt" in result.stderr
    assert "MAYBE" in result.stderr
    assert "dropped 2 n-gram(s) that use words outside words.txt" in result.stderr
    words = read_symbols(out / "words.txt")
    g = kaldifst.StdVectorFst.read(str(out / "G.fst"))
    eps = {0, words["#0"]}
    # NO YES: bow(<s>) p(NO) * p(YES|NO) * p(</s>|YES) = 10^-(0.3 + 0.5 + 0.2 + 0.6)
    assert g_cost(g, [words["NO"], words["YES"]], eps) == pytest.approx(1.6 * math.log(10), 1e-4)


def write_dict(dict_dir: Path) -> None:
    dict_dir.mkdir(parents=True)
    (dict_dir / "lexicon.txt").write_text(
        "<UNK> sil\nSIL sil\n北京 b ei3 j ing1\n天气 t ian1 q i4\n", encoding="utf-8")
    (dict_dir / "silence_phones.txt").write_text("sil\n")
    (dict_dir / "optional_silence.txt").write_text("sil\n")
    (dict_dir / "nonsilence_phones.txt").write_text("b\nei3\nj\ning1\nt\nian1\nq\ni4\n")
    (dict_dir / "extra_questions.txt").write_text("sil\n")


def test_train_lms_segments_extends_the_lexicon_and_reports_perplexity(tmp_path):
    text_dir = tmp_path / "lm_text"
    text_dir.mkdir()
    queries = ["北京天气", "上海天气", "北京天气怎么样", "导航到北京", "导航到上海", "播放音乐",
               "播放北京的音乐", "上海的天气怎么样", "今天天气", "明天北京天气"] * 20
    (text_dir / "queries.txt").write_text(
        "\n".join(queries + ["play 音乐", "北京 龦"]) + "\n", encoding="utf-8")
    dev = tmp_path / "dev_text"
    dev.write_text("D1 北京 天气\nD2 导航 到 上海\nD3 播放 鑫 的 音乐\n", encoding="utf-8")
    dict_dir = tmp_path / "dict"
    write_dict(dict_dir)
    lm = tmp_path / "lm"
    result = run_script([TRAIN_LMS, "--vocab-size", "60", str(text_dir), str(dict_dir), str(dev),
                         str(lm)])
    assert result.returncode == 0, result.stderr
    log = (lm / "log/train_lm.log").read_text(encoding="utf-8")
    assert "201 lines (1 skipped: characters other than Chinese)" in log
    assert "pypinyin has no reading for '龦'" in log
    assert "mapped to <UNK>" in log and "1 type(s) without a pronunciation" in log
    lexicon = (dict_dir / "lexicon.txt").read_text(encoding="utf-8").splitlines()
    assert "北京 b ei3 j ing1" in lexicon                       # kept from the dict
    added = (dict_dir / "lexicon_lm_words.txt").read_text(encoding="utf-8").split()
    assert added and all(w in {line.split()[0] for line in lexicon} for w in added)
    assert "sh" in (dict_dir / "nonsilence_phones.txt").read_text()   # 上海 brought new phones
    segmented = (lm / "text.seg").read_text(encoding="utf-8").splitlines()
    assert len(segmented) == 201 and "<UNK>" in segmented[-1].split()
    model = read_arpa(lm / "3gram.arpa.gz")
    assert model.order == 3 and "<UNK>" in model.vocabulary() and "SIL" not in model.vocabulary()
    summary = (lm / "dev_perplexity").read_text()
    assert summary.startswith("dev perplexity ") and "over 3 sentences" in summary
    assert "OOV rate" in result.stdout
    # Re-running starts from the same base lexicon: the same words are added, none twice.
    again = run_script([TRAIN_LMS, "--vocab-size", "60", str(text_dir), str(dict_dir), str(dev),
                        str(lm)])
    assert again.returncode == 0, again.stderr
    assert (dict_dir / "lexicon.txt").read_text(encoding="utf-8").splitlines() == lexicon
