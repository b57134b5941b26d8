"""kerasbert: Keras 3 / TensorFlow models, data and export tools for BERT, RoBERTa, ALBERT, ELECTRA
and DistilBERT.

`import kerasbert` loads neither TensorFlow nor the export stack (onnx, tf2onnx, ONNX Runtime,
LiteRT) nor matplotlib: the subpackages and `EncoderConfig` are imported when first used
(`kerasbert.zoo.list_presets()`, `kerasbert.models.build_encoder(...)`). Importing
`kerasbert.models` registers kerasbert's layers and models with Keras, so `.keras` files of them
reload with no custom objects.
"""

__version__ = "0.1.0"

from kerasbert import quiet_startup
from kerasbert.lazy_names import lazy_names

if quiet_startup.is_console_script():
    quiet_startup.exit_on_interrupt_while_starting()

_SUBPACKAGES = ("convert", "data", "export", "layers", "models", "tokenizers", "training", "zoo")

__getattr__, __dir__ = lazy_names(__name__, {
    "EncoderConfig": "kerasbert.config:EncoderConfig",
    **{name: f"kerasbert.{name}" for name in _SUBPACKAGES}})

__all__ = ["EncoderConfig", *_SUBPACKAGES]
