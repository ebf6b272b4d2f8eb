"""Reading media files: which files make a dataset (manifest), decoding a clip (decode), and a set held in
memory and cut there in batches (in_memory). data.py turns these into training and evaluation items."""
