"""media/in_memory.py's preloading: the preloaded clips are the decoded ones, in threads as one by one, and the cache
hands the decoded files to other processes and decodes a changed file afresh."""

import shutil

import torch

import data
from media import decode, manifest
from media import in_memory as preload
from test_data import _dataset_files


def test_preload_cuts_the_same_clips_as_decoding(tmp_path, files):
    recs = _dataset_files(tmp_path, files, n=2)
    decoded = data.AVDataset(recs, train=False, preload=False)
    preloaded = data.AVDataset(recs, train=False, preload=True)
    assert preloaded.memory is not None and decoded.memory is None
    for start in (0.0, 0.5, 1.25, 2.5):  # on the 16 fps grid
        fa, wa = decoded.read(recs[0].path, start, audio_start=min(start, 1.0))
        fb, wb = preloaded.read(recs[0].path, start, audio_start=min(start, 1.0))
        assert torch.equal(fa, fb)
        assert wa.shape == wb.shape and (wa - wb).abs().max() < 0.05  # AAC restarts differ slightly after a seek
        burst_a, burst_b = int((wa.abs() > 0.1).float().argmax()), int((wb.abs() > 0.1).float().argmax())
        assert abs(burst_a - burst_b) <= 2


def test_preload_in_threads_holds_the_same_files_and_samples_as_one_by_one(tmp_path, files):
    """The preload decodes over the cores in threads; every video and every injected sound is in
    memory, sample for sample as a one-thread preload gives it."""
    recs = _dataset_files(tmp_path, files, n=4)
    pool = manifest.audio_pool(files["silent_pool"].parent)
    threads = torch.get_num_threads()
    memories = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            preload._PRELOADED.clear()  # else the second preload would only read the first one's cache
            ds = data.AVDataset(recs, train=True, faulty_fraction=0.5, pool=pool, preload=True)
            memories.append(ds.memory)
    finally:
        torch.set_num_threads(threads)
        preload._PRELOADED.clear()
    one, two = memories
    assert set(one) == set(two) == {r.path for r in recs} | {p for p, _ in ds.donor.values()}
    assert len(ds.donor) == 2
    for path in one:
        for a, b in zip(one[path], two[path]):
            assert (a is None and b is None) or torch.equal(a, b)


def test_the_preload_cache_gives_the_decoded_files_to_other_processes_and_decodes_a_changed_file_afresh(
    tmp_path, files, monkeypatch
):
    """What a second process (a cleared memory) reads from --preload-cache equals what it would
    decode, frames, audio and injected sounds, without opening a file; a rank of a DDP run walks
    the list from its own share but returns it in order; a file rewritten since is decoded again."""
    recs = _dataset_files(tmp_path, files, n=4)
    pool = manifest.audio_pool(files["silent_pool"].parent)
    cache = str(tmp_path / "cache")
    memories, opened, threads = [], [], torch.get_num_threads()
    try:
        for cached in ("", cache, cache):
            preload._PRELOADED.clear()  # a new process
            ds = data.AVDataset(recs, train=True, faulty_fraction=0.5, pool=pool, preload=True, preload_cache=cached)
            memories.append(ds.memory)
            if cached and len(memories) == 2:
                monkeypatch.setattr(decode, "open_media", lambda p: opened.append(p))  # the third reads the cache
        monkeypatch.undo()
        assert opened == [] and len(list((tmp_path / "cache").glob("*.pt"))) == 4 * 2 + 2  # frames + audio, sounds
        for other in memories[1:]:
            assert set(other) == set(memories[0])
            for path in other:
                for a, b in zip(memories[0][path], other[path]):
                    assert (a is None and b is None) or torch.equal(a, b)
        spec, paths = ds.spec, [r.path for r in recs]
        preload._PRELOADED.clear()
        monkeypatch.setattr(preload.dist, "is_initialized", lambda: True)
        monkeypatch.setattr(preload.dist, "get_rank", lambda: 1)
        monkeypatch.setattr(preload.dist, "get_world_size", lambda: 2)
        walked = []
        real = preload._decode_all
        monkeypatch.setattr(preload, "_decode_all", lambda p, *a: walked.append(p) or real(p, *a))
        torch.set_num_threads(1)
        got = preload.hold(paths, [], spec, cache)
        assert walked == paths[2:] + paths[:2]  # rank 1 of 2 starts half-way down
        assert list(got) == paths and all(torch.equal(got[p][0], memories[0][p][0]) for p in paths)
        monkeypatch.undo()
        torch.set_num_threads(threads)
        shutil.copy(files["10fps"], paths[0])  # the file changes under the cache
        preload._PRELOADED.clear()
        frames, wav = preload.hold(paths[:1], [], spec, cache)[paths[0]]
        preload._PRELOADED.clear()
        fresh = preload.hold(paths[:1], [], spec)[paths[0]]  # no cache: decoded from the file
        assert torch.equal(frames, fresh[0]) and torch.equal(wav, fresh[1])
        assert not torch.equal(wav, memories[0][paths[0]][1])
    finally:
        torch.set_num_threads(threads)
        preload._PRELOADED.clear()
