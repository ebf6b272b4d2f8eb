"""The spatial cut of a clip: the multi-scale crop and the flip (paper Sec. 5.1), drawn once, applied anywhere.

A training clip's crop and flip are drawn from the item's seeded generator (data.AVDataset) and applied
to every frame of the clip. The draw and the application are separate so that two paths give the same
clip bit for bit: a loader worker cuts one item from a file (or from memory), and the in-memory training
set (media/in_memory.py) draws the same parameters on the host and cuts a whole batch on the training
device. Colour, blur, normalisation and the spectrogram come later, on the device (media/augment.py).

    used by data.py and media/in_memory.py; tests: python -m pytest tests/test_data.py tests/test_in_memory.py
"""

from collections.abc import Callable

import torch
from torch import Tensor
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

Box = dict[str, int]  # RandomResizedCrop's parameters: top, left, height, width


class TrainCrop:
    """(T, H, W, 3) uint8 -> (3, T, size, size) uint8, with one multi-scale crop and one flip for every
    frame. `draw` takes the random parameters from the global generator in v2.Compose([RandomResizedCrop,
    RandomHorizontalFlip])'s order (the crop's draws, then the flip's torch.rand(1) < 0.5); `apply` cuts
    with them. strength scales the area a crop may lose: at 1, crops keep >= 0.4 of the area, as AVID's
    multi-scale crop keeps >= 0.66 of the side."""

    def __init__(self, size: int, strength: float = 1.0) -> None:
        self.size = size
        self.crop = v2.RandomResizedCrop(size, scale=(1 - 0.6 * strength, 1.0), antialias=True)

    def draw(self, height: int, width: int) -> tuple[Box, bool]:
        # make_params reads only the input's size; an empty image of that size stands for the frames
        box = self.crop.make_params([torch.empty((1, height, width), dtype=torch.uint8)])
        return box, bool(torch.rand(1) < 0.5)

    def apply(self, frames: Tensor, box: Box, flip: bool) -> Tensor:
        # called through its parts, not v2.Compose: the same kernels without the wrapping and dispatch,
        # which cost a sixth of the transform (BENCHMARKS.md, "Data loading")
        x = frames.permute(0, 3, 1, 2)  # (T, 3, H, W), a channels-last view: the uint8 resize's fast path
        x = TF.resized_crop(x, **box, size=[self.size, self.size], antialias=True)  # (T, 3, size, size)
        if flip:
            x = TF.horizontal_flip(x)
        return x.permute(1, 0, 2, 3).contiguous()  # (3, T, size, size)

    def __call__(self, frames: Tensor) -> Tensor:
        return self.apply(frames, *self.draw(frames.shape[1], frames.shape[2]))


def video_transform(size: int, train: bool, strength: float = 1.0) -> Callable[[Tensor], Tensor]:
    """(T, H, W, 3) uint8 -> (3, T, size, size) uint8: the spatial part of the augmentation, which
    shrinks the clip before it leaves the worker. Training: TrainCrop; evaluation: resize the short
    side and take the centre."""
    if train:
        return TrainCrop(size, strength)
    pipeline = v2.Compose([v2.Resize(size, antialias=True), v2.CenterCrop(size)])

    def apply(frames: Tensor) -> Tensor:
        video = tv_tensors.Video(frames.permute(0, 3, 1, 2))  # (T, 3, H, W): one resize for every frame
        return pipeline(video).permute(1, 0, 2, 3).contiguous()  # (3, T, size, size)

    return apply
