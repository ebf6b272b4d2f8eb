"""Video and audio encoders f_v, f_a and the projection heads (paper Sec. 5.1 "Video and audio models").

    VideoEncoder  R(2+1)D-9 (ablations) or R(2+1)D-18 (Sec. 6) from torchvision's video ResNet
                  blocks, global max pooling: (B, 3, T, H, W) -> (B, 512)
    AudioEncoder  9-layer 2D ConvNet with batch norm and global max pooling: (B, 1, F, T) -> (B, 512)
    AVModel       both encoders + non-linear heads onto the 128-d unit sphere: forward -> (v, a)

`width` scales every channel count (1.0 is the paper's model) so the demo trains on a CPU in minutes.
Nothing here picks a device; train.py moves the model. Tests: python -m pytest tests/test_model.py
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torchvision.models.video.resnet import BasicBlock, Conv2Plus1D

VIDEO_BLOCKS = {9: (1, 1, 1, 1), 18: (2, 2, 2, 2)}  # BasicBlocks per stage
STAGE_CHANNELS = (64, 128, 256, 512)


def _ch(c: int, width: float) -> int:
    return max(8, int(round(c * width)))


class VideoEncoder(nn.Module):
    """R(2+1)D with torchvision's BasicBlock/Conv2Plus1D. depth 9 = stem + 4 stages x 1 block x 2
    convs; depth 18 = 2 blocks per stage. The stem ends with a 1x3x3 spatial max pool (stride 1x2x2)
    as in the authors' base code (AVID-CMA): the last feature map is 4x4x512 at 112x112 input (3x3 at
    80x80), and the network costs about a third of the FLOPs of torchvision's stem-without-pool."""

    def __init__(self, depth: int = 18, width: float = 1.0) -> None:
        super().__init__()
        if depth not in VIDEO_BLOCKS:
            raise ValueError(f"VideoEncoder depth={depth}: expected one of {sorted(VIDEO_BLOCKS)}")
        chans = [_ch(c, width) for c in STAGE_CHANNELS]
        stem_mid = _ch(45, width)  # torchvision's R(2+1)D stem: (1,7,7) spatial then (3,1,1) temporal
        self.stem = nn.Sequential(
            nn.Conv3d(3, stem_mid, (1, 7, 7), stride=(1, 2, 2), padding=(0, 3, 3), bias=False),
            nn.BatchNorm3d(stem_mid),
            nn.ReLU(inplace=True),
            nn.Conv3d(stem_mid, chans[0], (3, 1, 1), padding=(1, 0, 0), bias=False),
            nn.BatchNorm3d(chans[0]),
            nn.ReLU(inplace=True),
            nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
        )
        stages, inplanes = [], chans[0]
        for i, (planes, blocks) in enumerate(zip(chans, VIDEO_BLOCKS[depth])):
            stride = 1 if i == 0 else 2  # stages 2-4 halve T, H and W
            stages.append(self._stage(inplanes, planes, blocks, stride))
            inplanes = planes
        self.stages = nn.Sequential(*stages)
        self.out_dim = chans[-1]

    @staticmethod
    def _stage(inplanes: int, planes: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv3d(inplanes, planes, 1, stride=Conv2Plus1D.get_downsample_stride(stride), bias=False),
                nn.BatchNorm3d(planes),
            )
        layers = [BasicBlock(inplanes, planes, Conv2Plus1D, stride, downsample)]
        layers += [BasicBlock(planes, planes, Conv2Plus1D) for _ in range(blocks - 1)]
        return nn.Sequential(*layers)

    def feature_map(self, x: Tensor) -> Tensor:
        """The last conv feature map, used for retrieval: (B, 3, T, H, W) -> (B, 512, ceil(T/8), ceil(H/32),
        ceil(W/32)) at width 1, e.g. (B, 512, 1, 4, 4) for 8x112x112 clips; make demo's 2x64x64 clips at width
        0.125 give (B, 64, 1, 2, 2)."""
        return self.stages(self.stem(x))

    def forward(self, x: Tensor) -> Tensor:
        return torch.amax(self.feature_map(x), dim=(2, 3, 4))  # global max pool: (B, 512)


class AudioEncoder(nn.Module):
    """9 conv layers (Conv2d + BatchNorm + ReLU) on a log-mel spectrogram, global max pooling.
    Four stride-2 stages after a 7x7 stride-2 conv and a max pool: 80x80 -> 3x3, 128x128 -> 4x4."""

    # (out_channels, kernel, stride) for the 9 layers; a 3x3 max pool (stride 2) follows layer 1.
    LAYERS = (
        (64, 7, 2),
        (64, 3, 1),
        (128, 3, 2),
        (128, 3, 1),
        (256, 3, 2),
        (256, 3, 1),
        (512, 3, 2),
        (512, 3, 1),
        (512, 3, 1),
    )

    def __init__(self, width: float = 1.0) -> None:
        super().__init__()
        layers, cin = [], 1
        for n, (c, k, s) in enumerate(self.LAYERS):
            c = _ch(c, width)
            layers += [
                nn.Conv2d(cin, c, k, stride=s, padding=k // 2, bias=False),
                nn.BatchNorm2d(c),
                nn.ReLU(inplace=True),
            ]
            if n == 0:
                layers.append(nn.MaxPool2d(3, stride=2, padding=1))
            cin = c
        self.net = nn.Sequential(*layers)
        self.out_dim = cin

    def feature_map(self, x: Tensor) -> Tensor:
        """The last conv feature map, the audio side of retrieval: (B, 1, F, T) -> (B, 512, 3, 3) at 80x80."""
        return self.net(x)

    def forward(self, x: Tensor) -> Tensor:
        return torch.amax(self.feature_map(x), dim=(2, 3))  # global max pool: (B, 512)


def projection_head(in_dim: int, out_dim: int = 128) -> nn.Sequential:
    """A non-linear head, Linear-BN-ReLU-Linear, then BatchNorm1d without affine parameters; its output is
    L2-normalised by AVModel.

    Deviation: the BatchNorms are this project's. The paper's head is "as in SimCLR" (Sec. 5.1); SimCLR
    v1's and the authors' AVID-CMA code's are Linear-ReLU-Linear, without BatchNorm. The xID gradient,
    eqs. (3)-(4), has no component along the mean of the targets, so without the final one
    nothing removes an offset shared by all embeddings, and the bank's two modalities drift into opposite
    caps of the sphere. Measured (`python -m lab.head_bn`, lab/results/HISTORY.md): without it, make demo's
    warm-up ends its 5 epochs with the bank scores' mean negative and falling, and its bank ranks classes
    and faults worse."""
    return nn.Sequential(
        nn.Linear(in_dim, in_dim),
        nn.BatchNorm1d(in_dim),
        nn.ReLU(inplace=True),
        nn.Linear(in_dim, out_dim, bias=False),
        nn.BatchNorm1d(out_dim, affine=False),
    )


class AVModel(nn.Module):
    """f_v and f_a followed by projection heads; forward returns unit-norm (v, a), each (B, 128)."""

    def __init__(self, video_depth: int = 18, width: float = 1.0, proj_dim: int = 128) -> None:
        super().__init__()
        self.video = VideoEncoder(video_depth, width)
        self.audio = AudioEncoder(width)
        self.video_head = projection_head(self.video.out_dim, proj_dim)
        self.audio_head = projection_head(self.audio.out_dim, proj_dim)

    def forward(self, video: Tensor, audio: Tensor) -> tuple[Tensor, Tensor]:
        v = F.normalize(self.video_head(self.video(video)), dim=1)  # (B, 128)
        a = F.normalize(self.audio_head(self.audio(audio)), dim=1)  # (B, 128)
        return v, a


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
