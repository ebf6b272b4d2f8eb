"""Shapes and basics of model.py for both paper settings."""

import pytest
import torch

from model import AudioEncoder, AVModel, VideoEncoder, count_parameters


@pytest.mark.parametrize("size,fmap", [(80, 3), (112, 4)])
@pytest.mark.parametrize("depth", [9, 18])
def test_video_encoder_shapes(depth, size, fmap):
    enc = VideoEncoder(depth, width=0.25).eval()
    x = torch.randn(2, 3, 8, size, size)
    assert enc.feature_map(x).shape == (2, 16 * 8, 1, fmap, fmap)
    assert enc(x).shape == (2, 128)


def test_full_width_encoders_have_the_paper_feature_size():
    assert VideoEncoder(9).out_dim == 512 and AudioEncoder().out_dim == 512
    # R(2+1)D-18 has about twice the parameters of R(2+1)D-9; this pins the architectures.
    assert 12.0e6 < count_parameters(VideoEncoder(9)) < 13.0e6
    assert 31.0e6 < count_parameters(VideoEncoder(18)) < 31.6e6


@pytest.mark.parametrize("size,fmap", [(80, 3), (128, 4)])
def test_audio_encoder_shapes_and_nine_convs(size, fmap):
    enc = AudioEncoder(width=0.25).eval()
    assert sum(isinstance(m, torch.nn.Conv2d) for m in enc.modules()) == 9
    x = torch.randn(2, 1, size, size)
    assert enc.net(x).shape == (2, 128, fmap, fmap)
    assert enc(x).shape == (2, 128)


@pytest.mark.parametrize("depth", [9, 18])
def test_video_depth_counts_the_weight_layers_on_the_main_path(depth):
    """The weight layers on the main path: the (2+1)D stem and two (2+1)D convs per block. That is
    9 for R(2+1)D-9 (AVID's encoder counts conv layers) and 17 for R(2+1)D-18, whose name counts
    the final classifier too, as ResNet-18's does."""
    from torchvision.models.video.resnet import Conv2Plus1D

    enc = VideoEncoder(depth, width=0.125)
    stem = [m for m in enc.stem if isinstance(m, torch.nn.Conv3d)]
    assert [c.kernel_size for c in stem] == [(1, 7, 7), (3, 1, 1)]  # one factorised (2+1)D layer
    block_convs = [m for m in enc.stages.modules() if isinstance(m, Conv2Plus1D)]
    assert 1 + len(block_convs) == {9: 9, 18: 17}[depth]


def test_avmodel_outputs_unit_vectors_and_backprops_into_both_encoders():
    model = AVModel(video_depth=9, width=0.25)
    v, a = model(torch.randn(3, 3, 8, 64, 64), torch.randn(3, 1, 80, 80))
    assert v.shape == a.shape == (3, 128)
    torch.testing.assert_close(v.norm(dim=1), torch.ones(3))
    (v * a).sum().backward()
    assert model.video.stem[0].weight.grad.abs().sum() > 0
    assert model.audio.net[0].weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="depth"):
        VideoEncoder(34)


def test_a_checkpoint_with_the_retired_options_at_their_one_value_still_loads():
    """--head, --lr-ramp and --bank-init served probes that did not go on; a checkpoint that used them at
    the value every run now has reads as before, and one that used the probe's value is refused by name."""
    from dataclasses import asdict

    from checkpoint import config_from_dict
    from config import Config

    saved = asdict(Config()) | {"head": "mlp", "lr_ramp": 0, "bank_init": "random"}
    assert config_from_dict(saved) == Config()
    with pytest.raises(ValueError, match="head"):
        config_from_dict(saved | {"head": "linear"})
