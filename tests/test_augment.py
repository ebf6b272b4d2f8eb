"""augment.py: batched per-clip augmentations equal torchvision's ops; one draw per clip."""

import pytest
import torch
import torchvision.transforms.v2.functional as TF

import augment
import data
from augment import SOTA_CLIP, ClipSpec


def clips(n=3, t=4, size=24):
    return torch.rand(n, 3, t, size, size)  # (N, 3, T, H, W) in [0, 1]


def per_frame(op, x, factor):
    """torchvision's op on every frame of clip 0: (3, T, H, W) -> same."""
    return torch.stack([op(x[0, :, j], factor) for j in range(x.shape[2])], dim=1)


@pytest.mark.parametrize(
    "name,op",
    [("brightness", TF.adjust_brightness), ("contrast", TF.adjust_contrast), ("saturation", TF.adjust_saturation)],
)
def test_colour_ops_equal_torchvision(name, op):
    x = clips()
    f = torch.tensor([1.3, 0.7, 1.0])
    out = getattr(augment, name)(x, f)
    torch.testing.assert_close(out[0], per_frame(op, x, 1.3), atol=1e-5, rtol=0)
    torch.testing.assert_close(out[2], x[2].clamp(0, 1), atol=1e-6, rtol=0)  # factor 1 is the identity


def test_grey_and_blur_equal_torchvision():
    x = clips()
    ref = torch.stack([TF.rgb_to_grayscale(x[1, :, j]) for j in range(x.shape[2])], dim=1)
    torch.testing.assert_close(augment.grey(x)[1], ref, atol=1e-5, rtol=0)
    sigma = torch.tensor([0.5, 1.7, 0.1])
    out = augment.blur(x, sigma)
    for i in range(3):
        ref = torch.stack(
            [TF.gaussian_blur(x[i, :, j], [5, 5], [float(sigma[i])] * 2) for j in range(x.shape[2])], dim=1
        )
        torch.testing.assert_close(out[i], ref, atol=1e-5, rtol=0)


def test_hue_shift_equals_torchvision():
    x = clips()
    x[0, :, 0, :4] = torch.tensor([0.2, 0.2, 0.2]).view(3, 1, 1)  # grey pixels: no hue to shift
    out = augment.hue(x, torch.tensor([0.1, 0.0, -0.45]))
    torch.testing.assert_close(out[0], per_frame(TF.adjust_hue, x, 0.1), atol=1e-5, rtol=0)
    torch.testing.assert_close(out[1], x[1], atol=1e-5, rtol=0)
    torch.testing.assert_close(
        out[2], torch.stack([TF.adjust_hue(x[2, :, j], -0.45) for j in range(4)], 1), atol=1e-5, rtol=0
    )


def argmax_hue(x, shift):
    """The hue shift written with max(1)'s channel index: the form augment.hue replaced."""
    v, imax = x.max(1)
    cr = v - x.min(1).values
    r, g, b = x.unbind(1)
    num = torch.where(imax == 0, g - b, torch.where(imax == 1, b - r, r - g))
    h = (num / torch.where(cr > 0, cr, 1.0) + 2 * imax) / 6 + shift.view(-1, 1, 1, 1)
    k = torch.stack([h.remainder(1.0) * 6 + o for o in (5, 3, 1)], 1).remainder(6)
    return v[:, None] - cr[:, None] * torch.minimum(k, 4 - k).clamp(0, 1)


def test_hue_mask_form_gives_the_argmax_form_bit_for_bit_on_ties():
    torch.manual_seed(0)
    x = torch.randint(0, 4, (8, 3, 2, 16, 16)).float() / 3  # 4 levels: most pixels tie on their maximum
    shift = torch.tensor([0.0, 0.05, -0.05, 0.1, -0.1, 0.45, -0.45, 0.5])
    assert torch.equal(augment.hue(x, shift), argmax_hue(x, shift))
    x = torch.rand(8, 3, 2, 16, 16)
    assert torch.equal(augment.hue(x, shift), argmax_hue(x, shift))


def test_one_draw_per_clip_shared_by_its_frames():
    torch.manual_seed(0)
    still = torch.randint(0, 256, (1, 3, 1, 16, 16), dtype=torch.uint8).expand(16, 3, 8, 16, 16)  # 16 copies
    spec = ClipSpec(audio_seconds=0.0)
    out, audio = augment.ClipAugment(spec, p_jitter=1.0, p_grey=0.5, p_blur=0.5)(still)
    assert out.shape == (16, 3, 8, 16, 16) and audio is None
    assert torch.allclose(out, out[:, :, :1].expand_as(out), atol=1e-5)  # every frame of a clip alike
    assert len({round(float(c.sum()), 2) for c in out}) == 16  # clips differ from each other


def test_training_augment_never_writes_into_a_callers_float_clips():
    """The training path scales and augments in place: a float32 batch (a caller's own, in [0, 255]) is copied
    first, left as it was, and augmented as the same clips in uint8 are."""
    video = torch.randint(0, 256, (4, 3, 4, 16, 16)).float()  # (B, 3, T, H, W)
    before = video.clone()
    aug = augment.ClipAugment(ClipSpec(size=16, audio_seconds=0.0), p_jitter=1.0, p_grey=0.5, p_blur=0.5)
    torch.manual_seed(1)
    out, _ = aug(video)
    assert torch.equal(video, before)
    torch.manual_seed(1)
    torch.testing.assert_close(out, aug(before.to(torch.uint8))[0])


def test_eval_mode_only_normalises_and_keeps_the_clip_axis():
    spec = ClipSpec(n_mels=40, n_time=40)
    video = torch.randint(0, 256, (2, 10, 3, 8, 16, 16), dtype=torch.uint8)  # (B, clips, 3, T, H, W)
    out, audio = augment.ClipAugment(spec, train=False)(video, torch.randn(2, 10, 22050))
    torch.testing.assert_close(out, (video.float() / 255 - 0.45) / 0.225)
    assert audio.shape == (2, 10, 1, 40, 40)


@pytest.mark.parametrize("spec,shape", [(ClipSpec(), (1, 80, 80)), (SOTA_CLIP, (1, 128, 128))])
def test_spectrogram_shapes_for_both_paper_settings(spec, shape):
    wav = torch.randn(int(spec.audio_seconds * spec.audio_rate))
    assert augment.LogMel(spec)(wav).shape == shape
    assert augment.LogMel(spec)(wav[None].repeat(3, 1)).shape == (3,) + shape


def test_augment_strength_zero_leaves_colour_and_crop_alone_and_one_is_the_paper():
    spec = ClipSpec(size=24, augment=0.0)
    x = (255 * clips(n=8)).to(torch.uint8)
    out, _ = augment.ClipAugment(spec)(x)
    torch.testing.assert_close(out, augment.normalise(x), atol=1e-5, rtol=0)  # no jitter, grey or blur drawn
    frames = torch.randint(0, 256, (4, 24, 24, 3), dtype=torch.uint8)
    crop = data.video_transform(24, train=True, strength=0.0)(frames)  # (3, T, 24, 24): the whole frame
    assert torch.equal(crop, frames.permute(3, 0, 1, 2)) or torch.equal(crop, frames.permute(3, 0, 1, 2).flip(-1))
    paper = augment.ClipAugment(ClipSpec(size=24))
    assert paper.jitter == (0.4, 0.4, 0.4, 0.1) and (paper.p_jitter, paper.p_grey, paper.p_blur) == (0.8, 0.2, 0.5)
    torch.manual_seed(0)
    a, _ = paper(x)
    torch.manual_seed(0)
    b, _ = augment.ClipAugment(ClipSpec(size=24, augment=0.5))(x)
    assert (
        not torch.allclose(a, b) and (a - augment.normalise(x)).abs().mean() > (b - augment.normalise(x)).abs().mean()
    )


def where_augment(aug, x):
    """ClipAugment.augment as it was before the ops ran on the drawn clips alone: every op on every clip,
    identity factors on the undrawn ones, torch.where for greyscale and blur (the same draws, in order)."""
    n, (b, c, s, h) = x.shape[0], aug.jitter
    on = torch.rand(n) < aug.p_jitter
    x = augment.brightness(x, torch.where(on, torch.empty(n).uniform_(1 - b, 1 + b), 1.0))
    x = augment.contrast(x, torch.where(on, torch.empty(n).uniform_(1 - c, 1 + c), 1.0))
    x = augment.saturation(x, torch.where(on, torch.empty(n).uniform_(1 - s, 1 + s), 1.0))
    x = augment.hue(x, torch.where(on, torch.empty(n).uniform_(-h, h), 0.0))
    x = torch.where(augment._bcast(torch.rand(n) < aug.p_grey), augment.grey(x).expand_as(x), x)
    return torch.where(
        augment._bcast(torch.rand(n) < aug.p_blur), augment.blur(x, torch.empty(n).uniform_(*aug.sigma)), x
    )


@pytest.mark.parametrize("strength", [1.0, 0.5])
def test_ops_on_the_drawn_clips_alone_equal_the_where_form_to_rounding_and_keep_the_stream(strength):
    aug = augment.ClipAugment(ClipSpec(size=24, augment=strength))
    x = clips(n=32)
    outs = []
    for how in (None, True, False):  # the default on the CPU (by index), by index, torch.where
        torch.manual_seed(3)
        outs.append(aug.augment(x.clone(), by_index=how) if how is not None else aug.augment(x.clone()))
        outs.append(torch.rand(4))  # the generator's next numbers: the draws took the same count
    torch.manual_seed(3)
    ref, after = where_augment(aug, x.clone()), torch.rand(4)
    for out, nxt in zip(outs[::2], outs[1::2]):
        # the old form also ran the hue round trip (shift 0) on undrawn clips: a rounding of ~1e-7
        torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
        assert torch.equal(nxt, after)
    assert torch.equal(outs[0], outs[2])
    assert (outs[0] - x).abs().amax(dim=(1, 2, 3, 4)).eq(0).any()  # some clip drew nothing: it is x exactly


@pytest.mark.parametrize("spec", [ClipSpec(), SOTA_CLIP, ClipSpec(n_mels=40, n_time=40)])
def test_mel_power_is_torchaudios_mel_spectrogram_to_rounding(spec):
    import torchaudio

    hop = spec.hop
    ref = torchaudio.transforms.MelSpectrogram(spec.audio_rate, n_fft=2 * hop, hop_length=hop, n_mels=spec.n_mels)
    wav = 0.3 * torch.randn(3, spec.samples)
    torch.testing.assert_close(augment.MelPower(spec)(wav), ref(wav), rtol=2e-6, atol=1e-9)  # re^2 + im^2 vs |z|^2


def test_a_mel_power_given_in_place_of_the_waveform_gives_its_log_mel():
    spec = ClipSpec(n_mels=40, n_time=40, audio_rate=4000)
    wav = 0.3 * torch.randn(4, spec.samples)
    video = torch.randint(0, 256, (4, 3, 2, 8, 8), dtype=torch.uint8)
    aug = augment.ClipAugment(spec, train=False)
    _, want = aug(video, wav)
    _, got = aug(video, mel=augment.MelPower(spec)(wav)[..., : spec.n_time])
    assert want.shape == (4, 1, 40, 40) and torch.equal(got, want)
