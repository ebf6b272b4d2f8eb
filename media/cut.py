"""The spatial cut of a clip: the multi-scale crop and the flip (paper Sec. 5.1), drawn once, applied anywhere.

A training clip's crop and flip are drawn from the item's seeded generator (data.AVDataset) and applied
to every frame of the clip. The draw and the application are separate so that two paths give the same
clip bit for bit: a loader worker cuts one item from a file (or from memory), and the in-memory training
set (media/in_memory.py) draws the same parameters on the host and cuts a whole batch on the training
device. Colour, blur, normalisation and the spectrogram come later, on the device (media/augment.py).

    used by data.py and media/in_memory.py; tests: python -m pytest tests/test_data.py tests/test_in_memory.py
"""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

Box = dict[str, int]  # RandomResizedCrop's parameters: top, left, height, width
NATIVE = ("AVX2", "AVX512")  # CPUs where v2 resizes uint8 without float32 (its _do_native_uint8_resize_on_cpu)


class TrainCrop:
    """(T, H, W, 3) uint8 -> (3, T, size, size) uint8, with one multi-scale crop and one flip for every
    frame. `draw` takes the random parameters from a generator (the global one by default) in
    v2.Compose([RandomResizedCrop, RandomHorizontalFlip])'s order and with its calls (the crop's draws,
    then the flip's torch.rand(1) < 0.5); `apply` cuts with them, `apply_many` a batch of clips. strength
    scales the area a crop may lose: at 1, crops keep >= 0.4 of the area, as AVID's multi-scale crop
    keeps >= 0.66 of the side."""

    def __init__(self, size: int, strength: float = 1.0) -> None:
        self.size = size
        self.crop = v2.RandomResizedCrop(size, scale=(1 - 0.6 * strength, 1.0), antialias=True)
        self.log_ratio = self.crop._log_ratio.tolist()  # its float32 bounds, as make_params passes them

    def draw(self, height: int, width: int, g: torch.Generator | None = None) -> tuple[Box, bool]:
        # RandomResizedCrop.make_params' draws, call for call, from `g` (make_params takes the global
        # generator alone, and its wrapping cost a third of an item's draws)
        (lo, hi), (log_lo, log_hi), area = self.crop.scale, self.log_ratio, height * width
        one = torch.empty(1)  # each draw written into it: the values make_params' fresh tensors get
        for _ in range(10):
            target_area = area * one.uniform_(lo, hi, generator=g).item()
            aspect_ratio = one.uniform_(log_lo, log_hi, generator=g).exp_().item()  # float32, as torch.exp
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                top = torch.randint(0, height - h + 1, size=(1,), generator=g).item()
                left = torch.randint(0, width - w + 1, size=(1,), generator=g).item()
                break
        else:  # torchvision's fallback: the central crop, at the ratio's nearest bound
            ratio = min(max(width / height, min(self.crop.ratio)), max(self.crop.ratio))
            w, h = (
                (width, int(round(width / ratio))) if width / height < ratio else (int(round(height * ratio)), height)
            )
            top, left = (height - h) // 2, (width - w) // 2
        return {"top": top, "left": left, "height": h, "width": w}, torch.rand(1, generator=g).item() < 0.5

    def apply(self, frames: Tensor, box: Box, flip: bool) -> Tensor:
        return self.apply_many(frames[None], [box], [flip])[0]

    def apply_many(self, clips: Tensor, boxes: list[Box], flips: list[bool]) -> Tensor:
        """clips (B, T, H, W, 3) uint8, a box and a flip each -> (B, 3, T, size, size) uint8. The resize is
        torchvision's resized_crop, called through its kernel (F.interpolate, which v2's functional calls
        for uint8 on an AVX2 or AVX-512 CPU: the same bits without the wrapping and dispatch, BENCHMARKS.md);
        the flips and the layout change then run once for the batch."""
        s = self.size
        x = clips.permute(0, 1, 4, 2, 3)  # (B, T, 3, H, W), a channels-last view: the uint8 resize's fast path
        out = torch.empty(len(clips), x.shape[1], 3, s, s, dtype=clips.dtype, device=clips.device)  # (B, T, 3, S, S)
        for k, b in enumerate(boxes):
            crop = x[k, :, :, b["top"] : b["top"] + b["height"], b["left"] : b["left"] + b["width"]]  # (T, 3, h, w)
            out[k] = crop if crop.shape[-2:] == (s, s) else resize(crop, s)
        flipped = [k for k, f in enumerate(flips) if f]
        if flipped:
            out[flipped] = out[flipped].flip(-1)
        return out.permute(0, 2, 1, 3, 4).contiguous()  # (B, 3, T, S, S)

    def __call__(self, frames: Tensor) -> Tensor:
        return self.apply(frames, *self.draw(frames.shape[1], frames.shape[2]))


def resize(x: Tensor, s: int) -> Tensor:
    """(T, 3, h, w) -> (T, 3, s, s): v2.functional.resize's antialiased bilinear. On an AVX2 or AVX-512
    CPU v2 resizes uint8 natively, by this F.interpolate call; elsewhere v2 itself (through float32)."""
    if x.dtype == torch.uint8 and x.device.type == "cpu" and torch.backends.cpu.get_cpu_capability() in NATIVE:
        return F.interpolate(x, size=[s, s], mode="bilinear", align_corners=False, antialias=True)
    return TF.resize(x, [s, s], antialias=True)


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
