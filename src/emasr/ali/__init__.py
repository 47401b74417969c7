"""emasr.ali"""
