"""`kerasbert.data.passes`: passes whose order depends only on the seed and the pass, so that a
`tf.data` iterator restored from a checkpoint in a new process goes on as an uninterrupted one."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data.passes import batches_of, example_passes

# The shape of the fine-tuning pipeline: rows picked by each pass, then a parallel map and a
# prefetch. With TensorFlow's own reshuffling (`shuffle(16, seed=3,
# reshuffle_each_iteration=True)` before the batching and `repeat()` at the end) the restore
# below played another pass's order after the first pass (TensorFlow 2.21).
PIPELINE = """
import sys
import tensorflow as tf
from kerasbert.data.passes import batches_of, example_passes

def batches(rows=16):
    picked = batches_of({"id": tf.range(100, 100 + rows)}, batch_size=4)
    passes = example_passes(rows, picked, shuffle=True, seed=3, epochs=None)
    return passes.map(lambda batch: batch["id"], num_parallel_calls=tf.data.AUTOTUNE,
                      deterministic=True).prefetch(tf.data.AUTOTUNE)
"""


def _uninterrupted(count, rows=16):
    namespace = {}
    exec(PIPELINE, namespace)
    iterator = iter(namespace["batches"](rows))
    return [next(iterator).numpy().tolist() for _ in range(count)]


def test_each_pass_is_a_permutation_of_its_own(tmp_path):
    batches = _uninterrupted(9, rows=10)
    assert [len(batch) for batch in batches] == [4, 4, 2] * 3  # no batch mixes two passes
    passes = [sum(batches[index:index + 3], []) for index in (0, 3, 6)]
    assert all(sorted(order) == list(range(100, 110)) for order in passes)
    assert len({tuple(order) for order in passes}) == 3
    assert batches == _uninterrupted(9, rows=10)  # the same passes for the same seed
    other = example_passes(10, lambda indices: indices.batch(10), shuffle=True, seed=4, epochs=1)
    assert len(list(other)) == 1


@pytest.mark.slow
def test_a_restored_iterator_goes_on_in_the_same_order_in_a_new_process(tmp_path):
    """Saved in one process two batches into the first pass (of four), restored in another that
    reads on through two pass boundaries."""
    prefix = str(tmp_path / "position")
    save = PIPELINE + f"""
iterator = iter(batches())
for _ in range(2):
    next(iterator)
tf.train.Checkpoint(iterator=iterator).write({prefix!r})
"""
    restore = PIPELINE + f"""
iterator = iter(batches())
tf.train.Checkpoint(iterator=iterator).read({prefix!r}).assert_consumed()
print([next(iterator).numpy().tolist() for _ in range(10)])
"""
    for script in (save, restore):
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == str(_uninterrupted(12)[2:])


def test_a_single_pass_is_reshuffled_by_tensorflow_each_time_it_is_read():
    """`epochs=1` keeps `Dataset.shuffle(reshuffle_each_iteration=True)`: what `model.fit` reads
    anew every epoch, as before."""
    tf.random.set_seed(0)
    ours = example_passes(20, batches_of({"id": np.arange(20)}, 8), shuffle=True, seed=5)
    theirs = tf.data.Dataset.from_tensor_slices({"id": np.arange(20)}).shuffle(
        20, seed=5, reshuffle_each_iteration=True).batch(8)
    first, second = ([batch["id"].numpy().tolist() for batch in ours] for _ in range(2))
    assert first != second and sorted(sum(first, [])) == list(range(20))
    assert [first, second] == [[batch["id"].numpy().tolist() for batch in theirs]
                               for _ in range(2)]
    in_order = example_passes(5, lambda indices: indices.batch(2), epochs=2)
    assert [batch.numpy().tolist() for batch in in_order] == [[0, 1], [2, 3], [4]] * 2
