"""Which card a run was made on: validate.py records each run's GPU name, fit.py replays each
row with its card's model."""
from __future__ import annotations

FAMILIES = ("h100", "h200", "a100", "b200")


def card_of(gpu: str) -> str:
    """The card family of a GPU name ("NVIDIA H100 80GB HBM3" -> "h100"). Runs recorded
    before the `card` column (an empty name) were all made on the H200."""
    name = gpu.lower()
    for fam in FAMILIES:
        if fam in name:
            return fam
    return name.replace("nvidia ", "").split()[0] if name.strip() else "h200"
