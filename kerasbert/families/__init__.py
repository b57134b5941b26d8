"""The six families, each stated in one file as its differences from the generic encoder.

kerasbert has one encoder builder, one set of layers and one converter per checkpoint format;
what differs between BERT, RoBERTa, ALBERT, ELECTRA, DistilBERT and ModernBERT is data, and
that data lives
here, one file per family: its presets, config defaults and checks, heads, tokenizer, and the
weight-name tables and config keys of Hugging Face, Google's TF1 checkpoints and keras-hub.
Generic code asks `families.get(config.family)`; adding a family is one new file here
(registered in `_FAMILIES` below), any general switch the encoder gains, and its rows in the
test tables (docs/models.md, "Adding a family").

Example:
>>> from kerasbert import families
>>> families.NAMES
('bert', 'roberta', 'albert', 'electra', 'distilbert', 'modernbert')
>>> families.get("roberta").name
'roberta'
"""

from kerasbert.families import albert, bert, distilbert, electra, modernbert, roberta
from kerasbert.families.family import Family

_FAMILIES = {family.name: family for family in (bert.FAMILY, roberta.FAMILY, albert.FAMILY,
                                                electra.FAMILY, distilbert.FAMILY,
                                                modernbert.FAMILY)}
NAMES = tuple(_FAMILIES)


def get(name) -> Family:
    """The `Family` named `name`; `ValueError` naming it and the known ones otherwise."""
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown family {name!r}; one of {NAMES}") from None


__all__ = ["Family", "NAMES", "get"]
