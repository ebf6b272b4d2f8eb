"""Measurement: is bf16 training safe on this CPU? The weight gradient of one of the demo video
encoder's temporal convolutions (R(2+1)D stage 2's (3, 1, 1) kernel, 57 -> 32 channels, the shape
where `train.py --preset demo --amp bf16` first went non-finite on an AMD EPYC with AVX512-BF16),
computed many times from the same finite random inputs: in bf16 through oneDNN, in bf16 with oneDNN
off, and in fp32. Any non-finite gradient means `--amp bf16` is not usable on this machine.

    python -m experiments.bf16_cpu_check [--repeats 200]
"""
import argparse

import torch
import torch.nn.functional as F


def nonfinite_grads(x, w, go, repeats, dtype, onednn=True):
    """How many of `repeats` weight gradients of conv3d(x, w), padding (1, 0, 0), are not finite."""
    bad = 0
    with torch.backends.mkldnn.flags(enabled=onednn):
        for _ in range(repeats):
            ww = w.to(dtype).clone().requires_grad_(True)
            F.conv3d(x.to(dtype), ww, None, 1, (1, 0, 0)).backward(go.to(dtype))
            bad += not bool(torch.isfinite(ww.grad).all())
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=200)
    args = p.parse_args(argv)
    g = torch.Generator().manual_seed(0)
    w = 0.05 * torch.randn(32, 57, 3, 1, 1, generator=g)  # (C_out, C_in, 3, 1, 1)
    go = 0.01 * torch.randn(32, 32, 2, 8, 8, generator=g)  # the output's gradient (B, C_out, T, H, W)
    x = torch.randn(32, 57, 2, 8, 8, generator=g)  # (B, C_in, T, H, W): the demo's batch at that layer
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{torch.get_num_threads()} threads")
    # Where it fails, how often depends on the values and on the process's history (seen: 1% to 100%
    # of repeats): hence two kinds of input, the second like the layer's (after a ReLU, half zeros).
    for kind, inp in (("normal input", x), ("ReLU'd input", torch.relu(x))):
        for name, dtype, onednn in (("bf16, oneDNN", torch.bfloat16, True),
                                    ("bf16, oneDNN off", torch.bfloat16, False), ("fp32", torch.float32, True)):
            bad = nonfinite_grads(inp, w, go, args.repeats, dtype, onednn)
            print(f"{kind:13s} {name:17s}: non-finite weight gradient in {bad} of {args.repeats}")


if __name__ == "__main__":
    main()
