"""Hydrogen drum kits as classed recordings: which file is which piece of the kit, for tools/recorded.py.

Debian's hydrogen-drumkits package holds real drum recordings, one folder per kit, each with a
drumkit.xml that names its instruments and, per instrument, the files of its velocity layers:

    cd /tmp && apt-get download hydrogen-drumkits && dpkg -x hydrogen-drumkits_*.deb /tmp/hydrogen
    python -m tools.recorded --src /tmp/hydrogen/usr/share/hydrogen/data/drumkits --layout hydrogen --out data/drums

The class of a file is the piece of the kit (PIECES) that its instrument's name names, or, where that
name names none ('redo super opaco'), that its file's name names. A file is dropped when
  - either name names two pieces ('Crash/Ride', 'ride-crash20inch'), or the two names name different
    pieces (Audiophob's 'Kick' is 86335__zgump__tom-0105.wav; 'crash16inch' holds crash16i__ride2.flac);
  - neither names a piece of PIECES: hand drums, splash and china cymbals, 'cymbal 2', sound effects,
    the empty placeholders of unused pads, and rumpf_kit's 'Sample: beats_01-39.flac';
  - the instrument is a roll ('Snare Roll'): a run of strokes, not one strike;
  - another instrument already named it (Millo_MultiLayered2's 'Tom Mid' and 'Tom Hi' share files).
A file's group is its kit and piece: the velocity layers of one drum, and the several instruments one
drum makes (Forzee's 'Ride', 'Ride Bell', 'Ride Bow'), go to one split together, so the test set's drums
are never heard in training. Tambourine (3 instruments, 2 kits) is too few to split three ways and is left
out with the rest. Package 2017.09.19~dfsg-1 gives 478 files in 9 pieces (lab/results/drums/README.md).
"""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

# piece -> what names it, in an instrument's name or a file's (lower case, '_-./' read as spaces)
PIECES = {
    "kick": r"\bkick|bass ?drum|\bbd\b",
    "snare": r"snare",
    "hihat": r"hi ?hat|\bhh\b|\bhat\b|\bchh\b|\bohh\b",
    "tom": r"\btom",  # not 'custom': a word that starts with tom
    "ride": r"\bride",
    "crash": r"\bcrash",
    "clap": r"clap",
    "cowbell": r"cowbell",
    "stick": r"stick|rim ?click",  # side stick, cross stick, rim click; a rimshot is a snare's
}


def named(text):
    """The pieces a name names. -> set of PIECES' keys"""
    words = re.sub(r"[_\-./]+", " ", text.lower())
    return {piece for piece, pattern in PIECES.items() if re.search(pattern, words)}


def kit_files(kits):
    """Every (file, kit, instrument name) the drumkit.xml files under `kits` name, each file once (the
    first instrument that names it), in a fixed order; files that do not exist are skipped."""
    out, seen = [], set()
    for xml in sorted(Path(kits).glob("*/drumkit.xml")):
        try:
            root = ET.parse(xml).getroot()
        except ET.ParseError as err:
            raise ValueError(f"{xml}: not a readable drumkit.xml ({err})") from None
        ns = root.tag.split("}")[0] + "}" if root.tag.startswith("{") else ""  # some kits declare a namespace
        for instrument in root.iter(f"{ns}instrument"):
            name = (instrument.findtext(f"{ns}name") or "").strip()
            for layer in instrument.iter(f"{ns}filename"):
                path = xml.parent / (layer.text or "").strip()
                if layer.text and path.is_file() and path not in seen:
                    seen.add(path)
                    out.append((path, xml.parent.name, name))
    return out


def pieces(kits):
    """The classed recordings of a folder of Hydrogen kits: [(path, piece, group)], group = 'kit/piece'.
    Raises ValueError naming the folder when it holds no kit."""
    files = kit_files(kits)
    if not files:
        raise ValueError(f"--src {kits}: no */drumkit.xml naming an existing file (a Hydrogen drumkits folder)")
    out = []
    for path, kit, instrument in files:
        by_name, by_file = named(instrument), named(path.stem)
        if "roll" in instrument.lower() or len(by_name) > 1 or len(by_file) > 1:
            continue
        if by_name and by_file and by_name != by_file:
            continue
        piece = by_name or by_file
        if piece:
            (piece,) = piece
            out.append((path, piece, f"{kit}/{piece}"))
    return out
