"""Where the bare model's step spends its CPU time, and how the thread settings move its speed: measured per CPU
kind before making the model fast on each.

    python -m lab.bench profile [--preset demo] [--batch 32] [--steps 5]    # torch.profiler: top ops, grouped shares
    python -m lab.bench threads [--preset demo] [--batch 32] [--steps 20] [--rounds 2]  # settings side by side
    python -m lab.bench fold [--preset demo] [--batch 32] [--steps 20] [--rounds 2]     # 2-D convolutions, time folded

`profile` runs torch.profiler (CPU activities) over --steps bare model steps (lab.timing.bare_model_step: the
encoders, heads and Adam on one ready batch, as `lab.bench model`), one warm-up step left out, and prints the top
ops by self CPU time with their share, then the shares grouped: convolution forward and backward, batch norm
forward and backward, max pool, Adam (zero_grad and step), everything else. An op belongs to the group of the
innermost of it and its callers that names one, so an aten::mul that Adam calls is Adam's. The time is the
calling thread's: the work an op hands to OpenMP's threads is counted in the op.

`threads` times the bare model in fresh processes, one setting at a time, each --rounds times, the settings
alternated: the default (one process, all the cores' threads), OMP_WAIT_POLICY=PASSIVE and ACTIVE (read when
OpenMP starts, hence the fresh processes), torch.set_num_interop_threads(1), one thread, and as many processes
of one thread side by side as there are cores, and 5 (make demo's 5 branches at once, a thread each on 2 cores:
demo.py's side_by_side and branch_jobs), their clips summed over the time the slowest took.
Each row is the mean clips/s and its ratio to the default's.

`fold` times the levers of making the step fast (LEVERS): the video encoder's (1,k,k) and (k,1,1) Conv3d run as Conv2d,
the frames folded into the batch (spatial) or H*W into the width (temporal), the same weights and arithmetic up to the
order of the sums, and the temporal ones alone (a view of their input, no copy); channels_last_3d on the CPU; Adam
fused, and Adam multi-tensor (foreach; a CPU run takes the for-loop). The model as it is and each lever alternate,
--rounds rounds of --steps steps each, in this process; it prints their clips/s, the ratio, and how far each moves the
video output on one batch (Adam's options move nothing there: only later steps).
"""

import copy
import multiprocessing
import os
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

import checkpoint
import data
from augment import ClipAugment
from config import parse_config
from lab.timing import bare_model_step
from model import AVModel

# (group, words in an op's name), tried in order on the op and then on its callers, innermost first
GROUPS = (
    ("convolution backward", ("convolution_backward", "ConvolutionBackward")),
    ("batch norm backward", ("batch_norm_backward", "BatchNormBackward")),
    ("max pool", ("max_pool", "MaxPool")),
    ("Adam (optimizer)", ("Optimizer.step", "Optimizer.zero_grad")),
    ("convolution forward", ("convolution", "conv1d", "conv2d", "conv3d")),
    ("batch norm forward", ("batch_norm",)),
)
OTHER = "everything else"


def model_step(preset, batch, model=None, adam=None, video_format=torch.contiguous_format):
    """The bare model step of `lab.bench model` (fp32, contiguous) on a ready random batch, on the CPU; `adam`: Adam's
    own options (foreach, fused), `video_format` the batch's and the video encoder's memory format."""
    cfg = parse_config(["--preset", preset])
    spec = data.clip_spec(cfg)
    torch.manual_seed(0)  # the same batch for every model of one preset
    model = model or AVModel(**checkpoint.model_args(cfg))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, **(adam or {}))
    video = torch.randint(0, 256, (batch, 3, cfg.frames, cfg.size, cfg.size), dtype=torch.uint8)
    audio = torch.randn(batch, int(spec.audio_seconds * spec.audio_rate)) * 0.1
    with torch.no_grad():
        video, audio = ClipAugment(spec)(video, audio)
    model.video.to(memory_format=video_format)
    video = video.contiguous(memory_format=video_format)
    return bare_model_step(model, opt, torch.autocast("cpu", enabled=False), video, audio)


def group_of(event):
    """The group of a profiler event: the first of GROUPS that names it or, failing that, its nearest caller."""
    while event is not None:
        for group, words in GROUPS:
            if any(w in event.name for w in words):
                return group
        event = event.cpu_parent
    return OTHER


def profile_step(step, steps):
    """({op: (self CPU us, calls)}, {group: self CPU us}) over `steps` calls of step, after one untimed call."""
    step()  # warm-up: allocations, oneDNN's primitive choice
    with profile(activities=[ProfilerActivity.CPU], acc_events=True) as prof:
        for _ in range(steps):
            step()
    ops, groups = {}, {g: 0.0 for g, _ in GROUPS} | {OTHER: 0.0}
    for e in prof.events():
        us, calls = ops.get(e.name, (0.0, 0))
        ops[e.name] = (us + e.self_cpu_time_total, calls + 1)
        groups[group_of(e)] += e.self_cpu_time_total
    return ops, groups


def bench_profile(args, top=15):
    """Print the top ops and the grouped shares of the bare model's self CPU time; return the groups' shares (%)."""
    ops, groups = profile_step(model_step(args.preset, args.batch), args.steps)
    total, n = sum(groups.values()), args.steps
    print(
        f"profile: {args.preset} preset, batch {args.batch}, CPU, {torch.get_num_threads()} threads, {n} step(s) after "
        f"1 warm-up; self CPU time {total / n / 1e3:.1f} ms a step (profiler on)"
    )
    print("| op | ms/step | share | calls/step |\n|---|---:|---:|---:|")
    for name, (us, calls) in sorted(ops.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| {name} | {us / n / 1e3:.2f} | {100 * us / total:.1f}% | {calls / n:g} |")
    print("\n| group | ms/step | share |\n|---|---:|---:|")
    shares = {g: 100 * us / total for g, us in groups.items()}
    for g, us in groups.items():
        print(f"| {g} | {us / n / 1e3:.2f} | {shares[g]:.1f}% |")
    return shares


SETTINGS = {  # name: (processes, threads each, environment, interop threads)
    "default": (1, 0, {}, 0),
    "OMP_WAIT_POLICY=PASSIVE": (1, 0, {"OMP_WAIT_POLICY": "PASSIVE"}, 0),
    "OMP_WAIT_POLICY=ACTIVE": (1, 0, {"OMP_WAIT_POLICY": "ACTIVE"}, 0),
    "set_num_interop_threads(1)": (1, 0, {}, 1),
    "1 thread": (1, 1, {}, 0),
    "processes side by side, 1 thread each": (0, 1, {}, 0),
    "5 processes side by side, 1 thread each": (5, 1, {}, 0),
}


def _worker(preset, batch, steps, threads, interop, barrier, results):
    if interop:
        torch.set_num_interop_threads(interop)
    torch.set_num_threads(threads)
    step = model_step(preset, batch)
    step()  # warm-up, outside the clock
    barrier.wait()  # the side-by-side processes start their clocks together
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    results.put(time.perf_counter() - t0)


def run_setting(name, preset, batch, steps, cores):
    """Clips/s of one setting: its processes' clips over the time the slowest of them took."""
    processes, threads, env, interop = SETTINGS[name]
    processes, threads = processes or cores, threads or cores
    context = multiprocessing.get_context("spawn")  # a fresh OpenMP runtime, which reads the environment
    barrier, results, saved = context.Barrier(processes), context.Queue(), dict(os.environ)
    os.environ.pop("OMP_WAIT_POLICY", None)  # unset unless the setting sets it
    os.environ.update(env | {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
    try:
        workers = [
            context.Process(target=_worker, args=(preset, batch, steps, threads, interop, barrier, results))
            for _ in range(processes)
        ]
        for w in workers:
            w.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    seconds = [results.get() for _ in workers]
    for w in workers:
        w.join()
    return processes * batch * steps / max(seconds)


def bench_threads(args):
    """Each setting's mean clips/s over --rounds alternated rounds, and its ratio to the default's."""
    cores = len(os.sched_getaffinity(0))
    rates = {name: [] for name in SETTINGS}
    for _ in range(args.rounds):
        for name in SETTINGS:
            rates[name].append(run_setting(name, args.preset, args.batch, args.steps, cores))
    base = sum(rates["default"]) / len(rates["default"])
    print(
        f"threads: bare model, {args.preset} preset, batch {args.batch}, {args.steps} steps a process, {cores} cores, "
        f"{args.rounds} rounds alternated"
    )
    print("| setting | clips/s per round | mean | vs default |\n|---|---|---:|---:|")
    for name, r in rates.items():
        mean = sum(r) / len(r)
        print(f"| {name} | {', '.join(f'{x:.1f}' for x in r)} | {mean:.1f} | {mean / base:.2f}x |")
    return rates


class Folded(nn.Module):
    """A (1,k,k) or (k,1,1) Conv3d as a Conv2d over folded axes (the spatial ones only if `spatial`; the temporal
    ones are a view, the spatial ones a copy); any other stays a Conv3d."""

    def __init__(self, conv, spatial=True):
        super().__init__()
        self.conv, self.spatial = conv, spatial

    def forward(self, x):
        c, (b, ch, t, h, w) = self.conv, x.shape
        (kt, kh, kw), (st, sh, sw), (pt, ph, pw) = c.kernel_size, c.stride, c.padding
        if (kt, st, pt) == (1, 1, 0) and self.spatial:  # spatial: the frames as a batch
            y = F.conv2d(x.transpose(1, 2).reshape(b * t, ch, h, w), c.weight[:, :, 0], None, (sh, sw), (ph, pw))
            return y.view(b, t, *y.shape[1:]).transpose(1, 2)  # (B, C', T, H', W')
        if (kh, kw, sh, sw, ph, pw) == (1, 1, 1, 1, 0, 0):  # temporal: H*W as the width
            y = F.conv2d(x.reshape(b, ch, t, h * w), c.weight[..., 0], None, (st, 1), (pt, 0))
            return y.view(b, y.shape[1], y.shape[2], h, w)  # (B, C', T', H, W)
        return c(x)


def folded(model, spatial=True):
    """`model` with every Conv3d of its video encoder wrapped in Folded (the same parameters)."""
    for name, child in list(model.named_children()):
        setattr(model, name, Folded(child, spatial)) if isinstance(child, nn.Conv3d) else folded(child, spatial)
    return model


def folded_copy(plain, spatial=True):
    """A folded model holding `plain`'s weights."""
    fold = folded(copy.deepcopy(plain), spatial)
    names = {k.replace(".conv.weight", ".weight"): k for k in fold.state_dict()}
    fold.load_state_dict({names[k]: v for k, v in plain.state_dict().items()})
    return fold


# the levers of the bare model's CPU step the speed issue lists, each: (model from the plain one, Adam's options,
# the video's memory format); "as it is" first, the one each ratio is to
LEVERS = {
    "as it is": (lambda m: m, {}, torch.contiguous_format),
    "video convolutions folded to 2-D": (folded_copy, {}, torch.contiguous_format),
    "temporal ones only (a view, no copy)": (lambda m: folded_copy(m, spatial=False), {}, torch.contiguous_format),
    "channels_last_3d video (as on a GPU)": (copy.deepcopy, {}, torch.channels_last_3d),
    "Adam fused": (copy.deepcopy, {"fused": True}, torch.contiguous_format),
    "Adam foreach (multi-tensor)": (copy.deepcopy, {"foreach": True}, torch.contiguous_format),
}


def bench_fold(args):
    """Clips/s of the bare model step as it is and under each lever, alternated in this process; their ratios, and
    how far each lever's video output moves from the plain model's on one batch (0: the same arithmetic)."""
    cfg = parse_config(["--preset", args.preset])
    plain = AVModel(**checkpoint.model_args(cfg))
    x = torch.randn(4, 3, cfg.frames, cfg.size, cfg.size)
    steps, moved = {}, {}
    for name, (make, adam, video_format) in LEVERS.items():
        model = make(plain)
        with torch.no_grad():
            model.eval()
            moved[name] = (plain.eval().video(x) - model.video(x.contiguous(memory_format=video_format))).abs().max()
        plain.train(), model.train()  # the steps train
        steps[name] = model_step(args.preset, args.batch, model, adam, video_format)
    rates = {name: [] for name in steps}
    for step in steps.values():
        step()  # warm-up: oneDNN's primitive choice
    for _ in range(args.rounds):
        for name, step in steps.items():
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step()
            rates[name].append(args.batch * args.steps / (time.perf_counter() - t0))
    mean = {name: sum(r) / len(r) for name, r in rates.items()}
    print(
        f"fold: bare model, {args.preset} preset, batch {args.batch}, {args.steps} steps a round, {args.rounds} rounds "
        f"alternated, {torch.get_num_threads()} threads"
    )
    print("| lever | clips/s per round | mean | vs as it is | video output moved by |\n|---|---|---:|---:|---:|")
    for name, r in rates.items():
        ratio, per_round = mean[name] / mean["as it is"], ", ".join(f"{x:.1f}" for x in r)
        print(f"| {name} | {per_round} | {mean[name]:.1f} | {ratio:.2f}x | {moved[name]:.1e} |")
    return rates
