"""Measurement (issue 31): has xID memorised the faulty pairs? For each checkpoint, the bank's own-audio
retrieval (is an instance's own audio memory the nearest to its video memory?) for the clean and the
faulty positives, beside the class structure (diagnostics.bank_structure) and the AUROC.

    python -m experiments.memorisation runs/warmup_probe75/fps_4/ckpt.pt [CKPT ...]
"""
import sys

from checkpoint import load_pretrained
from diagnostics import bank_report


def main(paths):
    print("| checkpoint | epoch-end AUROC | own audio, clean | own audio, faulty | 1-NN class | cross-modal class |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in paths:
        _, _, bank, instances = load_pretrained(path)
        s = bank_report(bank, instances["labels"], instances["faulty"])
        print(f"| {path} | {s['faulty_auroc']:.3f} | {s['own_audio']:.3f} | {s['own_audio_faulty']:.3f} | {s['knn_class']:.2f} "
              f"| {s['xmodal_class']:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
