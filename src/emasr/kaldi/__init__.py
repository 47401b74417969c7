"""Kaldi's file formats: the binary and text streams (`io`), transition models and topologies
(`transitions`), GMM models and trees (`model_io`), matrices and transforms (`matrix_io`),
alignment archives and dirs (`alignments`), OpenFst binary FSTs (`openfst_binary`, `fst`) and
lattice archives (`lattice_io`). Every package above imports its file I/O from here."""
