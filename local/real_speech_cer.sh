#!/usr/bin/env bash
# Decode real recordings with a network trained by egs/aishell_sim (any profile) and score them:
# how far the simulated corpus is from real speech. The recordings get the recipe's network
# features (fbank, CMVN per utterance as the simulated runs use) and the network's own graph.
#
# Two real AISHELL-1 test recordings ship with the s3tokenizer wheel (s3tokenizer/assets/
# BAC009S0764W0121.wav and ...0122.wav); their transcripts are 甚至出现交易几乎停滞的情况 and
# 一二线城市虽然也处于调整中:
#   pip download s3tokenizer==0.3.0 --no-deps -d /tmp/s3t && unzip -o -d /tmp/s3t /tmp/s3t/*.whl
#   printf '%s\n' 'BAC009S0764W0121 甚至出现交易几乎停滞的情况' \
#     'BAC009S0764W0122 一二线城市虽然也处于调整中' > /tmp/s3t/text
#   local/real_speech_cer.sh /tmp/s3t/s3tokenizer/assets /tmp/s3t/text exp/nnet/dnn_single_s1
set -euo pipefail

# Begin configuration section.
cmd=run.pl
model=final             # the network's model file: final | ema | avg | lastk
graph=exp/nnet_tree/graph   # the networks' HCLG (exp/tri1/graph when they share the GMM's tree)
trans_mdl=exp/nnet_tree/final.mdl
decode_opts="--acwt 0.5 --beam 13 --lattice-beam 5 --max-active 1500"
scoring_opts="--min-lmwt 0.5 --max-lmwt 4 --lmwt-step 0.1 --word-ins-penalty 0.0,0.5"
name=real               # data/<name>, <nnet-dir>/decode_<name>_<model>
# End configuration section.

help_message="Usage: $0 [options] <wav-dir> <text> <nnet-dir>
Run in the recipe dir (egs/aishell_sim) after its stage 8. <wav-dir> holds <utt>.wav (16 kHz,
16-bit mono), <text> lines '<utt> <transcript>'. Writes data/<name>, fbank/ features and
<nnet-dir>/decode_<name>_<model>; prints the CER at the best LM weight on these utterances
(there is no dev set to choose it on: an optimistic number).
Options:
  --model <final|ema|avg|lastk> --graph <dir> --trans-mdl <final.mdl>
  --decode-opts '<opts of steps/nnet/decode.sh>' --scoring-opts '<opts of local/score.sh>'
  --name <name> --cmd <run.pl|queue.pl ..>"

. ./path.sh
. utils/parse_options.sh
if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
wav_dir=$1; text=$2; nnet_dir=$3
for f in "$text" "$nnet_dir/$model.pt" "$graph/HCLG.fst" "$trans_mdl"; do
  [ -f "$f" ] || die "expected file $f to exist"
done

data=data/$name
tmp=$(mktemp -d "data/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
while read -r utt words; do
  [ -n "$utt" ] || continue
  wav=$wav_dir/$utt.wav
  [ -f "$wav" ] || die "$text names $utt, but $wav does not exist"
  echo "$utt $(cd "$(dirname "$wav")" && pwd)/$utt.wav" >> "$tmp/wav.scp"
  echo "$utt $words" >> "$tmp/text"
  echo "$utt $utt" >> "$tmp/utt2spk"   # a speaker per utterance: CMVN per utterance
done < "$text"
[ -s "$tmp/wav.scp" ] || die "no utterances in $text"
for f in wav.scp text utt2spk; do sort -o "$tmp/$f" "$tmp/$f"; done
utils/utt2spk_to_spk2utt.pl "$tmp/utt2spk" > "$tmp/spk2utt"
rm -rf "$data" && mv "$tmp" "$data"
nj=$(wc -l < "$data/utt2spk")

steps/make_fbank.sh --cmd "$cmd" --nj "$nj" "$data" "exp/make_fbank/$name" fbank
steps/compute_cmvn_stats.sh "$data" "exp/make_fbank/$name" fbank
# shellcheck disable=SC2086
steps/nnet/decode.sh --cmd "$cmd" --nj "$nj" --model "$model" --trans-mdl "$trans_mdl" \
  $decode_opts --scoring-opts "$scoring_opts" "$graph" "$data" "$nnet_dir/decode_${name}_$model"
log "$nnet_dir/$model.pt on $data: $(cat "$nnet_dir/decode_${name}_$model/scoring_kaldi/best_cer")"
