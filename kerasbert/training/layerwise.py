"""Layer-wise learning-rate decay, ELECTRA's fine-tuning recipe: one rate factor per variable.

ELECTRA (google-research/electra, `model/optimization.py`) gives every
variable a depth: 0 for the embeddings (with the embedding projection),
`i + 1` for transformer layer `i`, and `L + 2` for the task head, `L` being the
number of layers; a variable at depth `d` learns at `decay ** (L + 2 - d)`
times the scheduled rate. The head learns at the full rate, the top layer at
`decay ** 2` (depth `L + 1` is used by nothing, as in ELECTRA's code) and the
embeddings at `decay ** (L + 2)`.

In a kerasbert model that reads:

- `embeddings/...` (token, position and segment tables, their LayerNorm and
  `embeddings/projection`): depth 0;
- `transformer_layer_{n}/...`: depth `a + 1`, where `a` is the *last*
  application of layer `n` in `config.layer_schedule`. ALBERT applies each
  shared layer several times; taking its top-most application gives a shared
  layer the rate of the highest layer it stands in for (ALBERT-base's single
  layer learns at `decay ** 2`, like BERT-base's top layer) instead of the
  embeddings' tiny rate;
- everything else, i.e. the pooler (it only reads the last layer's [CLS]
  vector and feeds the head, so it is treated as part of the head) and the
  task heads (`classifier_dense`, `classifier`, `qa_outputs`): depth `L + 2`,
  factor 1. ELECTRA's code has no pooler; it raises for a variable it cannot
  place, where unplaced variables here keep the full rate.

`L` is the number of layer applications, `len(config.layer_schedule)`: that is
`config.num_layers`, except for an ALBERT whose groups hold several layers
(`inner_group_num > 1`), where each of the `num_layers` group applications runs
`inner_group_num` layers.

Use with `kerasbert.training.create_optimizer(...,
lr_multipliers=layerwise_lr_multipliers(model, decay))`.
"""

import numbers

from kerasbert.models.encoder import Encoder


def _check_decay(decay):
    if isinstance(decay, bool) or not isinstance(decay, numbers.Real) or not 0 < decay <= 1:
        raise ValueError(f"The layer-wise learning-rate decay must be a number in (0, 1], "
                         f"got {decay!r}")
    return float(decay)


def _encoders_in(layer):
    """The distinct `Encoder`s that `layer` is or holds, searched through all tracked sublayers
    (a model built on an encoder's layers holds it as an attribute, not in `.layers`)."""
    if isinstance(layer, Encoder):
        return [layer]
    found = []
    for sublayer in layer._flatten_layers(include_self=False, recursive=True):
        if isinstance(sublayer, Encoder) and all(sublayer is not known for known in found):
            found.append(sublayer)
    return found


def _the_encoder(model):
    encoders = _encoders_in(model)
    if not encoders:
        raise TypeError(f"Layer-wise learning rates need a kerasbert Encoder or a model "
                        f"holding one; {type(model).__name__} {model.name!r} holds none")
    if len(encoders) > 1:
        names = ", ".join(sorted(repr(encoder.name) for encoder in encoders))
        raise ValueError(f"Layer-wise learning rates need a model with one encoder; "
                         f"{model.name!r} holds {len(encoders)} ({names})")
    return encoders[0]


def layerwise_lr_multipliers(model, decay):
    """`{variable.path: factor}` for every trainable variable of `model`, by ELECTRA's rule.

    A variable at depth `d` gets `decay ** (L + 2 - d)`: depth 0 for the
    embeddings (projection included), the last application + 1 for a
    transformer layer (ALBERT's shared layers: their top-most application),
    `L + 2` (factor 1) for the pooler, the task head and anything else
    outside the encoder; see the module docstring.

    Args:
        model: a kerasbert `Encoder` or a model holding exactly one (a task
            model, a BERT/ALBERT/RoBERTa pretraining model).
        decay: the factor between neighbouring depths, in (0, 1]; ELECTRA
            uses 0.8 for its base model and 0.9 for large. 1 gives every
            variable factor 1.

    Returns:
        A dict from `variable.path` to a float factor in (0, 1], ready for
        `create_optimizer(..., lr_multipliers=...)`.

    Raises:
        ValueError: `decay` outside (0, 1], or a model with several encoders
            (an ELECTRA generator + discriminator).
        TypeError: a model without a kerasbert encoder.

    Example:
    >>> from kerasbert import EncoderConfig
    >>> from kerasbert.models import build_encoder
    >>> encoder = build_encoder(EncoderConfig(family="bert", vocab_size=100, hidden_size=32,
    ...                                       num_layers=2, num_heads=2, intermediate_size=64))
    >>> factors = layerwise_lr_multipliers(encoder, 0.5)
    >>> [factors[path] for path in ("embeddings/layer_norm/gamma",
    ...     "transformer_layer_0/output/kernel", "transformer_layer_1/output/kernel",
    ...     "pooler/dense/kernel")]
    [0.0625, 0.125, 0.25, 1.0]
    >>> layerwise_lr_multipliers(encoder, 1.5)
    Traceback (most recent call last):
    ...
    ValueError: The layer-wise learning-rate decay must be a number in (0, 1], got 1.5
    """
    decay = _check_decay(decay)
    encoder = _the_encoder(model)
    schedule = encoder.config.layer_schedule
    head_depth = len(schedule) + 2
    last_application = {layer: step for step, layer in enumerate(schedule)}
    depths = {id(variable): 0 for variable in encoder.embeddings.trainable_variables}
    for index, layer in enumerate(encoder.transformer_layers):
        depths.update((id(variable), last_application[index] + 1)
                      for variable in layer.trainable_variables)
    return {variable.path: decay ** (head_depth - depths.get(id(variable), head_depth))
            for variable in model.trainable_variables}
