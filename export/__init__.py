"""Exporters (SavedModel, TFLite, ONNX) and their verification; installed as `kerasbert.export`.

    report = kerasbert.export.export("runs/mrpc/model.keras", "exports/mrpc",
                                     quantize=("none", "dynamic_int8"))

The names below are imported on first use (PEP 562): importing `kerasbert.export.errors` or
another light module of the package does not load onnx, tf2onnx or the TFLite converter.
"""

from kerasbert.lazy_names import lazy_names

__getattr__, __dir__ = lazy_names(__name__, {
    "ExportError": "kerasbert.export.errors:ExportError",
    "FORMATS": "kerasbert.choices:EXPORT_FORMATS",
    "QUANTIZATIONS": "kerasbert.choices:QUANTIZATIONS",
    "REPORT_FILE": "kerasbert.export.exporter:REPORT_FILE",
    "export": "kerasbert.export.exporter:export",
})

__all__ = ["ExportError", "FORMATS", "QUANTIZATIONS", "REPORT_FILE", "export"]
