"""What a binary says of an error from inside TensorFlow and of Ctrl-C (the binaries themselves are
run in tests/test_binary_errors.py)."""

import pytest
import tensorflow as tf

from kerasbert.cli.one_line_errors import interrupted_line, op_error_message
from kerasbert.training.preemption import TrainingInterrupted


def _raised(function):
    with pytest.raises(tf.errors.OpError) as raised:
        function()
    return raised.value


def test_an_op_error_is_its_first_message_line_without_function_and_op_names(tmp_path):
    path = tmp_path / "records.tfrecord"
    path.write_bytes(bytes(range(256)) * 4)
    error = _raised(lambda: list(tf.data.TFRecordDataset(str(path))))
    assert str(error).startswith("{{function_node ")  # what TensorFlow itself says
    assert op_error_message(error) == "corrupted record at 0 (Is this even a TFRecord file?)"
    error = _raised(lambda: tf.io.read_file(str(tmp_path / "missing.txt")))
    assert op_error_message(error) == f"{tmp_path / 'missing.txt'}; No such file or directory"
    error = _raised(lambda: tf.train.Checkpoint(value=tf.Variable(0.0)).restore(
        str(tmp_path / "ckpt-1")))
    assert "\n" in error.message and op_error_message(error) == error.message.splitlines()[0]


def test_a_failed_input_check_is_its_own_text():
    @tf.function
    def check(value):
        tf.debugging.Assert(value > 0, ["Corpus file", "a.txt", "line", 3, "is not valid UTF-8"])
        return value

    error = _raised(lambda: check(tf.constant(-1)))
    assert op_error_message(error) == "Corpus file a.txt line 3 is not valid UTF-8"


def test_the_ctrl_c_line():
    assert interrupted_line("kerasbert-vocab") == "kerasbert-vocab: interrupted"
    assert interrupted_line("kerasbert-pretrain", str(TrainingInterrupted(7, "run/ckpt-7"))) == (
        "kerasbert-pretrain: interrupted; saved run/ckpt-7 at step 7; run the same command "
        "again to resume")
