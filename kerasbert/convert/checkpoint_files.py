"""Read the tensors of a local Hugging Face checkpoint into numpy arrays.

Supported: `model.safetensors`, sharded safetensors (`model.safetensors.index.json`),
`pytorch_model.bin` and its sharded form. PyTorch files are read with
`torch.load(weights_only=True)`, which refuses to unpickle anything but tensors;
torch is needed only for them.
"""

import json
import os

import numpy as np

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH = "pytorch_model.bin"
PYTORCH_INDEX = "pytorch_model.bin.index.json"


class CheckpointFileError(ValueError):
    """A checkpoint directory or file that cannot be read."""


def read_state_dict(directory):
    """All tensors of the checkpoint in `directory`, as `{name: np.ndarray}`."""
    for index_name, reader in ((SAFETENSORS_INDEX, _read_safetensors), (PYTORCH_INDEX, _read_pytorch)):
        index_path = os.path.join(directory, index_name)
        if os.path.exists(index_path):
            return _read_sharded(directory, index_path, reader)
    for file_name, reader in ((SAFETENSORS, _read_safetensors), (PYTORCH, _read_pytorch)):
        path = os.path.join(directory, file_name)
        if os.path.exists(path):
            return reader(path)
    present = sorted(os.listdir(directory)) if os.path.isdir(directory) else "directory does not exist"
    raise CheckpointFileError(
        f"No weights in {directory!r}: expected one of {SAFETENSORS}, {SAFETENSORS_INDEX}, "
        f"{PYTORCH} or {PYTORCH_INDEX}; found {present}")


def _read_sharded(directory, index_path, reader):
    try:
        with open(index_path, encoding="utf-8") as file:
            weight_map = json.load(file)["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise CheckpointFileError(f"{index_path}: not a valid checkpoint index ({error})") from None
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = os.path.join(directory, shard)
        if not os.path.exists(shard_path):
            raise CheckpointFileError(f"{index_path} names shard {shard!r}, which is missing")
        tensors.update(reader(shard_path))
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise CheckpointFileError(f"{index_path} lists tensors that no shard holds: {missing}")
    return tensors


def _read_safetensors(path):
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        return load_file(path)
    except (SafetensorError, OSError) as error:
        raise CheckpointFileError(f"{path}: not a readable safetensors file ({error})") from None
    except TypeError:
        # bfloat16 has no numpy dtype; such files go through torch.
        return _read_safetensors_with_torch(path)


def _read_safetensors_with_torch(path):
    torch = _import_torch(path)
    from safetensors.torch import load_file

    return {name: tensor.float().numpy() for name, tensor in load_file(path).items()}


def _read_pytorch(path):
    torch = _import_torch(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for bad or unsafe pickles
        raise CheckpointFileError(
            f"{path}: could not be read with torch.load(weights_only=True) ({error})") from None
    if not isinstance(state, dict):
        raise CheckpointFileError(f"{path}: holds a {type(state).__name__}, not a state dict")
    arrays = {}
    for name, tensor in state.items():
        if not isinstance(tensor, torch.Tensor):
            raise CheckpointFileError(f"{path}: entry {name!r} is a {type(tensor).__name__}, not a tensor")
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        arrays[name] = np.asarray(tensor.numpy())
    return arrays


def _import_torch(path):
    try:
        import torch
    except ImportError:
        raise CheckpointFileError(
            f"{path} needs PyTorch to read (pip install torch), or convert the checkpoint to "
            "safetensors") from None
    return torch
