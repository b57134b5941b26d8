"""The serving function every artifact is made from: the model's int32 inputs in, its outputs out.

Inputs keep the model's own names (`token_ids`, `segment_ids`, `padding_mask`, and
`masked_lm_positions` for pretraining models) with every axis unknown, so the batch and the
sequence length (and a multiple-choice model's number of choices) stay free in every format.
Outputs keep the model's names and come out as float32 whatever the dtype policy.
"""

import tensorflow as tf


def input_specs(model):
    """`{name: tf.TensorSpec}` of `model`'s inputs: int32, every axis `None`.

    >>> import kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> {name: spec.shape.as_list() for name, spec in input_specs(encoder).items()}
    {'token_ids': [None, None], 'segment_ids': [None, None], 'padding_mask': [None, None]}
    """
    inputs = model.input
    if not isinstance(inputs, dict):
        raise TypeError(f"{model.name}: expected a model with named (dict) inputs, "
                        f"got {type(inputs).__name__}")
    specs = {}
    for name, tensor in inputs.items():
        if tensor.dtype != "int32":
            raise TypeError(f"{model.name}: input {name!r} is {tensor.dtype}; export takes "
                            "models whose inputs are all int32")
        specs[name] = tf.TensorSpec([None] * len(tensor.shape), tf.int32, name=name)
    return specs


def serving_function(model):
    """A `tf.function` with a fixed input signature that runs `model` for inference.

    It takes one dict of int32 tensors (`input_specs(model)`) and returns the
    model's output dict with every output cast to float32.

    >>> import numpy as np, kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> serve = serving_function(encoder)
    >>> ids = np.ones((2, 5), "int32")
    >>> outputs = serve({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": ids})
    >>> sorted(outputs), tuple(outputs["sequence_output"].shape)
    (['pooled_output', 'sequence_output'], (2, 5, 128))
    """
    specs = input_specs(model)

    @tf.function(input_signature=[specs], autograph=False)
    def serve(inputs):
        outputs = model(inputs, training=False)
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}

    return serve
