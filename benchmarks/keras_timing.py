"""Timing Keras `fit` steps, shared by the training benchmarks."""

import gc
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


def free_keras_models():
    """Free the models built so far (`keras.backend.clear_session()` and garbage collection),
    keeping the global dtype policy: `clear_session` also resets it to float32, so without this
    every model built after the first one of a `mixed_bfloat16` measurement would be float32."""
    policy = keras.config.dtype_policy()
    keras.backend.clear_session()
    keras.config.set_dtype_policy(policy)
    gc.collect()
