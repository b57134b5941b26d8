"""Data: corpus reading, pretraining instances, masking, TFRecords and task readers."""

from kerasbert.data import (conll, corpus, demo, glue, glue_tasks, instances, masking, pretraining,
                            sentence_split, squad, squad_decoding, swag, tfrecords, token_windows)
from kerasbert.data.conll import conll_dataset, read_conll
from kerasbert.data.glue import glue_dataset, glue_examples
from kerasbert.data.masking import MaskedLmMasker
from kerasbert.data.pretraining import instance_batches, pretraining_dataset
from kerasbert.data.squad import read_squad
from kerasbert.data.squad_decoding import decode_squad, write_squad_predictions
from kerasbert.data.squad_features import squad_dataset, squad_features
from kerasbert.data.swag import swag_dataset, swag_examples
from kerasbert.data.task_errors import TaskDataError
from kerasbert.data.tfrecords import read_pretraining_records

__all__ = ["MaskedLmMasker", "TaskDataError", "conll", "conll_dataset", "corpus", "decode_squad",
           "demo", "glue", "glue_dataset", "glue_examples", "glue_tasks", "instance_batches",
           "instances", "masking", "pretraining", "pretraining_dataset", "read_conll",
           "read_pretraining_records", "read_squad", "sentence_split", "squad", "squad_dataset",
           "squad_decoding", "squad_features", "swag", "swag_dataset", "swag_examples",
           "tfrecords", "token_windows", "write_squad_predictions"]
