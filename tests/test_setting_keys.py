"""A finished setting of the demo is reused only for the run it answers: its key (demo.py,
setting_key) holds what its numbers depend on, and changes with each of them."""

from dataclasses import replace

import demo
from config import PRESETS
from demo import DemoArgs


def test_setting_key_holds_the_injection_only_when_something_is_injected(tmp_path, monkeypatch):
    """The injection-draw fix and the move to held-out sounds change what is injected at 25-75%, so
    those settings must be rerun; at 0% nothing is drawn, so a 0% setting saved before is still the
    same run. Another pool of sounds is another setting too."""
    args = DemoArgs(data=str(tmp_path), warmup_epochs=75, epochs=8)
    (tmp_path / "_heldout").mkdir()
    (tmp_path / "_heldout" / "a.mp4").write_bytes(b"x")
    before = {0.0: demo.setting_key(args, 0.0), 0.5: demo.setting_key(args, 0.5)}
    assert before[0.5]["faulty_source"] == "heldout"
    (tmp_path / "_heldout" / "b.mp4").write_bytes(b"x")
    assert demo.setting_key(args, 0.5) != before[0.5]
    lent = replace(args, train_args=["--faulty-source", "train"])
    assert demo.setting_key(lent, 0.5)["faulty_source"] == "train"
    monkeypatch.setattr(demo.data, "INJECTION_STREAM", demo.data.INJECTION_STREAM + 1)
    assert demo.setting_key(args, 0.0) == before[0.0]
    assert demo.setting_key(args, 0.5)["injection_stream"] != before[0.5]["injection_stream"]


def test_a_setting_of_another_model_or_clip_recipe_gets_another_key(tmp_path):
    """Settings files of the demo2000 regime (the claims') predate the recipe field and keep their key;
    a run of another width, clip or preset is never answered from them."""
    args = DemoArgs(data=str(tmp_path), warmup_epochs=25, epochs=6, preset="demo2000")
    assert "recipe" not in demo.setting_key(args, 0.0)
    narrow = replace(args, train_args=["--width", "0.125", "--frames", "2"])
    assert demo.setting_key(narrow, 0.0)["recipe"] == {"width": 0.125, "frames": 2}
    other = {k: v for k, v in PRESETS["demo"].items() if k not in demo.KEYED and PRESETS["demo2000"][k] != v}
    assert demo.setting_key(replace(args, preset="demo"), 0.0).get("recipe", {}) == other
