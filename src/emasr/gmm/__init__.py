"""emasr.gmm"""
