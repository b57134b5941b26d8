"""The run record: what a training run in a model directory was started with, so that a rerun
continues only the run it was started as.

At its first start, `kerasbert-pretrain`, `kerasbert-finetune` and `kerasbert-distill` write
`kerasbert_run.json` (`RUN_RECORD_FILE`) into `--model_dir`: the binary, the values of the
flags that decide what is trained, and the model's config. A rerun compares its own values with
the record before it writes anything; any difference is a `RunRecordError` naming every
differing flag with its recorded and its given value, and nothing on disk changes. Paths are
compared made absolute (URLs such as `gs://...` as given), lists as lists, numbers exactly.

Recorded: every flag of the binary but those that only say how and where the run goes and how
it reports (`FREE_FLAGS`): the strategy and devices, XLA, the checkpoint interval, steps per
logged loop, `--max_recoveries`, the tf.data service address, and, for fine-tuning, the mode and
the test files (predicted once, at the end). Those may change between restarts.

The record also holds a fingerprint of every input file the path flags name
(`kerasbert.training.input_fingerprints`: size, modification time, a hash of the first and last
megabyte): a rerun whose inputs changed (the same `--train_file` path with other content, a
glob that now matches another file) is a `RunRecordError` naming the file.

`--overwrite` starts over: it removes what the binary itself writes into the directory (the
record, checkpoints, TensorBoard folders, the binary's result files: `outputs`), nothing else,
and records the new values.
"""

import dataclasses
import glob
import json
import os
import posixpath
from typing import Callable

from kerasbert import file_system
from kerasbert.atomic_files import write_atomically
from kerasbert.training import input_fingerprints

RUN_RECORD_FILE = "kerasbert_run.json"

# Flags that do not change what is trained (only how, where, or what is reported).
FREE_FLAGS = frozenset({
    "model_dir", "overwrite", "strategy", "tpu", "num_gpus", "jit_compile", "checkpoint_interval",
    "steps_per_loop", "max_recoveries", "tf_data_service", "mode", "test_file", "flagfile"})
# Flags whose values are paths (or lists of paths, or globs), compared made absolute.
PATH_FLAGS = frozenset({
    "init_checkpoint", "input_files", "text_files", "vocab_file", "merges_file", "tokenizer_dir",
    "teacher", "init_from", "data_dir", "train_file", "dev_file", "test_file"})
# What every training binary writes into its model directory (see `kerasbert.training.loop`):
# checkpoints, the TensorBoard folder of the training loop, the scratch folders of non-chief
# workers, and the record itself.
TRAINING_OUTPUTS = ("checkpoint", "ckpt-*.index", "ckpt-*.data-*", "train", ".worker-*",
                    ".chief-*", RUN_RECORD_FILE)


class RunRecordError(ValueError):
    """The model directory holds another run (the message, one line, says how it differs)."""


def absolute(value):
    """A path flag's value made absolute: a path, or each path of a list (URLs kept).

    >>> absolute(["/data/a.txt", "gs://bucket/b.txt"])
    ['/data/a.txt', 'gs://bucket/b.txt']
    """
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [absolute(item) for item in value]
    return value if "://" in value else file_system.absolute(value)


def recorded_flags(flag_values):
    """{name: value} of the flags of a binary's `FlagValues` that the record holds: the binary's
    own (not absl's or TensorFlow's), without `FREE_FLAGS`, path flags made absolute."""
    values = {}
    for name in flag_values:
        module = flag_values.find_module_defining_flag(name) or ""
        if name in FREE_FLAGS or module.startswith(("absl.", "tensorflow.")) or \
                flag_values[name].name != name:  # a short alias
            continue
        value = flag_values[name].value
        values[name] = absolute(value) if name in PATH_FLAGS else value
    return dict(sorted(values.items()))


def matching(*patterns):
    """An `outputs` function: the entries of the model directory that match `patterns`."""
    def outputs(model_dir):
        return sorted({path for pattern in patterns
                       for path in file_system.glob(file_system.join(glob.escape(model_dir),
                                                                     pattern))})
    return outputs


@dataclasses.dataclass
class RunRecord:
    """The run a binary is about to start (or continue) in `model_dir`.

    `program`: the binary's name; `flags`: the recorded flag values (`recorded_flags`);
    `outputs(model_dir)`: the paths the binary has written into the directory (what
    `--overwrite` removes); `overwrite`: start over instead of continuing.

    Call `check()` first (it only reads), then `start(model)` once the model is known, before
    anything is written into the directory.

    >>> import tempfile
    >>> model_dir = tempfile.mkdtemp()
    >>> record = RunRecord(model_dir, "kerasbert-pretrain", {"batch_size": 32},
    ...                    matching(*TRAINING_OUTPUTS))
    >>> record.check(); record.start({"hidden_size": 128})  # nothing of an earlier run removed
    []
    >>> RunRecord(model_dir, "kerasbert-pretrain", {"batch_size": 64}, record.outputs).check()
    Traceback (most recent call last):
    ...
    kerasbert.training.run_record.RunRecordError: ... --batch_size: recorded 32, given 64; ...
    """

    model_dir: str
    program: str
    flags: dict
    outputs: Callable
    overwrite: bool = False
    _started: bool = dataclasses.field(default=False, repr=False)

    @property
    def path(self):
        return file_system.join(self.model_dir, RUN_RECORD_FILE)

    def check(self, model=None):
        """Raise `RunRecordError` unless the directory holds no run yet, or the run recorded with
        this binary and these flag values (and `model`, when given); with `overwrite`, only if
        an input of the run lies among the files `--overwrite` would remove."""
        if self.overwrite:
            self._check_inputs_survive()
            return
        # Listed before the record is read: the workers of a multi-worker run share the
        # directory, and one that records the run between the two reads must be seen as the
        # recorded run (its record is written before its other files), not an unknown one.
        earlier = self.outputs(self.model_dir)
        recorded = self._read()
        if recorded is None:
            if earlier:
                raise RunRecordError(
                    f"{self.model_dir} holds files of an earlier run ("
                    f"{', '.join(_relative(path, self.model_dir) for path in earlier[:3])}"
                    f"{', ...' if len(earlier) > 3 else ''}) but no {RUN_RECORD_FILE}, so what "
                    "it was started with is unknown; give another --model_dir, or --overwrite "
                    "to start over")
            return
        if recorded.get("program") != self.program:
            raise RunRecordError(
                f"{self.model_dir} holds a {recorded.get('program')} run ({self.path}), not a "
                f"{self.program} one; give another --model_dir, or --overwrite to start over")
        differences = _differences(recorded.get("flags", {}), self.flags, "--")
        if model is not None and recorded.get("model") is not None:
            differences += _differences(_flat(_with_config_defaults(recorded["model"])),
                                        _flat(model), "model ")
        if differences:
            raise RunRecordError(
                f"{self.model_dir} holds a run started with other values ({self.path}): "
                f"{'; '.join(differences)}; rerun with the recorded values, give another "
                "--model_dir, or add --overwrite to start over")
        self._check_inputs_unchanged(recorded.get("inputs"))

    def _input_paths(self):
        """The path flags whose files the run reads: `{flag: value}`."""
        return {name: value for name, value in self.flags.items()
                if name in PATH_FLAGS and value is not None}

    def _check_inputs_unchanged(self, recorded):
        """Raise `RunRecordError` naming the first input file that differs from its recorded
        fingerprint, or that a path flag names now and did not then."""
        if recorded is None:  # a record written before inputs were fingerprinted
            return
        problems = []
        for path, fingerprint in sorted(recorded.items()):
            reason = input_fingerprints.changed(fingerprint, path)
            if reason:
                problems.append(f"{path}: {reason}")
        named = {path for value in self._input_paths().values()
                 for path in input_fingerprints.input_files(value)}
        problems += [f"{path}: it is an input now and was not when the run started"
                     for path in sorted(named - set(recorded))]
        if problems:
            raise RunRecordError(
                f"{self.model_dir} holds a run whose input files have changed since it started "
                f"({self.path}): {'; '.join(problems[:3])}"
                f"{f' (and {len(problems) - 3} more)' if len(problems) > 3 else ''}; rerun "
                "with the files it started with, give another --model_dir, or add --overwrite "
                "to start over")

    def start(self, model=None, log=print):
        """Before the first write into the directory: check again with `model` (the model's
        config, a JSON-able dict), then, with `overwrite`, remove the earlier run's files
        (saying so with `log`), and record the run if it is not recorded yet. Returns the
        paths removed. Later calls (one per fine-tuning seed) only check `model`."""
        if self._started:
            self.overwrite = False
            self.check(model)
            return []
        self.check(model)
        removed = []
        if self.overwrite:
            removed = self.outputs(self.model_dir)
            for path in removed:
                _remove(path)
            if removed:
                log(f"--overwrite: removed the earlier run from {self.model_dir} ("
                    f"{', '.join(_relative(path, self.model_dir) for path in removed)})")
        if self.overwrite or self._read() is None:
            inputs = input_fingerprints.fingerprints(self._input_paths())
            write_atomically(self.path, json.dumps(
                {"program": self.program, "flags": self.flags, "model": model,
                 "inputs": inputs}, indent=1, sort_keys=True) + "\n")
        self._started = True
        return removed

    def _read(self):
        if not file_system.isfile(self.path):
            return None
        try:
            recorded = json.loads(file_system.read_text(self.path))
        except (OSError, ValueError) as error:
            raise RunRecordError(f"{self.path} cannot be read ({error}); give another "
                                 "--model_dir, or --overwrite to start over") from None
        if not isinstance(recorded, dict):
            raise RunRecordError(f"{self.path} is not a run record (a JSON object); give "
                                 "another --model_dir, or --overwrite to start over")
        return recorded

    def _check_inputs_survive(self):
        """With `overwrite`: no path flag may point at what is about to be removed (e.g.
        `--init_checkpoint=<model_dir>/ckpt-10`)."""
        doomed = [file_system.absolute(path) for path in self.outputs(self.model_dir)]
        for name, value in self.flags.items():
            if name not in PATH_FLAGS or value is None:
                continue
            for path in value if isinstance(value, list) else [value]:
                if any(file_system.is_within(path, gone) or
                       (gone.startswith(path) and gone[len(path):len(path) + 1] in (".", ""))
                       for gone in doomed):
                    raise RunRecordError(f"--{name}={path} is among the files of the earlier run "
                                         f"that --overwrite removes from {self.model_dir}")


def _remove(path):
    """Remove the file or folder `path` (a symbolic link itself, not what it points to)."""
    if file_system.is_local(path) and os.path.islink(path):
        os.remove(path)
    elif file_system.isdir(path):
        file_system.rmtree(path)
    elif file_system.exists(path):
        file_system.remove(path)


def _relative(path, folder):
    """`path` relative to `folder` (both local, or both URLs of one file system)."""
    if file_system.is_local(path):
        return os.path.relpath(path, folder)
    return posixpath.relpath(path.split("://", 1)[1], folder.split("://", 1)[1])


def _differences(recorded, given, prefix):
    """"<prefix><name>: recorded <value>, given <value>" for every name whose values differ."""
    return [f"{prefix}{name}: recorded {_shown(recorded.get(name))}, given "
            f"{_shown(given.get(name))}"
            for name in sorted(set(recorded) | set(given))
            if _comparable(recorded.get(name)) != _comparable(given.get(name))]


def _with_config_defaults(model):
    """A recorded model description with its `encoder_config` completed by the fields that
    `EncoderConfig` gained after the record was written (at the values that build the same
    encoder), so that a run resumes across such an upgrade."""
    from kerasbert.config import EncoderConfig

    config = model.get("encoder_config") if isinstance(model, dict) else None
    if not isinstance(config, dict):
        return model
    try:
        completed = EncoderConfig.from_dict(config).to_dict()
    except (TypeError, ValueError):  # not a config this version builds: compared as it is
        return model
    return {**model, "encoder_config": {**completed, **config}}


def _flat(value, prefix=""):
    """A nested dict as {"a.b": leaf}, so that a difference names the field that differs."""
    if not isinstance(value, dict):
        return {prefix: value}
    flat = {}
    for name, item in value.items():
        flat.update(_flat(item, f"{prefix}.{name}" if prefix else str(name)))
    return flat


def _comparable(value):
    """A value as JSON gives it back (tuples are lists, dict keys strings)."""
    return json.loads(json.dumps(value))


def _shown(value):
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(str, value)) + "]"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)
