# The large profile's recipe defaults (a GPU cluster), sourced by run.sh after its options: each
# `: "${x:=v}"` fills only what the command line left empty. Its experiment (stages 8-10) is
# conf/experiment/large.yaml.
: "${nj:=16}" "${mono_totgauss:=2000}" "${num_leaves:=3000}"
: "${tri_totgauss:=40000}" "${mono_subset:=10000}" "${gmm_systems:=mono tri1 tri2 tri3}"
mono_opts=
targets_opts=
: "${gmm_decode_opts:=--beam 13 --lattice-beam 8}"   # Kaldi's
: "${gmm_scoring_opts:=--min-lmwt 7 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0}"
