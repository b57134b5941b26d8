"""What each output of a kerasbert model is, read from the model itself (its class, task and
number of labels), never guessed from an array's shape: the kind decides how a quantized
artifact's output is judged (`kerasbert.export.compare`).

Kinds:
- `example_logits`: one row of class logits per example (sequence classification with two
  labels or more, multiple choice, NSP / SOP) or per masked position (`mlm_logits`).
- `token_logits`: one row of class logits per token (token classification).
- `span_logits`: one logit per token, chosen among the real tokens (span starts and ends).
- `token_signs`: one logit per token whose sign is the decision (ELECTRA's `rtd_logits`).
- `regression`: one value per example (sequence classification with one label).
- `token_vectors`, `example_vectors`: hidden states per token (`sequence_output`) and per
  example (`pooled_output`, a text embedding model's `embedding`).
"""

from kerasbert.export.errors import ExportError

KINDS = ("example_logits", "token_logits", "span_logits", "token_signs", "regression",
         "token_vectors", "example_vectors")
# The kinds whose axis 1 runs along the input tokens.
TOKEN_KINDS = ("token_logits", "span_logits", "token_signs", "token_vectors")

_TASK_OUTPUTS = {
    "sequence_classification": {"logits": "example_logits"},
    "multiple_choice": {"logits": "example_logits"},
    "token_classification": {"logits": "token_logits"},
    "question_answering": {"start_logits": "span_logits", "end_logits": "span_logits"},
    "text_embedding": {"embedding": "example_vectors"},
}
_NAMED_OUTPUTS = {
    "sequence_output": "token_vectors", "pooled_output": "example_vectors",
    "mlm_logits": "example_logits", "nsp_logits": "example_logits",
    "sop_logits": "example_logits", "rtd_logits": "token_signs",
}


def output_kinds(model, strict=True):
    """`{output name: kind}` for every output of `model` (a kerasbert encoder, pretraining or
    task model); an output of no known kind is an `ExportError` naming it (left out when not
    `strict`).

    >>> import kerasbert
    >>> encoder = kerasbert.zoo.build("bert_tiny_uncased", num_layers=1)
    >>> output_kinds(encoder)
    {'pooled_output': 'example_vectors', 'sequence_output': 'token_vectors'}
    >>> regression = kerasbert.models.build_task_model(encoder, "sequence_classification",
    ...                                                num_labels=1)
    >>> output_kinds(regression)
    {'logits': 'regression'}
    """
    task = getattr(model, "task", None)
    declared = dict(_TASK_OUTPUTS.get(task, {}))
    if task == "sequence_classification" and getattr(model, "num_labels", None) == 1:
        declared["logits"] = "regression"
    kinds = {}
    for name in sorted(model.output):
        kind = declared.get(name) or _NAMED_OUTPUTS.get(name)
        if kind is None and not strict:
            continue
        if kind is None:
            raise ExportError(f"{model.name}: output {name!r} is of no kind the export knows how "
                              f"to judge when quantized (known: {sorted(_NAMED_OUTPUTS)} and "
                              "the task models' outputs)")
        kinds[name] = kind
    return kinds


def is_token_aligned(kinds, name, value, sequence_length):
    """Whether axis 1 of output `name` (`value`) runs along the input tokens: by its kind in
    `kinds` (`output_kinds`), else (an output of no known kind) by its shape.

    >>> import numpy as np
    >>> is_token_aligned({"logits": "example_logits"}, "logits", np.zeros((2, 9)), 9)
    False
    >>> is_token_aligned({}, "hidden", np.zeros((2, 9, 4)), 9)
    True
    """
    if name in kinds:
        return kinds[name] in TOKEN_KINDS
    return value.ndim >= 2 and value.shape[1] == sequence_length
