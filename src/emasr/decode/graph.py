"""Decoding graphs: HCLG = H o C o L o G, built the way Kaldi's utils/mkgraph.sh builds it.

    LG    = minimize_encoded(determinize_star_log(L_disambig o G))
    CLG   = compose_context(LG) with the tree's context width N and central position P
    HCLGa = minimize_encoded(rmepsilon(rm_disambig_tids(determinize_star_log(Ha o CLG))))
    HCLG  = add_self_loops(HCLGa, self_loop_scale, reorder=True), sorted on input labels

Every operation is OpenFst's or Kaldi's own (kaldifst, kaldi_hmm_gmm). Differences from Kaldi:
no fstpushspecial on LG and a full rmepsilon instead of fstrmepslocal (neither is bound in
kaldifst); both change only where weights sit, not which paths exist or what they cost in total.
LG and CLG depend only on the lang dir (and N, P), so they are cached in `<lang>/tmp` (or in the
graph dir when the lang dir is read-only) under a hash of their inputs and reused by later graphs.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import time
from dataclasses import dataclass

import click

from emasr.compat import TREE_DIGEST_FILE, CompatError, check_tree_matches_model, record_tree
from emasr.kaldi.fst import fst_size, map_input_labels_to_epsilon, read_fst, write_fst
from emasr.io.atomic import atomic_write
from emasr.io.table import read_lines
from emasr.lang.symbols import read_symbols
from emasr.lang.validate import fst_labels, grammar_problems, lexicon_problems
from emasr.fst_stack import kaldi_hmm_gmm, kaldifst

logger = logging.getLogger(__name__)

# Files of the lang dir that a graph dir carries along (Kaldi's mkgraph.sh copies the same ones).
LANG_FILES_TO_COPY = ("words.txt", "phones.txt")
PHONES_FILES_TO_COPY = ("word_boundary.txt", "word_boundary.int", "align_lexicon.txt",
                        "align_lexicon.int", "disambig.txt", "disambig.int", "silence.csl",
                        "optional_silence.txt", "optional_silence.int", "optional_silence.csl")


class GraphError(ValueError):
    """The lang dir or model cannot make a graph; the message names the file and the problem."""


@dataclass
class GraphStats:
    num_states: int
    num_arcs: int
    seconds: float
    num_pdfs: int


def read_int_list(path: str) -> list[int]:
    """Integers, one or more per line (Kaldi's *.int files)."""
    if not os.path.isfile(path):
        raise GraphError(f"expected file {path} to exist")
    values = []
    for number, line in enumerate(read_lines(path), 1):
        try:
            values.extend(int(x) for x in line.split())
        except ValueError:
            raise GraphError(f"{path}:{number}: expected integers, got '{line}'") from None
    return values


def file_digest(*paths: str, extra: str = "") -> str:
    """sha256 over the bytes of `paths` and a parameter string: the cache key of a derived FST."""
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def is_writable_dir(path: str) -> bool:
    """Writable by its permission bits too: root passes os.access on a read-only (r-x) fixture."""
    return (os.path.isdir(path) and os.access(path, os.W_OK)
            and bool(os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)))


def cache_dir_for(lang_dir: str, graph_dir: str) -> str:
    """`<lang>/tmp` as Kaldi uses it, or `<graph>/tmp` when the lang dir is read-only."""
    lang_tmp = os.path.join(lang_dir, "tmp")
    if is_writable_dir(lang_dir) and (not os.path.exists(lang_tmp) or is_writable_dir(lang_tmp)):
        return lang_tmp
    return os.path.join(graph_dir, "tmp")


def cached(path: str, key: str) -> bool:
    """True when `path` exists and was built from inputs with this key."""
    stamp = path + ".key"
    if not (os.path.isfile(path) and os.path.isfile(stamp)):
        return False
    with open(stamp, encoding="utf-8") as f:
        return f.read().strip() == key


def store_key(path: str, key: str) -> None:
    with atomic_write(path + ".key") as f:
        f.write(key + "\n")


def compose_lg(lang_dir: str) -> kaldifst.StdVectorFst:
    """L_disambig o G, determinized in the log semiring and minimized (Kaldi's LG.fst)."""
    lexicon = read_fst(os.path.join(lang_dir, "L_disambig.fst"))
    grammar = read_fst(os.path.join(lang_dir, "G.fst"))
    # a damaged L_disambig.fst that OpenFst still reads composes into another graph, and a G.fst
    # of another words.txt composes, then fails inside the decoder: validate_lang's checks of both
    problems = lexicon_problems(lang_dir, lexicon)
    problems += grammar_problems(fst_labels(grammar)[0],
                                 read_symbols(os.path.join(lang_dir, "words.txt")),
                                 os.path.join(lang_dir, "G.fst"))
    if problems:
        raise GraphError("\n".join(problems))
    kaldifst.arcsort(lexicon, sort_type="olabel")
    kaldifst.arcsort(grammar, sort_type="ilabel")
    lg = kaldifst.StdVectorFst(kaldifst.compose(lexicon, grammar, connect=True))
    if lg.num_states == 0:
        raise GraphError(f"L_disambig.fst o G.fst in {lang_dir} is empty: the LM's words do not "
                         "match the lexicon's (check words.txt and G.fst)")
    kaldifst.determinize_star(lg, use_log=True)
    kaldifst.minimize_encoded(lg)
    return lg


def compose_clg(lg, disambig_phones: list[int], context_width: int, central_position: int):
    """C o LG for the tree's context; returns (CLG sorted on input labels, ilabel_info)."""
    clg, ilabel_info = kaldifst.compose_context(disambig_syms=disambig_phones,
                                                context_width=context_width,
                                                central_position=central_position, ifst=lg)
    clg = kaldifst.StdVectorFst(clg)
    kaldifst.arcsort(clg, sort_type="ilabel")
    return clg, [list(x) for x in ilabel_info]


def compose_hclga(clg, ilabel_info, ctx_dep, trans_model, transition_scale: float):
    """Ha o CLG, determinized, disambiguation symbols and epsilons removed, minimized.

    Returns (HCLGa, disambig_tids): the transition-id stand-ins for the disambiguation symbols,
    which Kaldi writes to disambig_tid.int.
    """
    config = kaldi_hmm_gmm.HTransducerConfig(transition_scale=transition_scale)
    h_fst, disambig_tids = kaldi_hmm_gmm.get_h_transducer(ilabel_info, ctx_dep, trans_model, config)
    h_fst = kaldifst.StdVectorFst(h_fst)
    kaldifst.arcsort(h_fst, sort_type="olabel")
    hclga = kaldifst.StdVectorFst(kaldifst.compose(h_fst, clg, connect=True))
    kaldifst.determinize_star(hclga, use_log=True)
    max_label = max([trans_model.num_transition_ids, *disambig_tids])
    hclga = map_input_labels_to_epsilon(hclga, disambig_tids, max_label)
    kaldifst.rmepsilon(hclga)
    kaldifst.minimize_encoded(hclga)
    return hclga, list(disambig_tids)


def add_self_loops(hclga, trans_model, self_loop_scale: float) -> kaldifst.StdVectorFst:
    """Kaldi's add-self-loops --reorder=true, then sort arcs on input labels for the decoder."""
    hclg = kaldi_hmm_gmm.add_self_loops(self_loop_scale=self_loop_scale, disambig_syms=[],
                                        reorder=True, trans_model=trans_model, ifst=hclga)
    hclg = kaldifst.StdVectorFst(hclg)
    kaldifst.arcsort(hclg, sort_type="ilabel")
    return hclg


def cached_lg(lang_dir: str, cache: str) -> tuple[kaldifst.StdVectorFst, str]:
    """LG from the cache when L_disambig.fst and G.fst did not change, else built and cached."""
    # words.txt in the key: G.fst is checked against it when LG is built (compose_lg)
    key = file_digest(os.path.join(lang_dir, "L_disambig.fst"), os.path.join(lang_dir, "G.fst"),
                      os.path.join(lang_dir, "words.txt"))
    path = os.path.join(cache, "LG.fst")
    if cached(path, key):
        logger.info("reusing %s (inputs unchanged)", path)
        return read_fst(path), key
    start = time.monotonic()
    lg = compose_lg(lang_dir)
    write_fst(lg, path)
    store_key(path, key)
    logger.info("LG: %d states, %d arcs (%.1f s) -> %s", *fst_size(lg), time.monotonic() - start,
                path)
    return lg, key


def cached_clg(lang_dir: str, cache: str, context_width: int, central_position: int):
    """CLG_N_P and its ilabel_info, from the cache when LG and the disambig symbols are
    unchanged."""
    lg, lg_key = cached_lg(lang_dir, cache)
    disambig_path = os.path.join(lang_dir, "phones", "disambig.int")
    disambig = read_int_list(disambig_path)
    key = file_digest(disambig_path, extra=f"{lg_key} N={context_width} P={central_position}")
    path = os.path.join(cache, f"CLG_{context_width}_{central_position}.fst")
    ilabels_path = os.path.join(cache, f"ilabels_{context_width}_{central_position}")
    if cached(path, key) and os.path.isfile(ilabels_path):
        logger.info("reusing %s (inputs unchanged)", path)
        return read_fst(path), read_ilabel_info(ilabels_path)
    start = time.monotonic()
    clg, ilabel_info = compose_clg(lg, disambig, context_width, central_position)
    write_fst(clg, path)
    write_ilabel_info(ilabels_path, ilabel_info)
    store_key(path, key)
    logger.info("CLG: %d states, %d arcs (%.1f s) -> %s", *fst_size(clg), time.monotonic() - start,
                path)
    return clg, ilabel_info


def write_ilabel_info(path: str, ilabel_info: list[list[int]]) -> None:
    """One line per CLG input label: its index, then the phone window (empty for epsilon)."""
    with atomic_write(path) as f:
        for index, window in enumerate(ilabel_info):
            f.write(" ".join(str(x) for x in [index, *window]) + "\n")


def read_ilabel_info(path: str) -> list[list[int]]:
    info = []
    for number, line in enumerate(read_lines(path), 1):
        fields = [int(x) for x in line.split()]
        if not fields or fields[0] != number - 1:
            raise GraphError(f"{path}:{number}: expected index {number - 1} then phones")
        info.append(fields[1:])
    return info


def copy_lang_files(lang_dir: str, graph_dir: str) -> None:
    """words.txt, phones.txt and the phones/ files a decode and scoring need."""
    for name in LANG_FILES_TO_COPY:
        shutil.copyfile(os.path.join(lang_dir, name), os.path.join(graph_dir, name))
    os.makedirs(os.path.join(graph_dir, "phones"), exist_ok=True)
    for name in PHONES_FILES_TO_COPY:
        source = os.path.join(lang_dir, "phones", name)
        if os.path.isfile(source):
            shutil.copyfile(source, os.path.join(graph_dir, "phones", name))


def check_phones_compatible(lang_dir: str, model_dir: str) -> None:
    """The model was trained with the lang's phone set (Kaldi's check_phones_compatible.sh);
    checked when the model dir keeps its phones.txt, as Kaldi's training steps leave it."""
    model_phones = os.path.join(model_dir, "phones.txt")
    lang_phones = os.path.join(lang_dir, "phones.txt")
    if os.path.isfile(model_phones) and os.path.isfile(lang_phones):
        if read_lines(model_phones) != read_lines(lang_phones):
            raise GraphError(f"phone symbol tables {lang_phones} and {model_phones} differ: the "
                             "model was trained with another lang dir")


def check_lang_phones_in_model(lang_dir: str, model_path: str) -> None:
    """Every phone of the lang dir has an HMM in the model (else Kaldi's H builder aborts with
    'phone N not covered'); the model's phones.txt may be missing, the topology never is."""
    from emasr.kaldi.transitions import load_transition_table

    phones_txt = os.path.join(lang_dir, "phones.txt")
    covered = set(load_transition_table(model_path).topology.phones)
    for number, line in enumerate(read_lines(phones_txt), 1):
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            raise GraphError(f"{phones_txt}:{number}: expected 'phone integer-id', got '{line}'")
        name, phone = fields[0], int(fields[1])
        if phone != 0 and not name.startswith("#") and phone not in covered:
            raise GraphError(f"{phones_txt}:{number}: phone {phone} ({name}) has no HMM in "
                             f"{model_path} (its topology covers {len(covered)} phones): the lang "
                             "dir is from another phone set than the model")


def check_lang_dir(lang_dir: str) -> None:
    for name in ("L_disambig.fst", "G.fst", "words.txt", "phones.txt", "phones/disambig.int"):
        if not os.path.isfile(os.path.join(lang_dir, name)):
            raise GraphError(f"expected file {os.path.join(lang_dir, name)} to exist")


def make_graph(lang_dir: str, graph_dir: str, trans_model, ctx_dep, self_loop_scale: float = 0.1,
               transition_scale: float = 1.0) -> GraphStats:
    """Build `<graph_dir>/HCLG.fst` and its companions from a lang dir, a tree and a model."""
    check_lang_dir(lang_dir)
    os.makedirs(graph_dir, exist_ok=True)
    start = time.monotonic()
    cache = cache_dir_for(lang_dir, graph_dir)
    clg, ilabel_info = cached_clg(lang_dir, cache, ctx_dep.context_width, ctx_dep.central_position)
    hclga, disambig_tids = compose_hclga(clg, ilabel_info, ctx_dep, trans_model, transition_scale)
    hclg = add_self_loops(hclga, trans_model, self_loop_scale)
    if hclg.num_states == 0:
        raise GraphError(f"HCLG built from {lang_dir} is empty: the model's phones may not "
                         "cover the lexicon's (compare the model's phones.txt with the lang's)")
    write_fst(hclg, os.path.join(graph_dir, "HCLG.fst"))
    copy_lang_files(lang_dir, graph_dir)
    with atomic_write(os.path.join(graph_dir, "num_pdfs")) as f:
        f.write(f"{trans_model.num_pdfs}\n")
    with atomic_write(os.path.join(graph_dir, "disambig_tid.int")) as f:
        f.write("".join(f"{t}\n" for t in disambig_tids))
    write_ilabel_info(os.path.join(graph_dir, "ilabels"), ilabel_info)
    num_states, num_arcs = fst_size(hclg)
    stats = GraphStats(num_states, num_arcs, time.monotonic() - start, trans_model.num_pdfs)
    logger.info("HCLG: %d states, %d arcs, %d pdfs, built in %.1f s -> %s", num_states, num_arcs,
                stats.num_pdfs, stats.seconds, os.path.join(graph_dir, "HCLG.fst"))
    return stats


@click.command("mkgraph")
@click.option("--self-loop-scale", type=float, default=0.1, show_default=True,
              help="Scale on self-loop transition probabilities (Kaldi's default 0.1).")
@click.option("--transition-scale", type=float, default=1.0, show_default=True,
              help="Scale on the other transition probabilities.")
@click.argument("lang_dir", type=click.Path(file_okay=False))
@click.argument("model_dir", type=click.Path(file_okay=False))
@click.argument("graph_dir", type=click.Path(file_okay=False))
def mkgraph_cli(self_loop_scale, transition_scale, lang_dir, model_dir, graph_dir):
    """Build HCLG.fst in GRAPH_DIR from LANG_DIR (L_disambig.fst, G.fst) and MODEL_DIR (Kaldi
    final.mdl and tree), as Kaldi's utils/mkgraph.sh does."""
    from emasr.kaldi.model_io import read_model, read_tree

    for name in ("final.mdl", "tree"):
        if not os.path.isfile(os.path.join(model_dir, name)):
            raise click.ClickException(f"expected file {os.path.join(model_dir, name)} to exist")
    model, tree = os.path.join(model_dir, "final.mdl"), os.path.join(model_dir, "tree")
    try:
        check_phones_compatible(lang_dir, model_dir)
        check_tree_matches_model(tree, model)
        check_lang_dir(lang_dir)
        check_lang_phones_in_model(lang_dir, model)
        trans_model = read_model(model).transition_model
        ctx_dep = read_tree(tree)
        # An earlier graph left beside a failed build would be decoded as if it were this one's,
        # and a stale tree record would let a decoder accept the wrong model: both go first.
        for name in ("HCLG.fst", "num_pdfs", TREE_DIGEST_FILE):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(graph_dir, name))
        make_graph(lang_dir, graph_dir, trans_model, ctx_dep, self_loop_scale, transition_scale)
        record_tree(graph_dir, tree)
    except (GraphError, CompatError) as err:
        raise click.ClickException(str(err)) from None
