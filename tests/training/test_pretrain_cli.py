"""`kerasbert-pretrain`: trains from text or records, logs to TensorBoard, checkpoints, resumes
after a real kill at the same step and data position, and stops on a non-finite loss. The
binaries run in this process (`tests.binaries.run_binary`), except the run that is killed."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import kerasbert.data.demo
from tests.binaries import run_binary
from tests.helpers import save_modernbert_tokenizer

VOCAB = os.path.join(kerasbert.data.demo.vocabulary_dir("wordpiece"), "vocab.txt")
TEXT = kerasbert.data.demo.pretraining_corpus_files()[0]
# A tiny model (the flags a test adds later win: absl keeps the last value).
TINY = ["--config_overrides=num_layers=1,hidden_size=32,num_heads=2,intermediate_size=64,"
        "max_positions=64",
        "--batch_size=8", "--max_seq_length=64", "--max_predictions_per_seq=8",
        "--learning_rate=1e-3", "--steps_per_loop=5"]


def _flags(model_dir, *flags):
    model = [] if any(flag.startswith("--model=") for flag in flags) else [
        "--model=bert_tiny_uncased"]
    return [f"--model_dir={model_dir}", *model, *TINY, *flags]


def _run(model_dir, *flags, check=True):
    result = run_binary("pretrain", *_flags(model_dir, *flags))
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def _text_flags(steps):
    return [f"--text_files={TEXT}", f"--vocab_file={VOCAB}", f"--train_steps={steps}",
            "--checkpoint_interval=10"]


def _variables(checkpoint):
    reader = tf.train.load_checkpoint(checkpoint)
    return {name: reader.get_tensor(name) for name, dtype in
            reader.get_variable_to_dtype_map().items() if dtype.is_floating or dtype.is_integer}


@pytest.mark.slow
def test_trains_from_text_with_a_flagfile_and_logs(tmp_path):
    flagfile = tmp_path / "run.flags"
    flagfile.write_text("\n".join(_text_flags(20)) + "\n")
    result = _run(tmp_path / "run", f"--flagfile={flagfile}")
    assert "Done:" in result.stdout and "step 20" in result.stdout
    assert {"ckpt-10.index", "ckpt-20.index", "checkpoint"} <= set(os.listdir(tmp_path / "run"))
    events = [os.path.join(tmp_path / "run" / "train", name)
              for name in os.listdir(tmp_path / "run" / "train")]
    tags = {value.tag for path in events for event in tf.compat.v1.train.summary_iterator(path)
            for value in event.summary.value}
    assert {"loss", "mlm_logits_loss", "mlm_logits_accuracy", "nsp_logits_accuracy",
            "learning_rate"} <= tags


@pytest.mark.slow
def test_trains_from_pretraining_records(tmp_path):
    records = tmp_path / "records.tfrecord"
    made = run_binary(
        "create_pretraining_data", f"--input_file={TEXT}", f"--output_file={records}",
        f"--vocab_file={VOCAB}", "--max_seq_length=64", "--max_predictions_per_seq=8",
        "--dupe_factor=1", "--objective=sop")
    assert made.returncode == 0, made.stderr[-3000:]
    result = _run(tmp_path / "run", f"--input_files={records}", f"--vocab_file={VOCAB}",
                  "--objective=sop", "--train_steps=10", "--config_overrides=num_layers=1,"
                  "hidden_size=32,num_heads=2,intermediate_size=64,max_positions=64")
    assert "sop_logits_accuracy" in result.stdout
    # The vocabulary file sizes the embedding, as with text input (not the preset's 30,522).
    vocabulary_size = len(open(VOCAB, encoding="utf-8").read().splitlines())
    assert f"vocab {vocabulary_size}," in result.stdout
    with open(tmp_path / "run" / "kerasbert_model.json", encoding="utf-8") as file:
        config = json.load(file)["encoder_config"]
    assert config["vocab_size"] == vocabulary_size
    # Derived fields follow the overrides: no 128 -> 32 embedding projection appears.
    assert config["embedding_size"] == config["hidden_size"] == 32


@pytest.mark.slow
def test_killed_run_resumes_at_the_same_step_and_data_position(tmp_path):
    """SIGKILL once the first checkpoint is recorded; the rerun ends exactly where an
    uninterrupted run ends (weights, optimizer, dropout seeds, data iterator)."""
    _run(tmp_path / "whole", *_text_flags(30))
    process = subprocess.Popen([sys.executable, "-m", "kerasbert.cli.pretrain",
                                *_flags(tmp_path / "killed", *_text_flags(30))],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = tmp_path / "killed" / "checkpoint"
    deadline = time.time() + 300
    while process.poll() is None and time.time() < deadline and not (
            state.exists() and "ckpt-10" in state.read_text()):
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (tmp_path / "killed" / "ckpt-30.index").exists(), "finished before the kill"
    result = _run(tmp_path / "killed", *_text_flags(30))
    assert "Restored" in result.stdout
    assert "at step 10" in result.stdout or "at step 20" in result.stdout
    whole = _variables(str(tmp_path / "whole" / "ckpt-30"))
    resumed = _variables(str(tmp_path / "killed" / "ckpt-30"))
    assert whole.keys() == resumed.keys() and len(whole) > 50
    for name in whole:
        np.testing.assert_array_equal(resumed[name], whole[name], err_msg=name)


@pytest.mark.slow
def test_non_finite_loss_stops_naming_the_step(tmp_path):
    result = _run(tmp_path / "run", *_text_flags(40), "--learning_rate=1e12", "--clip_norm=0",
                  "--optimizer=adam", check=False)
    assert result.returncode != 0
    assert "Training stopped at step" in result.stderr + result.stdout
    assert "not finite" in result.stderr + result.stdout


@pytest.mark.slow
def test_bfloat16_start_up_line_and_warning(tmp_path, monkeypatch):
    """On a CPU without bfloat16 (simulated: `KERASBERT_CPUINFO` names a cpuinfo file without
    the flags), the binary says so, warns, and runs its steps without XLA although asked."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse2 avx2 avx512f\n")
    monkeypatch.setenv("KERASBERT_CPUINFO", str(cpuinfo))
    result = _run(tmp_path / "run", *_text_flags(2), "--mixed_precision=mixed_bfloat16",
                  "--jit_compile")
    assert ("bfloat16: NOT supported by this device (CPU without avx512_bf16 or amx_bf16); "
            "steps run without XLA (--jit_compile is overridden" in result.stdout)
    assert "Warning: mixed_bfloat16 on a device without native bfloat16" in result.stdout
    assert "Done:" in result.stdout and "step 2" in result.stdout


@pytest.mark.slow
def test_bad_flags_are_named(tmp_path):
    result = _run(tmp_path / "run", "--train_steps=5", check=False)
    assert result.returncode != 0 and "--input_files and --text_files" in result.stderr
    result = _run(tmp_path / "run", *_text_flags(5), "--config_overrides=depth=3", check=False)
    assert result.returncode != 0 and "depth=3" in result.stderr


@pytest.mark.slow
def test_trains_electra(tmp_path):
    result = _run(tmp_path / "run", f"--text_files={TEXT}", f"--vocab_file={VOCAB}",
                  "--model=electra_small_discriminator", "--objective=electra",
                  "--config_overrides=num_layers=1,hidden_size=32,num_heads=2,"
                  "intermediate_size=64,embedding_size=16,max_positions=64",
                  "--train_steps=10", "--checkpoint_interval=10")
    for name in ("mlm_loss", "rtd_loss", "rtd_accuracy", "rtd_precision", "rtd_recall"):
        assert name in result.stdout


@pytest.mark.slow
def test_trains_modernbert_masked_lm_only_with_its_tokenizer_folder(tmp_path):
    """ModernBERT's recipe: MLM only at 30% masking, sequences past the local window, the
    tokenizer (and so the vocabulary size and padding id) from a tokenizer.json folder."""
    hf_tokenizer = save_modernbert_tokenizer(tmp_path / "tokenizer")
    result = _run(tmp_path / "run", f"--text_files={TEXT}",
                  f"--tokenizer_dir={tmp_path / 'tokenizer'}", "--model=modernbert_base",
                  "--objective=full_sentences", "--masked_lm_prob=0.3",
                  "--config_overrides=num_layers=3,hidden_size=32,num_heads=2,"
                  "intermediate_size=48,max_positions=64,local_attention_window=16",
                  "--max_predictions_per_seq=20", "--train_steps=10", "--checkpoint_interval=10")
    assert "Done:" in result.stdout and "objective full_sentences" in result.stdout
    with open(tmp_path / "run" / "kerasbert_model.json", encoding="utf-8") as file:
        config = json.load(file)["encoder_config"]
    assert (config["vocab_size"], config["pad_token_id"]) == (len(hf_tokenizer),
                                                              hf_tokenizer.pad_token_id)
    assert config["local_attention_window"] == 16 and config["rotary_theta"] > 0
    variables = _variables(str(tmp_path / "run" / "ckpt-10"))
    assert not any("nsp" in name or "pooler" in name for name in variables)


def _snapshot(directory):
    """{relative path: (bytes, mtime)} of every file under `directory`."""
    return {os.path.relpath(os.path.join(folder, name), directory):
            (open(os.path.join(folder, name), "rb").read(),
             os.stat(os.path.join(folder, name)).st_mtime_ns)
            for folder, _, names in os.walk(directory) for name in names}


@pytest.mark.slow
def test_a_rerun_with_other_values_is_refused_and_overwrite_starts_over(tmp_path):
    run = tmp_path / "run"
    _run(run, *_text_flags(10))
    recorded = json.loads((run / "kerasbert_run.json").read_text())
    assert recorded["program"] == "kerasbert-pretrain"
    assert recorded["flags"]["text_files"] == [TEXT] and recorded["flags"]["batch_size"] == 8
    assert recorded["model"]["encoder_config"]["hidden_size"] == 32
    assert "checkpoint_interval" not in recorded["flags"]  # free to change
    (run / "notes.txt").write_text("not the binary's")
    before = _snapshot(run)

    wider = "num_layers=1,hidden_size=64,num_heads=2,intermediate_size=64,max_positions=64"
    refused = _run(run, *_text_flags(10), "--learning_rate=2e-3", f"--config_overrides={wider}",
                   check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    line = refused.stderr.strip().splitlines()[-1]
    assert line.startswith("kerasbert-pretrain: error: ") and "--overwrite" in line
    assert "--learning_rate: recorded 0.001, given 0.002" in line
    assert (f"--config_overrides: recorded [{TINY[0].split('=', 1)[1]}], given [{wider}]"
            in line)
    assert _snapshot(run) == before  # kerasbert_model.json included: nothing rewritten

    # Flags that only say how the run goes may change.
    again = _run(run, *_text_flags(10), "--checkpoint_interval=5", "--steps_per_loop=2")
    assert "Restored" in again.stdout and "at step 10" in again.stdout

    over = _run(run, *_text_flags(10), "--learning_rate=2e-3", "--overwrite")
    assert "--overwrite: removed the earlier run" in over.stdout and "Restored" not in over.stdout
    assert (run / "notes.txt").read_text() == "not the binary's"
    assert json.loads((run / "kerasbert_run.json").read_text())["flags"]["learning_rate"] == 2e-3
