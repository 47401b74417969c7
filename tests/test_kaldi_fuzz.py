"""Readers of the files a user hands the toolkit, fed truncations and damage (the `hypothesis`
package, seeded): each gives the correct parse or the project's named error, never another
exception. Kaldi archives have their own fuzz tests in tests/test_kaldi_tables.py."""
from __future__ import annotations

import gzip

import pytest
from hypothesis import given, settings, strategies as st

from conftest import YESNO
from emasr.kaldi.alignments import AlignmentError, iter_alignment_file
from emasr.kaldi.fst import read_fst
from emasr.kaldi.lattice_io import LatticeFormatError, read_lattices
from emasr.kaldi.openfst_binary import FstFormatError
from emasr.nnet import config as configs

FUZZ = settings(max_examples=60, deadline=None, derandomize=True)
L_DISAMBIG = YESNO / "data" / "lang" / "L_disambig.fst"
ALIGNMENTS = YESNO / "exp" / "mono" / "ali.1.gz"


@FUZZ
@given(fraction=st.floats(0, 1, exclude_max=True))
def test_any_truncation_of_an_fst_is_named(tmp_path_factory, fraction):
    data = L_DISAMBIG.read_bytes()
    path = tmp_path_factory.mktemp("fst") / "L_disambig.fst"
    path.write_bytes(data[:int(fraction * len(data))])
    with pytest.raises(FstFormatError, match=str(path)):
        read_fst(path)


def test_an_fst_with_damaged_counts_is_named(tmp_path):
    # OpenFst trusts the state and arc counts: damaged ones ask for absurd sizes (vector::reserve)
    data = bytearray(L_DISAMBIG.read_bytes())
    data[60:80] = b"\xff" * 20
    path = tmp_path / "L_disambig.fst"
    path.write_bytes(bytes(data))
    with pytest.raises(FstFormatError, match=rf"{path}: OpenFst could not read this FST"):
        read_fst(path)


@FUZZ
@given(fraction=st.floats(0, 1, exclude_max=True), gzipped=st.booleans())
def test_any_truncation_of_an_alignment_archive_parses_or_is_named(tmp_path_factory, fraction,
                                                                   gzipped):
    raw = gzip.decompress(ALIGNMENTS.read_bytes())
    data = gzip.compress(raw) if gzipped else raw
    path = tmp_path_factory.mktemp("ali") / ("ali.1.gz" if gzipped else "ali.1")
    path.write_bytes(data[:int(fraction * len(data))])
    whole = dict(iter_alignment_file(ALIGNMENTS))
    try:
        for utt, ali in iter_alignment_file(path):
            assert utt in whole and len(ali) <= len(whole[utt])
    except AlignmentError as err:
        assert str(path) in str(err)


@FUZZ
@given(data=st.binary(max_size=300))
def test_any_bytes_as_a_lattice_archive_parse_or_are_named(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("lat") / "lat.1.gz"
    path.write_bytes(gzip.compress(data) if data[:1] != b"x" else data)
    try:
        for utt, _ in read_lattices(str(path)):
            assert isinstance(utt, str)
    except LatticeFormatError as err:
        assert str(path) in str(err)


@FUZZ
@given(text=st.text(max_size=200))
def test_any_text_as_a_training_config_loads_or_is_named(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("conf") / "conf.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        configs.resolve(str(path))
    except configs.ConfigError as err:
        assert str(err)


@pytest.mark.parametrize("text, named", [
    ("model: [1, 2", "{path}: cannot read the configuration: while parsing"),
    ("model:\n  hidden_dim: {", "{path}: cannot read the configuration"),
    ("- a\n- b", "{path}: expected a YAML mapping at the top level"),
    ("train: 3", "'train' must be a mapping"),
    ("train:\n  epochs: many", "'train.epochs' must be an integer")])
def test_a_broken_training_config_is_named(tmp_path, text, named):
    path = tmp_path / "conf.yaml"
    path.write_text(text)
    with pytest.raises(configs.ConfigError) as err:
        configs.resolve(str(path))
    assert named.format(path=path) in str(err.value)


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=200)


@FUZZ
@given(text=TEXT, raw=st.binary(max_size=60))
def test_any_lexicon_reads_or_is_named(tmp_path_factory, text, raw):
    from emasr.io.table import TableError as TextTableError
    from emasr.lang.dictdir import DictError, read_lexicon

    root = tmp_path_factory.mktemp("lexicon")
    for name, data in (("lexicon.txt", text.encode("utf-8")), ("raw.txt", raw)):
        (root / name).write_bytes(data)
        try:
            read_lexicon(root / name)
        except (DictError, TextTableError) as err:
            assert name in str(err)


@FUZZ
@given(text=TEXT, raw=st.binary(max_size=60))
def test_any_arpa_file_reads_or_is_named(tmp_path_factory, text, raw):
    from emasr.lang.arpa import ArpaError, read_arpa

    root = tmp_path_factory.mktemp("arpa")
    for name, data in (("lm.arpa", ("\\data\\\nngram 1=2\n\n\\1-grams:\n" + text).encode()),
                       ("raw.arpa", raw)):
        (root / name).write_bytes(data)
        try:
            read_arpa(root / name)
        except ArpaError as err:
            assert name in str(err)


@FUZZ
@given(utt2spk=TEXT, text=TEXT)
def test_any_data_dir_loads_or_is_named(tmp_path_factory, utt2spk, text):
    from emasr.io.datadir import DataDirError, load_data_dir
    from emasr.io.table import TableError as TextTableError

    data = tmp_path_factory.mktemp("data")
    (data / "utt2spk").write_text(utt2spk, encoding="utf-8")
    (data / "text").write_text(text, encoding="utf-8")
    try:
        load_data_dir(data)
    except (DataDirError, TextTableError) as err:
        assert str(data) in str(err)
