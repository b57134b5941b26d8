"""Start a model from earlier weights: a Hugging Face encoder or a kerasbert checkpoint."""

import tensorflow as tf

from kerasbert import file_system
from kerasbert.convert.from_hf import from_hf
from kerasbert.op_errors import op_error_message
from kerasbert.training.loop import model_variables


def load_initial_weights(model, encoder, path):
    """Start `model` from `path`: `encoder`'s weights from a Hugging Face directory (its config
    must be the encoder's, pooler aside), or every weight of `model` from a kerasbert checkpoint
    (`model_dir/ckpt-N`). Returns what was initialised: `"Encoder"` or `"Model"`."""
    if file_system.isfile(file_system.join(path, "config.json")):
        source = from_hf(path, encoder_only=True)
        if source.config != encoder.config.replace(use_pooler=source.config.use_pooler):
            raise ValueError(f"--init_checkpoint {path}: its config {source.config} differs "
                             f"from the model's {encoder.config}")
        targets = {weight.path: weight for weight in encoder.weights}
        for weight in source.weights:
            targets[weight.path].assign(weight)
        return "Encoder"
    try:
        tf.train.Checkpoint(model_variables=model_variables(model)).restore(path).expect_partial()
    except tf.errors.OpError as error:  # TensorFlow's message names no file
        raise ValueError(f"--init_checkpoint {path}: cannot be read as a checkpoint "
                         f"({op_error_message(error)})") from None
    return "Model"
