"""Reading media files: which files make a dataset (manifest) and which of them work (scan), what a clip
is (clip), decoding one (decode), holding a small set in memory (preload), and the loaders and their
workers' cores (loader_workers). data.py turns these into training and evaluation items."""
