"""Cross-checks between the files that meet in a step: pdf counts and tree identity.

A targets dir, a transition model (final.mdl), a tree, a graph dir and a network each fix a number
of pdfs; where two of them meet (training, graph building, decoding) a disagreement means their
outputs are silently wrong, or the C++ decoder aborts on the first utterance. `emasr
check-compatible` compares every pair it is given, before a step does any work, and names both
files and both numbers (as Kaldi's utils/check_phones_compatible.sh does for phone sets).

A graph dir records the identity of the tree it was built with in ``tree.sha256`` (a digest of
the tree's Kaldi binary serialisation, so a text and a binary copy of one tree agree); a decoder
refuses a model whose tree differs, since the graph's transition ids then mean other HMM states
even when the number of pdfs agrees. A targets dir records the tree of its alignments the same
way (make-targets), so training refuses a --trans-mdl of another tree: a GMM tree and a network
tree (steps/nnet/build_tree.sh) can have the same number of pdfs and different ones.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import click

TREE_DIGEST_FILE = "tree.sha256"


class CompatError(ValueError):
    """Two inputs of a step do not belong together; the message names both files."""


@dataclass
class PdfCount:
    """How many pdfs one input has, and where that number was read."""
    source: str
    num_pdfs: int


# -- how many pdfs each kind of input has --

def _read_count(path: str) -> int:
    if not os.path.isfile(path):
        raise CompatError(f"expected file {path} to exist")
    text = open(path).read().strip()
    try:
        return int(text)
    except ValueError:
        raise CompatError(f"{path}: expected one integer (a number of pdfs), got "
                          f"'{text[:40]}'") from None


def model_pdfs(path: str) -> PdfCount:
    from emasr.kaldi.io import KaldiFormatError
    from emasr.kaldi.transitions import load_transition_table

    if not os.path.isfile(path):
        raise CompatError(f"expected file {path} to exist")
    try:
        return PdfCount(path, load_transition_table(path).num_pdfs)
    except (KaldiFormatError, ValueError) as err:
        raise CompatError(f"{path}: not a readable Kaldi model: {err}") from None


def tree_pdfs(path: str) -> PdfCount:
    return PdfCount(path, _load_tree(path).num_pdfs)


def targets_pdfs(targets_dir: str) -> PdfCount:
    path = os.path.join(targets_dir, "num_pdfs")
    return PdfCount(path, _read_count(path))


def graph_pdfs(graph_dir: str) -> PdfCount:
    path = os.path.join(graph_dir, "num_pdfs")
    return PdfCount(path, _read_count(path))


def network_pdfs(path: str) -> PdfCount:
    from emasr.io.torch_header import FileHeaderError, read_plain_values

    if not os.path.isfile(path):
        raise CompatError(f"expected file {path} to exist")
    try:
        return PdfCount(path, int(read_plain_values(path)["num_pdfs"]))
    except FileHeaderError as err:
        raise CompatError(str(err)) from None
    except (KeyError, TypeError, ValueError):
        raise CompatError(f"{path}: expected a network file with num_pdfs") from None


def _table_keys(path: str) -> list[str]:
    if not os.path.isfile(path):
        raise CompatError(f"expected file {path} to exist")
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.split(None, 1)[0] for line in f if line.strip()]


def check_network_data(network: str, data_dir: str) -> None:
    """The data dir has what the network's feature pipeline (stored in its file) reads: feats.scp,
    and for per-speaker CMVN utt2spk and cmvn.scp with stats for every speaker. Checked before a
    decode splits the data or starts a job, as the GMM decode checks its own inputs, instead of
    failing inside each job."""
    from emasr.io.torch_header import FileHeaderError, read_plain_values

    try:
        pipeline = read_plain_values(network).get("pipeline") or {}
    except FileHeaderError as err:
        raise CompatError(str(err)) from None
    _table_keys(os.path.join(data_dir, "feats.scp"))
    cmvn = pipeline.get("cmvn", "none")   # a file without a pipeline is refused when loaded
    if cmvn == "global" and "global_cmvn_stats" not in pipeline:
        _table_keys(os.path.join(data_dir, "global_cmvn"))
    if cmvn != "speaker":
        return
    utt2spk = os.path.join(data_dir, "utt2spk")
    with open(utt2spk if os.path.isfile(utt2spk) else os.devnull, encoding="utf-8") as f:
        speakers = {line.split()[1] for line in f if len(line.split()) > 1}
    cmvn_scp = os.path.join(data_dir, "cmvn.scp")
    if not os.path.isfile(cmvn_scp) or not os.path.isfile(utt2spk):
        missing = cmvn_scp if not os.path.isfile(cmvn_scp) else utt2spk
        raise CompatError(f"expected file {missing} to exist: {network} normalizes its features "
                          f"per speaker (run steps/compute_cmvn_stats.sh {data_dir})")
    unknown = sorted(speakers - set(_table_keys(cmvn_scp)))
    if unknown:
        raise CompatError(f"{cmvn_scp} has no stats for {len(unknown)} of the {len(speakers)} "
                          f"speakers of {utt2spk} ({', '.join(unknown[:5])}"
                          f"{', ...' if len(unknown) > 5 else ''}); expected one line per speaker "
                          f"(rerun steps/compute_cmvn_stats.sh {data_dir})")


def check_pdf_counts(counts: list[PdfCount]) -> None:
    """Every count equals the first; the error names the first disagreeing pair."""
    for other in counts[1:]:
        if other.num_pdfs != counts[0].num_pdfs:
            raise CompatError(f"{counts[0].source} has {counts[0].num_pdfs} pdfs but "
                              f"{other.source} has {other.num_pdfs}: they do not belong together")


# -- tree identity --

def _load_tree(path: str):
    from emasr.kaldi.io import KaldiFormatError
    from emasr.kaldi.model_io import read_tree

    if not os.path.isfile(path):
        raise CompatError(f"expected file {path} to exist")
    try:
        return read_tree(path)
    except (KaldiFormatError, ValueError, RuntimeError) as err:
        raise CompatError(f"{path}: not a readable Kaldi tree: {err}") from None


def tree_digest(path: str) -> str:
    """sha256 of the tree's binary serialisation (the same for a binary and a text copy)."""
    payload = bytes(b & 0xFF for b in _load_tree(path).__getstate__()[0])
    return hashlib.sha256(payload).hexdigest()


def record_tree(graph_dir: str, tree_path: str) -> None:
    """Write <graph_dir>/tree.sha256 for the decoders' check."""
    from emasr.io.atomic import atomic_write

    with atomic_write(os.path.join(graph_dir, TREE_DIGEST_FILE)) as f:
        f.write(tree_digest(tree_path) + "\n")


def _recorded_tree_differs(directory: str, tree_path: str) -> str | None:
    """The path of <directory>/tree.sha256 when it names another tree than tree_path, else None
    (also when there is no record: graphs and targets from Kaldi or older runs pass)."""
    recorded_path = os.path.join(directory, TREE_DIGEST_FILE)
    if not os.path.isfile(recorded_path):
        return None
    recorded = open(recorded_path).read().split()
    return None if recorded[:1] == [tree_digest(tree_path)] else recorded_path


def check_graph_tree(graph_dir: str, tree_path: str) -> None:
    """The graph was built with this tree (graphs without tree.sha256, e.g. Kaldi's, pass)."""
    recorded_path = _recorded_tree_differs(graph_dir, tree_path)
    if recorded_path:
        raise CompatError(f"{graph_dir}/HCLG.fst was built with another tree than {tree_path} "
                          f"({recorded_path} differs): rebuild the graph with utils/mkgraph.sh "
                          "for this model")


def check_targets_tree(targets_dir: str, tree_path: str) -> None:
    """The targets are pdfs of this tree (targets dirs without tree.sha256 pass)."""
    recorded_path = _recorded_tree_differs(targets_dir, tree_path)
    if recorded_path:
        raise CompatError(f"{targets_dir} holds the pdfs of another tree than {tree_path} "
                          f"({recorded_path} differs): make the targets from the alignments of "
                          "this tree (steps/nnet/make_targets.sh), or train with the model of "
                          "theirs")


def check_tree_matches_model(tree_path: str, model_path: str) -> None:
    """The model's transition tuples are those the tree gives for the model's own topology."""
    import kaldi_hmm_gmm

    from emasr.kaldi.model_io import build_topology
    from emasr.kaldi.transitions import load_transition_table

    tree = _load_tree(tree_path)
    check_pdf_counts([model_pdfs(model_path), PdfCount(tree_path, tree.num_pdfs)])
    table = load_transition_table(model_path)
    try:
        rebuilt = kaldi_hmm_gmm.TransitionModel(tree, build_topology(table.topology))
    except RuntimeError as err:
        raise CompatError(f"{tree_path} does not fit the topology of {model_path}: {err}") from None
    expected = sorted(t.__getstate__() for t in rebuilt.tuples)
    actual = sorted((t.phone, t.hmm_state, t.forward_pdf, t.self_loop_pdf) for t in table.tuples)
    if expected != actual:
        raise CompatError(f"{tree_path} is not the tree of {model_path}: its pdfs for the model's "
                          "phones and HMM states differ (the model was built from another tree)")


# -- command line --

@click.command("check-compatible")
@click.option("--targets", "targets_dir", default=None,
              help="A targets dir (its num_pdfs, and tree.sha256 where it has one).")
@click.option("--model", default=None, help="A Kaldi final.mdl (its transition model).")
@click.option("--tree", default=None,
              help="A Kaldi tree; checked against --model, --graph and --targets.")
@click.option("--graph", "graph_dir", default=None,
              help="A graph dir (its num_pdfs and tree.sha256, where it has them).")
@click.option("--network", default=None, help="A network file (final.pt, ema.pt).")
@click.option("--data", "data_dir", default=None,
              help="A data dir the --network is to read (its feats.scp, and cmvn.scp for every "
                   "speaker where the network's pipeline normalizes per speaker).")
def check_compatible_cli(targets_dir, model, tree, graph_dir, network, data_dir):
    """Check that the inputs given agree: the same number of pdfs for all of them, --tree the
    tree of --model, --graph built with --tree, --targets made from its alignments and --data
    holding what --network reads. Exits 1 naming both files on a mismatch."""
    try:
        counts = []
        if targets_dir:
            counts.append(targets_pdfs(targets_dir))
        if network:
            counts.append(network_pdfs(network))
        if model:
            counts.append(model_pdfs(model))
        if tree:
            counts.append(tree_pdfs(tree))
        if graph_dir and os.path.isfile(os.path.join(graph_dir, "num_pdfs")):
            counts.append(graph_pdfs(graph_dir))
        check_pdf_counts(counts)
        if tree and model:
            check_tree_matches_model(tree, model)
        if tree and graph_dir:
            check_graph_tree(graph_dir, tree)
        if tree and targets_dir:
            check_targets_tree(targets_dir, tree)
        if network and data_dir:
            check_network_data(network, data_dir)
    except CompatError as err:
        raise click.ClickException(str(err)) from None
