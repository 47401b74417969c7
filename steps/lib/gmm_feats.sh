# The GMM feature pipeline of a model dir, decided as Kaldi's align_si.sh and decode.sh decide it:
# a dir with final.mat (an LDA system, steps/train_lda_mllt.sh) reads CMVN -> splice-feats
# $splice_opts -> transform-feats final.mat; any other reads CMVN -> add-deltas (its delta_order,
# default 2). A speaker-adapted (SAT) system adds its per-speaker fMLLR transforms (trans.JOB)
# last. Sourced by align_si.sh, decode.sh, train_lda_mllt.sh and the SAT steps (train_sat.sh,
# align_fmllr.sh, decode_fmllr.sh); docs/gmm.md.

# gmm_feat_opts DIR [TRANSFORM_DIR]: sets feat_type (lda or delta), delta_order and the array
# transform_opts (emasr's options after --cmvn-opts and --delta-order). With TRANSFORM_DIR, the
# per-speaker affine transforms TRANSFORM_DIR/trans.JOB (fMLLR, keyed by speaker or utterance)
# are applied last; JOB is the job's number, so TRANSFORM_DIR must have the caller's num_jobs.
gmm_feat_opts() {
  local dir=$1 transform_dir=${2:-} splice_opts
  transform_opts=()
  if [ -f "$dir/final.mat" ]; then
    feat_type=lda
    delta_order=0
    splice_opts=$(cat "$dir/splice_opts" 2>/dev/null || true)
    # Kaldi's splice-feats without options splices 4 frames on each side
    [ -n "$splice_opts" ] || splice_opts="--left-context=4 --right-context=4"
    transform_opts=(--splice-opts "$splice_opts" --transform "$dir/final.mat")
  else
    feat_type=delta
    delta_order=$(cat "$dir/delta_order" 2>/dev/null || echo 2)
  fi
  if [ -n "$transform_dir" ]; then
    [ -f "$transform_dir/trans.1" ] || die "expected file $transform_dir/trans.1 to exist (--transform-dir)"
    transform_opts+=(--speaker-transforms "ark:$transform_dir/trans.JOB")
  fi
}

# check_transform_dir_jobs TRANSFORM_DIR NJ: its trans.JOB must be split as the caller's jobs.
check_transform_dir_jobs() {
  local tnj
  tnj=$(cat "$1/num_jobs" 2>/dev/null || echo "")
  if [ "$tnj" != "$2" ]; then
    die "--transform-dir $1 has num_jobs '$tnj', this step runs $2 jobs: its trans.JOB" \
         "would not match the data splits (use --nj $tnj)"
  fi
}

# check_gmm_feat_dim MODEL DATA: before any work, the features of DATA after the pipeline set by
# gmm_feat_opts must have MODEL's dimension; otherwise exit 1 with a message naming the files.
check_gmm_feat_dim() {
  local opts=()
  [ ${#transform_opts[@]} -gt 0 ] && opts=("${transform_opts[@]//JOB/1}")
  emasr feat-to-dim --delta-order "$delta_order" ${opts[@]+"${opts[@]}"} --model "$1" "$2" \
    > /dev/null || exit 1
}

# is_sat_dir DIR: DIR belongs to a speaker-adapted system: a SAT model dir (final.alimdl, from
# train_sat.sh) or a dir carrying per-speaker transforms (trans.1: train_sat.sh, align_fmllr.sh,
# decode_fmllr.sh, align_si.sh --transform-dir), whose model was trained on adapted features.
is_sat_dir() {
  [ -f "$1/final.alimdl" ] || [ -f "$1/trans.1" ]
}

# warn_unadapted_sat MODEL TRANSFORM_DIR: a SAT system's final.mdl used without its speakers'
# transforms sees features it was not trained on (as Kaldi, this is allowed; it is rarely meant).
warn_unadapted_sat() {
  local model_dir
  model_dir=$(dirname "$1")
  if [ -z "$2" ] && [ "$(basename "$1")" != final.alimdl ] && is_sat_dir "$model_dir"; then
    warn "$model_dir is a speaker-adapted (SAT) system but no --transform-dir" \
         "was given: $1 will see unadapted features (steps/align_fmllr.sh and" \
         "steps/decode_fmllr.sh estimate the speakers' transforms)"
  fi
}

# check_trans_jobs DIR NJ: DIR/trans.1 .. DIR/trans.NJ exist (one per job of DIR's splits).
check_trans_jobs() {
  local n
  for n in $(seq "$2"); do
    [ -f "$1/trans.$n" ] || die "expected file $1/trans.$n to exist ($1 has num_jobs $2)"
  done
}

# fmllr_est_opts SILENCE_WEIGHT MAX_SKIPPED: sets the array fmllr_opts, the options of every
# gmm-est-fmllr call of the SAT steps (from the caller's silphonelist, fmllr_update_type and
# fmllr_min_count): what the steps share, so that training, alignment and decoding estimate alike.
fmllr_est_opts() {
  fmllr_opts=(--silence-phones "$silphonelist" --silence-weight "$1"
              --fmllr-update-type "$fmllr_update_type" --fmllr-min-count "$fmllr_min_count"
              --max-skipped "$2")
}

# fmllr_gain LOG_PREFIX: the fMLLR auxiliary-function improvement per frame over the jobs' logs
# LOG_PREFIX.*.log (gmm-est-fmllr's "Overall fMLLR auxf impr per frame", frame-weighted).
fmllr_gain() {
  { grep -h "Overall fMLLR auxf impr per frame" "$1".*.log || true; } |
    awk '{ i += $(NF-3) * $(NF-1); n += $(NF-1) } END { if (n > 0) printf "%.4f", i / n }'
}

# warn_identity_transforms LOG_PREFIX MIN_COUNT: a warning on stderr when speakers of the jobs'
# logs had too few frames for a transform (Kaldi's --fmllr-min-count): theirs stay the identity,
# and where that is every speaker (one utterance each, as the simulated corpus's pseudo-speakers)
# the "adapted" system is a speaker-independent one.
warn_identity_transforms() {
  local below speakers
  below=$(cat "$1".*.log | grep -c "not updating fMLLR since below min-count" || true)
  speakers=$(cat "$1".*.log | grep -c "For speaker .*, auxf-impr from fMLLR" || true)
  [ "${below:-0}" -eq 0 ] ||
    warn "$below of $speakers speakers have at most --fmllr-min-count $2 frames" \
      "(silence weighted): their transforms stay the identity (docs/gmm.md)"
}
