"""Feature-space transforms of the GMM systems: LDA, MLLT and fMLLR (Kaldi's src/transform).

kaldi-hmm-gmm has none of them, so their estimators are written here in NumPy, following Kaldi's
algorithms: LdaEstimate (emasr.transform.lda), MlltAccs with Gales' row update
(emasr.transform.mllt), FmllrDiagGmmAccs and its row-by-row update (emasr.transform.fmllr).
Transforms are Kaldi matrices (``final.mat``, ``trans.JOB``), read and written by
emasr.kaldi.matrix_io and applied as Kaldi's transform-feats does.
"""
