#!/usr/bin/env python3
"""Simulated AISHELL-1 corpus: a thin entry point to `emasr simulate-corpus` (see its --help).

Usage: local/simulate_corpus.py --profile tiny|small|large --out DIR [--nj N] [--seed S] [knobs]
"""
import sys

from emasr.cli import main

if __name__ == "__main__":
    sys.exit(main(["simulate-corpus", *sys.argv[1:]]))
