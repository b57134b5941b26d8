"""kerasbert: Keras 3 / TensorFlow models, data and export tools for BERT, RoBERTa, ALBERT, ELECTRA
and DistilBERT.

`import kerasbert` loads neither TensorFlow nor the export stack (onnx, tf2onnx, ONNX Runtime,
LiteRT) nor matplotlib: the subpackages and `EncoderConfig` are imported when first used
(`kerasbert.zoo.list_presets()`, `kerasbert.models.build_encoder(...)`). Importing
`kerasbert.models` registers kerasbert's layers and models with Keras, so `.keras` files of them
reload with no custom objects.
"""

import importlib

__version__ = "0.1.0"

from kerasbert import quiet_startup

if quiet_startup.is_console_script():
    quiet_startup.exit_on_interrupt_while_starting()

_SUBPACKAGES = ("convert", "data", "export", "layers", "models", "tokenizers", "training", "zoo")

__all__ = ["EncoderConfig", *_SUBPACKAGES]


def __getattr__(name):
    """`EncoderConfig` and the subpackages, imported on first use (PEP 562)."""
    if name == "EncoderConfig":
        from kerasbert.config import EncoderConfig
        return EncoderConfig
    if name in _SUBPACKAGES:
        return importlib.import_module(f"kerasbert.{name}")
    raise AttributeError(f"module 'kerasbert' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
