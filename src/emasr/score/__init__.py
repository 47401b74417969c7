"""emasr.score: WER/CER in Kaldi's formats.

wer        edit counts (kaldialign), compute-wer lines, filters, per-utterance/speaker details
cli        emasr score-lattices (steps/score_kaldi.sh, local/score.sh), emasr best-wer
compare    emasr compare-cer: bootstrap interval and P(B improves on A)
"""
