"""Defaults of argument dataclasses that libraries ship, for code that parses its flags
into them (`HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))` with
transformers' own `TrainingArguments`): a flag the user does not pass takes the
library's default, as a field of the project's own dataclass would.

The values are transformers' documented defaults of `TrainingArguments` (shared by
`Seq2SeqTrainingArguments`), stable across its releases: no weight decay, Adam's
usual betas and epsilon, a 5e-5 rate, clipping at 1.0, no warmup."""

from __future__ import annotations

from typing import Optional

_TRAINING_ARGUMENTS = {
    "learning_rate": 5e-5,
    "weight_decay": 0.0,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "adam_epsilon": 1e-8,
    "max_grad_norm": 1.0,
    "warmup_steps": 0,
    "warmup_ratio": 0.0,
}

LIBRARY_DATACLASSES = {
    "transformers.TrainingArguments": _TRAINING_ARGUMENTS,
    "transformers.Seq2SeqTrainingArguments": _TRAINING_ARGUMENTS,
    "transformers.training_args.TrainingArguments": _TRAINING_ARGUMENTS,
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments": _TRAINING_ARGUMENTS,
}


def library_default(qual: Optional[str], field: str) -> Optional[object]:
    """The default of `field` in the library dataclass `qual`, or None when unknown."""
    return LIBRARY_DATACLASSES.get(qual or "", {}).get(field)
