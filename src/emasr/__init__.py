"""emasr: Kaldi-style ASR recipes with parallel BMUF/EMA training of hybrid DNN-HMM models."""

__version__ = "0.1.0"
