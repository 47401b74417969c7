"""emasr.nnet"""
