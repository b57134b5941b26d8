"""A `TextEmbeddingModel`'s sentence-transformers module files: `modules.json` and the
Pooling, Dense and Normalize folders around the Hugging Face checkpoint of its encoder."""

import json

import numpy as np
import safetensors.numpy

from kerasbert.convert.sentence_transformers_folder import DENSE_ACTIVATIONS

# Keras activation names -> the torch.nn module a sentence-transformers Dense module names.
_TORCH_ACTIVATIONS = {"linear": "torch.nn.modules.linear.Identity"} | {
    keras_name: f"torch.nn.modules.activation.{torch_name}"
    for torch_name, keras_name in DENSE_ACTIVATIONS.items() if keras_name != "linear"}
_MODULE_TYPE = "sentence_transformers.models.{}"  # the names every version since 2 imports


def sentence_transformers_files(model):
    """`{path relative to the folder: str or bytes}` of `model`'s sentence-transformers
    modules; its encoder's checkpoint and tokenizer go in the folder itself (path "").

    >>> import kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1, vocab_size=100)
    >>> model = kerasbert.models.build_task_model(encoder, "text_embedding", normalize=True)
    >>> sorted(sentence_transformers_files(model))  # doctest: +NORMALIZE_WHITESPACE
    ['1_Pooling/config.json', '2_Normalize/config.json', 'config_sentence_transformers.json',
     'modules.json', 'sentence_bert_config.json']
    """
    modules = [("Transformer", "")]
    files = {"sentence_bert_config.json": _json({"max_seq_length": model.max_seq_length or
                                                  model.encoder.config.max_sequence_length,
                                                  "do_lower_case": False})}
    folder = f"{len(modules)}_Pooling"
    modules.append(("Pooling", folder))
    files[f"{folder}/config.json"] = _json({
        "embedding_dimension": model.encoder.config.hidden_size,
        "pooling_mode": model.pooling if isinstance(model.pooling, str) else list(model.pooling),
        "include_prompt": True})
    inputs = model.encoder.config.hidden_size * (
        1 if isinstance(model.pooling, str) else len(model.pooling))
    for index, settings in enumerate(model.dense_layers):
        folder = f"{len(modules)}_Dense"
        modules.append(("Dense", folder))
        layer = model.get_layer(f"dense_{index}")
        files[f"{folder}/config.json"] = _json({
            "in_features": inputs, "out_features": settings["units"],
            "bias": settings["use_bias"],
            "activation_function": _TORCH_ACTIVATIONS[settings["activation"]]})
        tensors = {"linear.weight": np.ascontiguousarray(
            np.asarray(layer.kernel.numpy(), "float32").T)}
        if settings["use_bias"]:
            tensors["linear.bias"] = np.asarray(layer.bias.numpy(), "float32")
        files[f"{folder}/model.safetensors"] = safetensors.numpy.save(
            tensors, metadata={"format": "pt"})
        inputs = settings["units"]
    if model.normalize:
        folder = f"{len(modules)}_Normalize"
        modules.append(("Normalize", folder))
        files[f"{folder}/config.json"] = _json({})
    files["modules.json"] = _json([
        {"idx": index, "name": str(index), "path": path, "type": _MODULE_TYPE.format(kind)}
        for index, (kind, path) in enumerate(modules)])
    files["config_sentence_transformers.json"] = _json({
        "model_type": "SentenceTransformer", "prompts": dict(model.prompts),
        "default_prompt_name": model.default_prompt_name, "similarity_fn_name": model.similarity})
    return files


def _json(value):
    return json.dumps(value, indent=2, sort_keys=True) + "\n"
