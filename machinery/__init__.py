"""The machinery the method's parts and the recipe share, below them in the stack: where a run
computes and with whom (devices.py: the default device, torchrun's processes, the all-gather of
eq. (1)'s memory-bank update across ranks), the cosine of the learning-rate schedules (schedule.py,
Sec. 5.1), and an epoch's running account of the step statistics (tally.py).
"""
