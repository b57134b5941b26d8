"""Exporters (SavedModel, TFLite, ONNX) and their verification; installed as `kerasbert.export`.

    report = kerasbert.export.export("runs/mrpc/model.keras", "exports/mrpc",
                                     quantize=("none", "dynamic_int8"))

The names below are imported on first use (PEP 562): importing `kerasbert.export.errors` or
another light module of the package does not load onnx, tf2onnx or the TFLite converter.
"""

import importlib

# name: (module, its name there)
_EXPORTS = {
    "ExportError": ("kerasbert.export.errors", "ExportError"),
    "FORMATS": ("kerasbert.choices", "EXPORT_FORMATS"),
    "QUANTIZATIONS": ("kerasbert.choices", "QUANTIZATIONS"),
    "REPORT_FILE": ("kerasbert.export.exporter", "REPORT_FILE"),
    "export": ("kerasbert.export.exporter", "export"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kerasbert.export' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    return getattr(importlib.import_module(module), attribute)


def __dir__():
    return sorted({*globals(), *__all__})
