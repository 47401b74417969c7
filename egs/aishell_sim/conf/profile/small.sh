# The small profile's recipe defaults (the default run, 2 cores), sourced by run.sh after its
# options: each `: "${x:=v}"` fills only what the command line left empty. Its experiment
# (stages 8-10) is conf/experiment/small.yaml.
: "${nj:=2}" "${mono_totgauss:=1000}" "${num_leaves:=1200}"
: "${tri_totgauss:=10000}" "${mono_subset:=2000}"
# tri3 (SAT) is left to ladder/run.sh: its training, fMLLR alignment and two-pass decodes
# (about 35 min on 2 cores) do not fit the 90 minutes with the networks (docs/gmm.md)
: "${gmm_systems:=mono tri1 tri2}"
mono_opts=
targets_opts=
: "${gmm_decode_opts:=--beam 11 --lattice-beam 5}"
: "${gmm_scoring_opts:=--min-lmwt 1 --max-lmwt 17 --word-ins-penalty 0.0,0.5}"
