"""The main job: build, run, save and reload presets, and print the table."""

import os
import subprocess
import sys

from kerasbert import demo


def test_smallest_preset_of_each_family():
    assert demo.smallest_presets() == ["bert_tiny_uncased", "roberta_base", "albert_base_v2",
                                       "electra_small_discriminator"]


def test_batches_are_shipped_corpus_text_through_the_preset_tokenizer():
    sentences = demo.corpus_sentences(4)
    assert len(sentences) == 4 and all(len(s.split()) > 3 for s in sentences)


def test_run_and_table(tmp_path):
    rows = demo.run_demo(["bert_tiny_uncased"], work_dir=str(tmp_path))
    (row,) = rows
    assert row.parameters == 4_385_920  # transformers' BertModel for google/bert_uncased_L-2_H-128_A-2
    assert row.output_shapes == {"sequence_output": (2, 16, 128), "pooled_output": (2, 128)}
    assert row.reload_max_diff < 1e-5
    assert (tmp_path / "bert_tiny_uncased.keras").exists()
    table = demo.format_table(rows)
    assert "bert_tiny_uncased" in table and "4,385,920" in table and "reload max-diff" in table


def test_command_line(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-m", "kerasbert.cli.demo", "--presets=bert_tiny_uncased",
                             f"--work_dir={tmp_path}"], env=env, capture_output=True, text=True,
                            check=True)
    assert "bert_tiny_uncased" in result.stdout and "sequence_output (2, 16, 128)" in result.stdout
    failed = subprocess.run([sys.executable, "-m", "kerasbert.cli.demo", "--presets=bert_nano"],
                            env=env, capture_output=True, text=True)
    assert failed.returncode != 0 and "bert_nano" in failed.stderr
