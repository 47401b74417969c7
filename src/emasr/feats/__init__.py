"""emasr.feats"""
