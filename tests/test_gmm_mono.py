"""GMM-HMM pieces: statistics and their MLE update, flat start, alignment with bad input, on the
real Kaldi yesno data and model."""
from __future__ import annotations

import logging

import numpy as np
import pytest
from click.testing import CliRunner

from emasr.kaldi.alignments import iter_alignment_file
from emasr.gmm.accumulate import GmmStats, accumulate_alignments, acc_stats_ali_cli
from emasr.gmm.align import gmm_align_cli
from emasr.kaldi.alignments import AlignmentWriter
from emasr.gmm.estimate import (MleOptions, gmm_est_cli, mix_up_model, split_gmm,
                                 split_targets, update_gmm)
from emasr.gmm.features import FeatureOptions
from emasr.kaldi.model_io import read_model, read_tree, transition_table, write_model, write_tree
from emasr.gmm.mono import init_mono, single_gaussian
from emasr.gmm.training_graphs import LangDir, TranscriptError
from gmm_helpers import LANG, MONO, write_data_dir, yesno_mfcc_feats, yesno_texts


@pytest.fixture(scope="module")
def feats():
    return yesno_mfcc_feats()


@pytest.fixture(scope="module")
def yesno_data(feats, tmp_path_factory):
    return write_data_dir(tmp_path_factory.mktemp("train"), feats, yesno_texts())


def test_cmvn_opts():
    assert FeatureOptions.parse("") == FeatureOptions(True, False, 2)
    assert FeatureOptions.parse("--norm-means=true --norm-vars=true", 0) == \
        FeatureOptions(True, True, 0)
    with pytest.raises(ValueError, match="--norm-var=true"):
        FeatureOptions.parse("--norm-var=true")


def test_mle_update_of_one_gmm_matches_numpy():
    rng = np.random.default_rng(0)
    gmm = single_gaussian(np.zeros(3), np.ones(3))
    gmm.split(3, 0.1)  # 3 components
    x = rng.normal(size=(500, 3)) * [1.0, 2.0, 0.5] + [1.0, -1.0, 0.0]
    post = rng.dirichlet([1.0, 1.0, 1.0], size=500)
    post[:, 2] *= 0.001  # component 2 gets almost no data: removed
    occ = post.sum(axis=0)
    removed, _ = update_gmm(gmm, occ, post.T @ x, post.T @ np.square(x), MleOptions())
    assert removed == 1 and gmm.num_gauss == 2
    mean0 = post[:, 0] @ x / occ[0]
    var0 = post[:, 0] @ np.square(x) / occ[0] - np.square(mean0)
    np.testing.assert_allclose(np.asarray(gmm.means)[0], mean0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(gmm.vars)[0], var0, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(gmm.weights).ravel(), occ[:2] / occ[:2].sum(),
                               rtol=1e-5)


def test_split_targets_follow_occupancy_power_and_min_count():
    # occupancies 1000, 100, 10 with power 1: Gaussians go to the largest count per Gaussian
    assert split_targets(np.array([1000.0, 100.0, 10.0]), 7, 1.0, 1.0) == [5, 1, 1]
    # power 0 spreads them evenly (ties go to the lower pdf id)
    assert split_targets(np.array([1000.0, 100.0, 10.0]), 7, 0.0, 1.0) == [3, 2, 2]
    # min_count 40: the 100-frame pdf can take 2 Gaussians (3 * 40 >= 100), the 10-frame pdf 1
    assert split_targets(np.array([1000.0, 100.0, 10.0]), 30, 0.5, 40.0) == [24, 2, 1]


def test_split_halves_the_heaviest_gaussian_symmetrically_and_reproducibly():
    gmm = single_gaussian(np.array([1.0, -2.0]), np.array([4.0, 0.25]))
    split_gmm(gmm, 2, 0.1, np.random.default_rng(5))
    np.testing.assert_allclose(np.asarray(gmm.weights).ravel(), [0.5, 0.5])
    means = np.asarray(gmm.means)
    np.testing.assert_allclose(means.mean(axis=0), [1.0, -2.0], rtol=1e-6)
    shift = (means[1] - means[0]) / 2
    assert np.all(np.abs(shift) > 0) and np.all(np.abs(shift) < 0.5 * np.sqrt([4.0, 0.25]))
    np.testing.assert_allclose(np.asarray(gmm.vars), [[4.0, 0.25]] * 2, rtol=1e-6)
    split_gmm(gmm, 4, 0.1, np.random.default_rng(5))
    np.testing.assert_allclose(np.asarray(gmm.weights).ravel(), [0.25] * 4)
    first, second = read_model(MONO / "final.mdl"), read_model(MONO / "final.mdl")
    occs = np.full(first.am_gmm.num_pdfs, 500.0)
    for model in (first, second):
        mix_up_model(model, occs, first.am_gmm.num_gauss + 20, 0.25, 0.01, 20.0, seed=3)
    assert first.am_gmm.num_gauss > read_model(MONO / "final.mdl").am_gmm.num_gauss
    for pdf in range(first.am_gmm.num_pdfs):
        np.testing.assert_array_equal(first.am_gmm.get_pdf(pdf).means,
                                      second.am_gmm.get_pdf(pdf).means)


def test_stats_of_kaldis_alignments_and_their_sum_over_jobs(yesno_data, tmp_path):
    stats = accumulate_alignments(str(MONO / "final.mdl"), str(yesno_data),
                                  str(MONO / "ali.1.gz"), FeatureOptions(), 0.0)
    assert stats.frames == 18996
    assert stats.occupancy.sum() == pytest.approx(18996)
    # Per-pdf occupancy is Kaldi's final.occs: the same alignments, the same frames per pdf.
    occs = np.array((MONO / "final.occs").read_text().split()[1:-1], dtype=float)
    np.testing.assert_allclose(stats.pdf_occupancy(), occs, rtol=1e-6)
    # Kaldi's model scores its training data at -81.4 per frame (39-dim MFCC + deltas).
    assert -82 < stats.log_like / stats.frames < -81
    stats.save(tmp_path / "a.acc")
    stats.save(tmp_path / "b.acc")
    model_in = tmp_path / "in.mdl"
    model_in.write_bytes((MONO / "final.mdl").read_bytes())
    result = CliRunner().invoke(gmm_est_cli, ["--write-occs", str(tmp_path / "2.occs"),
                                              str(model_in), str(tmp_path / "2.mdl"),
                                              str(tmp_path / "a.acc"), str(tmp_path / "b.acc")])
    assert result.exit_code == 0, result.output
    occs2 = np.array((tmp_path / "2.occs").read_text().split()[1:-1], dtype=float)
    np.testing.assert_allclose(occs2, 2 * occs, rtol=1e-6)
    # One more EM step from Kaldi's own model on its own alignments cannot lower the likelihood.
    again = accumulate_alignments(str(tmp_path / "2.mdl"), str(yesno_data),
                                  str(MONO / "ali.1.gz"), FeatureOptions(), 0.0)
    assert again.log_like >= stats.log_like - 1e-3 * abs(stats.log_like)


def test_flat_start_and_equal_alignment(yesno_data, tmp_path):
    lang = LangDir.load(LANG)
    model, tree = init_mono(lang.topology, lang.phone_sets("sets.int"), np.zeros(39),
                            np.ones(39))
    assert tree.num_pdfs == 11 and model.am_gmm.num_gauss == 11
    write_model(tmp_path / "0.mdl", model)
    write_tree(tmp_path / "tree", tree)
    result = CliRunner().invoke(gmm_align_cli, ["--equal", str(tmp_path / "0.mdl"),
                                                str(tmp_path / "tree"), str(LANG),
                                                str(yesno_data), str(tmp_path / "ali.1.gz")])
    assert result.exit_code == 0, result.output
    table = transition_table(read_model(tmp_path / "0.mdl"))
    kaldi = dict(iter_alignment_file(MONO / "ali.1.gz"))
    for utt, ali in iter_alignment_file(tmp_path / "ali.1.gz"):
        assert len(ali) == len(kaldi[utt])
        # the equal alignment has the transcript's words: as many Y/N phone instances
        phones = table.id2phone[ali[table.phone_starts(ali)]].tolist()
        words = yesno_texts()[utt].split()
        assert [p for p in phones if p != 1] == [2 if w == "YES" else 3 for w in words]


def test_bad_utterances_are_named_skipped_and_counted(feats, tmp_path, caplog):
    texts = yesno_texts()
    utts = sorted(feats)
    bad = dict(feats)
    texts = dict(texts)
    texts[utts[0]] = "YES MAYBE NO"                    # a word missing from the lexicon: <SIL>
    bad[utts[1]] = feats[utts[1]][:5]                  # 5 frames for 8 words
    bad[utts[2]] = np.zeros((300, 20), np.float32)     # features of the wrong dimension
    data = write_data_dir(tmp_path / "bad", bad, texts)
    args = [str(MONO / "final.mdl"), str(MONO / "tree"), str(LANG), str(data)]
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(gmm_align_cli, ["--max-failed", "0.2", *args,
                                                    str(tmp_path / "ali.1.gz")])
    assert result.exit_code == 0, result.output
    aligned = dict(iter_alignment_file(tmp_path / "ali.1.gz"))
    assert len(aligned) == 29 and utts[0] in aligned and not set(utts[1:3]) & set(aligned)
    log = caplog.text
    # Kaldi's rule (sym2int.pl --map-oov): the unknown word is the lang's OOV word, and counted
    assert (f"1 occurrence(s) of 1 word(s) not in {LANG}/words.txt mapped to the OOV word "
            "(oov.int 1): MAYBE (1)") in log
    assert f"skipping utterance {utts[1]}: no alignment" in log
    assert f"skipping utterance {utts[2]}:" in log and "20" in log
    # Past the stated fraction the job fails and writes nothing.
    result = CliRunner().invoke(gmm_align_cli, ["--max-failed", "0.05", *args,
                                                str(tmp_path / "ali.2.gz")])
    assert result.exit_code != 0 and "2 of 31 utterances skipped" in result.output
    assert not (tmp_path / "ali.2.gz").exists()
    # The accumulator skips the unaligned ones as well.
    result = CliRunner().invoke(acc_stats_ali_cli, ["--max-skipped", "0.2",
                                                    str(MONO / "final.mdl"), str(data),
                                                    str(tmp_path / "ali.1.gz"),
                                                    str(tmp_path / "x.acc")])
    assert result.exit_code == 0, result.output
    assert GmmStats.load(str(tmp_path / "x.acc")).frames == sum(len(a) for a in aligned.values())


def test_without_oov_int_an_unknown_word_is_an_error_naming_it(tmp_path):
    lang = LangDir.load(LANG)
    assert lang.word_ids(["YES", "NO"]) == [3, 2] and not lang.oov_counts
    lang.oov = None   # a lang dir without oov.int
    with pytest.raises(TranscriptError, match=r"not in .*words.txt and no .*oov.int .*: MAYBE"):
        lang.word_ids(["YES", "MAYBE"])


def test_kaldi_tree_and_model_realign_as_kaldi(yesno_data, tmp_path):
    # Our aligner with Kaldi's model and tree reproduces Kaldi's alignment (dither aside).
    result = CliRunner().invoke(gmm_align_cli, [str(MONO / "final.mdl"), str(MONO / "tree"),
                                                str(LANG), str(yesno_data),
                                                str(tmp_path / "ali.1.gz")])
    assert result.exit_code == 0, result.output
    tid2pdf = np.asarray(read_model(MONO / "final.mdl").transition_model.id2pdf_id)
    kaldi = dict(iter_alignment_file(MONO / "ali.1.gz"))
    ours = dict(iter_alignment_file(tmp_path / "ali.1.gz"))
    agree = sum(np.sum(tid2pdf[ours[u]] == tid2pdf[kaldi[u]]) for u in kaldi)
    assert agree / sum(len(a) for a in kaldi.values()) > 0.99
    assert read_tree(MONO / "tree").num_pdfs == 11


def test_boundary_error_against_known_timings(tmp_path):
    import json

    from emasr.ali.boundary_error import boundary_error_cli
    from emasr.kaldi.transitions import load_transition_table

    (tmp_path / "final.mdl").write_bytes((MONO / "final.mdl").read_bytes())
    (tmp_path / "ali.1.gz").write_bytes((MONO / "ali.1.gz").read_bytes())
    table = load_transition_table(MONO / "final.mdl")
    names = {1: "SIL", 2: "Y", 3: "N"}

    def timings(n_later: int) -> list[dict]:
        # The "synthesizer" puts every boundary 20 ms (160 samples at 8 kHz) later, the starts of
        # N n_later samples later.
        records = []
        for utt, ali in iter_alignment_file(MONO / "ali.1.gz"):
            starts = np.flatnonzero(table.phone_starts(ali))
            ends = np.append(starts[1:], len(ali))
            phones = []
            for s, e in zip(starts, ends):
                name = names[int(table.id2phone[ali[s]])]
                phones.append([name, int(s) * 80 + (n_later if name == "N" else 160),
                               int(e) * 80 + 160])
            if utt.startswith("0_0"):
                phones = phones[:-2]  # a different phone sequence: left out
            records.append({"utt": utt, "sample_rate": 8000, "phones": phones})
        return records

    def run(records: list[dict], *options: str) -> list[str]:
        (tmp_path / "timings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        result = CliRunner().invoke(boundary_error_cli, [
            "--silence", "SIL", *options, str(tmp_path), str(LANG / "phones.txt"),
            str(tmp_path / "timings.jsonl")])
        assert result.exit_code == 0, result.output
        return result.output.splitlines()

    records = timings(160)
    lines = run(records)
    left_out = sum(r["utt"].startswith("0_0") for r in records)
    assert lines[0] == f"utterances compared {31 - left_out}, left out {left_out}"
    assert lines[2] == ("boundary error mean 20.0 ms, median 20.0 ms, within 20 ms 100.0%, "
                        "signed mean -20.0 ms")
    # per phone: N's starts 40 ms off, the others' 20 ms
    lines = run(timings(320), "--by-phone", "3")
    by_phone = {line.split()[0]: line for line in lines[3:]}
    assert sorted(by_phone) == ["<end>", "N", "Y"]
    assert "mean 40.0 ms, median 40.0 ms, within 20 ms 0.0%, signed mean -40.0 ms" in by_phone["N"]
    assert "mean 20.0 ms" in by_phone["Y"] and "mean 20.0 ms" in by_phone["<end>"]
    # each phone's constant offset taken out (N's 40 ms, the others' 20), nothing is left
    lines = run(timings(320), "--phone-offsets")
    assert lines[3] == ("without each phone's median offset mean 0.0 ms, median 0.0 ms, "
                        "within 20 ms 100.0%, signed mean +0.0 ms")
    # per SNR band: the noisy utterances have N 40 ms off, the clean ones 20 ms
    records = [clean if i % 2 else noisy
               for i, (clean, noisy) in enumerate(zip(timings(160), timings(320)))]
    for i, record in enumerate(records):
        record["conditions"] = {"snr_db": 20.0 if i % 2 else 2.0}
    lines = run(records, "--by-snr", "5 15")
    assert lines[3].startswith("SNR [-inf, 5) dB: boundaries ")
    assert "within 20 ms 100.0%" not in lines[3]
    assert lines[4].startswith("SNR [15, inf) dB: ") and lines[4].endswith(
        "mean 20.0 ms, median 20.0 ms, within 20 ms 100.0%, signed mean -20.0 ms")
    assert len(lines) == 5   # no utterance in [5, 15)
    result = CliRunner().invoke(boundary_error_cli, [
        "--silence", "SIL", "--by-snr", "five", str(tmp_path), str(LANG / "phones.txt"),
        str(tmp_path / "timings.jsonl")])
    assert result.exit_code != 0 and "'five': expected SNR edges" in result.output
    # --common-with: only the utterances another dir aligned too (here the even-numbered ones,
    # which hold every noisy utterance, N 40 ms off)
    other = tmp_path / "other"
    other.mkdir()
    writer = AlignmentWriter(str(other / "ali.1.gz"))
    for i, (utt, ali) in enumerate(iter_alignment_file(MONO / "ali.1.gz")):
        if i % 2 == 0:
            writer.write(utt, ali)
    writer.close()
    compared = sum(i % 2 == 0 and not r["utt"].startswith("0_0") for i, r in enumerate(records))
    lines = run(records, "--common-with", str(other), "--by-phone", "3")
    assert lines[0] == f"utterances compared {compared}, left out " + str(
        sum(i % 2 == 0 and r["utt"].startswith("0_0") for i, r in enumerate(records)))
    by_phone = {line.split()[0]: line for line in lines[3:]}
    assert "mean 40.0 ms, median 40.0 ms" in by_phone["N"]
    (other / "ali.1.gz").unlink()
    result = CliRunner().invoke(boundary_error_cli, [
        "--silence", "SIL", "--common-with", str(other), str(tmp_path), str(LANG / "phones.txt"),
        str(tmp_path / "timings.jsonl")])
    assert result.exit_code != 0 and f"expected files {other}/ali.JOB.gz to exist" in result.output
