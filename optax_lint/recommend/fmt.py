"""Numbers as the recommendation prints them: 50_000 in code, 3e-4 for rates, 1.3B for counts."""

from __future__ import annotations


def py_number(value) -> str:
    """Numbers as a person writes them in Python: 50_000, 3e-4, 2.4e-3, 0.1, 1.0."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    value = float(value)
    if value == 0:
        return "0.0"
    if abs(value) < 0.01:
        mantissa, exponent = f"{value:.6e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    return repr(round(value, 12))


def count_text(value) -> str:
    """1_300_000_000 -> '1.3B'."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return str(value)


ARCH_NAMES = {"transformer": "Transformer", "cnn": "CNN", "mlp": "MLP", "rnn": "RNN"}


def arch_phrase(arch: str) -> str:
    """'a Transformer', 'an MLP'."""
    name = ARCH_NAMES.get(arch, arch)
    return f"{'an' if name[0] in 'AEIMRU' else 'a'} {name}"
