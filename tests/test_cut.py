"""augment.py: TrainCrop takes torchvision's draws and makes torchvision's cut, without its wrapping.

`draw` repeats v2.RandomResizedCrop.make_params and the flip's torch.rand(1) < 0.5 call for call, from a
generator of its own: seeded alike, the boxes and flips equal the library's on the global generator, the
fallback crop included. `apply_many` cuts a batch as v2.functional.resized_crop and horizontal_flip cut
each clip, bit for bit. A torchvision whose make_params or resize changed fails here first."""

import pytest
import torch
from torchvision.transforms.v2 import functional as TF

from augment import TrainCrop


def library_draw(crop, height, width, seed):
    torch.manual_seed(seed)
    box = crop.crop.make_params([torch.empty((1, height, width), dtype=torch.uint8)])
    return box, bool(torch.rand(1) < 0.5)


@pytest.mark.parametrize("strength", [1.0, 0.5])
def test_draws_equal_random_resized_crops_call_for_call_and_leave_the_global_generator_alone(strength):
    crop = TrainCrop(24, strength)
    sizes = [(32, 32), (48, 64), (128, 171), (30, 200), (200, 30)]  # (30, 200), (200, 30): the fallback too
    state = torch.get_rng_state()
    mine = [crop.draw(h, w, torch.Generator().manual_seed(s)) for s in range(300) for h, w in sizes]
    assert torch.equal(torch.get_rng_state(), state)  # a generator of its own
    theirs = [library_draw(crop, h, w, s) for s in range(300) for h, w in sizes]
    assert mine == theirs
    assert {f for _, f in mine} == {True, False}
    # 30 x 200: no box of >= 40% of the area has a ratio within [3/4, 4/3], so every draw ends in the
    # central crop at the nearest ratio
    wide = [b for (b, _), size in zip(mine, sizes * 300) if size == (30, 200)]
    assert len(wide) == 300 and all(b == {"top": 0, "left": 80, "height": 30, "width": 40} for b in wide)


def test_a_batch_cut_equals_torchvisions_resized_crop_and_flip_clip_by_clip():
    g = torch.Generator().manual_seed(0)
    clips = torch.randint(0, 256, (6, 4, 40, 52, 3), dtype=torch.uint8, generator=g)  # (B, T, H, W, 3)
    crop = TrainCrop(24)
    draws = [crop.draw(40, 52, torch.Generator().manual_seed(10 + k)) for k in range(6)]
    draws[0] = ({"top": 3, "left": 5, "height": 24, "width": 24}, True)  # a box of the output's size: no resize
    got = crop.apply_many(clips, [b for b, _ in draws], [f for _, f in draws])  # (B, 3, T, S, S)
    assert {f for _, f in draws} == {True, False}
    for clip, (box, flip), out in zip(clips, draws, got):
        x = TF.resized_crop(clip.permute(0, 3, 1, 2), **box, size=[24, 24], antialias=True)  # (T, 3, S, S)
        x = TF.horizontal_flip(x) if flip else x
        assert torch.equal(out, x.permute(1, 0, 2, 3))
    assert torch.equal(crop.apply(clips[1], *draws[1]), got[1])
