"""Shapes and basics of model.py for both paper settings."""
import pytest
import torch

import torch.nn.functional as F

from model import AudioEncoder, AVModel, SpatialMaxPool, VideoEncoder, count_parameters


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


def test_linear_head_probe_drops_only_the_hidden_layer_and_is_rebuilt_from_a_checkpoint():
    import checkpoint
    from config import parse_config
    mlp, lin = AVModel(9, 0.125), AVModel(9, 0.125, head="linear")
    assert [type(m).__name__ for m in lin.video_head] == ["Linear", "BatchNorm1d"]
    assert len(mlp.video_head) == 5  # the paper's Linear-BN-ReLU-Linear-BN
    v, a = lin.eval()(torch.randn(2, 3, 4, 32, 32), torch.randn(2, 1, 40, 40))
    torch.testing.assert_close(v.norm(dim=1), torch.ones(2))
    cfg = parse_config(["--preset", "demo", "--head", "linear"])
    assert checkpoint.model_args(cfg)["head"] == "linear"
    with pytest.raises(SystemExit):
        parse_config(["--head", "transformer"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hw", [(32, 32), (31, 17)])
def test_stem_pool_hack_is_bit_identical_to_max_pool3d(dtype, hw):
    """The channels_last forward / NCDHW backward pool must not change a single output or gradient."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 4, *hw, generator=g).to(dtype)
    x = torch.where(x > 0.5, x, torch.zeros((), dtype=dtype))  # ties at 0, as after a ReLU
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = F.max_pool3d(a, (1, 3, 3), (1, 2, 2), (0, 1, 1)), SpatialMaxPool()(b)
    grad = torch.randn(ya.shape, generator=g).to(dtype)
    ya.backward(grad)
    yb.backward(grad)
    assert yb.is_contiguous() and torch.equal(ya, yb) and torch.equal(a.grad, b.grad)
