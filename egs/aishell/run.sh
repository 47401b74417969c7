#!/usr/bin/env bash
# The paper's experiment on the real AISHELL-1 corpus (Bu et al. 2017; 178 h, 400 speakers).
# Same stages as egs/aishell_sim/run.sh (this script runs them in this directory), except stage 0:
# instead of simulating a corpus it checks the one at --corpus-dir (optionally unpacking the
# per-speaker wav tarballs, as Kaldi's download_and_untar.sh does) and writes the LM text from the
# training transcripts. Nothing is downloaded. Get AISHELL-1 from OpenSLR resource 33,
# https://www.openslr.org/33/ : data_aishell.tgz (about 15 GB) and resource_aishell.tgz; unpack
# both into one directory and pass it as --corpus-dir.
set -eEuo pipefail

# Begin configuration section.
corpus_dir=     # required: holds data_aishell/{wav,transcript} and resource_aishell/lexicon.txt
extract=false   # true: unpack data_aishell/wav/*.tar.gz in place where not unpacked yet
stage=0
profile=large   # model and GMM sizes (the corpus is what it is): small | large
# End configuration section.

help_message="Usage: $0 --corpus-dir DIR [--extract true] [options of egs/aishell_sim/run.sh]
e.g.: $0 --corpus-dir /export/corpora/aishell --extract true --nj 16 --num-workers 8
AISHELL-1 (OpenSLR 33, https://www.openslr.org/33/) unpacked under DIR:
  DIR/data_aishell/wav/{train,dev,test}/SXXXX/BAC009SXXXXWYYYY.wav (or the wav/*.tar.gz as shipped)
  DIR/data_aishell/transcript/aishell_transcript_v0.8.txt
  DIR/resource_aishell/lexicon.txt
Every other option goes to ../aishell_sim/run.sh (stages, --archs, --strategies, --seeds, --grid,
--epochs, ...); the default profile here is large (GPU workers through cuda_cmd in cmd.sh)."

# This script's own options; the rest pass through unchanged.
command_line=("$@")
forward=()
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) printf '%b\n' "$help_message" >&2; exit 0 ;;
    --corpus-dir|--extract|--stage|--profile)
      [ $# -ge 2 ] || die "option $1 needs a value"
      name=${1#--}; printf -v "${name//-/_}" '%s' "$2"; shift 2 ;;
    --corpus-dir=*|--extract=*|--stage=*|--profile=*)
      name=${1%%=*}; name=${name#--}; printf -v "${name//-/_}" '%s' "${1#*=}"; shift ;;
    *) forward+=("$1"); shift ;;
  esac
done
if [ -z "$corpus_dir" ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
case "$corpus_dir" in /*) ;; *) corpus_dir=$PWD/$corpus_dir ;; esac
cd "$(dirname "$0")"

. utils/lib/log.sh   # the toolkit's log lines
log_command "$0" ${command_line[@]+"${command_line[@]}"}

wav=$corpus_dir/data_aishell/wav
transcript=$corpus_dir/data_aishell/transcript/aishell_transcript_v0.8.txt
lm_text=data/local/lm_text/train_transcripts.txt

if [ "$stage" -le 0 ]; then
  log "stage 0: checking the AISHELL-1 corpus at $corpus_dir"
  for f in "$transcript" "$corpus_dir/resource_aishell/lexicon.txt"; do
    [ -f "$f" ] || die "expected file $f to exist (AISHELL-1: https://www.openslr.org/33/)"
  done
  packed=$(find "$wav" -maxdepth 1 -name '*.tar.gz' 2>/dev/null | sort)
  if [ -n "$packed" ]; then
    if [ "$extract" != true ]; then
      die "$wav holds $(echo "$packed" | wc -l) speaker tarballs; unpack them (rerun with" \
          "--extract true, or: cd $wav && for f in *.tar.gz; do tar -xzf \$f; done)"
    fi
    for f in $packed; do
      spk=$(basename "$f" .tar.gz)
      if ! ls -d "$wav"/*/"$spk" > /dev/null 2>&1; then
        log "unpacking $f"
        tar -xzf "$f" -C "$wav"
      fi
    done
  fi
  for x in train dev test; do
    n=$(find "$wav/$x" -name '*.wav' 2>/dev/null | wc -l)
    [ "$n" -gt 0 ] || die "expected wav files under $wav/$x"
    log "$x: $n wav files"
  done
  # The LM text: the training transcripts without their utterance ids and word boundaries (an
  # unsegmented query log is what local/train_lms.sh expects); dev and test stay out of it.
  mkdir -p "$(dirname "$lm_text")"
  find "$wav/train" -name '*.wav' -printf '%f\n' | sed 's/\.wav$//' | LC_ALL=C sort > "$lm_text.utts"
  LC_ALL=C awk 'NR == FNR {train[$1] = 1; next}
                ($1 in train) {$1 = ""; gsub(/ /, ""); if ($0 != "") print}' \
    "$lm_text.utts" "$transcript" > "$lm_text.tmp"
  mv "$lm_text.tmp" "$lm_text"
  rm -f "$lm_text.utts"
  log "LM text: $(wc -l < "$lm_text") training sentences in $lm_text"
fi

exec ../aishell_sim/run.sh --workdir "$PWD" --profile "$profile" --corpus-dir "$corpus_dir" \
  --simulate false --lm-text "$PWD/$lm_text" --stage "$stage" ${forward[@]+"${forward[@]}"}
