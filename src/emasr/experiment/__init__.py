"""The experiment as data: one typed spec file (emasr.experiment.spec) that `emasr experiment`
(emasr.experiment.cli) validates (emasr.experiment.checks; its rows: emasr.experiment.rows),
plans into training runs and decodes (emasr.experiment.plan) and reports;
steps/nnet/experiment.sh is the Kaldi-style step that trains and decodes what the plan lists.
Every per-rule and per-model question is asked of the registries (emasr.nnet.sync.RULES,
emasr.nnet.averages.AVERAGED_MODELS, emasr.nnet.models.ARCHITECTURES), never of a name."""
