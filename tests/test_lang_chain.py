"""The tiny end-to-end chain: simulate -> data prep -> dict -> LM -> lang -> lang_test."""
from __future__ import annotations

import sys
import time

import pytest

from conftest import REPO, run_script
from emasr.lang.symbols import read_symbols
from emasr.fst_stack import kaldifst


def run_ok(args, cwd):
    result = run_script([str(a) for a in args], cwd=cwd)
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stderr[-3000:]}"
    return result


@pytest.mark.slow  # ~30 s: espeak synthesis of the tiny corpus dominates
def test_tiny_corpus_to_lang_test_in_under_two_minutes(tmp_path):
    start = time.monotonic()
    corpus = tmp_path / "corpus"
    run_ok([sys.executable, REPO / "local/simulate_corpus.py", "--profile", "tiny", "--out", corpus],
           tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    run_ok([REPO / "local/aishell_data_prep.sh", corpus / "data_aishell/wav",
            corpus / "data_aishell/transcript"], work)
    run_ok([REPO / "local/aishell_prepare_dict.sh", "--text", "data/train/text",
            corpus / "resource_aishell"], work)
    lm = run_ok([REPO / "local/train_lms.sh", corpus / "lm_text", "data/local/dict",
                 "data/dev/text", "data/local/lm"], work)
    run_ok([REPO / "utils/prepare_lang.sh", "data/local/dict", "<UNK>", "data/local/lang",
            "data/lang"], work)
    run_ok([REPO / "utils/format_lm.sh", "data/lang", "data/local/lm/3gram.arpa.gz",
            "data/local/dict/lexicon.txt", "data/lang_test"], work)
    elapsed = time.monotonic() - start

    for split in ("train", "dev", "test"):
        run_ok([REPO / "utils/validate_data_dir.sh", "--no-feats", f"data/{split}"], work)
    run_ok([REPO / "utils/validate_lang.sh", "data/lang_test"], work)
    assert "dev perplexity" in lm.stdout
    words = read_symbols(work / "data/lang_test/words.txt")
    train_words = {w for line in (work / "data/train/text").read_text(encoding="utf-8")
                   .splitlines() for w in line.split()[1:]}
    assert train_words <= set(words), sorted(train_words - set(words))[:10]
    g = kaldifst.StdVectorFst.read(str(work / "data/lang_test/G.fst"))
    assert g.num_states > 100
    assert elapsed < 120, f"the tiny chain took {elapsed:.0f} s"
