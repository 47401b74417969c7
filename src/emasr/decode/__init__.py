"""emasr.decode: decoding graphs, Kaldi's decoders, lattices.

graph         HCLG as Kaldi's utils/mkgraph.sh builds it (emasr mkgraph), LG/CLG cache
decoder       one utterance: log-likelihoods over pdfs -> lattice and 1-best (UtteranceDecoder)
gmm_loglikes  GMM log-likelihoods over all pdfs of a Kaldi AmDiagGmm, batched
cli           decoding jobs: emasr decode-loglikes, emasr gmm-decode

FST and lattice files are read and written by emasr.kaldi (fst, openfst_binary, lattice_io).
"""
