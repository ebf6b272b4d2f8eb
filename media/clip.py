"""What one clip is: frames, rate, crop, audio window and spectrogram (paper Sec. 5.1; Sec. 6's larger
setting as SOTA_CLIP). Every room that cuts or transforms clips reads it: media/decode.py and
media/preload.py, data.py's items, media/augment.py's device half.

    from media.clip import ClipSpec; ClipSpec(size=112)      # a value object, no command of its own

Tests: tests/test_data.py, tests/test_augment.py
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    augment: float = 1.0  # video augmentation strength; 1 is the paper's (media/augment.py)

    @property
    def seconds(self) -> float:
        return self.frames / self.fps

    @property
    def samples(self) -> int:
        """Audio samples in a clip's window."""
        return int(round(self.audio_seconds * self.audio_rate))

    def first_frame(self, start: float, length: int) -> int:
        """Where a clip starting at `start` s begins in a decoded video of `length` frames at self.fps:
        on the frame grid, kept inside the video (a shorter video repeats its last frame after it)."""
        return max(0, min(int(round(start * self.fps)), length - self.frames))

    def first_sample(self, start: float) -> int:
        """Where an audio window starting at `start` s begins in a decoded sound at self.audio_rate."""
        return int(round(start * self.audio_rate))

    @property
    def hop(self) -> int:
        """Samples per spectrogram step, set so that the audio window gives n_time steps (25 ms at
        11025 Hz, as in the paper); the spectrogram's windows are two hops long (media/augment.py)."""
        return int(round(self.audio_seconds * self.audio_rate / self.n_time))

    def on_hop_grid(self, start: float) -> float:
        """An audio window's start `start` s moved to the nearest spectrogram step of its sound (at most
        half a hop, 12.5 ms): a training clip's spectrogram is then a run of the sound's own frames
        (media/in_memory.py); first_sample of the result is a multiple of the hop. Unchanged without audio."""
        return round(start * self.audio_rate / self.hop) * self.hop / self.audio_rate if self.hop else start


SOTA_CLIP = ClipSpec(size=112, audio_rate=24000, n_mels=128, n_time=128)


def clip_spec(cfg: "Config", audio: bool = True) -> ClipSpec:
    """The ClipSpec of a config.Config (or anything with the same fields); audio=False for
    evaluation, which reads video only."""
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
