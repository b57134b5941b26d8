"""kerasbert: Keras 3 / TensorFlow models, data and export tools for BERT, RoBERTa, ALBERT, ELECTRA
and DistilBERT."""

__version__ = "0.1.0"

from kerasbert import quiet_startup

if quiet_startup.is_console_script():
    quiet_startup.exit_on_interrupt_while_starting()
    quiet_startup.import_tensorflow_quietly()

from kerasbert.config import EncoderConfig
from kerasbert import layers, models, convert, tokenizers, zoo, export, data, training

__all__ = ["EncoderConfig", "convert", "export", "layers", "models", "tokenizers", "zoo"]
