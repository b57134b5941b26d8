"""The training loop checkpoints the data position of an input pipeline that tokenizes with the
byte-pair tokenizer (its map inserts into the tokenizer's word cache, a table that tf.data
refuses to save by default): a run stopped after 3 steps and started again ends with the weights
of an uninterrupted 6-step run, bit for bit, and differs from a restart that read the data from
its beginning again."""

import keras
import numpy as np
import tensorflow as tf

from kerasbert.data import demo
from kerasbert.tokenizers import BytePairTokenizer
from kerasbert.training.loop import train

QUIET = dict(steps_per_loop=1, checkpoint_interval=3, progress=False, log=lambda message: None)


def _tokenizer():
    directory = demo.vocabulary_dir("byte_pair")
    return BytePairTokenizer.from_files(f"{directory}/vocab.json", f"{directory}/merges.txt")


def _dataset_fn(tokenizer):
    """Batches of 2 texts, tokenized in the pipeline: features (token count, mean id / 1000)."""
    texts = [f"sentence number {i} says {' '.join(['more'] * i)} words" for i in range(12)]

    def features(batch):
        ids = tf.cast(tokenizer.tokenize(batch), tf.float32)
        counts = tf.cast(ids.row_lengths(), tf.float32)
        return (tf.stack([counts, tf.reduce_mean(ids, axis=1) / 1000.0], axis=1),
                tf.ones_like(counts))

    return lambda context: tf.data.Dataset.from_tensor_slices(texts).batch(2).map(
        features).repeat()


def _trained(model_dir, runs, save_data_position=True):
    """A fresh model trained by `train` to each step count of `runs` in turn (one Trainer per
    count, from `model_dir`); its weights."""
    tokenizer = _tokenizer()
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse")
    for steps in runs:
        train(model, strategy, _dataset_fn(tokenizer), str(model_dir), steps,
              save_data_position=save_data_position, **QUIET)
    return [weight.numpy() for weight in model.weights]


def test_a_restarted_run_reads_on_from_the_saved_position(tmp_path):
    uninterrupted = _trained(tmp_path / "uninterrupted", [6])
    restarted = _trained(tmp_path / "restarted", [3, 6])
    for expected, actual in zip(uninterrupted, restarted):
        np.testing.assert_array_equal(actual, expected)
    # The position matters to the weights: a restart that reads from the first batch again
    # ends elsewhere.
    reread = _trained(tmp_path / "reread", [3, 6], save_data_position=False)
    assert not np.allclose(reread[0], uninterrupted[0], rtol=0, atol=1e-7)
