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
