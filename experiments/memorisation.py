"""Measurement (issue 31): has xID memorised the faulty pairs? For each checkpoint, the bank's own-audio
retrieval (is an instance's own audio memory the nearest to its video memory?) for the clean and the
faulty positives, beside the class structure (diagnostics.bank_structure) and the AUROC.

    python -m experiments.memorisation runs/warmup_probe75/fps_4/ckpt.pt [CKPT ...]
"""
import sys

from checkpoint import load_pretrained
from diagnostics import bank_structure, faulty_auroc


def main(paths):
    print("| checkpoint | epoch-end AUROC | own audio, clean | own audio, faulty | 1-NN class | cross-modal class |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in paths:
        _, _, bank, instances = load_pretrained(path)
        valid, faulty = bank.valid, instances["faulty"]
        s = bank_structure(bank.video[valid], bank.audio[valid], instances["labels"][valid], faulty[valid])
        auroc = faulty_auroc(bank.scores()[valid], faulty[valid])
        print(f"| {path} | {auroc:.3f} | {s['own_audio']:.3f} | {s['own_audio_faulty']:.3f} | {s['knn_class']:.2f} "
              f"| {s['xmodal_class']:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
