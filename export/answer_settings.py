"""The settings the answer signatures decode with: window length, doc stride, span limits and
the SQuAD v2.0 null rule.

They come from the fine-tuning run's record (`kerasbert_run.json`, written by
`kerasbert-finetune` into its model directory) when the exported model is such a folder, so the
signatures decode exactly as the run's evaluation did; else from the export's flags.
"""

import dataclasses

from kerasbert import file_system

_RECORDED = ("doc_stride", "max_query_length", "max_answer_length", "n_best_size",
             "null_score_diff_threshold")


@dataclasses.dataclass(frozen=True)
class AnswerSettings:
    """How the answer signatures decode (the defaults are `kerasbert-finetune`'s flags).

    Attributes:
        max_seq_length: the longest packed window, in tokens.
        doc_stride: tokens between the starts of two windows of a long SQuAD context.
        max_query_length: a question's tokens kept (the rest are cut).
        max_answer_length: the longest answer, in tokens.
        n_best_size: start and end candidates kept per window.
        version_2_with_negative: the model may answer "no answer" (SQuAD v2.0).
        null_score_diff_threshold: predict no answer when the null score exceeds the best
            span's by more than this.

    >>> AnswerSettings(max_seq_length=64).doc_stride
    128
    """

    max_seq_length: int = 128
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def recorded_settings(model_path, defaults):
    """`defaults` with what the fine-tuning record of `model_path` (a `kerasbert-finetune`
    folder, or a `.keras` file in one) says: `max_seq_length`, the SQuAD flags, v2.0 when the
    task is `squad_v2`; `defaults` unchanged for any other path.

    >>> import tempfile
    >>> recorded_settings(tempfile.mkdtemp(), AnswerSettings(doc_stride=64)).doc_stride
    64
    """
    from kerasbert.json_files import read_json_file
    from kerasbert.training.run_record import RUN_RECORD_FILE

    if not file_system.isdir(model_path):
        model_path = file_system.dirname(model_path)
    path = file_system.join(model_path, RUN_RECORD_FILE)
    if not file_system.isfile(path):
        return defaults
    record = read_json_file(path, "a training run record")
    flags = record.get("flags", {})
    if record.get("program") != "kerasbert-finetune" or not isinstance(flags, dict):
        return defaults
    changes = {name: flags[name] for name in ("max_seq_length", *_RECORDED) if name in flags}
    if "task" in flags:
        changes["version_2_with_negative"] = flags["task"] == "squad_v2"
    return defaults.replace(**changes)
