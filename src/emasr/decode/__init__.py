"""emasr.decode: decoding graphs, Kaldi's decoders, lattices.

graph         HCLG as Kaldi's utils/mkgraph.sh builds it (emasr mkgraph), LG/CLG cache
fstutil       FST file I/O (atomic writes), sizes, input-label removal by composition
decoder       one utterance: log-likelihoods over pdfs -> lattice and 1-best (UtteranceDecoder)
lattice_io    lat.N.gz (Kaldi archive of binary Lattices), best paths per LM weight and penalty
gmm_loglikes  GMM log-likelihoods over all pdfs of a Kaldi AmDiagGmm, batched
decode_cli    decoding jobs: emasr decode-loglikes, emasr gmm-decode
"""
