"""File contracts: Kaldi text tables, data directories, atomic writes."""
