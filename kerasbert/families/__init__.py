"""The five families, each stated in one file as its differences from the generic encoder.

kerasbert has one encoder builder, one set of layers and one converter per checkpoint format;
what differs between BERT, RoBERTa, ALBERT, ELECTRA and DistilBERT is data, and that data lives
here, one file per family: its presets, config defaults and checks, heads, tokenizer, and the
weight-name tables and config keys of Hugging Face, Google's TF1 checkpoints and keras-hub.
Generic code asks `families.get(config.family)`; adding a sixth family is one new file here
(registered in `_FAMILIES` below) plus its rows in the test tables.

Example:
>>> from kerasbert import families
>>> families.NAMES
('bert', 'roberta', 'albert', 'electra', 'distilbert')
>>> families.get("roberta").name
'roberta'
"""

from kerasbert.families import albert, bert, distilbert, electra, roberta
from kerasbert.families.family import Family

_FAMILIES = {family.name: family for family in (bert.FAMILY, roberta.FAMILY, albert.FAMILY,
                                                electra.FAMILY, distilbert.FAMILY)}
NAMES = tuple(_FAMILIES)


def get(name) -> Family:
    """The `Family` named `name`; `ValueError` naming it and the known ones otherwise."""
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown family {name!r}; one of {NAMES}") from None


__all__ = ["Family", "NAMES", "get"]
