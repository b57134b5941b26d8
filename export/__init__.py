"""Exporters (SavedModel, TFLite, ONNX) and their verification; installed as `kerasbert.export`."""
