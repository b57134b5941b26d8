"""Data: corpus reading, pretraining instances, masking, TFRecords and task readers.

The names below are imported on first use: importing one data module (or `kerasbert.data.demo`'s
file list) does not import every reader.
"""

from kerasbert.lazy_names import lazy_names

__getattr__, __dir__ = lazy_names(__name__, {
    "conll": "kerasbert.data.conll",
    "conll_dataset": "kerasbert.data.conll:conll_dataset",
    "corpus": "kerasbert.data.corpus",
    "decode_squad": "kerasbert.data.squad_decoding:decode_squad",
    "demo": "kerasbert.data.demo",
    "glue": "kerasbert.data.glue",
    "glue_dataset": "kerasbert.data.glue:glue_dataset",
    "glue_examples": "kerasbert.data.glue:glue_examples",
    "glue_tasks": "kerasbert.data.glue_tasks",
    "instance_batches": "kerasbert.data.pretraining:instance_batches",
    "instances": "kerasbert.data.instances",
    "length_buckets": "kerasbert.data.length_buckets",
    "MaskedLmMasker": "kerasbert.data.masking:MaskedLmMasker",
    "masking": "kerasbert.data.masking",
    "pretraining": "kerasbert.data.pretraining",
    "pretraining_dataset": "kerasbert.data.pretraining:pretraining_dataset",
    "PretrainingDataConfig": "kerasbert.data.pretraining:PretrainingDataConfig",
    "read_conll": "kerasbert.data.conll:read_conll",
    "read_pretraining_records": "kerasbert.data.tfrecords:read_pretraining_records",
    "read_squad": "kerasbert.data.squad:read_squad",
    "sentence_split": "kerasbert.data.sentence_split",
    "squad": "kerasbert.data.squad",
    "squad_dataset": "kerasbert.data.squad_features:squad_dataset",
    "squad_decoding": "kerasbert.data.squad_decoding",
    "squad_features": "kerasbert.data.squad_features",
    "squad_windows": "kerasbert.data.squad_features:squad_windows",
    "swag": "kerasbert.data.swag",
    "swag_dataset": "kerasbert.data.swag:swag_dataset",
    "swag_examples": "kerasbert.data.swag:swag_examples",
    "TaskDataError": "kerasbert.data.task_errors:TaskDataError",
    "tfrecords": "kerasbert.data.tfrecords",
    "token_windows": "kerasbert.data.token_windows",
    "write_squad_predictions": "kerasbert.data.squad_decoding:write_squad_predictions",
})

__all__ = ["MaskedLmMasker", "PretrainingDataConfig", "TaskDataError", "conll", "conll_dataset",
           "corpus", "decode_squad", "demo", "glue", "glue_dataset", "glue_examples", "glue_tasks",
           "instance_batches", "instances", "length_buckets", "masking", "pretraining", "pretraining_dataset",
           "read_conll", "read_pretraining_records", "read_squad", "sentence_split", "squad",
           "squad_dataset", "squad_decoding", "squad_features", "squad_windows", "swag",
           "swag_dataset", "swag_examples", "tfrecords", "token_windows", "write_squad_predictions"]
