"""Data: corpus reading, pretraining instances, masking, TFRecords and task readers."""

from kerasbert.data import corpus, demo, instances, masking, pretraining, sentence_split, tfrecords
from kerasbert.data.masking import MaskedLmMasker
from kerasbert.data.pretraining import instance_batches, pretraining_dataset
from kerasbert.data.tfrecords import read_pretraining_records

__all__ = ["MaskedLmMasker", "corpus", "demo", "instance_batches", "instances", "masking",
           "pretraining", "pretraining_dataset", "read_pretraining_records", "sentence_split",
           "tfrecords"]
