"""Damaged and mismatched inputs and hostile disks, each given to the binary a user would run:
a truncated or bit-flipped pretraining TFRecord, a full disk (a 64 KB tmpfs), a read-only output
folder (a read-only tmpfs), and weights of another shape or family. Each must end in one line
`<binary>: error: ...` naming the file (and record), exit status 1, no traceback, and nothing
half-written left under a finished-looking name.

"Data lost" in the figures is read from the disk after the run: the outputs left half-written
(`faults.damaged_outputs`; for the disk cases, any file under a final name in the output
folder), plus one if the run changed its input."""

import os
import random
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from kerasbert.data.demo import vocabulary_dir
from tests.helpers import demo_wordpiece_tokenizer, hf_config, save_hf_model
from tests.reliability.faults import (binary, contents, damaged_outputs, final_files,
                                      pretrain_command, run, small_corpus, tfrecord_spans, tmpfs,
                                      write_pretraining_records)

pytestmark = pytest.mark.slow

VOCAB = os.path.join(vocabulary_dir("wordpiece"), "vocab.txt")
VOCABULARY_SIZE = len(open(VOCAB, encoding="utf-8").read().splitlines())


def _damaged_records(root):
    """(truncated file, its first bad record, bit-flipped file, its first bad record): copies of
    one pretraining TFRecord file, cut inside a seeded random record or with one bit of a seeded
    random record's data flipped."""
    records = root / "train.tfrecord"
    write_pretraining_records(records, small_corpus(root / "corpus"), demo_wordpiece_tokenizer())
    spans = tfrecord_spans(records)
    data = records.read_bytes()
    rng = random.Random(1406)
    cut = rng.randrange(len(spans) // 2, len(spans))
    start, end = spans[cut]
    truncated = root / "truncated.tfrecord"
    truncated.write_bytes(data[:rng.randrange(start + 1, end)])
    flip = rng.randrange(1, len(spans) // 2)
    start, end = spans[flip]
    position = rng.randrange(start + 12, end - 4)  # inside the record's data
    flipped = bytearray(data)
    flipped[position] ^= 1 << rng.randrange(8)
    bit_flipped = root / "bit_flipped.tfrecord"
    bit_flipped.write_bytes(bytes(flipped))
    return truncated, cut, bit_flipped, flip


def _mismatched_hf_folder(root):
    """A Hugging Face BERT folder whose config.json says hidden size 64 while its weights are
    those of a hidden-size-32 model."""
    folder = root / "mismatched_hf"
    save_hf_model("BertModel", hf_config("bert", vocab_size=VOCABULARY_SIZE), folder)
    wider = root / "wider_hf"
    hf_config("bert", vocab_size=VOCABULARY_SIZE, hidden_size=64,
              intermediate_size=128).save_pretrained(wider)
    shutil.copy(wider / "config.json", folder / "config.json")
    shutil.copy(VOCAB, folder / "vocab.txt")
    return folder


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """{case: (Run, what the case needs to be judged, why its mount failed, the files left
    under final names (disk cases), data lost)}: every case's binary run once, two at a time,
    inside the mounts the disk cases need."""
    root = tmp_path_factory.mktemp("bad_inputs")
    truncated, cut, bit_flipped, flip = _damaged_records(root)
    mismatched = _mismatched_hf_folder(root)
    wider_bert = root / "wider_bert_hf"
    save_hf_model("BertModel", hf_config("bert", vocab_size=VOCABULARY_SIZE, hidden_size=64,
                                         intermediate_size=128), wider_bert)
    albert = root / "albert_hf"
    save_hf_model("AlbertModel", hf_config("albert", vocab_size=VOCABULARY_SIZE), albert)
    corpus = small_corpus(root / "corpus")
    steps = ["--train_steps=4", "--checkpoint_interval=2", "--steps_per_loop=2"]

    def data_creation(output_file):
        return binary("create_pretraining_data", f"--input_file={','.join(corpus)}",
                      f"--output_file={output_file}", f"--vocab_file={VOCAB}",
                      "--max_seq_length=64", "--max_predictions_per_seq=8", "--dupe_factor=2")

    cases = {
        "truncated_record": (pretrain_command(root / "run_truncated", truncated, VOCAB, *steps),
                             (truncated, cut)),
        "bit_flipped_record": (pretrain_command(root / "run_flipped", bit_flipped, VOCAB, *steps),
                               (bit_flipped, flip)),
        "full_disk": (data_creation(root / "full" / "train.tfrecord"), root / "full"),
        "read_only_data": (data_creation(root / "read_only" / "train.tfrecord"),
                           root / "read_only"),
        "read_only_vocab": (binary("vocab", f"--input_files={corpus[0]}", "--type=wordpiece",
                                   "--vocab_size=400", f"--output_dir={root / 'read_only'}"),
                            root / "read_only"),
        "wider_init_checkpoint": (pretrain_command(root / "run_wider", root / "train.tfrecord",
                                                   VOCAB, *steps,
                                                   f"--init_checkpoint={wider_bert}"),
                                  (wider_bert, root / "run_wider")),
        "other_family_init_checkpoint": (
            pretrain_command(root / "run_albert", root / "train.tfrecord", VOCAB, *steps,
                             f"--init_checkpoint={albert}"), (albert, root / "run_albert")),
        "mismatched_init_from": (
            binary("finetune", "--task=wordnet_gloss", f"--train_file={root / 'train.tsv'}",
                   f"--dev_file={root / 'train.tsv'}", f"--init_from={mismatched}",
                   f"--model_dir={root / 'run_finetune'}", "--max_seq_length=32"),
            (mismatched, root / "run_finetune")),
        "mismatched_convert": (binary("convert", f"--input={mismatched}",
                                      f"--output={root / 'converted.keras'}"),
                               (mismatched, root / "converted.keras")),
    }
    (root / "train.tsv").write_text("label\ttext\nnoun.animal\ta small dog\n")
    # (input, output) of the cases whose output is not a mount: what is on disk decides their
    # data lost.
    paths = {"truncated_record": (truncated, root / "run_truncated"),
             "bit_flipped_record": (bit_flipped, root / "run_flipped"),
             "wider_init_checkpoint": (wider_bert, root / "run_wider"),
             "other_family_init_checkpoint": (albert, root / "run_albert"),
             "mismatched_init_from": (mismatched, root / "run_finetune"),
             "mismatched_convert": (mismatched, root / "converted.keras")}
    inputs = {name: contents(source) for name, (source, _) in paths.items()}
    results = {}
    with tmpfs(root / "full", size="64k") as full_failure, \
            tmpfs(root / "read_only", read_only=True) as read_only_failure:
        mount_failures = {"full_disk": full_failure, "read_only_data": read_only_failure,
                          "read_only_vocab": read_only_failure}
        runnable = [name for name in cases if mount_failures.get(name) is None]
        with ThreadPoolExecutor(2) as pool:
            runs = pool.map(lambda name: run(cases[name][0], root / "logs" / name), runnable)
            results = dict(zip(runnable, runs))
        left = {name: final_files(cases[name][1]) for name in mount_failures if name in results}
    lost = {name: len(files) for name, files in left.items()}
    lost.update({name: len(damaged_outputs(output)) + (contents(source) != inputs[name])
                 for name, (source, output) in paths.items()})
    return {name: (results.get(name), cases[name][1], mount_failures.get(name),
                   left.get(name), lost.get(name)) for name in cases}


def _one_line_error(result, program, *needles):
    """The `<program>: error:` line of a failed run; fails unless the run exited 1 without a
    traceback and the line names each of `needles`."""
    assert result.returncode == 1, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    lines = result.error_lines(program)
    assert len(lines) == 1, result.describe()
    for needle in needles:
        assert str(needle) in lines[0], f"{needle} not in {lines[0]!r}"
    return lines[0]


def _judge(figures, fault, check, lost):
    """Run `check()`; record the fault as survived if it passes, with `lost` half-written
    outputs."""
    try:
        check()
    except AssertionError:
        figures(fault, 1, 0, lost)
        raise
    figures(fault, 1, int(not lost), lost)


@pytest.mark.parametrize("case,fault", [
    ("truncated_record", "truncated TFRecord (kerasbert-pretrain --input_files)"),
    ("bit_flipped_record", "bit-flipped TFRecord (kerasbert-pretrain --input_files)"),
])
def test_a_damaged_record_is_named_with_its_file_and_number(outcomes, figures, case, fault):
    result, (path, number), _, _, lost = outcomes[case]
    _judge(figures, fault, lambda: _one_line_error(result, "kerasbert-pretrain", path,
                                                   f"record {number}"), lost=lost)


def _skip_unless_mounted(failure):
    if failure is not None:
        pytest.skip(f"mounting a tmpfs is not permitted here ({failure}); no other way to give "
                    "a child process ENOSPC / EROFS on a chosen folder")


def test_a_full_disk_is_named_and_leaves_nothing_finished(outcomes, figures):
    result, directory, failure, left, lost = outcomes["full_disk"]
    _skip_unless_mounted(failure)

    def check():
        line = _one_line_error(result, "kerasbert-create-pretraining-data", directory)
        assert "space" in line.lower(), line
        assert left == {}, sorted(left)

    _judge(figures, "full disk (kerasbert-create-pretraining-data)", check, lost=lost)


@pytest.mark.parametrize("case,program", [("read_only_data", "kerasbert-create-pretraining-data"),
                                          ("read_only_vocab", "kerasbert-vocab")])
def test_a_read_only_output_folder_is_named(outcomes, figures, case, program):
    result, directory, failure, _, lost = outcomes[case]
    _skip_unless_mounted(failure)
    _judge(figures, f"read-only output folder ({program})",
           lambda: _one_line_error(result, program, directory), lost=lost)


@pytest.mark.parametrize("case,program,fault", [
    ("wider_init_checkpoint", "kerasbert-pretrain",
     "weights of another hidden size (kerasbert-pretrain --init_checkpoint)"),
    ("other_family_init_checkpoint", "kerasbert-pretrain",
     "weights of another family (kerasbert-pretrain --init_checkpoint)"),
    ("mismatched_init_from", "kerasbert-finetune",
     "config and weights of different shapes (kerasbert-finetune --init_from)"),
    ("mismatched_convert", "kerasbert-convert",
     "config and weights of different shapes (kerasbert-convert)"),
])
def test_mismatched_weights_are_named_and_nothing_is_written(outcomes, figures, case, program,
                                                               fault):
    result, (source, output), _, _, lost = outcomes[case]
    written = sorted(os.listdir(output)) if os.path.isdir(output) else (
        [output.name] if os.path.exists(output) else [])

    def check():
        _one_line_error(result, program, source)
        assert written == [], written

    _judge(figures, fault, check, lost=lost)
