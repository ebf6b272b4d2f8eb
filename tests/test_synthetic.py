"""The synthetic set is honest: nothing in a faulty positive's sound alone gives it away."""

import csv

import numpy as np
import pytest

from lab.honesty import audio_statistics, best_auroc
from tools import render, synthetic


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    synthetic.generate(
        out, classes=4, train_per_class=24, test_per_class=0, pool=20, faulty=0.5, size=32, seconds=(2.2, 2.6), seed=1
    )
    return out


def test_audio_statistics_cannot_tell_natural_faulty_positives_from_clean(synth):
    rows = list(csv.DictReader(open(synth / "ground_truth.csv")))
    stats = {r["path"]: audio_statistics(synth / r["path"]) for r in rows}
    faulty = [stats[r["path"]] for r in rows if r["faulty_audio"] == "1"]
    clean = [stats[r["path"]] for r in rows if r["faulty_audio"] == "0"]
    assert len(faulty) > 30 and len(clean) > 30
    aurocs = best_auroc(faulty, clean)
    assert max(aurocs) < 0.75, aurocs
    # the control: the same statistics spot the out-of-distribution _pool/ audio at once
    pool = [audio_statistics(p) for p in sorted((synth / "_pool").iterdir())]
    assert max(best_auroc(pool, clean)) > 0.95


def test_the_injection_pool_cannot_be_told_from_the_training_audio_by_its_sound(synth):
    """The paper's injected audio (Sec. 5.2) must be faulty only in its missing correspondence: the
    held-out sounds have the training audio's statistics, or a shortcut would find them."""
    rows = list(csv.DictReader(open(synth / "ground_truth.csv")))
    clean = [audio_statistics(synth / r["path"]) for r in rows if r["faulty_audio"] == "0"]
    held = [audio_statistics(p) for p in sorted((synth / "_heldout").iterdir())]
    assert len(held) == 4 * 24  # one per training video by default
    aurocs = best_auroc(held, clean)
    assert max(aurocs) < 0.75, aurocs


def test_the_injection_pool_holds_no_file_of_either_split_and_leaves_them_unchanged(synth, tmp_path):
    listed = {line for split in ("train", "test") for line in (synth / f"{split}.txt").read_text().split()}
    held = sorted((synth / "_heldout").iterdir())
    assert held and not {f"_heldout/{p.name}" for p in held} & listed
    assert all(not p.with_suffix("").name.startswith(("train", "test")) for p in held)
    # its own random stream: without it the generator writes the very same videos
    other = tmp_path / "no_pool"
    synthetic.generate(
        other,
        classes=4,
        train_per_class=24,
        test_per_class=0,
        heldout=0,
        pool=20,
        faulty=0.5,
        size=32,
        seconds=(2.2, 2.6),
        seed=1,
        workers=1,
    )
    assert (other / "manifest.csv").read_bytes() == (synth / "manifest.csv").read_bytes()
    assert (other / "ground_truth.csv").read_bytes() == (synth / "ground_truth.csv").read_bytes()
    assert not any((other / "_heldout").iterdir())


def test_the_first_ten_classes_each_have_a_shape_of_their_own_and_all_25_signatures_differ():
    shapes = [render.class_signature(c)[0] for c in range(10)]
    assert len(set(shapes)) == 10
    assert len({render.class_signature(c) for c in range(25)}) == 25
    yy, xx = np.mgrid[0:64, 0:64] / 32 - 1.0  # the renderer's coordinates
    masks = {s: render._mask(s, xx, yy, 0.4) for s in render.SHAPES + render.TRANSFER_SHAPES}
    for s, m in masks.items():  # every shape of both families is a sizeable blob, 20 pixels off any other
        assert m.sum() > 60, s
        assert min(int((m ^ o).sum()) for t, o in masks.items() if t != s) >= 20, s


def test_the_shape_stays_in_the_central_region_that_training_crops_keep():
    """A crop keeping 40% of the area is 0.63 of the side: with the centre within +-0.2 and the
    path's amplitude 0.3, the shape's centre stays within +-0.5 of the frame's (coordinates -1..1)."""
    rng = np.random.default_rng(0)
    for c in range(10):
        p = synthetic._video_params(rng, c, (3.0, 3.0), 0.3)
        bg = np.random.default_rng(p["seed"]).uniform(0, 255, 3) * 0.6  # the renderer's first draw
        frames = render.render_video({**p, "noise": 0.0, "dcolour": bg}, 64, 24).astype(float)  # no distractor
        on = np.abs(frames - frames[:, :1, :1]).sum(-1) > 30  # pixels off the flat background
        ys, xs = np.nonzero(on.any(0))
        assert on.any(axis=(1, 2)).all(), f"class {c}: a frame without the shape"
        assert abs(ys.mean() / 32 - 1) < 0.5 and abs(xs.mean() / 32 - 1) < 0.5, c


def test_the_honesty_command_passes_a_generated_set_and_fails_a_leaking_split(synth, tmp_path):
    from lab import honesty

    with pytest.raises(SystemExit) as ok:
        honesty.main([str(synth), "--n", "30"])
    assert ok.value.code == 0
    for entry in synth.iterdir():  # the same set, but its test list names a held-out sound
        if entry.name != "test.txt":
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "test.txt").write_text(f"_heldout/{sorted((synth / '_heldout').iterdir())[0].name}\n")
    with pytest.raises(SystemExit) as leak:
        honesty.main([str(tmp_path), "--n", "30"])
    assert leak.value.code == 1


def test_the_cue_options_at_their_defaults_leave_every_frame_and_sample_as_before():
    rng = np.random.default_rng(3)
    p = synthetic._video_params(rng, 4, (1.0, 1.0), 0.3)
    cued = {**p, "instance_cue": 0.0, "class_cue": 1.0}
    assert np.array_equal(render.render_video(p, 32, 8), render.render_video(cued, 32, 8))
    assert np.array_equal(render.render_audio(p, 8000), render.render_audio(cued, 8000))


def test_the_instance_cue_puts_the_stripes_height_into_the_pitch_of_its_sound():
    """Picture and sound of one video share the cue; another video's sound carries another pitch."""
    rng = np.random.default_rng(5)
    rate = 8000
    pitches, heights = [], []
    for _ in range(6):
        p = {**synthetic._video_params(rng, 0, (1.0, 1.0), 0.0), "instance_cue": 1.0, "class_cue": 0.05}
        height, _ = render.instance_cue(p)
        wav = render.render_audio(p, rate)
        spectrum = np.abs(np.fft.rfft(wav))
        freqs = np.fft.rfftfreq(len(wav), 1 / rate)
        low = (freqs > 200) & (freqs < 1100)
        pitches.append(freqs[low][spectrum[low].argmax()])
        heights.append(height)
        frame = render.render_video(p, 64, 8)[0].astype(float)
        row = int(round((-0.45 + 0.9 * height + 1) * 32))  # the stripe's centre row
        same = np.abs(frame[row] - np.median(frame[row], axis=0)).max(axis=1) < 1  # (64,) pixels of one colour
        assert same.mean() > 0.75  # across the width, but where the shape or the distractor cross it
    np.testing.assert_allclose(pitches, [250 * 2 ** (2 * h) for h in heights], atol=2.0)
    assert max(pitches) - min(pitches) > 100  # videos differ: the pitch is not a constant


def test_clips_of_one_source_share_their_scene_and_sources_never_cross_the_split(tmp_path):
    """--clips-per-source: every source gives its N clips to one split only, and clips of one source
    look alike (the same background and texture) while clips of two sources do not."""
    out = tmp_path / "sources"
    synthetic.generate(
        out,
        classes=2,
        train_per_class=4,
        test_per_class=2,
        pool=0,
        heldout=2,
        size=32,
        fps=8,
        seconds=(2.2, 2.4),
        clips_per_source=2,
        audio_codec="flac",
        workers=1,
    )
    rows = list(csv.DictReader(open(out / "ground_truth.csv")))
    sources = {}
    for r in rows:
        sources.setdefault(r["source"], []).append(r)
    assert len(sources) == 2 * (4 + 2) // 2 and all(len(clips) == 2 for clips in sources.values())
    assert all(len({r["split"] for r in clips}) == 1 for clips in sources.values())
    assert all(len({r["label"] for r in clips}) == 1 for clips in sources.values())
    import av

    def first_frame(rel):
        with av.open(str(out / rel)) as c:
            return next(c.decode(video=0)).to_ndarray(format="rgb24").astype(float)

    within = [np.abs(first_frame(a["path"]) - first_frame(b["path"])).mean() for a, b in sources.values()]
    firsts = [clips[0]["path"] for clips in sources.values()]
    across = [np.abs(first_frame(a) - first_frame(b)).mean() for a, b in zip(firsts, firsts[1:])]
    assert max(within) < min(across), (within, across)
    with pytest.raises(ValueError, match="clips_per_source"):
        synthetic.generate(tmp_path / "bad", classes=1, train_per_class=3, test_per_class=0, clips_per_source=2)


def test_a_clip_of_a_source_keeps_the_sources_scene_under_noise_of_its_own():
    """A clip draws its background and texture from the source's seed and its frame noise from its own."""
    rng = np.random.default_rng(7)
    p = synthetic._video_params(rng, 2, (1.0, 1.0), 0.3)
    clip = synthetic._clip_of_source(rng, p, (1.0, 1.0))
    assert clip["scene_seed"] == p["seed"] and clip["seed"] != p["seed"]
    own = {**p, "scene_seed": p["seed"]}  # a separate noise stream, so not identical, but the same scene
    assert not np.array_equal(render.render_video(p, 32, 8), render.render_video(own, 32, 8))
    assert np.abs(render.render_video(p, 32, 8).astype(float) - render.render_video(own, 32, 8)).mean() < 10


def test_source_pitch_own_draws_each_clips_pitch_from_the_class_register_not_the_source():
    rng = np.random.default_rng(11)
    source = synthetic._video_params(rng, 7, (1.0, 1.0), 0.3)  # class 7: register 1
    shared = [synthetic._clip_of_source(rng, source, (1.0, 1.0))["pitch"] / source["pitch"] for _ in range(20)]
    own = [synthetic._clip_of_source(rng, source, (1.0, 1.0), c=7)["pitch"] for _ in range(20)]
    assert max(abs(np.log2(shared))) <= 0.03  # a source's clips keep its pitch, give or take about 2%
    lo, hi = 220 * 2 ** (0.75 - 0.25), 220 * 2 ** (0.75 + 0.25)  # the class's register, as a new video's
    assert all(lo <= f <= hi for f in own) and np.std(np.log2(own)) > 3 * np.std(np.log2(shared))


def test_novelty_spots_held_out_sounds_that_lack_the_siblings_natural_sounds_have():
    """The shortcut the novelty check exists for: natural sounds in tight groups (5 clips of a source),
    held-out sounds alone. Their nearest-neighbour distance gives them away; alike sounds do not.
    (With pairs the shortcut is weaker: at 50% injected half the kept clips lose their sibling.)"""
    from lab.honesty import LIMIT, novelty_auroc

    rng = np.random.default_rng(0)
    sources = rng.normal(size=(80, 6))
    siblings = np.repeat(sources, 5, axis=0) + rng.normal(0, 0.05, (400, 6))  # (400, 6): 80 sources x 5
    alone = rng.normal(size=(400, 6))
    assert novelty_auroc(siblings, alone) > 0.9
    assert novelty_auroc(rng.normal(size=(400, 6)), alone) < LIMIT


def test_the_sound_descriptor_finds_a_clips_source_sibling_more_often_than_chance(tmp_path):
    """Clips of one source share their tempo: by rhythm, a clip's nearest other clip is its sibling far
    more often than the 1 in 47 of chance, so the novelty check can see what sources share."""
    from scipy.spatial.distance import cdist

    from lab.honesty import VIEWS, sound_descriptor

    synthetic.generate(
        tmp_path, classes=4, train_per_class=12, test_per_class=0, pool=0, size=32, seconds=(2.2, 2.6), seed=1,
        clips_per_source=2, source_pitch="own", heldout=0,
    )  # fmt: skip
    rows = list(csv.DictReader(open(tmp_path / "ground_truth.csv")))
    d = np.array([sound_descriptor(tmp_path / r["path"]) for r in rows])[:, VIEWS["rhythm"]]  # (48, RHYTHMS)
    z = (d - d.mean(0)) / d.std(0)
    dist = cdist(z, z)  # (48, 48)
    np.fill_diagonal(dist, np.inf)
    found = np.mean([rows[i]["source"] == rows[j]["source"] for i, j in enumerate(dist.argmin(1))])
    assert found > 3 / 47, found


def test_transfer_classes_share_no_shape_timbre_or_name_with_any_pretraining_class(tmp_path):
    """The transfer endpoint judges classes never seen in pre-training (the paper's UCF101 and HMDB51)."""
    seen = [render.class_signature(c) for c in range(25)]
    new = [render.class_signature(c, "transfer") for c in range(25)]
    assert not {s[0] for s in seen} & {s[0] for s in new}  # shapes
    assert not {s[2] for s in seen} & {s[2] for s in new}  # timbres
    assert len({s[0] for s in new[:5]}) == 5  # five transfer classes, five shapes
    synthetic.generate(
        tmp_path / "t", classes=5, train_per_class=2, test_per_class=2, heldout=0, pool=0, size=32,
        seconds=(2.2, 2.4), family="transfer",
    )  # fmt: skip
    synthetic.generate(
        tmp_path / "p", classes=10, train_per_class=1, test_per_class=0, heldout=0, pool=0, size=32, seconds=(2.2, 2.4)
    )
    names = {d.name for d in (tmp_path / "t").iterdir() if d.is_dir() and not d.name.startswith("_")}
    shapes = {n.split("_")[1] for n in names}
    assert shapes == set(render.TRANSFER_SHAPES)
    assert not shapes & {
        d.name.split("_")[1] for d in (tmp_path / "p").iterdir() if d.is_dir() and d.name.startswith("class")
    }


def test_each_transfer_timbre_sounds_unlike_every_other_timbre():
    """Spectra of one pitch, one per timbre of both families: no two alike (cosine below 0.98)."""
    rng = np.random.default_rng(0)
    p = {**synthetic._video_params(rng, 0, (1.0, 1.0), 0.0), "pitch": 330.0}
    spectra = {}
    for timbre in render.TIMBRES + render.TRANSFER_TIMBRES:
        spec = np.abs(np.fft.rfft(render.render_audio({**p, "timbre": timbre}, 16000)))[:8000]  # (8000,)
        spectra[timbre] = spec / np.linalg.norm(spec)
    for a, x in spectra.items():
        assert max(float(x @ y) for b, y in spectra.items() if b != a) < 0.98, a


def test_the_generators_manifest_is_the_one_the_scan_writes_of_its_files(tmp_path):
    """The generator writes the manifest from the files as it makes them; the scan of the same folder gives
    the same file, byte for byte (its digest keys the evidence). A video shorter than one clip of audio is
    left out as the scan leaves it out."""
    from tools import scan

    out = tmp_path / "set"
    synthetic.generate(out, classes=2, train_per_class=3, test_per_class=1, heldout=2, pool=1, size=32, workers=1)
    written = (out / "manifest.csv").read_bytes()
    scan.write_manifest(scan.scan(out, jobs=1, progress=False), tmp_path / "scanned.csv")
    assert written == (tmp_path / "scanned.csv").read_bytes() and written.count(b"\n") == 1 + 2 * 4
    short = tmp_path / "short"
    synthetic.generate(
        short, classes=1, train_per_class=2, test_per_class=0, heldout=0, pool=0, size=32, seconds=(1.0, 1.2), workers=1
    )
    assert (short / "manifest.csv").read_text().splitlines() == [",".join(scan.MANIFEST_FIELDS)]
