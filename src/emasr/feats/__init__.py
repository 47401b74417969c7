"""emasr.feats: features as Kaldi computes and stores them, and the network input pipeline.

wav            wav.scp entries (files, pipes, segments) -> 16-bit PCM samples, with clear errors
audio          FFT resampling and 16-bit PCM wav files (the simulator's, speed perturbation's)
speed          speed perturbation of audio; perturb_speed: of a data dir; utt2dur: durations
kaldi_options  Kaldi config files (--name=value) -> kaldi-native-fbank options
framing        frame geometry (Kaldi's frame-count formula) and whole-utterance extraction
fbank          log-mel fbank (compute-fbank-feats)
mfcc_pitch     MFCC + Kaldi pitch, pasted (make_mfcc_pitch.sh)
ark            atomic ark/scp writer
extract        the per-job extraction and the merge into a data dir (steps/make_*.sh)
cmvn           CMVN stats in Kaldi's layout, apply-cmvn (steps/compute_cmvn_stats.sh)
reader         a data dir's features with each utterance's CMVN stats
deltas         add-deltas and the GMM input (CMVN then deltas)
pipeline       the network pipeline: CMVN, frame stacking, splicing, label subsampling
"""
