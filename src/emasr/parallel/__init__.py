"""Job launchers: run.pl, queue.pl, slurm.pl (Kaldi-compatible)."""
