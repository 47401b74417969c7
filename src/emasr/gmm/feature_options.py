"""The feature-pipeline options of the GMM steps: ``transform_options`` (an LDA system's splicing
and ``final.mat``, a SAT system's per-speaker transforms), ``feature_pipeline_options`` (those
with ``--cmvn-opts`` and ``--delta-order``, parsed into one FeatureOptions), and ``emasr
feat-to-dim``, which the shell steps run before any work to check that a model and the pipeline
agree on the dimension.

The steps decide the pipeline as Kaldi's scripts do, from the model dir (steps/lib/gmm_feats.sh):
a dir with ``final.mat`` reads CMVN -> splice ``splice_opts`` -> ``final.mat``, any other
CMVN -> deltas.
"""
from __future__ import annotations

import functools

import click

from emasr.gmm.features import FeatureOptions, check_model_dim, feature_dim


def transform_options(command):
    """--splice-opts, --transform, --speaker-transforms and --utt2spk (all off by default)."""
    options = [
        click.option("--splice-opts", default="", help="Splice frames after CMVN (and deltas), "
                     "Kaldi's splice_opts, e.g. '--left-context=3 --right-context=3'."),
        click.option("--transform", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="Then apply this Kaldi matrix (an LDA system's final.mat)."),
        click.option("--speaker-transforms", default=None, help="Then apply the affine "
                     "transform of each utterance's speaker (or of the utterance) from this "
                     "table, e.g. 'ark:exp/tri3/trans.1' (fMLLR)."),
        click.option("--utt2spk", type=click.Path(dir_okay=False, exists=True), default=None,
                     help="utt2spk for --speaker-transforms (default: the data dir's)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def feature_pipeline_options(delta_order: int = 2,
                             cmvn_help: str = "Kaldi's cmvn_opts, e.g. '--norm-vars=false'."):
    """The whole feature pipeline of a GMM step as options (--cmvn-opts, --delta-order and
    transform_options), handed to the command as one FeatureOptions `features`; a bad
    --cmvn-opts stops with a one-line error naming it."""
    def decorate(command):
        @functools.wraps(command)
        def run(cmvn_opts, delta_order, splice_opts, transform, speaker_transforms, utt2spk,
                **kwargs):
            try:
                features = FeatureOptions.parse(
                    cmvn_opts, delta_order, splice_opts=splice_opts, transform=transform,
                    speaker_transforms=speaker_transforms, utt2spk=utt2spk)
            except ValueError as err:
                raise click.ClickException(str(err)) from None
            return command(features=features, **kwargs)
        run = transform_options(run)
        run = click.option("--delta-order", type=int, default=delta_order,
                           show_default=True)(run)
        return click.option("--cmvn-opts", default="", help=cmvn_help)(run)
    return decorate


@click.command("feat-to-dim")
@feature_pipeline_options(delta_order=0, cmvn_help="Kaldi's cmvn_opts (no effect on the "
                          "dimension; accepted so a step passes its options unchanged).")
@click.option("--model", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Fail, naming the files, unless this Kaldi GMM model has that dimension.")
@click.argument("data", type=click.Path(file_okay=False, exists=True))
def feat_to_dim_cli(features, model, data):
    """Print the dimension of the features of the data dir DATA after the pipeline given by
    the options (Kaldi's feat-to-dim on the steps' feature pipe); with --model, check it."""
    try:
        if model:
            from emasr.kaldi.model_io import read_model
            am_gmm = read_model(model).am_gmm
            if am_gmm is None:
                raise ValueError(f"{model}: a transition model only (no GMMs)")
            check_model_dim(model, am_gmm.dim, data, features)
        dim, _ = feature_dim(data, features)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    click.echo(dim)
