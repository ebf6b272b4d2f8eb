"""Reading media files: which files make a dataset and which of them work (manifest), decoding a clip
(decode), holding a small set in memory (preload), and the loader workers' cores (loader_workers).
data.py turns these into training and evaluation items."""
