"""The one error type of the fine-tuning task readers (GLUE, SWAG, SQuAD, CoNLL, ...)."""


class TaskDataError(ValueError):
    """Malformed task data: its one-line message names the file and the line or the question id.

    Raised for bad JSON, a wrong column count, an unknown label, an answer that is not in its
    context, an empty split, and the like. It is a `ValueError`, so callers that catch
    `ValueError` keep working.

    >>> try:
    ...     raise TaskDataError("dev.tsv line 3: expected 4 columns, got 2")
    ... except ValueError as error:
    ...     print(error)
    dev.tsv line 3: expected 4 columns, got 2
    """
