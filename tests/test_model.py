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


def test_video_depth_9_has_nine_weight_layers_on_the_main_path():
    enc = VideoEncoder(9)
    # stem counts as one layer (a (2+1)D factorised conv), each block has two (2+1)D convs
    blocks = [m for m in enc.modules() if m.__class__.__name__ == "BasicBlock"]
    assert len(blocks) == 4 and len([m for m in VideoEncoder(18).modules() if m.__class__.__name__ == "BasicBlock"]) == 8


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
