"""Read the tensors of a Hugging Face checkpoint into numpy arrays.

Supported: `model.safetensors`, sharded safetensors (`model.safetensors.index.json`),
`pytorch_model.bin` and its sharded form. PyTorch files are read with
`torch.load(weights_only=True)`, which refuses to unpickle anything but tensors;
torch is needed only for them. The folder may be local or a TensorFlow file-system URL
(`gs://...`, see `kerasbert.file_system`): each weights file is then read from a local copy.
The shards an index names must be files in the checkpoint's folder (or below it).
"""

import json
import os
import posixpath

import numpy as np

from kerasbert import file_system

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH = "pytorch_model.bin"
PYTORCH_INDEX = "pytorch_model.bin.index.json"


class CheckpointFileError(ValueError):
    """A checkpoint directory or file that cannot be read."""


def read_state_dict(directory):
    """All tensors of the checkpoint in `directory`, as `{name: np.ndarray}`."""
    for index_name, reader in ((SAFETENSORS_INDEX, _read_safetensors), (PYTORCH_INDEX, _read_pytorch)):
        index_path = file_system.join(directory, index_name)
        if file_system.exists(index_path):
            return _read_sharded(directory, index_path, reader)
    for file_name, reader in ((SAFETENSORS, _read_safetensors), (PYTORCH, _read_pytorch)):
        path = file_system.join(directory, file_name)
        if file_system.exists(path):
            return _read_local_copy(path, reader)
    present = (file_system.listdir(directory) if file_system.isdir(directory)
               else "directory does not exist")
    raise CheckpointFileError(
        f"No weights in {directory!r}: expected one of {SAFETENSORS}, {SAFETENSORS_INDEX}, "
        f"{PYTORCH} or {PYTORCH_INDEX}; found {present}")


def _read_sharded(directory, index_path, reader):
    try:
        with file_system.open_file(index_path, encoding="utf-8") as file:
            weight_map = json.load(file)["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise CheckpointFileError(f"{index_path}: not a valid checkpoint index ({error})") from None
    tensors = {}
    for shard in shards:
        shard_path = _shard_path(directory, index_path, shard)
        if not file_system.exists(shard_path):
            raise CheckpointFileError(f"{index_path} names shard {shard!r}, which is missing")
        tensors.update(_read_local_copy(shard_path, reader))
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise CheckpointFileError(f"{index_path} lists tensors that no shard holds: {missing}")
    return tensors


def _shard_path(directory, index_path, shard):
    """The path of `shard` (a `weight_map` value of the index), which must name a file in
    `directory`: a relative name that stays inside it."""
    if not isinstance(shard, str) or not shard:
        raise CheckpointFileError(f"{index_path}: weight_map names shard {shard!r}, which is not "
                                  "a file name")
    path = file_system.join(directory, shard)
    if (os.path.isabs(shard) or posixpath.isabs(shard) or not file_system.is_local(shard)
            or not file_system.is_within(path, directory)
            or file_system.absolute(path) == file_system.absolute(directory)):
        raise CheckpointFileError(f"{index_path}: weight_map names shard {shard!r}, which is not "
                                  f"inside the checkpoint folder {directory}; shards must be "
                                  "files in it")
    return path


def _read_local_copy(path, reader):
    """`reader` (safetensors and torch read local files only) on `path` or its local copy."""
    if file_system.is_local(path):
        return reader(path)
    with file_system.local_copy(path) as local:
        try:
            return reader(local)
        except CheckpointFileError as error:  # named as the user named it
            raise CheckpointFileError(str(error).replace(local, path)) from None


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
