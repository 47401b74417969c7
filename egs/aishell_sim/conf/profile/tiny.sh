# The tiny profile's recipe defaults (CI, minutes on 2 cores), sourced by run.sh after its options:
# each `: "${x:=v}"` fills only what the command line left empty. Its experiment (stages 8-10) is
# conf/experiment/tiny.yaml.
: "${nj:=2}" "${mono_totgauss:=300}" "${num_leaves:=200}"
: "${tri_totgauss:=1200}" "${mono_subset:=0}" "${gmm_systems:=mono tri1}"
mono_opts="--num-iters 20"
targets_opts="--max-lost 0.05"   # 230 utterances: a dozen unaligned is already 5%
: "${gmm_decode_opts:=--beam 9 --lattice-beam 3}"
# GMMs: LM weights up to Kaldi's 17, Kaldi's three penalties (with per-utterance CMVN the
# tiny tri1 needed LM weight 14: cut at 12 it lost to mono)
: "${gmm_scoring_opts:=--min-lmwt 1 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0}"
