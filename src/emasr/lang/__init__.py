"""emasr.lang"""
