"""The machinery the method's parts and the recipe share, below them in the stack: where a run
computes and with whom (devices.py: the default device, torchrun's processes, the all-gather of
eq. (1)'s memory-bank update across ranks), and the learning-rate schedules (schedule.py: the xID
warm-up's constant rate, then one cosine, Sec. 4.3 and 5.1).
"""
