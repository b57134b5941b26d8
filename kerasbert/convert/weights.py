"""Fill a model's variables from a checkpoint's tensors, all or nothing."""

import numpy as np


class WeightMismatchError(ValueError):
    """Checkpoint tensors and model variables do not correspond one to one.

    The message lists every missing, unexpected and wrongly shaped name.
    """


def variables_by_path(model):
    """`{variable.path: variable}` for every weight of `model`."""
    return {variable.path: variable for variable in model.weights}


def assign_weights(model, state_dict, name_map, ignored=(), source="checkpoint"):
    """Copy `state_dict` tensors into `model`'s variables as `name_map` pairs them.

    `name_map` is `{source_name: (variable_path, transpose)}`. Every source
    tensor must map to a variable (except the names in `ignored`), every
    variable must be filled, and every shape must agree; otherwise nothing is
    assigned and `WeightMismatchError` lists all the problems.
    """
    variables = variables_by_path(model)
    unexpected = sorted(name for name in state_dict if name not in name_map and name not in ignored)
    missing_in_checkpoint = sorted(name for name in name_map if name not in state_dict)
    targets = {path for path, _ in name_map.values()}
    missing_in_model = sorted(path for path in targets if path not in variables)
    unfilled = sorted(path for path in variables if path not in targets)

    updates, wrong_shapes = [], []
    for name, (path, transpose) in name_map.items():
        if name not in state_dict or path not in variables:
            continue
        value = np.asarray(state_dict[name])
        if transpose:
            value = value.T
        variable = variables[path]
        if tuple(value.shape) != tuple(variable.shape):
            wrong_shapes.append(f"{name} {tuple(state_dict[name].shape)} -> {path} "
                                f"{tuple(variable.shape)}")
            continue
        updates.append((variable, value))

    problems = []
    if missing_in_checkpoint:
        problems.append(f"missing from the {source}: {missing_in_checkpoint}")
    if unexpected:
        problems.append(f"unexpected in the {source} (no variable takes them): {unexpected}")
    if wrong_shapes:
        problems.append(f"wrong shapes: {wrong_shapes}")
    if missing_in_model:
        problems.append(f"variables named by the table but absent from the model: {missing_in_model}")
    if unfilled:
        problems.append(f"model variables that nothing fills: {unfilled}")
    if problems:
        raise WeightMismatchError(f"Cannot load {source} into {model.name}:\n  " + "\n  ".join(problems))
    for variable, value in updates:
        variable.assign(value.astype(variable.dtype))


def load_initial_weights(model, encoder, path):
    """Start `model` from `path`: `encoder`'s weights from a Hugging Face directory (its config
    must be the encoder's, pooler aside), or every weight of `model` from a kerasbert checkpoint
    (`model_dir/ckpt-N`). Returns what was initialised: `"Encoder"` or `"Model"`."""
    import tensorflow as tf

    from kerasbert import file_system
    from kerasbert.convert.from_hf import from_hf
    from kerasbert.op_errors import op_error_message
    from kerasbert.training.loop import model_variables

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
