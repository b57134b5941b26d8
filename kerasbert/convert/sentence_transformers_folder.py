"""Read a sentence-transformers model folder (`modules.json`) into the settings of a
`TextEmbeddingModel`: where its Transformer module's checkpoint is, and its pooling, dense
layers (with weights), normalization, prompts, similarity function and maximum length.
"""

import dataclasses

from kerasbert import file_system
from kerasbert.convert.checkpoint_files import read_state_dict
from kerasbert.json_files import read_json_file
from kerasbert.layers.sentence_pooling import POOLING_MODES
from kerasbert.tokenizers.sentence_transformers_modules import (
    MODULES_FILE, SentenceTransformersFolderError, module_entries, transformer_settings)

# The boolean pooling keys of older folders, in the order sentence-transformers reads them.
LEGACY_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                       "pooling_mode_mean_tokens": "mean",
                       "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                       "pooling_mode_weightedmean_tokens": "weightedmean",
                       "pooling_mode_lasttoken": "lasttoken"}
# torch.nn activation modules of a `Dense` module -> Keras activation names.
DENSE_ACTIVATIONS = {"Identity": "linear", "Tanh": "tanh", "ReLU": "relu", "GELU": "gelu",
                     "Sigmoid": "sigmoid", "SiLU": "silu"}
# Modules that do nothing at inference.
_INFERENCE_NO_OPS = ("Dropout",)


@dataclasses.dataclass(frozen=True)
class SentenceTransformersModel:
    """What a sentence-transformers folder holds, as `TextEmbeddingModel` settings.

    `transformer_dir`: the Hugging Face checkpoint folder of its Transformer
    module; `dense_weights`: per dense layer `(kernel [in, out], bias or None)`.

    >>> minilm = SentenceTransformersModel(
    ...     transformer_dir="/models/all-MiniLM-L6-v2", pooling=("mean",), embedding_dimension=384,
    ...     dense_layers=(), dense_weights=(), normalize=True, similarity="cosine", prompts={},
    ...     max_seq_length=256)
    >>> minilm.pooling, minilm.normalize
    (('mean',), True)
    """

    transformer_dir: str
    pooling: tuple
    embedding_dimension: int
    dense_layers: tuple
    dense_weights: tuple
    normalize: bool
    similarity: str
    prompts: dict
    max_seq_length: int | None
    default_prompt_name: str | None = None


def read_sentence_transformers_folder(directory):
    """The `SentenceTransformersModel` of the folder `directory` (local or a URL).

    The modules must be a Transformer, then Pooling, then any number of Dense
    (and Dropout) modules, then optionally Normalize; anything else raises
    `SentenceTransformersFolderError` naming the module and `modules.json`.
    """
    modules_path = file_system.join(directory, MODULES_FILE)
    entries = module_entries(directory)
    for index, entry in enumerate(entries):
        if entry.kind not in ("Transformer", "Pooling", "Dense", "Normalize") + _INFERENCE_NO_OPS:
            raise SentenceTransformersFolderError(
                f"{modules_path}: module {index} is a {entry.type}, which kerasbert does not "
                "import (it reads Transformer, Pooling, Dense, Dropout and Normalize modules)")
    kinds = [entry.kind for entry in entries]
    paths = [entry.folder for entry in entries]
    order = [kind for kind in kinds if kind not in _INFERENCE_NO_OPS]
    expected_order = (order[:2] == ["Transformer", "Pooling"] and
                      all(kind == "Dense" for kind in order[2:-1]) and
                      (len(order) == 2 or order[-1] in ("Dense", "Normalize")))
    if not expected_order:
        raise SentenceTransformersFolderError(
            f"{modules_path}: modules {kinds} are not a Transformer, Pooling, optional Dense "
            "layers and an optional Normalize, the models kerasbert imports")
    transformer_dir, transformer = transformer_settings(directory)
    pooling, dimension = _pooling(paths[kinds.index("Pooling")])
    dense = [_dense(path) for path, kind in zip(paths, kinds) if kind == "Dense"]
    usage_path = file_system.join(directory, "config_sentence_transformers.json")
    usage = _optional_json(usage_path)
    prompts = dict(usage.get("prompts") or {})
    default_prompt_name = usage.get("default_prompt_name")
    if default_prompt_name is not None and default_prompt_name not in prompts:
        raise SentenceTransformersFolderError(
            f"{usage_path}: default_prompt_name {default_prompt_name!r} is not one of its "
            f"prompts {sorted(prompts)}")
    max_seq_length = transformer.get("max_seq_length")
    if max_seq_length is None:
        tokenizer_settings = _optional_json(file_system.join(transformer_dir,
                                                             "tokenizer_config.json"))
        max_seq_length = tokenizer_settings.get("model_max_length")
    return SentenceTransformersModel(
        transformer_dir=transformer_dir, pooling=pooling, embedding_dimension=dimension,
        dense_layers=tuple(settings for settings, _ in dense),
        dense_weights=tuple(weights for _, weights in dense),
        normalize=order[-1] == "Normalize",
        similarity=usage.get("similarity_fn_name") or "cosine",
        prompts=prompts, default_prompt_name=default_prompt_name,
        max_seq_length=max_seq_length if isinstance(max_seq_length, int) else None)


def _optional_json(path):
    return read_json_file(path, "a sentence-transformers settings file") if file_system.exists(
        path) else {}


def _pooling(folder):
    """The pooling modes of a Pooling module folder and the token vector size it expects."""
    path = file_system.join(folder, "config.json")
    settings = read_json_file(path, "a sentence-transformers Pooling config")
    if settings.get("include_prompt", True) is False:
        raise SentenceTransformersFolderError(
            f"{path}: include_prompt is false (prompt tokens left out of the pooling); "
            "kerasbert pools every token")
    mode = settings.get("pooling_mode")
    if mode is None:
        mode = [name for key, name in LEGACY_POOLING_KEYS.items() if settings.get(key)] or "mean"
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    if not modes or any(name not in POOLING_MODES for name in modes):
        raise SentenceTransformersFolderError(
            f"{path}: pooling mode {mode!r} is not one of {POOLING_MODES}")
    dimension = settings.get("embedding_dimension", settings.get("word_embedding_dimension"))
    if not isinstance(dimension, int):
        raise SentenceTransformersFolderError(f"{path}: no integer embedding_dimension")
    return modes, dimension


def _dense(folder):
    """A Dense module folder's `({"units", "activation", "use_bias"}, (kernel, bias))`."""
    path = file_system.join(folder, "config.json")
    settings = read_json_file(path, "a sentence-transformers Dense config")
    activation_path = settings.get("activation_function") or "torch.nn.modules.activation.Tanh"
    activation = DENSE_ACTIVATIONS.get(activation_path.rsplit(".", 1)[-1])
    if activation is None or not activation_path.startswith("torch."):
        raise SentenceTransformersFolderError(
            f"{path}: activation_function {activation_path!r} is not one of the torch.nn "
            f"modules {sorted(DENSE_ACTIVATIONS)}")
    tensors = read_state_dict(folder)
    weight, bias = tensors.get("linear.weight"), tensors.get("linear.bias")
    use_bias = settings.get("bias", True)
    expected = (settings["out_features"], settings["in_features"])
    if weight is None or tuple(weight.shape) != expected or (bias is None) == bool(use_bias):
        raise SentenceTransformersFolderError(
            f"{folder}: expected linear.weight {expected}"
            f"{' and linear.bias' if use_bias else ' and no bias'}, found "
            f"{ {name: tuple(value.shape) for name, value in tensors.items()} }")
    return ({"units": settings["out_features"], "activation": activation,
             "use_bias": bool(use_bias)}, (weight.T, bias))
