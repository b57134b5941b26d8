"""What a binary says of an error from inside TensorFlow, of Ctrl-C, of an unexpected error
(a bug) and with `--traceback` (the binaries' own errors are run in tests/test_binary_errors.py)."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.cli.one_line_errors import interrupted_line, is_input_error, op_error_message
from kerasbert.models import feature_files
from kerasbert.training.preemption import TrainingInterrupted
from tests.binaries import run_binary


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


def _broadcasting_bug(settings):
    """A bug, not bad input: numpy refuses to add arrays of shapes (2,) and (3,)."""
    return np.ones(2) + np.ones(3)


def test_an_unexpected_error_says_so_and_how_to_report_it(monkeypatch, tmp_path):
    monkeypatch.setattr(feature_files, "extract_feature_file", _broadcasting_bug)
    flags = [f"--model={tmp_path}", f"--input_file={tmp_path / 'in.txt'}",
             f"--output_file={tmp_path / 'out.jsonl'}"]
    run = run_binary("extract_features", *flags)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("kerasbert-extract-features: unexpected ValueError: operands could "
                           "not be broadcast together")
    assert line.endswith("rerun the same command with --traceback and report the command and "
                         "all it printed to the kerasbert developers")

    run = run_binary("extract_features", *flags, "--traceback")
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert lines[0] == line and lines[1] == "Traceback (most recent call last):"
    assert any("_broadcasting_bug" in text for text in lines)  # where it came from
    assert lines[-1].startswith("ValueError: operands could not be broadcast together")


def test_bad_input_is_one_line_and_traceback_shows_where_it_was_found(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n", encoding="utf-8")
    flags = [f"--model={tmp_path}", f"--input_file={blank}",
             f"--output_file={tmp_path / 'out.jsonl'}"]
    run = run_binary("extract_features", *flags)
    expected = (f"kerasbert-extract-features: error: --input_file {blank}: no text (every line "
                "is blank); nothing to extract")
    assert run.returncode == 1 and run.stderr.strip() == expected
    run = run_binary("extract_features", *flags, "--traceback")
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and lines[0] == expected
    assert any("feature_files.py" in text for text in lines)
    assert lines[-1].startswith("ValueError: --input_file")


def test_which_errors_are_bad_input(tmp_path):
    """kerasbert's own `raise` and classes, files the system or TensorFlow cannot use, and
    failed input checks are bad input; an error raised inside a library is not."""
    from kerasbert.json_files import JsonFileError
    from kerasbert.models.feature_files import extract_feature_file

    with pytest.raises(FileNotFoundError) as missing:
        extract_feature_file(feature_files.FeatureFileSettings(
            "m", str(tmp_path / "missing.txt"), str(tmp_path / "out"), (-1,)))
    assert is_input_error(missing.value)  # raised by kerasbert's own `raise`
    assert is_input_error(JsonFileError("x.json: not JSON"))
    with pytest.raises(OSError) as unreadable:
        open(tmp_path / "missing.txt", encoding="utf-8")
    assert is_input_error(unreadable.value)  # names its file
    assert is_input_error(_raised(lambda: tf.io.read_file(str(tmp_path / "missing.txt"))))
    with pytest.raises(ValueError) as broadcast:
        _broadcasting_bug(None)
    assert not is_input_error(broadcast.value)
    assert not is_input_error(_raised(lambda: tf.reshape(tf.zeros([2, 3]), [4])))
    with pytest.raises(TypeError) as typed:
        len(5)
    assert not is_input_error(typed.value)
