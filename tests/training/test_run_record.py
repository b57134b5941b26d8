"""The run record (`kerasbert.training.run_record`): what a training binary records at its first
start, how a rerun is compared with it, and what `--overwrite` removes. The binaries' use of it
is tested end to end in test_pretrain_cli.py, test_finetune_cli.py and test_distill_cli.py."""

import json
import os

import pytest
from absl import flags

from kerasbert.training.run_record import (RUN_RECORD_FILE, TRAINING_OUTPUTS, RunRecord,
                                          RunRecordError, matching, recorded_flags)

OUTPUTS = matching(*TRAINING_OUTPUTS, "kerasbert_model.json")


def _flag_values(argv):
    """A binary's flags as absl parses them from `argv`."""
    values = flags.FlagValues()
    flags.DEFINE_float("learning_rate", 1e-4, "", flag_values=values)
    flags.DEFINE_integer("batch_size", 32, "", flag_values=values)
    flags.DEFINE_list("text_files", None, "", flag_values=values)
    flags.DEFINE_string("vocab_file", None, "", flag_values=values)
    flags.DEFINE_string("init_checkpoint", None, "", flag_values=values)
    flags.DEFINE_string("model_dir", None, "", flag_values=values)
    flags.DEFINE_integer("checkpoint_interval", 1000, "", flag_values=values)
    flags.DEFINE_string("strategy", "one_device", "", flag_values=values)
    flags.DEFINE_boolean("overwrite", False, "", flag_values=values)
    values(["binary", *argv])
    return values


def _record(model_dir, *argv, program="kerasbert-pretrain"):
    values = _flag_values([f"--model_dir={model_dir}", *argv])
    return RunRecord(str(model_dir), program, recorded_flags(values), OUTPUTS,
                     values.overwrite)


def _snapshot(directory):
    """{relative path: (bytes, mtime)} of every file under `directory`."""
    return {os.path.relpath(os.path.join(folder, name), directory):
            (open(os.path.join(folder, name), "rb").read(),
             os.stat(os.path.join(folder, name)).st_mtime_ns)
            for folder, _, names in os.walk(directory) for name in names}


def _started(model_dir, *argv, model=None):
    record = _record(model_dir, *argv)
    record.check()
    record.start(model or {"hidden_size": 32}, log=lambda message: None)
    (model_dir / "ckpt-5.index").write_text("a checkpoint")
    (model_dir / "train").mkdir()
    return record


def test_the_record_holds_the_shaping_flags_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _started(tmp_path / "run", "--text_files=a.txt,b.txt", "--vocab_file=vocab.txt",
             "--checkpoint_interval=5")
    recorded = json.loads((tmp_path / "run" / RUN_RECORD_FILE).read_text())
    assert recorded["program"] == "kerasbert-pretrain"
    assert recorded["model"] == {"hidden_size": 32}
    # How the run goes (checkpoint interval, strategy), where it is and --overwrite: not recorded.
    assert recorded["flags"] == {
        "batch_size": 32, "init_checkpoint": None, "learning_rate": 1e-4,
        "text_files": [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")],
        "vocab_file": str(tmp_path / "vocab.txt")}


def test_a_rerun_with_the_same_values_passes_however_they_are_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _started(tmp_path / "run", "--text_files=a.txt", "--vocab_file=vocab.txt",
             "--learning_rate=0.001")
    os.mkdir(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path / "elsewhere")
    # The same file by another relative path, the same number in another notation, other
    # values of flags that are free to change.
    record = _record(tmp_path / "run", "--text_files=../a.txt", f"--vocab_file={tmp_path}/vocab.txt",
                     "--learning_rate=1e-3", "--checkpoint_interval=7", "--strategy=mirrored")
    record.check()
    assert record.start({"hidden_size": 32}) == []


def test_a_rerun_with_other_values_names_each_and_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _started(tmp_path / "run", "--text_files=a.txt,b.txt", "--learning_rate=0.001")
    before = _snapshot(tmp_path / "run")
    record = _record(tmp_path / "run", "--text_files=b.txt,a.txt", "--learning_rate=0.0010001",
                     "--batch_size=64")
    with pytest.raises(RunRecordError) as raised:
        record.check()
    message = str(raised.value)
    assert "\n" not in message
    assert "--batch_size: recorded 32, given 64" in message
    assert "--learning_rate: recorded 0.001, given 0.0010001" in message
    # Lists compare as lists: the same files in another order are another data order.
    assert (f"--text_files: recorded [{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}], given "
            f"[{tmp_path / 'b.txt'},{tmp_path / 'a.txt'}]") in message
    assert "--overwrite" in message and "vocab_file" not in message
    with pytest.raises(RunRecordError):
        record.start({"hidden_size": 32})
    assert _snapshot(tmp_path / "run") == before


def test_another_model_config_is_named_by_its_field(tmp_path):
    _started(tmp_path / "run", model={"encoder_config": {"hidden_size": 32, "num_layers": 2}})
    record = _record(tmp_path / "run")
    record.check()  # the flags alone agree
    with pytest.raises(RunRecordError, match=r"model encoder_config\.hidden_size: recorded 32, "
                                             r"given 64"):
        record.start({"encoder_config": {"hidden_size": 64, "num_layers": 2}})


def test_a_run_recorded_before_the_config_gained_fields_resumes(tmp_path):
    """A run recorded before `EncoderConfig` had the encoder switches (rotary positions, gated
    MLP, ...) resumes: the missing fields count at the values that build the same encoder; a
    real difference is still named."""
    from kerasbert import EncoderConfig
    from kerasbert.config import SWITCH_DEFAULTS

    config = EncoderConfig(family="bert", vocab_size=100, hidden_size=32, num_layers=2,
                           num_heads=2, intermediate_size=64).to_dict()
    older = {name: value for name, value in config.items()
             if name not in SWITCH_DEFAULTS and not name.endswith("rotary_theta")
             and name != "local_attention_window"}
    _started(tmp_path / "run", model={"encoder_config": older})
    record = _record(tmp_path / "run")
    record.start({"encoder_config": config})
    with pytest.raises(RunRecordError, match=r"model encoder_config\.pre_norm: recorded False, "
                                             r"given True"):
        record.start({"encoder_config": dict(config, pre_norm=True)})


def test_later_starts_check_the_model_only(tmp_path):
    record = _record(tmp_path / "run")
    record.check()
    record.start({"hidden_size": 32})
    (tmp_path / "run" / "ckpt-5.index").write_text("a checkpoint")
    assert record.start({"hidden_size": 32}) == []  # the next seed's model
    with pytest.raises(RunRecordError, match="model hidden_size"):
        record.start({"hidden_size": 64})


def test_a_worker_that_records_the_run_meanwhile_is_the_recorded_run(tmp_path):
    """Workers of a multi-worker run share the model directory: when another worker records
    the same run (and writes its files) while this one checks, this one sees that record, not
    an unrecorded earlier run (a race tests/training/test_preemption.py once lost)."""
    other_worker = _record(tmp_path / "run")
    record = _record(tmp_path / "run")

    def outputs_while_the_other_worker_starts(model_dir):
        if not (tmp_path / "run" / RUN_RECORD_FILE).exists():
            other_worker.start({"hidden_size": 32}, log=lambda message: None)
            (tmp_path / "run" / "kerasbert_model.json").write_text("{}")
        return OUTPUTS(model_dir)

    record.outputs = outputs_while_the_other_worker_starts
    (tmp_path / "run").mkdir()
    assert record.start({"hidden_size": 32}) == []


def test_another_binary_or_an_unrecorded_run_is_refused(tmp_path):
    _started(tmp_path / "run")
    with pytest.raises(RunRecordError, match="holds a kerasbert-pretrain run .* not a "
                                             "kerasbert-distill one"):
        _record(tmp_path / "run", program="kerasbert-distill").check()
    (tmp_path / "run" / RUN_RECORD_FILE).unlink()
    with pytest.raises(RunRecordError, match=r"holds files of an earlier run \(ckpt-5.index, "
                                             r"train\) but no kerasbert_run.json"):
        _record(tmp_path / "run").check()
    (tmp_path / "run" / RUN_RECORD_FILE).write_text("[1, 2]")
    with pytest.raises(RunRecordError, match="not a run record"):
        _record(tmp_path / "run").check()


def test_overwrite_removes_only_what_the_binary_wrote(tmp_path):
    _started(tmp_path / "run", "--batch_size=8")
    (tmp_path / "run" / "kerasbert_model.json").write_text("{}")
    (tmp_path / "run" / "notes.txt").write_text("mine")
    (tmp_path / "run" / "ckpt-notes").mkdir()
    messages = []
    record = _record(tmp_path / "run", "--batch_size=64", "--overwrite")
    record.check()
    removed = record.start({"hidden_size": 64}, log=messages.append)
    assert sorted(os.path.basename(path) for path in removed) == [
        "ckpt-5.index", "kerasbert_model.json", RUN_RECORD_FILE, "train"]
    assert sorted(os.listdir(tmp_path / "run")) == ["ckpt-notes", RUN_RECORD_FILE, "notes.txt"]
    assert json.loads((tmp_path / "run" / RUN_RECORD_FILE).read_text())["flags"][
        "batch_size"] == 64
    assert messages and messages[0].startswith("--overwrite: removed the earlier run")


def test_overwrite_refuses_to_remove_an_input_of_the_run(tmp_path):
    _started(tmp_path / "run")
    record = _record(tmp_path / "run", f"--init_checkpoint={tmp_path / 'run' / 'ckpt-5'}",
                     "--overwrite")
    with pytest.raises(RunRecordError, match="--init_checkpoint=.*ckpt-5 is among the files of "
                                             "the earlier run that --overwrite removes"):
        record.check()
    assert (tmp_path / "run" / "ckpt-5.index").exists()


def test_an_input_file_replaced_at_the_same_path_is_refused(tmp_path, monkeypatch):
    """The flags are equal, the data is not: the record's fingerprints name the file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("the first corpus\n")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    _started(tmp_path / "run", "--text_files=a.txt", "--vocab_file=vocab.txt")
    recorded = json.loads((tmp_path / "run" / RUN_RECORD_FILE).read_text())
    assert sorted(recorded["inputs"]) == [str(tmp_path / "a.txt"), str(tmp_path / "vocab.txt")]
    # Written again with the same bytes (a new modification time): the same input.
    (tmp_path / "a.txt").write_text("the first corpus\n")
    _record(tmp_path / "run", "--text_files=a.txt", "--vocab_file=vocab.txt").check()
    (tmp_path / "a.txt").write_text("the other corpus\n")  # same size, other content
    before = _snapshot(tmp_path / "run")
    with pytest.raises(RunRecordError) as raised:
        _record(tmp_path / "run", "--text_files=a.txt", "--vocab_file=vocab.txt").check()
    assert f"{tmp_path / 'a.txt'}: its content differs" in str(raised.value)
    assert "--overwrite" in str(raised.value) and "\n" not in str(raised.value)
    (tmp_path / "a.txt").write_text("a longer other corpus\n")
    with pytest.raises(RunRecordError, match="its size was 17 bytes and is 22"):
        _record(tmp_path / "run", "--text_files=a.txt", "--vocab_file=vocab.txt").check()
    os.remove(tmp_path / "vocab.txt")
    with pytest.raises(RunRecordError, match="vocab.txt: it is no longer there"):
        _record(tmp_path / "run", "--text_files=a.txt", "--vocab_file=vocab.txt").check()
    assert _snapshot(tmp_path / "run") == before
    # --overwrite starts over and records the new files.
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    _started(tmp_path / "run", "--text_files=a.txt", "--vocab_file=vocab.txt", "--overwrite")
    _record(tmp_path / "run", "--text_files=a.txt", "--vocab_file=vocab.txt").check()


def test_a_glob_that_matches_another_file_and_a_large_file_touched_in_the_middle(tmp_path):
    from kerasbert.training import input_fingerprints

    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "train-0.txt").write_text("one\n")
    large = shards / "train-1.txt"
    large.write_bytes(b"x" * (3 * input_fingerprints.ENDS_BYTES))
    _started(tmp_path / "run", f"--text_files={shards}/train-*.txt")
    with open(large, "r+b") as file:  # the middle, which the hash does not read
        file.seek(input_fingerprints.ENDS_BYTES + 10)
        file.write(b"y")
    os.utime(large, (1e9, 1e9))
    with pytest.raises(RunRecordError, match="train-1.txt: it was modified since"):
        _record(tmp_path / "run", f"--text_files={shards}/train-*.txt").check()
    _started(tmp_path / "run", f"--text_files={shards}/train-*.txt", "--overwrite")
    (shards / "train-2.txt").write_text("two\n")
    with pytest.raises(RunRecordError, match="train-2.txt: it is an input now and was not"):
        _record(tmp_path / "run", f"--text_files={shards}/train-*.txt").check()


def test_a_damaged_checkpoint_is_named(tmp_path):
    """A pretraining directory whose latest checkpoint is not one: TensorFlow says only "file
    is too short to be an sstable"; fine-tuning's reader names the checkpoint."""
    import kerasbert
    from kerasbert.training.pretrained_sources import (PRETRAINED_MODEL_FILE,
                                                       PretrainedSourceError,
                                                       pretraining_description,
                                                       pretraining_run_model)

    config = kerasbert.zoo.get_config("bert_tiny_uncased").replace(num_layers=1)
    (tmp_path / PRETRAINED_MODEL_FILE).write_text(json.dumps(pretraining_description(
        config, ["mlm"])))
    (tmp_path / "ckpt-3.index").write_bytes(b"garbage")
    (tmp_path / "ckpt-3.data-00000-of-00001").write_bytes(b"x")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\n')
    with pytest.raises(PretrainedSourceError, match=f"{tmp_path / 'ckpt-3'}: cannot be read as "
                                                    "a checkpoint .*too short"):
        pretraining_run_model(str(tmp_path))
