"""emasr.corpus"""
