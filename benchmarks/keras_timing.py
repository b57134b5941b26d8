"""Timing Keras `fit` steps, shared by the training benchmarks."""

import statistics
import time

import keras
import tensorflow as tf


class StepClock(keras.callbacks.Callback):
    """Seconds of every training step, each ended by reading its loss."""

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_train_batch_begin(self, batch, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        float(logs["loss"])
        self.seconds.append(time.perf_counter() - self.start)


def fit_throughput(model, batch, warmup, steps):
    """`(warm-up seconds, median seconds per timed step)` of `model.fit` on `batch` repeated."""
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    start = time.perf_counter()
    model.fit(dataset, steps_per_epoch=warmup, epochs=1, verbose=0, shuffle=False)
    warmup_seconds = time.perf_counter() - start
    clock = StepClock()
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False,
              callbacks=[clock])
    return warmup_seconds, statistics.median(clock.seconds)
