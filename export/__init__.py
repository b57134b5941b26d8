"""Exporters (SavedModel, TFLite, ONNX) and their verification; installed as `kerasbert.export`.

    report = kerasbert.export.export("runs/mrpc/model.keras", "exports/mrpc",
                                     quantize=("none", "dynamic_int8"))
"""

from kerasbert.export.errors import ExportError
from kerasbert.export.exporter import FORMATS, REPORT_FILE, export
from kerasbert.export.tflite import QUANTIZATIONS

__all__ = ["ExportError", "FORMATS", "QUANTIZATIONS", "REPORT_FILE", "export"]
