"""The device half of the input pipeline: augmentation and spectrograms of whole batches (Sec. 5.1).

DataLoader workers only decode and cut (data.py): uint8 frames after the multi-scale crop and the
flip, and the raw waveform after the volume change (the in-memory set, media/in_memory.py, gives each
clip's mel power instead, cut from its sound's). The rest runs here, on the GPU when there is one, on
the whole batch at once: colour jitter (brightness, contrast, saturation 0.4, hue 0.1, p=0.8),
greyscale (p=0.2), Gaussian blur (5x5, sigma in [0.1, 2], p=0.5), normalisation, and the log-mel
spectrogram (50 ms windows, 25 ms hop, 80 bands at 11025 Hz: 1x80x80; 128x128 in Sec. 6).
These are SimCLR's augmentations, as the paper uses; like its video clips they draw one set of
parameters per clip and apply it to every frame.

Why by hand: torchvision's functional ops take one factor per call, so a batch with a factor per
clip would need a call per clip (hundreds of small kernels per step). Brightness, contrast,
saturation, hue, greyscale and blur below equal torchvision's functional ops for the same factors
(tests/test_augment.py). Unlike torchvision's ColorJitter the four colour changes are applied in a
fixed order. Each op's result is kept only on the clips that drew it (on the CPU it runs on those
alone, ClipAugment.augment): a skipped op is the identity, so this moved values by rounding at most
(the earlier form's hue round trip on undrawn clips, ~1e-7), and the draws are every clip's, as before.

    used by train.py and evaluate.py; tests: python -m pytest tests/test_augment.py
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchaudio
from torch import Tensor

if TYPE_CHECKING:  # for annotations only
    from media.clip import ClipSpec

MEAN, STD = 0.45, 0.225  # per channel, as AVID normalises
GREY = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale weights


class MelPower(nn.Module):
    """Waveform (..., n) -> mel power spectrogram (..., n_mels, 1 + n // hop): torchaudio's
    MelSpectrogram (windows of two hops, a frame every hop, the signal's ends padded by reflection), its
    power taken as re^2 + im^2 (torchaudio's |z|^2 takes a square root first: the same math to rounding,
    and a fifth of the time on a CPU)."""

    def __init__(self, spec: "ClipSpec") -> None:
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

    def __init__(self, spec: "ClipSpec") -> None:
        super().__init__()
        self.n_time, self.power = spec.n_time, MelPower(spec)

    def forward(self, wav: Tensor) -> Tensor:
        return log_mel(self.power(wav), self.n_time)


class ClipAugment(nn.Module):
    """(video uint8 (B, [clips,] 3, T, H, W), waveform (B, [clips,] n) or None[, mel=its mel power
    (B, n_mels, n_time), the in-memory set's, in place of the waveform]) -> (video float normalised,
    same shape; log-mel (B, [clips,] 1, n_mels, n_time) or None). train=False only converts and
    normalises (evaluation clips)."""

    def __init__(
        self,
        spec: "ClipSpec",
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
        """x: (N, 3, T, H, W) in [0, 1], overwritten on the CPU; one random draw per clip. The draws are
        taken for all N clips, in one order, whatever they pick. On the CPU (by_index, the default off a
        GPU) each op then runs only on the clips that drew it (a skipped op is the identity); on a GPU
        every op runs on the whole batch and torch.where picks, since selecting clips by index costs a
        host sync per op there, and the GPU has time to spare."""
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
    """x (N, ...) with op(clips, their indices) applied to the clips where drawn (N,) is True. by_index:
    op runs on those clips alone, written back into x in place; else on all N, and torch.where picks."""
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
    """Shift the HSV hue of each clip by `shift` (in turns), as torchvision's adjust_hue. Which channel
    holds the maximum is a mask, as in torchvision's _rgb2hsv (the first of r, g, b on ties): an
    argmax (`max(1)` with indices) or nested torch.where give the same bits, but those CPU kernels
    are not vectorised and cost several times the whole shift (BENCHMARKS.md)."""
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
    """k x k Gaussian blur with one sigma per clip, reflect padding: torchvision's gaussian_blur, whose
    k x k kernel is the outer product of the 1-d ones. One depthwise conv with it, not one along W then
    one along H: the same math, a quarter of the time on a CPU (oneDNN; rounding differs, ~3e-7)."""
    n, ch, t, h, w = x.shape
    r = torch.arange(k, device=x.device, dtype=x.dtype) - (k - 1) / 2  # (k,)
    g = torch.exp(-0.5 * (r / sigma.to(x.dtype)[:, None]) ** 2)  # (N, k)
    g = (g / g.sum(1, keepdim=True)).repeat_interleave(ch * t, dim=0)  # (N*3*T, k)
    y = F.pad(x.reshape(1, n * ch * t, h, w), (k // 2,) * 4, mode="reflect")  # (1, N*3*T, H+k-1, W+k-1)
    y = F.conv2d(y, (g[:, :, None] * g[:, None, :])[:, None], groups=n * ch * t)  # (1, N*3*T, H, W)
    return y.view(n, ch, t, h, w)
