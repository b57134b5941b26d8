"""The architectures of the public BERT, RoBERTa, ALBERT, ELECTRA and DistilBERT checkpoints.

Each preset lists the `EncoderConfig` fields of one public checkpoint's
`config.json`, under the name kerasbert uses for it, with the checkpoint's
public name in `source`. The numbers live in each family's file
(`kerasbert/families/<family>.py`); `PRESETS` gathers them, family by family.

Example:
>>> source, fields = PRESETS["roberta_base"]
>>> source, fields["family"], fields["max_positions"]
('FacebookAI/roberta-base', 'roberta', 514)
"""

from kerasbert import families

# name -> (public checkpoint, EncoderConfig fields)
PRESETS = {name: preset for family in families.NAMES
           for name, preset in families.get(family).model.presets.items()}
