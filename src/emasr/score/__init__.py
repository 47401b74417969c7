"""emasr.score"""
