"""The `emasr` command line: one click group, one subcommand per step.

Subcommands are listed in COMMANDS as "module:attribute" and imported only when invoked, so
`emasr --help` is fast and a step never imports libraries it does not use (this matters: importing
kaldilm before kaldi_hmm_gmm can deadlock, see docs/design.md "Known pitfalls").
To add a step: write a click command in its module and add one line here.
"""
from __future__ import annotations

import importlib

import click

from emasr import __version__
from emasr.log import setup_logging

# name -> (module:attribute, one-line help shown by `emasr --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "check-stack": ("emasr.fst_stack:check_stack_cli", "Import the FST stack and decode a tiny FST."),
    "check-compatible": ("emasr.compat:check_compatible_cli", "Check that targets, model, tree, graph and network agree (pdfs, tree)."),
    # -- parallel (job launchers) --
    # -- io (data directories) --
    "validate-data-dir": ("emasr.io.cli:validate_data_dir_cli", "Check a Kaldi data dir (validate_data_dir.sh)."),
    "fix-data-dir": ("emasr.io.cli:fix_data_dir_cli", "Sort a data dir and keep the utterances in all files (fix_data_dir.sh)."),
    "split-data": ("emasr.io.cli:split_data_cli", "Split a data dir into N parts by speaker or utterance (split_data.sh)."),
    "subset-data-dir": ("emasr.io.cli:subset_data_dir_cli", "Write a subset of a data dir (subset_data_dir.sh)."),
    "copy-data-dir": ("emasr.io.cli:copy_data_dir_cli", "Copy a data dir, prefixing ids (copy_data_dir.sh)."),
    "combine-data": ("emasr.io.cli:combine_data_cli", "Combine data dirs into one (combine_data.sh)."),
    "filter-scp": ("emasr.io.cli:filter_scp_cli", "Keep the lines whose id is in a list (filter_scp.pl)."),
    "utt2spk-to-spk2utt": ("emasr.io.cli:utt2spk_to_spk2utt_cli", "utt2spk -> spk2utt (utt2spk_to_spk2utt.pl)."),
    "spk2utt-to-utt2spk": ("emasr.io.cli:spk2utt_to_utt2spk_cli", "spk2utt -> utt2spk (spk2utt_to_utt2spk.pl)."),
    "get-utt2dur": ("emasr.feats.utt2dur:get_utt2dur_cli", "Write a data dir's utt2dur from segments, wav.scp or feats (get_utt2dur.sh)."),
    "perturb-data-dir-speed": ("emasr.feats.perturb_speed:perturb_data_dir_speed_cli", "Speed-perturbed copies of a data dir, sp0.9-/sp1.1- (perturb_data_dir_speed_3way.sh)."),
    "speed-perturb-wav": ("emasr.feats.speed:speed_perturb_wav_cli", "Play a 16-bit wav F times faster, as sox's speed effect (for wav.scp pipes)."),
    # -- corpus (simulation) --
    "simulate-corpus": ("emasr.corpus.simulate:simulate_corpus_cli", "Synthesize an AISHELL-style Mandarin corpus with espeak-ng."),
    # -- lang (data prep, dict, lang, LM) --
    "aishell-data-prep": ("emasr.corpus.aishell_prep:aishell_data_prep_cli", "AISHELL-1 tree -> data/{train,dev,test}."),
    "aishell-prepare-dict": ("emasr.lang.aishell_dict:aishell_prepare_dict_cli", "resource_aishell lexicon -> AISHELL-style dict dir."),
    "prepare-lang": ("emasr.lang.prepare_lang:prepare_lang_cli", "Dict dir -> lang dir (L.fst, phones.txt, words.txt, topo)."),
    "validate-lang": ("emasr.lang.validate:validate_lang_cli", "Check a lang dir (symbol tables, L.fst, G.fst, topo)."),
    "sym2int": ("emasr.lang.symbol_map:sym2int_cli", "Symbols -> integers through a symbol table (sym2int.pl)."),
    "int2sym": ("emasr.lang.symbol_map:int2sym_cli", "Integers -> symbols through a symbol table (int2sym.pl)."),
    "train-lm": ("emasr.lang.train_lm:train_lm_cli", "Segment LM text with sentencepiece, train a 3-gram KN ARPA."),
    "format-lm": ("emasr.lang.format_lm:format_lm_cli", "ARPA -> lang_test with G.fst (kaldilm arpa2fst)."),
    "prepare-lang-nnet": ("emasr.lang.nnet_lang:prepare_lang_nnet_cli", "Copy a lang dir with the one-frame (skip) topology: the networks' lang dir."),
    # -- feats --
    "compute-fbank-feats": ("emasr.feats.extract:compute_fbank_cli", "Compute Kaldi fbank features for a wav.scp (one job)."),
    "compute-mfcc-feats": ("emasr.feats.extract:compute_mfcc_cli", "Compute Kaldi MFCC features for a wav.scp (one job)."),
    "compute-fbank-pitch-feats": ("emasr.feats.extract:compute_fbank_pitch_cli", "Compute Kaldi fbank + pitch features for a wav.scp (one job)."),
    "compute-mfcc-pitch-feats": ("emasr.feats.extract:compute_mfcc_pitch_cli", "Compute Kaldi MFCC + pitch features for a wav.scp (one job)."),
    "merge-feats-jobs": ("emasr.feats.extract:merge_feats_jobs_cli", "Merge feature jobs into a data dir's feats.scp, utt2num_frames, utt2dur."),
    "compute-cmvn-stats": ("emasr.feats.cmvn:compute_cmvn_stats_cli", "Compute per-speaker or global CMVN stats (Kaldi layout)."),
    "add-deltas": ("emasr.feats.deltas:add_deltas_cli", "Append delta features, as Kaldi's add-deltas."),
    # -- decode and score --
    "mkgraph": ("emasr.decode.graph:mkgraph_cli", "Build HCLG.fst from a lang dir and a Kaldi model dir (utils/mkgraph.sh)."),
    "decode-loglikes": ("emasr.decode.cli:decode_loglikes_cli", "Decode log-likelihood matrices over pdfs into lat.N.gz and 1-best."),
    "gmm-decode": ("emasr.decode.cli:gmm_decode_cli", "Decode a data dir with a Kaldi GMM (CMVN, deltas) into lat.N.gz and 1-best."),
    "lattice-to-post": ("emasr.decode.lattice_post:lattice_to_post_cli", "Per-frame transition-id posteriors by forward-backward over lattices (Kaldi's lattice-to-post)."),
    "gmm-rescore-lattice": ("emasr.decode.lattice_rescore:gmm_rescore_lattice_cli", "Replace lattices' acoustic costs by a GMM's on other features (Kaldi's gmm-rescore-lattice)."),
    "score-lattices": ("emasr.score.cli:score_lattices_cli", "Kaldi scoring: WER/CER per LM weight and penalty, best_wer/best_cer."),
    "compare-cer": ("emasr.score.compare:compare_cer_cli", "Bootstrap 95% interval of CER and P(B better than A)."),
    "best-wer": ("emasr.score.cli:best_wer_cli", "Lowest %WER line of compute-wer outputs on stdin (utils/best_wer.sh)."),
    # -- gmm --
    "gmm-init-mono": ("emasr.gmm.mono:init_mono_cli", "Flat-start monophone model and tree (Kaldi's gmm-init-mono)."),
    "gmm-align": ("emasr.gmm.align:gmm_align_cli", "Viterbi or equal alignment of a data dir into ali.JOB.gz (gmm-align-compiled)."),
    "gmm-acc-stats-ali": ("emasr.gmm.accumulate:acc_stats_ali_cli", "GMM and transition stats from alignments (one job's .acc)."),
    "gmm-acc-stats-twofeats": ("emasr.gmm.accumulate:acc_stats_twofeats_cli", "GMM stats of speaker-independent features with the posteriors of the adapted ones (SAT's final.alimdl)."),
    "gmm-est": ("emasr.gmm.estimate:gmm_est_cli", "Sum jobs' stats and re-estimate a GMM-HMM, with mixing up (gmm-est)."),
    "acc-tree-stats": ("emasr.gmm.tree_stats:acc_tree_stats_cli", "Single-Gaussian stats per phonetic context from alignments (one job)."),
    "sum-tree-stats": ("emasr.gmm.tree_stats:sum_tree_stats_cli", "Sum the tree statistics of several jobs."),
    "cluster-phones": ("emasr.gmm.questions:cluster_phones_cli", "Tree questions by top-down clustering of phone sets, plus extra questions."),
    "build-tree": ("emasr.gmm.build_tree:build_tree_cli", "Grow and cluster a phonetic decision tree; write a Kaldi tree file."),
    "gmm-init-model": ("emasr.gmm.tri:init_model_cli", "Initialize a context-dependent model from a tree and tree stats."),
    "train-transitions": ("emasr.gmm.train_transitions:train_transitions_cli", "Re-estimate a model's transition probabilities from alignments (nnet3-am-train-transitions)."),
    "ali-boundary-error": ("emasr.ali.boundary_error:boundary_error_cli", "Mean phone-boundary error of alignments against synthesizer timings."),
    "gmm-info": ("emasr.gmm.model_info:gmm_info_cli", "Numbers of phones, pdfs, transition ids and Gaussians of a Kaldi model."),
    "feat-to-dim": ("emasr.gmm.feature_options:feat_to_dim_cli", "Dimension of a data dir's GMM features after deltas or splice + final.mat; --model checks it."),
    "show-transitions": ("emasr.gmm.model_info:show_transitions_cli", "Transition states, ids and probabilities of a Kaldi model."),
    # -- transform (LDA, MLLT, fMLLR) --
    "acc-lda": ("emasr.transform.cli:acc_lda_cli", "LDA statistics per pdf class from alignments (one job's .acc)."),
    "est-lda": ("emasr.transform.cli:est_lda_cli", "Sum LDA statistics and write the LDA matrix (Kaldi's est-lda)."),
    "gmm-acc-mllt": ("emasr.transform.cli:gmm_acc_mllt_cli", "MLLT statistics from a diagonal GMM and alignments (one job's .macc)."),
    "est-mllt": ("emasr.transform.cli:est_mllt_cli", "Sum MLLT statistics and estimate the MLLT matrix (Gales' row update)."),
    "gmm-transform-means": ("emasr.transform.cli:gmm_transform_means_cli", "Transform a GMM model's means by a matrix (after MLLT)."),
    "gmm-est-fmllr": ("emasr.transform.cli:gmm_est_fmllr_cli", "fMLLR transforms per speaker or utterance from alignments or posteriors (trans.JOB)."),
    "transform-feats": ("emasr.transform.cli:transform_feats_cli", "Apply a linear or affine transform (or per-speaker ones) to features."),
    "compose-transforms": ("emasr.transform.cli:compose_transforms_cli", "Compose two transforms, C = A B (Kaldi's compose-transforms)."),
    # -- ali (alignment ingestion, targets) --
    "ali-from-timings": ("emasr.ali.from_timings:ali_from_timings_cli", "Oracle alignments of a model and tree from the simulated corpus's phone timings."),
    "ali-info": ("emasr.ali.ali_info:ali_info_cli", "Utterances, frames, pdf counts and per-phone durations of an alignment dir."),
    "convert-ali": ("emasr.ali.convert:convert_ali_cli", "Convert alignments to another model and tree (topology, frame rate), as Kaldi's convert-ali."),
    "make-targets": ("emasr.ali.targets:make_targets_cli", "Frame-level pdf targets and priors at the network frame rate from an alignment dir."),
    # -- nnet (training) --
    "train": ("emasr.nnet.cli:train_cli", "Train a network (one worker; torchrun runs N)."),
    "regime": ("emasr.nnet.cli:regime_cli", "The regime a training will run in (syncs, BMUF's data rule, EMA half-lives), before it."),
    "tuning-grid": ("emasr.nnet.config.tuning:tuning_grid_cli", "A sync rule's runs of a tuning grid searched on dev: directory suffix and overrides."),
    "nnet-forward": ("emasr.nnet.forward:nnet_forward_cli", "Network log-likelihoods for decoding."),
    # -- experiment (the spec) and report --
    "experiment": ("emasr.experiment.cli:experiment_cli", "An experiment spec: validate, show, plan its runs, list its decodes, report it."),
    "report": ("emasr.report.cli:report_cli", "RESULTS.md with the paper's table, intervals and plots from exp dirs."),
    "power": ("emasr.report.power:power_cli", "Seeds a verdict needs, planned from a report's committed counts."),
    "sweep": ("emasr.report.sweep:sweep_cli", "The same comparisons across several reports' counts (a setting no report varies alone): a table and a plot."),
}


def kaldi_format_errors() -> tuple[type[ValueError], ...]:
    """The errors of emasr.kaldi's readers, each naming the file, the entry and what was expected."""
    from emasr.kaldi.alignments import AlignmentError
    from emasr.kaldi.io import KaldiFormatError
    from emasr.kaldi.lattice_io import LatticeFormatError
    from emasr.kaldi.openfst_binary import FstFormatError
    from emasr.kaldi.tables import TableError
    return AlignmentError, KaldiFormatError, LatticeFormatError, FstFormatError, TableError


class OneLineUsageError(click.UsageError):
    """A usage mistake (a missing argument, a bad option value) as one `Error:` line, the console
    format (docs/reliability.md), instead of click's block of usage, hint and error."""

    def show(self, file=None) -> None:
        where = self.ctx.command_path if self.ctx is not None else "emasr"
        click.echo(f"Error: {where}: {self.format_message()} (see {where} --help)",
                   file=file, err=file is None)


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.UsageError as err:
            if isinstance(err, OneLineUsageError):
                raise
            raise OneLineUsageError(err.format_message(), err.ctx) from None
        except ValueError as err:
            # a damaged Kaldi file met by any step: its message names the file and where in it,
            # so it is the one line the user sees (no traceback)
            if isinstance(err, kaldi_format_errors()):
                raise click.ClickException(str(err)) from None
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="emasr")
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages too.")
@click.option("--log-file", type=click.Path(dir_okay=False), default=None,
              help="Also write the log to this file.")
def main(verbose: bool, log_file: str | None) -> None:
    """emasr: Kaldi-style speech recognition steps. Run `emasr COMMAND --help` for one step."""
    setup_logging(verbose, log_file)


if __name__ == "__main__":
    main()
