"""The pinned FST stack imports in the package's order and composes and decodes an FST."""
import subprocess
import sys

from emasr.fst_stack import smoke_test


def test_stack_composes_and_decodes():
    assert smoke_test() == [10, 20]


def test_stack_imports_in_one_fresh_process():
    # A fresh interpreter, so the import order is really the package's (a deadlock would time out).
    code = "from emasr.fst_stack import smoke_test, import_kaldilm; print(smoke_test()); import_kaldilm()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[10, 20]"


def test_pinned_versions():
    import kaldi_hmm_gmm
    import kaldifst
    import kaldi_decoder

    assert kaldi_hmm_gmm.__version__ == "1.1.4"
    assert kaldifst.__version__.startswith("1.7.")
    assert kaldi_decoder.__version__ == "0.2.11"
