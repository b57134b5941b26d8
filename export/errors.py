"""The one error type export raises for bad input and for artifacts that fail verification."""


class ExportError(ValueError):
    """An export that cannot be made or does not verify; the message names the artifact,
    the output or the input at fault.

    >>> str(ExportError("model.tflite: output 'logits' differs by 0.3"))
    "model.tflite: output 'logits' differs by 0.3"
    """
