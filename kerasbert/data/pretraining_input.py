"""Where the batches of a pretraining run come from: text files (instances made and masked on the
fly by `pretraining_dataset`) or pretraining TFRecords, read here or by the workers of a tf.data
service (`kerasbert.data.service`). `kerasbert-pretrain` and `kerasbert-distill` train on them.
"""

import dataclasses
from typing import Optional

import tensorflow as tf

from kerasbert import file_system
from kerasbert.data.pretraining import PretrainingDataConfig, pretraining_dataset
from kerasbert.data.service import (DISTRIBUTED_EPOCH, PARALLEL_EPOCHS, distribute, freshly_seeded,
                                    service_address)
from kerasbert.data.tfrecords import read_pretraining_records


@dataclasses.dataclass(frozen=True)
class PretrainingInput:
    """The batches of a pretraining run: exactly one of `text_files` and `input_files` (lists of
    files or globs), made as `data` says (a `PretrainingDataConfig`; for TFRecords only its
    `max_seq_length`, `max_predictions_per_seq` and `batch_size` count), made by the workers of
    the tf.data service at `tf_data_service` (`grpc://HOST:PORT`) or here (None). Local paths are
    made absolute (the service's workers read the files at the same paths, e.g. on a shared
    file system; URLs such as gs://... are kept). Checked on creation.

    >>> PretrainingInput(text_files=["corpus/*.txt"]).saves_data_position
    True
    >>> PretrainingInput()
    Traceback (most recent call last):
    ...
    ValueError: Give exactly one of --input_files and --text_files
    """

    text_files: Optional[list] = None
    input_files: Optional[list] = None
    data: PretrainingDataConfig = PretrainingDataConfig()
    tf_data_service: Optional[str] = None

    def __post_init__(self):
        if (self.input_files is None) == (self.text_files is None):
            raise ValueError("Give exactly one of --input_files and --text_files")
        if self.tf_data_service is not None:
            service_address(self.tf_data_service)

    @property
    def saves_data_position(self):
        """Whether the training loop can checkpoint the position in the data (not when the
        tf.data service makes the batches)."""
        return self.tf_data_service is None

    def batches(self, tokenizer, context, seed):
        """This worker's batches, repeated forever (its share of the global batch), from the text
        files (tokenized with `tokenizer`) or the TFRecords; made by the tf.data service's workers
        with `tf_data_service` (from text, each from its own seed)."""
        if self.tf_data_service is None:
            return self._batches(tokenizer, context, seed)
        # The whole corpus, not this trainer's share: the service divides the work.
        whole = tf.distribute.InputContext(num_replicas_in_sync=context.num_replicas_in_sync)
        if self.text_files is None:
            return distribute(self._batches(tokenizer, whole, seed), self.tf_data_service,
                              DISTRIBUTED_EPOCH)
        return distribute(freshly_seeded(lambda drawn: self._batches(tokenizer, whole, drawn)),
                          self.tf_data_service, PARALLEL_EPOCHS)

    def _batches(self, tokenizer, context, seed):
        if self.text_files is not None:
            return pretraining_dataset(_absolute(self.text_files), tokenizer, self.data,
                                       seed=seed, epochs=None, input_context=context)
        records = read_pretraining_records(_absolute(self.input_files), self.data.max_seq_length,
                                           self.data.max_predictions_per_seq, compression="auto",
                                           input_context=context)
        batch_size = context.get_per_replica_batch_size(self.data.batch_size)
        return records.repeat().shuffle(10_000, seed=seed).batch(
            batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def _absolute(patterns):
    return [file_system.absolute(pattern) for pattern in patterns]
