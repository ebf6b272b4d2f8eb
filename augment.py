"""What a clip is, and its augmentations (paper Sec. 5.1; Sec. 6's larger setting as SOTA_CLIP).

ClipSpec is a training clip, the paper's ablation setting by default: T frames at fps, the crop's side, the audio
window and its log-mel spectrogram (50 ms windows, 25 ms hop, 80 bands at 11025 Hz: 1x80x80; 128x128 in Sec. 6).
TrainCrop is the multi-scale crop and the flip, drawn once per clip from the item's seeded generator and applied to
every frame, on uint8 (data.py's items and the in-memory batches alike, bit for bit). ClipAugment is the device
half, on whole batches: SimCLR's augmentations, as the paper uses them, drawn once per clip for all its frames:
colour jitter (brightness, contrast, saturation 0.4, hue 0.1; p=0.8), greyscale (p=0.2), Gaussian blur (5x5, sigma
in [0.1, 2], p=0.5), then normalisation. They are written here because torchvision's ops take one factor per call
(a call per clip); each equals torchvision's for the same factors. Deviation: the four colour changes run in a
fixed order, not ColorJitter's random one.

    python -m pytest tests/test_augment.py tests/test_cut.py
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchaudio
from torch import Tensor
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

if TYPE_CHECKING:  # for annotations only
    from config import Config


@dataclass(frozen=True)
class ClipSpec:
    """What one training clip is. Defaults are the paper's ablation setting (Sec. 5.1)."""

    frames: int = 8  # T
    fps: float = 16.0
    size: int = 80  # crop side; 112 in Sec. 6
    audio_rate: int = 11025  # 24000 in Sec. 6
    audio_seconds: float = 2.0
    n_mels: int = 80  # 128 in Sec. 6
    n_time: int = 80  # spectrogram time steps; 128 in Sec. 6
    augment: float = 1.0  # video augmentation strength; 1 is the paper's (ClipAugment)

    @property
    def seconds(self) -> float:
        return self.frames / self.fps

    @property
    def samples(self) -> int:
        """Audio samples in a clip's window."""
        return int(round(self.audio_seconds * self.audio_rate))

    def first_frame(self, start: float, length: int) -> int:
        """Where a clip starting at `start` s begins in a decoded video of `length` frames at self.fps, kept
        inside the video (a shorter one repeats its last frame)."""
        return max(0, min(int(round(start * self.fps)), length - self.frames))

    def first_sample(self, start: float) -> int:
        """Where an audio window starting at `start` s begins in a decoded sound at self.audio_rate."""
        return int(round(start * self.audio_rate))

    @property
    def hop(self) -> int:
        """Samples per spectrogram step: n_time steps in the window (25 ms at 11025 Hz); windows of two hops."""
        return int(round(self.audio_seconds * self.audio_rate / self.n_time))

    def on_hop_grid(self, start: float) -> float:
        """Deviation: an audio window's start moved to its sound's nearest spectrogram step (at most half a hop,
        12.5 ms), so that a clip's spectrogram is a run of the sound's own frames (media/in_memory.py)."""
        return round(start * self.audio_rate / self.hop) * self.hop / self.audio_rate if self.hop else start


SOTA_CLIP = ClipSpec(size=112, audio_rate=24000, n_mels=128, n_time=128)


def clip_spec(cfg: "Config", audio: bool = True) -> ClipSpec:
    """The ClipSpec of a config.Config (or anything with its fields); audio=False for evaluation's video only."""
    return ClipSpec(
        frames=cfg.frames,
        fps=cfg.fps,
        size=cfg.size,
        audio_rate=cfg.audio_rate,
        n_mels=cfg.n_mels,
        n_time=cfg.n_time,
        audio_seconds=2.0 if audio else 0.0,
        augment=cfg.augment,
    )


# ----------------------------------------------------------------------------- the crop and the flip


Box = dict[str, int]  # RandomResizedCrop's parameters: top, left, height, width
NATIVE = ("AVX2", "AVX512")  # CPUs where v2 resizes uint8 without float32 (its _do_native_uint8_resize_on_cpu)


class TrainCrop:
    """(T, H, W, 3) uint8 -> (3, T, size, size) uint8, one multi-scale crop and flip for every frame. `draw` takes
    v2.Compose([RandomResizedCrop, RandomHorizontalFlip])'s draws, call for call, from a generator; `apply` cuts
    with them, `apply_many` a batch. At strength 1 a crop keeps >= 0.4 of the area (AVID's: >= 0.66 of the side)."""

    def __init__(self, size: int, strength: float = 1.0) -> None:
        self.size = size
        self.crop = v2.RandomResizedCrop(size, scale=(1 - 0.6 * strength, 1.0), antialias=True)
        self.log_ratio = self.crop._log_ratio.tolist()  # its float32 bounds, as make_params passes them

    def draw(self, height: int, width: int, g: torch.Generator | None = None) -> tuple[Box, bool]:
        # RandomResizedCrop.make_params' draws from `g` (make_params takes the global generator alone)
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
        """clips (B, T, H, W, 3) uint8, a box and a flip each -> (B, 3, T, size, size) uint8: torchvision's
        resized_crop and horizontal_flip, bit for bit, the flips and the layout change once for the batch."""
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
    """(T, 3, h, w) -> (T, 3, s, s): v2.functional.resize's antialiased bilinear, by its own uint8 kernel on an
    AVX2 or AVX-512 CPU without its dispatch (lab/BENCHMARKS.md), elsewhere v2 itself (through float32)."""
    if x.dtype == torch.uint8 and x.device.type == "cpu" and torch.backends.cpu.get_cpu_capability() in NATIVE:
        return F.interpolate(x, size=[s, s], mode="bilinear", align_corners=False, antialias=True)
    return TF.resize(x, [s, s], antialias=True)


def video_transform(size: int, train: bool, strength: float = 1.0) -> Callable[[Tensor], Tensor]:
    """(T, H, W, 3) uint8 -> (3, T, size, size) uint8, in the loader's worker: TrainCrop for training, else the
    short side resized and the centre taken."""
    if train:
        return TrainCrop(size, strength)
    pipeline = v2.Compose([v2.Resize(size, antialias=True), v2.CenterCrop(size)])

    def apply(frames: Tensor) -> Tensor:
        video = tv_tensors.Video(frames.permute(0, 3, 1, 2))  # (T, 3, H, W): one resize for every frame
        return pipeline(video).permute(1, 0, 2, 3).contiguous()  # (3, T, size, size)

    return apply


# ----------------------------------------------------------------------------- the device half


MEAN, STD = 0.45, 0.225  # per channel, as AVID normalises
GREY = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale weights


class MelPower(nn.Module):
    """Waveform (..., n) -> mel power spectrogram (..., n_mels, 1 + n // hop): torchaudio's MelSpectrogram (windows
    of two hops, reflect-padded ends), its power as re^2 + im^2 (torchaudio's |z|^2 roots first: equal to rounding)."""

    def __init__(self, spec: ClipSpec) -> None:
        super().__init__()
        self.hop = spec.hop
        mel = torchaudio.transforms.MelSpectrogram(
            sample_rate=spec.audio_rate, n_fft=2 * self.hop, hop_length=self.hop, n_mels=spec.n_mels
        )
        self.register_buffer("window", mel.spectrogram.window, persistent=False)  # (2*hop,)
        self.register_buffer("fb", mel.mel_scale.fb, persistent=False)  # (hop + 1, n_mels)

    def forward(self, wav: Tensor) -> Tensor:
        flat = wav.float().reshape(-1, wav.shape[-1])  # (M, n)
        z = torch.stft(flat, 2 * self.hop, self.hop, window=self.window, pad_mode="reflect", return_complex=True)
        power = z.real.square() + z.imag.square()  # (M, hop + 1, frames)
        mel = torch.matmul(power.transpose(1, 2), self.fb).transpose(1, 2)  # (M, n_mels, frames)
        return mel.reshape(*wav.shape[:-1], *mel.shape[1:])


def log_mel(power: Tensor, n_time: int) -> Tensor:
    """Mel power (..., n_mels, >= n_time) -> log-mel (..., 1, n_mels, n_time), its first n_time frames."""
    return torch.log(power[..., :n_time] + 1e-6).unsqueeze(-3)


class LogMel(nn.Module):
    """Waveform (..., n) -> log-mel spectrogram (..., 1, n_mels, n_time) (MelPower, then log_mel)."""

    def __init__(self, spec: ClipSpec) -> None:
        super().__init__()
        self.n_time, self.power = spec.n_time, MelPower(spec)

    def forward(self, wav: Tensor) -> Tensor:
        return log_mel(self.power(wav), self.n_time)


class ClipAugment(nn.Module):
    """(video uint8 (B, [clips,] 3, T, H, W), waveform (B, [clips,] n) or None, or mel: the in-memory set's mel
    power (B, n_mels, n_time)) -> (video normalised float, log-mel (B, [clips,] 1, n_mels, n_time) or None).
    train=False only converts and normalises (evaluation clips)."""

    def __init__(
        self,
        spec: ClipSpec,
        train: bool = True,
        jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1),
        p_jitter: float = 0.8,
        p_grey: float = 0.2,
        p_blur: float = 0.5,
        sigma: tuple[float, float] = (0.1, 2.0),
    ) -> None:
        super().__init__()
        k = spec.augment  # strength: 1 is the paper's, 0 leaves colour and sharpness alone
        self.train_mode, self.jitter, self.sigma = train, tuple(k * j for j in jitter), sigma
        self.p_jitter, self.p_grey, self.p_blur = k * p_jitter, k * p_grey, k * p_blur
        self.logmel = LogMel(spec) if spec.audio_seconds else None

    @torch.no_grad()
    def forward(
        self, video: Tensor, wav: Tensor | None = None, mel: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        lead = video.shape[:-4]  # (B,) or (B, clips)
        x = video.reshape(-1, *video.shape[-4:])  # x: (N, 3, T, H, W) uint8
        if self.train_mode:  # in [0, 1], augmented, then normalised in place: normalise's values, two copies fewer
            x = self.augment(x.to(torch.float32, copy=True).div_(255)).sub_(MEAN).div_(STD)  # never the caller's
        else:
            x = normalise(x)
        x = x.reshape(*lead, *x.shape[1:])  # (B, [clips,] 3, T, H, W)
        if self.logmel is None or (wav is None and mel is None):
            return x, None
        return x, self.logmel(wav) if mel is None else log_mel(mel, self.logmel.n_time)

    def augment(self, x: Tensor, by_index: bool | None = None) -> Tensor:
        """x: (N, 3, T, H, W) in [0, 1], overwritten on the CPU. Every clip's draws are taken, in one order; an op
        then runs on the clips that drew it (by_index, the CPU's default), or on a GPU on all and torch.where picks
        (selecting by index costs a host sync per op there)."""
        n, dev = x.shape[0], x.device
        b, c, s, h = self.jitter

        def uniform(lo: float, hi: float) -> Tensor:
            return torch.empty(n, device=dev).uniform_(lo, hi)

        def chance(p: float) -> Tensor:
            return torch.rand(n, device=dev) < p

        on = chance(self.p_jitter)  # (N,) clips that get colour jitter
        f = torch.stack(
            [uniform(1 - b, 1 + b), uniform(1 - c, 1 + c), uniform(1 - s, 1 + s), uniform(-h, h)], 1
        )  # (N, 4)
        greyed, blurred = chance(self.p_grey), chance(self.p_blur)  # (N,), (N,)
        sigma = uniform(*self.sigma)  # (N,)
        by_index = not x.is_cuda if by_index is None else by_index
        x = where_drawn(x, on, lambda y, i: jitter(y, f[i]), by_index)
        x = where_drawn(x, greyed, lambda y, i: grey(y).expand_as(y), by_index)
        return where_drawn(x, blurred, lambda y, i: blur(y, sigma[i]), by_index)


def where_drawn(x: Tensor, drawn: Tensor, op: Callable[[Tensor, Tensor], Tensor], by_index: bool) -> Tensor:
    """x (N, ...) with op(clips, their indices) where drawn (N,): on those clips alone, in place (by_index), else
    on all N and torch.where picks."""
    if not by_index:
        return torch.where(drawn.view(-1, *[1] * (x.dim() - 1)), op(x, torch.arange(len(x), device=x.device)), x)
    idx = drawn.nonzero().flatten()  # (M,)
    return x.index_copy_(0, idx, op(x.index_select(0, idx), idx)) if len(idx) else x


def jitter(x: Tensor, f: Tensor) -> Tensor:
    """Brightness, contrast, saturation and hue, in that order; f: (N, 4) their factors and shift."""
    return hue(saturation(contrast(brightness(x, f[:, 0]), f[:, 1]), f[:, 2]), f[:, 3])


def normalise(x: Tensor) -> Tensor:
    """Frames in [0, 1] (float) or 0..255 (uint8) -> normalised float, any shape."""
    x = x.float() / 255 if x.dtype == torch.uint8 else x
    return (x - MEAN) / STD


def _bcast(t: Tensor) -> Tensor:
    return t.view(-1, 1, 1, 1, 1)  # (N,) -> (N, 1, 1, 1, 1)


def grey(x: Tensor) -> Tensor:
    """(N, 3, T, H, W) -> (N, 1, T, H, W), torchvision's luma weights."""
    w = x.new_tensor(GREY).view(1, 3, 1, 1, 1)
    return (x * w).sum(1, keepdim=True)


def brightness(x: Tensor, f: Tensor) -> Tensor:
    return (x * _bcast(f)).clamp(0, 1)


def contrast(x: Tensor, f: Tensor) -> Tensor:
    """Blend with the mean grey level of each frame, as torchvision does per image."""
    m = grey(x).mean(dim=(1, 3, 4), keepdim=True)  # (N, 1, T, 1, 1)
    return (_bcast(f) * x + (1 - _bcast(f)) * m).clamp(0, 1)


def saturation(x: Tensor, f: Tensor) -> Tensor:
    return (_bcast(f) * x + (1 - _bcast(f)) * grey(x)).clamp(0, 1)


def hue(x: Tensor, shift: Tensor) -> Tensor:
    """Shift the HSV hue of each clip by `shift` (in turns), as torchvision's adjust_hue. The channel of the
    maximum is a mask (the first of r, g, b on ties, as _rgb2hsv): an argmax gives the same bits, several times
    slower on a CPU (lab/BENCHMARKS.md)."""
    v = x.amax(1)  # value: (N, T, H, W)
    cr = v - x.amin(1)  # chroma, = v * saturation
    r, g, b = x.unbind(1)
    at_r = (r == v).float()  # 1 where red holds the maximum
    at_g = (g == v).float().mul_(1 - at_r)  # 1 where green holds it and red does not
    at_b = 1 - at_r - at_g
    # two of the three terms are multiplied by 0, so the sum is the chosen one exactly
    num = (g - b).mul_(at_r).add_((b - r).mul_(at_g)).add_((r - g).mul_(at_b))  # (N, T, H, W)
    sector = at_g.mul_(2).add_(at_b.mul_(4))  # 0, 2 or 4: 2 x the channel index
    h = num.div_(torch.where(cr > 0, cr, 1.0)).add_(sector).div_(6).add_(shift.view(-1, 1, 1, 1))  # hue in turns
    h6 = torch.remainder(h, 1.0).mul_(6)
    k = torch.stack([h6 + 5, h6 + 3, h6 + 1], 1)  # (N, 3, T, H, W), in [1, 11]
    k.sub_((k >= 6).float().mul_(6))  # = k mod 6, exact here, and faster than remainder
    return v[:, None] - cr[:, None] * torch.minimum(k, 4 - k).clamp_(0, 1)  # (N, 3, T, H, W)


def blur(x: Tensor, sigma: Tensor, k: int = 5) -> Tensor:
    """k x k Gaussian blur with one sigma per clip, reflect padding: torchvision's gaussian_blur, as one depthwise
    conv with the outer product of its 1-d kernels (a quarter of the time on a CPU; rounding differs, ~3e-7)."""
    n, ch, t, h, w = x.shape
    r = torch.arange(k, device=x.device, dtype=x.dtype) - (k - 1) / 2  # (k,)
    g = torch.exp(-0.5 * (r / sigma.to(x.dtype)[:, None]) ** 2)  # (N, k)
    g = (g / g.sum(1, keepdim=True)).repeat_interleave(ch * t, dim=0)  # (N*3*T, k)
    y = F.pad(x.reshape(1, n * ch * t, h, w), (k // 2,) * 4, mode="reflect")  # (1, N*3*T, H+k-1, W+k-1)
    y = F.conv2d(y, (g[:, :, None] * g[:, None, :])[:, None], groups=n * ch * t)  # (1, N*3*T, H, W)
    return y.view(n, ch, t, h, w)
