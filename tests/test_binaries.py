"""`tests.binaries.run_binary`, which the binary tests use to run a console script's `run()` in
their own process: binaries whose flags share names run one after another, each with its own
definitions and defaults; a run ends as its process would (status, one line on stderr); what a
run changes in the process is put back."""

import os
import signal

import keras
import pytest

from kerasbert.data import demo
from tests.binaries import run_binary


def test_binaries_sharing_flag_names_each_parse_their_own(tmp_path):
    # kerasbert-vocab and kerasbert-export both define --output_dir; kerasbert-pretrain and
    # kerasbert-vocab both --input_files, with other meanings and defaults.
    vocab = run_binary("vocab", f"--input_files={tmp_path}/none*.txt", "--type=wordpiece",
                       "--vocab_size=100", f"--output_dir={tmp_path}/vocab")
    export = run_binary("export", f"--model={tmp_path}/missing.keras",
                        f"--output_dir={tmp_path}/export")
    vocab_again = run_binary("vocab", f"--input_files={tmp_path}/none*.txt", "--type=wordpiece",
                             "--vocab_size=100", f"--output_dir={tmp_path}/vocab")
    assert vocab.returncode == export.returncode == vocab_again.returncode == 1
    assert vocab.stderr == vocab_again.stderr
    assert vocab.stderr.startswith("kerasbert-vocab: error: ") and "none*.txt" in vocab.stderr
    assert export.stderr == (f"kerasbert-export: error: {tmp_path}/missing.keras: no such model "
                             "file or directory\n")
    assert not os.path.exists(tmp_path / "vocab") and not os.path.exists(tmp_path / "export")


def test_an_unknown_flag_is_the_binary_s_own_one_line_error():
    run = run_binary("convert", "--vocab_size=3")  # kerasbert-vocab's flag, not kerasbert-convert's
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr == "kerasbert-convert: error: Unknown command line flag 'vocab_size'\n"


@pytest.mark.slow
def test_the_process_state_a_run_changes_is_put_back(tmp_path, monkeypatch):
    """A pretraining step under mixed_bfloat16 sets the global dtype policy, and the training
    loop installs its own signal handlers while it trains; afterwards this process has its own
    again."""
    monkeypatch.chdir(tmp_path)
    policy = keras.config.dtype_policy().name
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    run = run_binary("pretrain", "--model=bert_tiny_uncased", f"--model_dir={tmp_path}/run",
                     f"--text_files={demo.pretraining_corpus_files()[0]}",
                     f"--vocab_file={demo.vocabulary_dir('wordpiece')}/vocab.txt",
                     "--config_overrides=num_layers=1,hidden_size=32,num_heads=2,"
                     "intermediate_size=64,max_positions=32", "--max_seq_length=32",
                     "--batch_size=2", "--train_steps=1", "--mixed_precision=mixed_bfloat16")
    assert run.returncode == 0, run.stderr[-3000:]
    # The plan line of a bfloat16 run, with or without the CPU's bfloat16 units.
    assert "oneDNN's bfloat16 kernels" in run.stdout and policy != "mixed_bfloat16"
    assert keras.config.dtype_policy().name == policy
    assert {number: signal.getsignal(number) for number in handlers} == handlers
    assert os.getcwd() == str(tmp_path)
