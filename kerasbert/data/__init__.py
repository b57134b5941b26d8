"""Data: corpus reading, pretraining instances, masking, TFRecords and task readers."""
