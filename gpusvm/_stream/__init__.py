"""Data in chunks: the chunk types and sources (``chunks``), the pipeline that reads,
checks and stages chunks ahead of the steps (``pipeline``; the copies to the device are
``gpusvm/_device/staging.py``'s), the file readers (``readers``) and the Arrow parser of
plain svmlight lines (``svmlight_arrow``).
"""
