"""Variables of Google's original TF1 checkpoints -> kerasbert variable paths.

The rows are the families' (`families.get(family).conversion.google`). A row is
`(google_scope, kerasbert_layer, kind)`; `kind` fixes the
variable names on both sides:

- `DENSE`: `kernel`/`bias` -> `kernel`/`bias`. TF1 dense kernels are stored
  `[in, out]`, as Keras keeps them: no transpose.
- `LAYER_NORM`: `gamma`/`beta` -> `gamma`/`beta`.
- `OUTPUT_LAYER`: the hand-made classifier of `run_pretraining.py`,
  `output_weights` (stored `[out, in]`, so transposed) / `output_bias` -> `kernel`/`bias`.
- `EMBEDDING`: the scope is the table itself -> `embeddings`.
- `VARIABLE`: the scope is one variable, the layer path one variable.

`{scope}` stands for the encoder's variable scope (`bert` for BERT and ALBERT,
`electra` for ELECTRA's discriminator, `generator` for its generator),
`{embeddings}` for the scope holding the embedding tables (ELECTRA's generator
reads the discriminator's `electra/embeddings` unless trained with untied
embeddings), `{n}` for a distinct transformer layer, `{group}`/`{inner}` for
ALBERT's group and layer within it.
"""

from kerasbert import families
from kerasbert.families.conversion_tables import (DENSE, EMBEDDING, LAYER_NORM, OUTPUT_LAYER,
                                                  VARIABLE)

# kind -> ((google variable, kerasbert variable, transpose), ...); None: the row names it whole.
PARAMETERS = {
    DENSE: (("kernel", "kernel", False), ("bias", "bias", False)),
    LAYER_NORM: (("gamma", "gamma", False), ("beta", "beta", False)),
    OUTPUT_LAYER: (("output_weights", "kernel", True), ("output_bias", "bias", False)),
    EMBEDDING: ((None, "embeddings", False),),
    VARIABLE: ((None, None, False),),
}

# Training state, not model weights: read past without a word.
SKIPPED_SUFFIXES = ("/adam_m", "/adam_v")
SKIPPED_NAMES = ("global_step",)


def google_tables(family):
    """The `GoogleTables` of `family`, or None when Google released no TF1 checkpoints of it."""
    return families.get(family).conversion.google


def google_families():
    """The families with Google TF1 tables.

    >>> google_families()
    ('bert', 'albert', 'electra')
    """
    return tuple(name for name in families.NAMES if google_tables(name))


def encoder_name_map(config, scope=None, embeddings_scope=None):
    """`{google_variable: (kerasbert_variable_path, transpose)}` for an encoder of `config`
    under `scope` (default: the family's), its embedding tables under `embeddings_scope`
    (default: `scope`).

    >>> from kerasbert import EncoderConfig
    >>> config = EncoderConfig(family="albert", vocab_size=50, hidden_size=8, num_layers=4,
    ...                        num_heads=2, intermediate_size=16, embedding_size=4,
    ...                        num_hidden_groups=2)
    >>> names = encoder_name_map(config)
    >>> names["bert/encoder/transformer/group_1/inner_group_0/ffn_1/intermediate/dense/kernel"]
    ('transformer_layer_1/intermediate/kernel', False)
    """
    tables = google_tables(config.family)
    fields = {"scope": scope or tables.scope}
    fields["embeddings"] = embeddings_scope or fields["scope"]
    encoder = tables.encoder
    rows = [(row, fields) for row in encoder.embeddings]
    if config.has_embedding_projection:
        rows += [(row, fields) for row in encoder.projection]
    for n in range(config.num_distinct_layers):
        group, inner = divmod(n, config.inner_group_num)
        rows += [(row, dict(fields, n=n, group=group, inner=inner)) for row in encoder.layer]
    if config.use_pooler:
        rows += [(row, fields) for row in encoder.pooler]
    return expand_modules([(google.format(**values), ours.format(**values), kind)
                           for (google, ours, kind), values in rows])


def expand_modules(modules):
    """Expand `(google_scope, kerasbert_layer, kind)` rows to variable-level name pairs."""
    names = {}
    for google_scope, our_layer, kind in modules:
        for google_variable, our_variable, transpose in PARAMETERS[kind]:
            google_name = f"{google_scope}/{google_variable}" if google_variable else google_scope
            path = f"{our_layer}/{our_variable}" if our_variable else our_layer
            names[google_name] = (path, transpose)
    return names


def head_name_map(family, heads):
    """`{google_variable: (kerasbert_variable_path, transpose)}` for pretraining heads.

    >>> head_name_map("bert", ("nsp",))["cls/seq_relationship/output_weights"]
    ('nsp_head/kernel', True)
    """
    return expand_modules([row for head in heads for row in google_tables(family).heads[head]])


def head_scopes(family, head):
    """The variable scopes of one head's rows (a variable under one means the head is there)."""
    return tuple(google for google, _, _ in google_tables(family).heads[head])


def is_skipped(name):
    """Whether a checkpoint variable is training state (optimizer slots, the step counter)."""
    return name in SKIPPED_NAMES or name.endswith(SKIPPED_SUFFIXES)


def query_kernel_name(family, scope, n):
    """The query kernel of `family`'s transformer layer `n` under `scope`.

    >>> query_kernel_name("electra", "generator", 3)
    'generator/encoder/layer_3/attention/self/query/kernel'
    """
    query = next(google for google, ours, _ in google_tables(family).encoder.layer
                 if ours == "transformer_layer_{n}/attention/query")
    return query.format(scope=scope, n=n) + "/kernel"
