"""emasr.decode"""
